//===- DecodeArithmetic.cpp - Arithmetic, compare, mov and cvt ------------===//
//
// The modifiers, types and operands of the arithmetic families: integer,
// float and bit operations, setp/set with their predicate combinations,
// selp, mov (incl. vector pack/unpack and the clock registers), cvt and
// cvta. Most take the plain form `op d, a, b, ...`.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

#include <iterator>

namespace kiln::runtime::emu::detail {

namespace {

constexpr SubopName kPrmtModes[] = {
    {"f4e", uint8_t(PrmtMode::F4e)}, {"b4e", uint8_t(PrmtMode::B4e)},
    {"rc8", uint8_t(PrmtMode::Rc8)}, {"ecl", uint8_t(PrmtMode::Ecl)},
    {"ecr", uint8_t(PrmtMode::Ecr)}, {"rc16", uint8_t(PrmtMode::Rc16)},
};
constexpr SubopName kTestpOps[] = {
    {"finite", uint8_t(TestpOp::Finite)},
    {"infinite", uint8_t(TestpOp::Infinite)},
    {"number", uint8_t(TestpOp::Number)},
    {"notanumber", uint8_t(TestpOp::NotANumber)},
    {"normal", uint8_t(TestpOp::Normal)},
    {"subnormal", uint8_t(TestpOp::Subnormal)},
};

} // namespace

bool KernelBuilder::decodeArithmeticModifier(DecodedInstruction &d,
                                             std::string_view m) {
  Instruction &inst = d.inst;
  uint8_t subop = 0;
  if (inst.op == Op::Prmt && lookupSubop(kPrmtModes, m, subop)) {
    inst.subop = subop;
    return true;
  }
  if (inst.op == Op::Testp && lookupSubop(kTestpOps, m, subop)) {
    inst.subop = subop;
    return true;
  }
  if ((inst.op == Op::Setp || inst.op == Op::Set) &&
      (m == "and" || m == "or" || m == "xor")) {
    inst.subop = uint8_t(m == "and"  ? BoolOp::And
                         : m == "or" ? BoolOp::Or
                                     : BoolOp::Xor);
    return true;
  }
  if (inst.op == Op::Bfind && m == "shiftamt") {
    inst.shiftLeft = true;
    return true;
  }
  if ((inst.op == Op::Bmsk || inst.op == Op::Szext) &&
      (m == "clamp" || m == "wrap")) {
    inst.shiftClamp = m == "clamp";
    return true;
  }
  if (inst.op == Op::Shf && (m == "l" || m == "r")) {
    inst.shiftLeft = m == "l";
    return true;
  }
  if (inst.op == Op::Shf && (m == "wrap" || m == "clamp")) {
    inst.shiftClamp = m == "clamp";
    return true;
  }
  return false;
}

Error KernelBuilder::decodeArithmeticTypes(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<Type> &types = d.types;
  if (inst.op == Op::Mul || inst.op == Op::Mad) {
    if (types.size() != 1)
      return unknownInstruction(d);
    inst.type = types[0];
    if (isFloat(inst.type))
      inst.mulMode = MulMode::None;
    else if (inst.mulMode == MulMode::None)
      return unknownInstruction(d); // integer mul/mad needs .lo, .hi or .wide
    return Error::success();
  }
  // cvt, slct, dp4a, dp2a, set: the destination's type, then the source's.
  if (types.size() != 2)
    return unknownInstruction(d);
  inst.type = types[0];
  inst.srcType = types[1];
  // The fp8 pairs: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and
  // cvt.rn.f16x2.{e4m3x2,e5m2x2}, nothing else (no .relu, no f16x2 source).
  auto isF8x2 = [](Type t) { return t == Type::E4M3x2 || t == Type::E5M2x2; };
  if (isF8x2(inst.type) || isF8x2(inst.srcType)) {
    bool pack =
        isF8x2(inst.type) && inst.srcType == Type::F32 && inst.satfinite;
    bool unpack =
        isF8x2(inst.srcType) && inst.type == Type::F16x2 && !inst.satfinite;
    if (inst.op != Op::Cvt || inst.rounding != Rounding::Rn || inst.relu ||
        inst.sat || inst.ftz || !(pack || unpack))
      return makeError("PTX line {}: '{}' is not emulated (fp8 pairs: "
                       "cvt.rn.satfinite.{{e4m3x2,e5m2x2}}.f32 and "
                       "cvt.rn.f16x2.{{e4m3x2,e5m2x2}})",
                       d.line, d.opcode);
  }
  return Error::success();
}

Error KernelBuilder::decodeArithmeticOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  switch (inst.op) {
  case Op::Set: {
    // set.cmp{.bool}.dtype.stype d, a, b{, {!}c}
    bool combine = inst.subop != uint8_t(BoolOp::None);
    if (Error err = expectOperands(d, combine ? 4 : 3))
      return err;
    if (Error err = readDest(d, operands[0]))
      return err;
    for (size_t i = 1; i < 3; ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[i], line);
      if (!slot)
        return slot.takeError();
      inst.src[inst.numSrc++] = *slot;
    }
    if (combine)
      if (Error err = readNegatableSource(d, operands[3]))
        return err;
    return Error::success();
  }
  case Op::Mov: {
    if (Error err = expectOperands(d, 2))
      return err;
    // Packing: mov.b64 %rd1, {%r1, %r2}; unpacking: mov.b64 {%r1, %r2}, %rd1.
    if (trim(operands[1]).front() == '{') {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(d, operands[1]);
      if (!elements)
        return elements.takeError();
      if (Error err = readDest(d, operands[0]))
        return err;
      for (std::string_view e : *elements) {
        Expected<uint32_t> slot = sourceSlot(e, line);
        if (!slot)
          return slot.takeError();
        if (inst.numSrc == std::size(inst.src))
          return makeError("PTX line {}: too many source operands", line);
        inst.src[inst.numSrc++] = *slot;
      }
      inst.vec = static_cast<uint8_t>(elements->size());
      if (inst.vec != 2 && inst.vec != 4)
        return unknownInstruction(d);
      return Error::success();
    }
    if (trim(operands[0]).front() == '{') {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(d, operands[0]);
      if (!elements)
        return elements.takeError();
      for (std::string_view e : *elements)
        if (Error err = readDest(d, e))
          return err;
      inst.vec = static_cast<uint8_t>(elements->size());
      if (inst.vec != 2 && inst.vec != 4)
        return unknownInstruction(d);
      return readSources(d, 1);
    }
    if (Error err = readDest(d, operands[0]))
      return err;
    std::string_view source = trim(operands[1]);
    if (source == "%clock" || source == "%clock64" ||
        startsWith(source, "%globaltimer")) {
      inst.op = Op::Clock;
      inst.subop =
          uint8_t(source == "%clock"            ? ClockKind::Clock
                  : source == "%clock64"        ? ClockKind::Clock64
                  : source == "%globaltimer_lo" ? ClockKind::GlobalTimerLo
                  : source == "%globaltimer_hi" ? ClockKind::GlobalTimerHi
                                                : ClockKind::GlobalTimer);
      return Error::success();
    }
    return readSources(d, 1);
  }
  case Op::Setp: {
    // setp.cmp{.bool}.type p[|q], a, b{, {!}c}
    bool combine = inst.subop != uint8_t(BoolOp::None);
    if (Error err = expectOperands(d, combine ? 4 : 3))
      return err;
    if (Error err = readPairedDest(d, operands[0], /*padMissing=*/false))
      return err;
    for (size_t i = 1; i < 3; ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[i], line);
      if (!slot)
        return slot.takeError();
      inst.src[inst.numSrc++] = *slot;
    }
    if (combine)
      if (Error err = readNegatableSource(d, operands[3]))
        return err;
    return Error::success();
  }
  default: {
    // Plain `op d, a, b, ...`.
    if (operands.empty())
      return makeError("PTX line {}: '{}' needs operands", line, d.opcode);
    if (operands.size() > 5)
      return makeError("PTX line {}: too many operands for '{}'", line,
                       d.opcode);
    if (Error err = readDest(d, operands[0]))
      return err;
    return readSources(d, 1);
  }
  }
}

} // namespace kiln::runtime::emu::detail
