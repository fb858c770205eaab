//===- DecodeCluster.cpp - mapa (sm_90 thread-block clusters) -------------===//
//
// `mapa{.shared::cluster}.{u32,u64} d, a, rank`: the address of shared
// variable `a` in the shared memory of block `rank` of the cluster
// (Instruction::space Shared for .shared::cluster addresses, Generic for
// generic ones). Operands: dst[0], src[0] the address, src[1] the rank.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

Error KernelBuilder::decodeClusterOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  if (inst.type != Type::U32 && inst.type != Type::U64)
    return makeError("PTX line {}: '{}' takes .u32 or .u64", d.line, d.opcode);
  if (inst.space != Space::Shared && inst.space != Space::Generic)
    return makeError("PTX line {}: '{}' maps only shared::cluster or generic "
                     "addresses",
                     d.line, d.opcode);
  if (Error err = expectOperands(d, 3))
    return err;
  if (Error err = readDest(d, d.operands[0]))
    return err;
  return readSources(d, 1);
}

} // namespace kiln::runtime::emu::detail
