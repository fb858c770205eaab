//===- DecodeTensorCore.cpp - ldmatrix, stmatrix and mma.sync -------------===//
//
// Shapes, fragment counts and types of the tensor-core instructions. An
// mma's registers (up to 14) do not fit an Instruction's operand arrays:
// they go to Kernel::operandLists, D first, then A, B and C.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeTensorCoreModifier(DecodedInstruction &d,
                                             std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::Ldmatrix || inst.op == Op::Stmatrix) {
    if (m == "m8n8")
      return true;
    if (m == "x1" || m == "x2" || m == "x4") {
      inst.vec = static_cast<uint8_t>(m[1] - '0');
      return true;
    }
    if (m == "trans") {
      inst.transpose = true;
      return true;
    }
  }
  if (inst.op == Op::Mma) {
    if (m == "m16n8k16" || m == "m16n8k8" || m == "m16n8k32") {
      d.mmaShape = m;
      return true;
    }
    if (m == "row" || m == "col")
      return true;
  }
  return false;
}

Error KernelBuilder::decodeTensorCoreTypes(DecodedInstruction &d) {
  // mma.sync.aligned.shape.row.col.dtype.atype.btype.ctype
  Instruction &inst = d.inst;
  const std::vector<Type> &types = d.types;
  if (types.size() != 4 || types[0] != types[3])
    return unknownInstruction(d);
  inst.type = types[0];
  inst.srcType = types[1];
  Type in = types[1];
  // Integer mma may mix s8 and u8 (srcType is A's type, aux B's signedness);
  // the float shapes take one input type.
  auto isByte = [](Type t) { return t == Type::S8 || t == Type::U8; };
  if (isByte(types[1]) && isByte(types[2]) && types[0] == Type::S32) {
    inst.aux = types[2] == Type::S8 ? 1 : 0;
    if (d.mmaShape == "m16n8k32")
      inst.subop = uint8_t(MmaShape::M16N8K32I8);
    else if (d.mmaShape == "m16n8k16")
      inst.subop = uint8_t(MmaShape::M16N8K16I8);
    else
      return unknownInstruction(d);
    return Error::success();
  }
  // fp8 (sm_89+): e4m3 and e5m2 may mix; only f32 accumulators are
  // emulated (the .f16 ones are refused, not guessed).
  auto isF8 = [](Type t) { return t == Type::E4M3 || t == Type::E5M2; };
  if (isF8(types[1]) || isF8(types[2])) {
    if (!isF8(types[1]) || !isF8(types[2]) || types[0] != Type::F32 ||
        d.mmaShape != "m16n8k32" || inst.satfinite)
      return makeError("PTX line {}: '{}' is not emulated (fp8 mma is "
                       "m16n8k32 with f32 accumulators)",
                       d.line, d.opcode);
    inst.aux = types[2] == Type::E5M2 ? 1 : 0;
    inst.subop = uint8_t(MmaShape::M16N8K32F8);
    return Error::success();
  }
  if (types[1] != types[2] || inst.satfinite)
    return unknownInstruction(d);
  bool halfIn = in == Type::F16 || in == Type::BF16;
  std::string_view shape = d.mmaShape;
  if (shape == "m16n8k16" && halfIn && inst.type == Type::F32)
    inst.subop = uint8_t(MmaShape::M16N8K16F32);
  else if (shape == "m16n8k16" && in == Type::F16 && inst.type == Type::F16)
    inst.subop = uint8_t(MmaShape::M16N8K16F16);
  else if (shape == "m16n8k8" && halfIn && inst.type == Type::F32)
    inst.subop = uint8_t(MmaShape::M16N8K8F32);
  else if (shape == "m16n8k8" && in == Type::TF32 && inst.type == Type::F32)
    inst.subop = uint8_t(MmaShape::M16N8K8Tf32);
  else
    return unknownInstruction(d);
  return Error::success();
}

Error KernelBuilder::decodeTensorCoreOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  switch (inst.op) {
  case Op::Stmatrix: {
    if (Error err = expectOperands(d, 2))
      return err;
    inst.numSrc = 1;
    if (Error err = address(operands[0], line, inst))
      return err;
    Expected<std::vector<std::string_view>> elements =
        vectorElements(d, operands[1]);
    if (!elements)
      return elements.takeError();
    if (elements->size() != inst.vec)
      return makeError("PTX line {}: stmatrix .x{} reads {} registers", line,
                       inst.vec, inst.vec);
    for (std::string_view e : *elements) {
      Expected<uint32_t> slot = sourceSlot(e, line);
      if (!slot)
        return slot.takeError();
      inst.src[inst.numSrc++] = *slot;
    }
    return Error::success();
  }
  case Op::Ldmatrix: {
    if (Error err = expectOperands(d, 2))
      return err;
    Expected<std::vector<std::string_view>> elements =
        vectorElements(d, operands[0]);
    if (!elements)
      return elements.takeError();
    if (elements->size() != inst.vec)
      return makeError("PTX line {}: ldmatrix .x{} writes {} registers", line,
                       inst.vec, inst.vec);
    for (std::string_view e : *elements)
      if (Error err = readDest(d, e))
        return err;
    inst.numSrc = 1;
    return address(operands[1], line, inst);
  }
  default: { // mma
    if (Error err = expectOperands(d, 4))
      return err;
    MmaShape shape = MmaShape(inst.subop);
    unsigned want[4] = {4, 4, 2, 4};
    if (shape == MmaShape::M16N8K16F16)
      want[0] = want[3] = 2;
    if (shape == MmaShape::M16N8K8F32 || shape == MmaShape::M16N8K16I8)
      want[1] = 2, want[2] = 1;
    inst.target = static_cast<uint32_t>(kernel.operandLists.size());
    for (unsigned k = 0; k < 4; ++k) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(d, operands[k]);
      if (!elements)
        return elements.takeError();
      if (elements->size() != want[k])
        return makeError("PTX line {}: '{}' operand {} needs {} registers, "
                         "got {}",
                         line, d.opcode, k + 1, want[k], elements->size());
      for (std::string_view e : *elements) {
        Expected<uint32_t> slot =
            k == 0 ? destSlot(e, line) : sourceSlot(e, line);
        if (!slot)
          return slot.takeError();
        kernel.operandLists.push_back(*slot);
      }
    }
    return Error::success();
  }
  }
}

} // namespace kiln::runtime::emu::detail
