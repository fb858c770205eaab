//===- DecodeWarp.cpp - shfl, vote, activemask, redux, match --------------===//
//
// The warp-level instructions' modes and operands: the member mask is the
// last source (vote without .sync has none); shfl and match may write a
// second, predicate destination.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

namespace {

constexpr SubopName kVoteModes[] = {
    {"all", uint8_t(VoteMode::All)},
    {"any", uint8_t(VoteMode::Any)},
    {"uni", uint8_t(VoteMode::Uni)},
    {"ballot", uint8_t(VoteMode::Ballot)},
};

} // namespace

bool KernelBuilder::decodeWarpModifier(DecodedInstruction &d,
                                       std::string_view m) {
  Instruction &inst = d.inst;
  uint8_t subop = 0;
  if (inst.op == Op::Redux && lookupAtomOp(m, subop)) {
    inst.subop = subop;
    return true;
  }
  if (inst.op == Op::Match && (m == "any" || m == "all")) {
    inst.subop = m == "all";
    return true;
  }
  if (inst.op == Op::Vote && lookupSubop(kVoteModes, m, subop)) {
    inst.subop = subop;
    return true;
  }
  return false;
}

Error KernelBuilder::decodeWarpOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  switch (inst.op) {
  case Op::Vote: {
    // vote.sync.mode.type d, {!}a, membermask (or vote.mode d, {!}a).
    if (operands.size() != 2 && operands.size() != 3)
      return makeError("PTX line {}: '{}' takes 3 operands", d.line, d.opcode);
    if (Error err = readDest(d, operands[0]))
      return err;
    if (Error err = readNegatableSource(d, operands[1]))
      return err;
    if (operands.size() == 3)
      return readSources(d, 2);
    return Error::success();
  }
  case Op::Activemask: {
    if (Error err = expectOperands(d, 1))
      return err;
    return readDest(d, operands[0]);
  }
  default: {
    // match.sync.mode.type d{|p}, a, membermask
    // shfl.sync.mode.b32 d[|p], a, b, c, membermask
    if (Error err = expectOperands(d, inst.op == Op::Match ? 3 : 5))
      return err;
    if (Error err = readPairedDest(d, operands[0], /*padMissing=*/true))
      return err;
    return readSources(d, 1);
  }
  }
}

} // namespace kiln::runtime::emu::detail
