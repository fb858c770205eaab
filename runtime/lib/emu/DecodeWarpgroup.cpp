//===- DecodeWarpgroup.cpp - wgmma, setmaxnreg, elect ---------------------===//
//
// The sm_90 warpgroup instructions: wgmma.fence, wgmma.mma_async (its
// shape, types (f16, bf16, tf32, e4m3/e5m2 inputs; f32 accumulators),
// accumulator list, A from a descriptor or registers, B's descriptor,
// scale-d and the immediate scale/transpose flags, kept in
// Kernel::wgmmas), wgmma.commit_group and wgmma.wait_group; setmaxnreg
// (whose count is checked here) and elect.sync.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeWarpgroupModifier(DecodedInstruction &d,
                                            std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::Wgmma) {
    if (m == "fence")
      inst.subop = uint8_t(WgmmaOp::Fence);
    else if (m == "mma_async")
      inst.subop = uint8_t(WgmmaOp::MmaAsync);
    else if (m == "commit_group")
      inst.subop = uint8_t(WgmmaOp::Commit);
    else if (m == "wait_group")
      inst.subop = uint8_t(WgmmaOp::Wait);
    else if (m.size() > 3 && m[0] == 'm' && m[1] == '6' && m[2] == '4')
      d.mmaShape = m;
    else
      return false;
    return true;
  }
  if (inst.op == Op::Setmaxnreg && (m == "inc" || m == "dec")) {
    inst.aux = m == "inc";
    return true;
  }
  return false;
}

Error KernelBuilder::decodeWarpgroupTypes(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  WgmmaOp op = WgmmaOp(inst.subop);
  if (op != WgmmaOp::MmaAsync) {
    if (!d.types.empty() || !d.mmaShape.empty())
      return unknownInstruction(d);
    return Error::success();
  }
  // wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.dtype.atype.btype
  const std::vector<Type> &types = d.types;
  auto isF8 = [](Type t) { return t == Type::E4M3 || t == Type::E5M2; };
  auto isI8 = [](Type t) { return t == Type::S8 || t == Type::U8; };
  // A and B share a type, except that e4m3 and e5m2 may mix, and s8 and
  // u8 (with s32 accumulators, the only integer wgmma emulated).
  bool integer = types.size() == 3 && types[0] == Type::S32 && isI8(types[1]) &&
                 isI8(types[2]);
  if (!integer &&
      (types.size() != 3 || types[0] != Type::F32 || inst.satfinite ||
       (types[1] != types[2] && !(isF8(types[1]) && isF8(types[2])))))
    return makeError("PTX line {}: '{}' is not emulated (f32 accumulators "
                     "with f16, bf16, tf32, e4m3 or e5m2 inputs are, and s32 "
                     "ones with s8 or u8)",
                     d.line, d.opcode);
  Type ab = types[1];
  unsigned wantK = ab == Type::TF32                      ? 8
                   : ab == Type::F16 || ab == Type::BF16 ? 16
                   : isF8(ab) || integer                 ? 32
                                                         : 0;
  std::string_view shape = d.mmaShape;
  size_t kPos = shape.find('k');
  int64_t n = 0, k = 0;
  if (wantK == 0 || shape.size() < 4 || shape.substr(0, 4) != "m64n" ||
      kPos == std::string_view::npos ||
      !parseInteger(shape.substr(4, kPos - 4), n) ||
      !parseInteger(shape.substr(kPos + 1), k) || n < 8 || n > 256 ||
      n % 8 != 0 || k != wantK)
    return makeError("PTX line {}: '{}' is not emulated (m64nNk16 for f16 "
                     "and bf16, m64nNk8 for tf32, m64nNk32 for e4m3, e5m2, "
                     "s8 and u8, N = 8..256 in steps of 8)",
                     d.line, d.opcode);
  inst.type = types[0];
  inst.srcType = ab;
  WgmmaInfo info;
  info.n = static_cast<uint32_t>(n);
  info.k = static_cast<uint32_t>(k);
  info.abType = ab;
  info.bType = types[2];
  inst.target = static_cast<uint32_t>(kernel.wgmmas.size());
  kernel.wgmmas.push_back(info);
  return Error::success();
}

Error KernelBuilder::decodeWarpgroupOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  auto immediate = [&](std::string_view text, const char *what,
                       int64_t &value) -> Error {
    if (!parseInteger(text, value))
      return makeError("PTX line {}: '{}' needs an immediate {}, got '{}'",
                       line, d.opcode, what, text);
    return Error::success();
  };
  if (inst.op == Op::Setmaxnreg) {
    // setmaxnreg.{inc,dec}.sync.aligned.u32 N
    if (Error err = expectOperands(d, 1))
      return err;
    int64_t count = 0;
    if (Error err = immediate(operands[0], "register count", count))
      return err;
    if (count < 24 || count > 256 || count % 8 != 0)
      return makeError("PTX line {}: setmaxnreg register count {} must be a "
                       "multiple of 8 in 24..256",
                       line, count);
    if (inst.type != Type::U32)
      return makeError("PTX line {}: setmaxnreg takes .u32", line);
    return Error::success();
  }
  if (inst.op == Op::Elect) {
    // elect.sync d|p, membermask (d may be the sink '_').
    if (Error err = expectOperands(d, 2))
      return err;
    if (Error err = readPairedDest(d, operands[0], /*padMissing=*/true))
      return err;
    return readSources(d, 1);
  }
  switch (WgmmaOp(inst.subop)) {
  case WgmmaOp::Fence:
  case WgmmaOp::Commit:
    return expectOperands(d, 0);
  case WgmmaOp::Wait: {
    if (Error err = expectOperands(d, 1))
      return err;
    int64_t n = 0;
    if (Error err = immediate(operands[0], "group count", n))
      return err;
    return readSources(d, 0);
  }
  case WgmmaOp::MmaAsync:
    break;
  }
  WgmmaInfo &info = kernel.wgmmas[inst.target];
  // Only the 16-bit types take transpose flags: tf32 and the 8-bit floats
  // are K-major in shared memory.
  bool halfTypes = info.abType == Type::F16 || info.abType == Type::BF16;
  bool aRegisters = !operands.empty() && operands.size() > 1 &&
                    trim(operands[1]).substr(0, 1) == "{";
  // d, a, b, scale-d{, imm-scale-a, imm-scale-b}{, imm-trans-a}{,
  // imm-trans-b}; the integer forms stop after scale-d.
  const bool integer = inst.type == Type::S32;
  size_t want = integer ? 4 : 6 + (halfTypes ? (aRegisters ? 1 : 2) : 0);
  if (Error err = expectOperands(d, want))
    return err;
  Expected<std::vector<std::string_view>> dList =
      vectorElements(d, operands[0]);
  if (!dList)
    return dList.takeError();
  if (dList->size() != info.n / 2)
    return makeError("PTX line {}: '{}' has {} accumulator registers, the "
                     "shape needs {}",
                     line, d.opcode, dList->size(), info.n / 2);
  info.dFirst = static_cast<uint32_t>(kernel.operandLists.size());
  for (std::string_view e : *dList) {
    Expected<uint32_t> slot = destSlot(e, line);
    if (!slot)
      return slot.takeError();
    if (*slot == kNoSlot)
      return makeError("PTX line {}: wgmma accumulators cannot be '_'", line);
    kernel.operandLists.push_back(*slot);
  }
  if (aRegisters) {
    Expected<std::vector<std::string_view>> aList =
        vectorElements(d, operands[1]);
    if (!aList)
      return aList.takeError();
    if (aList->size() != 4)
      return makeError("PTX line {}: '{}' reads A from 4 registers, got {}",
                       line, d.opcode, aList->size());
    info.aFromRegisters = true;
    info.aFirst = static_cast<uint32_t>(kernel.operandLists.size());
    for (std::string_view e : *aList) {
      Expected<uint32_t> slot = sourceSlot(e, line);
      if (!slot)
        return slot.takeError();
      kernel.operandLists.push_back(*slot);
    }
  } else {
    Expected<uint32_t> slot = sourceSlot(operands[1], line);
    if (!slot)
      return slot.takeError();
    info.aDesc = *slot;
  }
  Expected<uint32_t> b = sourceSlot(operands[2], line);
  if (!b)
    return b.takeError();
  info.bDesc = *b;
  Expected<uint32_t> scaleD = sourceSlot(operands[3], line);
  if (!scaleD)
    return scaleD.takeError();
  info.scaleD = *scaleD;
  int64_t v = 0;
  for (int i = 0; i < (integer ? 0 : 2); ++i) {
    if (Error err = immediate(operands[4 + i], "scale (1 or -1)", v))
      return err;
    if (v != 1 && v != -1)
      return makeError("PTX line {}: wgmma imm-scale-{} must be 1 or -1, "
                       "got {}",
                       line, i == 0 ? 'a' : 'b', v);
    (i == 0 ? info.scaleA : info.scaleB) = static_cast<int>(v);
  }
  if (halfTypes) {
    size_t next = 6;
    for (int i = aRegisters ? 1 : 0; i < 2; ++i) {
      if (Error err = immediate(operands[next++], "transpose flag", v))
        return err;
      if (v != 0 && v != 1)
        return makeError("PTX line {}: wgmma imm-trans-{} must be 0 or 1, "
                         "got {}",
                         line, i == 0 ? 'a' : 'b', v);
      (i == 0 ? info.transA : info.transB) = v == 1;
    }
  }
  // The accumulators and A registers are also checked against the
  // instructions between this wgmma and its wait (ExecWgmma.cpp).
  return Error::success();
}

} // namespace kiln::runtime::emu::detail
