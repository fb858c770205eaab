//===- DecodeMemory.cpp - ld, st, atom and red ----------------------------===//
//
// Loads and stores (scalar or .v2/.v4, with the call sequence's .param
// variables redirected to local memory) and atomics with their operation.
// The state-space and vector modifiers are the shared ones
// (DecodeInstruction.cpp); addresses are read by ParseOperands.cpp.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

#include <iterator>

namespace kiln::runtime::emu::detail {

namespace {

constexpr SubopName kAtomOps[] = {
    {"add", uint8_t(AtomOp::Add)},   {"min", uint8_t(AtomOp::Min)},
    {"max", uint8_t(AtomOp::Max)},   {"inc", uint8_t(AtomOp::Inc)},
    {"dec", uint8_t(AtomOp::Dec)},   {"and", uint8_t(AtomOp::And)},
    {"or", uint8_t(AtomOp::Or)},     {"xor", uint8_t(AtomOp::Xor)},
    {"exch", uint8_t(AtomOp::Exch)}, {"cas", uint8_t(AtomOp::Cas)},
};

} // namespace

bool lookupAtomOp(std::string_view name, uint8_t &value) {
  return lookupSubop(kAtomOps, name, value);
}

bool KernelBuilder::decodeMemoryModifier(DecodedInstruction &d,
                                         std::string_view m) {
  Instruction &inst = d.inst;
  uint8_t subop = 0;
  if ((inst.op == Op::Atom || inst.op == Op::Red) && lookupAtomOp(m, subop)) {
    inst.subop = subop;
    return true;
  }
  return false;
}

Error KernelBuilder::decodeMemoryOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  switch (inst.op) {
  case Op::Atom:
  case Op::Red: {
    // atom.op.type d, [a], b{, c};  red.op.type [a], b
    bool isAtom = inst.op == Op::Atom;
    if (inst.subop == uint8_t(AtomOp::None))
      return unknownInstruction(d);
    size_t values = inst.subop == uint8_t(AtomOp::Cas) ? 2 : 1;
    if (Error err = expectOperands(d, (isAtom ? 2 : 1) + values))
      return err;
    if (isAtom) {
      if (Error err = readDest(d, operands[0]))
        return err;
    }
    inst.numSrc = 1;
    if (Error err = address(operands[isAtom ? 1 : 0], line, inst))
      return err;
    return readSources(d, isAtom ? 2 : 1);
  }
  case Op::Ld: {
    if (Error err = expectOperands(d, 2))
      return err;
    if (inst.vec > 1) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(d, operands[0]);
      if (!elements)
        return elements.takeError();
      if (elements->size() != inst.vec)
        return makeError("PTX line {}: vector width mismatch", line);
      for (std::string_view e : *elements)
        if (Error err = readDest(d, e))
          return err;
    } else if (Error err = readDest(d, operands[0])) {
      return err;
    }
    inst.numSrc = 1;
    if (Error err = address(operands[1], line, inst))
      return err;
    if (lastAddressIsCallParam && inst.space == Space::Param)
      inst.space = Space::Local;
    return Error::success();
  }
  default: { // st
    if (Error err = expectOperands(d, 2))
      return err;
    inst.numSrc = 1;
    if (Error err = address(operands[0], line, inst))
      return err;
    if (lastAddressIsCallParam && inst.space == Space::Param)
      inst.space = Space::Local;
    std::vector<std::string_view> values;
    if (inst.vec > 1) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(d, operands[1]);
      if (!elements)
        return elements.takeError();
      if (elements->size() != inst.vec)
        return makeError("PTX line {}: vector width mismatch", line);
      values = *elements;
    } else {
      values.push_back(operands[1]);
    }
    for (std::string_view v : values) {
      Expected<uint32_t> slot = sourceSlot(v, line);
      if (!slot)
        return slot.takeError();
      if (inst.numSrc == std::size(inst.src))
        return makeError("PTX line {}: too many source operands", line);
      inst.src[inst.numSrc++] = *slot;
    }
    return Error::success();
  }
  }
}

} // namespace kiln::runtime::emu::detail
