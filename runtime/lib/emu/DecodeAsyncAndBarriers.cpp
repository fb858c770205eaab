//===- DecodeAsyncAndBarriers.cpp - bar.* and cp.async groups -------------===//
//
// Barriers (bar/barrier .sync, .arrive, .red.popc/and/or, with a barrier
// number and an optional thread count; bar.warp.sync with a member mask) and
// cp.async with its commit and
// wait instructions. cp.async's source address offset, which has no
// operand slot of its own, goes to Kernel::operandLists.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeAsyncAndBarrierModifier(DecodedInstruction &d,
                                                  std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::Bar && (m == "arrive" || m == "red" || m == "popc" ||
                             m == "and" || m == "or" || m == "warp")) {
    if (m == "warp")
      inst.subop = uint8_t(BarMode::WarpSync);
    else if (m == "arrive")
      inst.subop = uint8_t(BarMode::Arrive);
    else if (m == "popc")
      inst.subop = uint8_t(BarMode::RedPopc);
    else if (m == "and")
      inst.subop = uint8_t(BarMode::RedAnd);
    else if (m == "or")
      inst.subop = uint8_t(BarMode::RedOr);
    return true;
  }
  if (inst.op == Op::CpAsync) {
    if (m == "async")
      return true;
    if (m == "commit_group") {
      inst.op = Op::CpAsyncCommit;
      return true;
    }
    if (m == "wait_group" || m == "wait_all") {
      inst.op = Op::CpAsyncWait;
      return true;
    }
  }
  return false;
}

Error KernelBuilder::decodeAsyncAndBarrierOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  switch (inst.op) {
  case Op::CpAsync: {
    // cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size}
    if (operands.size() != 3 && operands.size() != 4)
      return makeError("PTX line {}: '{}' takes 3 or 4 operands", line,
                       d.opcode);
    inst.numSrc = 1;
    if (Error err = address(operands[0], line, inst))
      return err;
    Instruction source;
    source.numSrc = 1;
    if (Error err = address(operands[1], line, source))
      return err;
    inst.src[inst.numSrc++] = source.src[0];
    inst.target = static_cast<uint32_t>(kernel.operandLists.size());
    uint64_t offset = static_cast<uint64_t>(source.offset);
    kernel.operandLists.push_back(static_cast<uint32_t>(offset));
    kernel.operandLists.push_back(static_cast<uint32_t>(offset >> 32));
    return readSources(d, 2);
  }
  case Op::CpAsyncCommit:
    return expectOperands(d, 0);
  case Op::CpAsyncWait:
    if (operands.size() > 1)
      return makeError("PTX line {}: '{}' takes at most 1 operand", line,
                       d.opcode);
    return readSources(d, 0);
  default: {
    // bar{.cta}.sync a{, b}; bar.arrive a, b; barrier{.cta}.sync{.aligned}
    // a{, b}; bar.red.popc.u32 d, a{, b}, {!}c; bar.red.{and,or}.pred d,
    // a{, b}, {!}c. src[0] = barrier, src[1] = thread count (or kNoSlot),
    // src[2] = bar.red's predicate.
    BarMode mode = BarMode(inst.subop);
    if (mode == BarMode::WarpSync) { // bar.warp.sync membermask
      if (Error err = expectOperands(d, 1))
        return err;
      return readSources(d, 0);
    }
    bool known = false;
    for (size_t i = 1; i < d.parts.size(); ++i)
      known |=
          d.parts[i] == "sync" || d.parts[i] == "arrive" || d.parts[i] == "red";
    if (!known)
      return unknownInstruction(d);
    bool red = mode == BarMode::RedPopc || mode == BarMode::RedAnd ||
               mode == BarMode::RedOr;
    size_t first = red ? 1 : 0;
    size_t count = operands.size() - first - (red ? 1 : 0);
    if (operands.size() < first + 1 || count < 1 || count > 2 ||
        (mode == BarMode::Arrive && count != 2))
      return makeError("PTX line {}: wrong operands for '{}'", line, d.opcode);
    if (red)
      if (Error err = readDest(d, operands[0]))
        return err;
    for (size_t i = 0; i < count; ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[first + i], line);
      if (!slot)
        return slot.takeError();
      inst.src[i] = *slot;
    }
    inst.numSrc = 2;
    if (red) {
      inst.numSrc = 2;
      if (Error err = readNegatableSource(d, operands.back()))
        return err;
    }
    return Error::success();
  }
  }
}

} // namespace kiln::runtime::emu::detail
