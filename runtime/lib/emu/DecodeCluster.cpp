//===- DecodeCluster.cpp - mapa, barrier.cluster (sm_90 clusters) ---------===//
//
// `mapa{.shared::cluster}.{u32,u64} d, a, rank`: the address of shared
// variable `a` in the shared memory of block `rank` of the cluster
// (Instruction::space Shared for .shared::cluster addresses, Generic for
// generic ones). Operands: dst[0], src[0] the address, src[1] the rank.
// `barrier.cluster.{arrive,wait}` with the optional .release/.relaxed,
// .acquire and .aligned (no operands; subop 0 arrive, 1 wait).
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeClusterModifier(DecodedInstruction &d,
                                          std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::Bar && m == "cluster" && d.parts.size() > 1 &&
      d.parts[1] == "cluster") {
    inst.op = Op::ClusterBarrier;
    inst.subop = 0xff; // until arrive or wait
    return true;
  }
  if (inst.op != Op::ClusterBarrier)
    return false;
  if (m == "arrive" || m == "wait") {
    inst.subop = m == "arrive" ? 0 : 1;
    return true;
  }
  return false;
}

Error KernelBuilder::decodeClusterOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  if (inst.op == Op::ClusterBarrier) {
    if (inst.subop > 1)
      return makeError("PTX line {}: '{}' needs .arrive or .wait", d.line,
                       d.opcode);
    return expectOperands(d, 0);
  }
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
