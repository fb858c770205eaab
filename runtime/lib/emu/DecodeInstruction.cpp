//===- DecodeInstruction.cpp - Opcode, guard, modifiers, operand counts ---===//
//
// Decodes one instruction statement: its guard predicate, the opcode and
// the modifiers every family shares (rounding, spaces, vector widths,
// comparisons, the qualifiers without an emulated effect), then hands the
// family-specific modifiers, types and operands to the family's decoder
// (Decode*.cpp) and checks the operand count. Branches, ret and exit are
// decoded here. A modifier nobody knows is an error naming the line.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

#include <iterator>

namespace kiln::runtime::emu::detail {

namespace {

struct OpName {
  const char *name;
  Op op;
};

constexpr OpName kOps[] = {
    {"mov", Op::Mov},
    {"add", Op::Add},
    {"sub", Op::Sub},
    {"mul", Op::Mul},
    {"mad", Op::Mad},
    {"fma", Op::Fma},
    {"madc", Op::Mad},
    {"addc", Op::Add},
    {"shf", Op::Shf},
    {"div", Op::Div},
    {"rem", Op::Rem},
    {"neg", Op::Neg},
    {"abs", Op::Abs},
    {"min", Op::Min},
    {"max", Op::Max},
    {"and", Op::And},
    {"or", Op::Or},
    {"xor", Op::Xor},
    {"not", Op::Not},
    {"shl", Op::Shl},
    {"shr", Op::Shr},
    {"setp", Op::Setp},
    {"selp", Op::Selp},
    {"cvt", Op::Cvt},
    {"cvta", Op::Cvta},
    {"ld", Op::Ld},
    {"st", Op::St},
    {"bra", Op::Bra},
    {"ret", Op::Ret},
    {"exit", Op::Exit},
    {"bar", Op::Bar},
    {"barrier", Op::Bar},
    {"shfl", Op::Shfl},
    {"ex2", Op::Ex2},
    {"lg2", Op::Lg2},
    {"rcp", Op::Rcp},
    {"sqrt", Op::Sqrt},
    {"rsqrt", Op::Rsqrt},
    {"sin", Op::Sin},
    {"cos", Op::Cos},
    {"tanh", Op::Tanh},
    {"copysign", Op::Copysign},
    {"bfe", Op::Bfe},
    {"bfi", Op::Bfi},
    {"popc", Op::Popc},
    {"clz", Op::Clz},
    {"brev", Op::Brev},
    {"membar", Op::Membar},
    {"fence", Op::Membar},
    {"atom", Op::Atom},
    {"red", Op::Red},
    {"vote", Op::Vote},
    {"activemask", Op::Activemask},
    {"redux", Op::Redux},
    {"prmt", Op::Prmt},
    {"bfind", Op::Bfind},
    {"slct", Op::Slct},
    {"lop3", Op::Lop3},
    {"testp", Op::Testp},
    {"mul24", Op::Mul24},
    {"mad24", Op::Mad24},
    {"sad", Op::Sad},
    {"cnot", Op::Cnot},
    {"bmsk", Op::Bmsk},
    {"szext", Op::Szext},
    {"dp4a", Op::Dp4a},
    {"dp2a", Op::Dp2a},
    {"match", Op::Match},
    {"ldmatrix", Op::Ldmatrix},
    {"stmatrix", Op::Stmatrix},
    {"set", Op::Set},
    {"mma", Op::Mma},
    {"cp", Op::CpAsync},
    {"subc", Op::Sub},
    {"setmaxnreg", Op::Setmaxnreg},
    {"elect", Op::Elect},
    {"mbarrier", Op::Mbarrier},
    {"wgmma", Op::Wgmma},
    {"mapa", Op::Mapa},
    {"prefetch", Op::Membar},
    {"prefetchu", Op::Membar},
};

struct CmpName {
  const char *name;
  Cmp cmp;
};

constexpr CmpName kCmps[] = {
    {"eq", Cmp::Eq},   {"ne", Cmp::Ne},   {"lt", Cmp::Lt},   {"le", Cmp::Le},
    {"gt", Cmp::Gt},   {"ge", Cmp::Ge},   {"lo", Cmp::Lo},   {"ls", Cmp::Ls},
    {"hi", Cmp::Hi},   {"hs", Cmp::Hs},   {"equ", Cmp::Equ}, {"neu", Cmp::Neu},
    {"ltu", Cmp::Ltu}, {"leu", Cmp::Leu}, {"gtu", Cmp::Gtu}, {"geu", Cmp::Geu},
    {"num", Cmp::Num}, {"nan", Cmp::Nan},
};

} // namespace

Error KernelBuilder::instruction(std::string_view text, uint32_t line) {
  DecodedInstruction d;
  Instruction &inst = d.inst;
  d.line = line;
  inst.line = line;
  if (text[0] == '@') {
    size_t end = text.find_first_of(" \t");
    // "@%p1" alone (found by kiln-fuzz-ptx: substr(npos) threw).
    if (end == std::string_view::npos)
      return makeError("PTX line {}: a guard with no instruction after it",
                       line);
    std::string_view guard = text.substr(1, end - 1);
    if (!guard.empty() && guard[0] == '!') {
      inst.negateGuard = true;
      guard.remove_prefix(1);
    }
    Expected<uint32_t> slot = sourceSlot(guard, line);
    if (!slot)
      return slot.takeError();
    inst.guard = *slot;
    text = trim(text.substr(end));
  }
  size_t opEnd = text.find_first_of(" \t");
  std::string_view opcode = text.substr(0, opEnd);
  d.opcode = opcode;
  if (opcode == "call" || startsWith(opcode, "call."))
    return inlineCall(opEnd == std::string_view::npos
                          ? std::string_view()
                          : trim(text.substr(opEnd)),
                      inst, line);
  std::string_view operandText = opEnd == std::string_view::npos
                                     ? std::string_view()
                                     : trim(text.substr(opEnd));
  std::vector<std::string_view> &parts = d.parts;
  for (size_t start = 0;;) {
    size_t dot = opcode.find('.', start);
    // "L1::evict_last" style qualifiers keep their '::' parts together.
    parts.push_back(opcode.substr(start, dot - start));
    if (dot == std::string_view::npos)
      break;
    start = dot + 1;
  }
  bool known = false;
  for (const OpName &name : kOps)
    if (parts[0] == name.name) {
      inst.op = name.op;
      known = true;
    }
  if (!known)
    return unknownInstruction(d);
  inst.carryIn = parts[0] == "madc" || parts[0] == "addc" || parts[0] == "subc";
  if (inst.op == Op::CpAsync && (parts.size() < 2 || parts[1] != "async"))
    return unknownInstruction(d);
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view m = parts[i];
    if (m == "shared" || m == "shared::cta" || m == "shared::cluster" ||
        m == "global" || m == "param")
      d.spaces.push_back(m);
    Type type = parseType(m);
    if (type != Type::None) {
      d.types.push_back(type);
      continue;
    }
    // Op-specific modifiers first: their names overlap general ones. Each
    // family's decoder looks only at its own ops.
    if (decodeClusterModifier(d, m) || decodeArithmeticModifier(d, m) ||
        decodeMemoryModifier(d, m) ||
        decodeWarpModifier(d, m) || decodeTensorCoreModifier(d, m) ||
        decodeAsyncAndBarrierModifier(d, m) || decodeWarpgroupModifier(d, m) ||
        decodeMbarrierModifier(d, m) || decodeBulkCopyModifier(d, m))
      continue;
    if (m == "shared::cta" || m == "shared::cluster") {
      inst.space = Space::Shared;
      continue;
    }
    if (m == "cc")
      inst.carryOut = true;
    else if (m == "rn")
      inst.rounding = Rounding::Rn;
    else if (m == "rz")
      inst.rounding = Rounding::Rz;
    else if (m == "rm")
      inst.rounding = Rounding::Rm;
    else if (m == "rp")
      inst.rounding = Rounding::Rp;
    else if (m == "rni")
      inst.rounding = Rounding::Rni;
    else if (m == "rzi")
      inst.rounding = Rounding::Rzi;
    else if (m == "rmi")
      inst.rounding = Rounding::Rmi;
    else if (m == "rpi")
      inst.rounding = Rounding::Rpi;
    else if (m == "rna")
      inst.rounding = Rounding::Rna;
    else if (m == "relu")
      inst.relu = true;
    else if (m == "satfinite")
      inst.satfinite = true;
    else if (m == "ftz")
      inst.ftz = true;
    else if (m == "sat")
      inst.sat = true;
    else if (m == "NaN")
      inst.propagateNaN = true;
    else if (m == "lo")
      inst.mulMode = MulMode::Lo, inst.cmp = Cmp::Lo;
    else if (m == "hi")
      inst.mulMode = MulMode::Hi, inst.cmp = Cmp::Hi;
    else if (m == "wide")
      inst.mulMode = MulMode::Wide;
    else if (m == "global")
      inst.space = Space::Global;
    else if (m == "shared")
      inst.space = Space::Shared;
    else if (m == "local")
      inst.space = Space::Local;
    else if (m == "param")
      inst.space = Space::Param;
    else if (m == "const")
      inst.space = Space::Const;
    else if (m == "to")
      inst.toSpace = true;
    else if (m == "v2")
      inst.vec = 2;
    else if (m == "v4")
      inst.vec = 4;
    else if (m == "up")
      inst.shflMode = ShflMode::Up;
    else if (m == "down")
      inst.shflMode = ShflMode::Down;
    else if (m == "bfly")
      inst.shflMode = ShflMode::Bfly;
    else if (m == "idx")
      inst.shflMode = ShflMode::Idx;
    else if (m == "approx" || m == "full" || m == "uni" || m == "sync" ||
             m == "aligned" || m == "nc" || m == "ca" || m == "cg" ||
             m == "cs" || m == "lu" || m == "cv" || m == "wb" || m == "wt" ||
             m == "volatile" || m == "relaxed" || m == "acquire" ||
             m == "release" || m == "acq_rel" || m == "sc" || m == "cta" ||
             m == "cluster" || m == "gpu" || m == "sys" || m == "ptr" ||
             m.find("::") != std::string_view::npos || startsWith(m, "L1") ||
             startsWith(m, "L2"))
      ; // No effect on the emulated result.
    else {
      bool isCmp = false;
      for (const CmpName &c : kCmps)
        if (m == c.name) {
          inst.cmp = c.cmp;
          isCmp = true;
        }
      if (!isCmp)
        return unknownInstruction(d);
    }
  }
  // The 8-bit floats are operand types of mma and wgmma only, their pairs
  // (.e4m3x2, .e5m2x2) types of cvt only.
  for (Type t : d.types) {
    if ((t == Type::E4M3 || t == Type::E5M2) && inst.op != Op::Mma &&
        inst.op != Op::Wgmma)
      return unknownInstruction(d);
    if ((t == Type::E4M3x2 || t == Type::E5M2x2) && inst.op != Op::Cvt)
      return unknownInstruction(d);
  }
  switch (inst.op) {
  case Op::Mma:
    if (Error err = decodeTensorCoreTypes(d))
      return err;
    break;
  case Op::Wgmma:
    if (Error err = decodeWarpgroupTypes(d))
      return err;
    break;
  case Op::Cvt:
  case Op::Slct:
  case Op::Dp4a:
  case Op::Set:
  case Op::Dp2a:
  case Op::Mul:
  case Op::Mad:
    if (Error err = decodeArithmeticTypes(d))
      return err;
    break;
  default:
    if (!d.types.empty()) {
      if (d.types.size() != 1)
        return unknownInstruction(d);
      inst.type = d.types[0];
    }
    break;
  }

  d.operands = splitOperands(operandText);
  switch (inst.op) {
  case Op::Atom:
  case Op::Red:
  case Op::Ld:
  case Op::St:
    if (Error err = decodeMemoryOperands(d))
      return err;
    break;
  case Op::Vote:
  case Op::Activemask:
  case Op::Match:
  case Op::Shfl:
    if (Error err = decodeWarpOperands(d))
      return err;
    break;
  case Op::Ldmatrix:
  case Op::Stmatrix:
  case Op::Mma:
    if (Error err = decodeTensorCoreOperands(d))
      return err;
    break;
  case Op::CpAsync:
  case Op::CpAsyncCommit:
  case Op::CpAsyncWait:
  case Op::Bar:
    if (Error err = decodeAsyncAndBarrierOperands(d))
      return err;
    break;
  case Op::Wgmma:
  case Op::Setmaxnreg:
  case Op::Elect:
    if (Error err = decodeWarpgroupOperands(d))
      return err;
    break;
  case Op::Mbarrier:
    if (Error err = decodeMbarrierOperands(d))
      return err;
    break;
  case Op::BulkCopy:
    if (Error err = decodeBulkCopyOperands(d))
      return err;
    break;
  case Op::Mapa:
  case Op::ClusterBarrier:
    if (Error err = decodeClusterOperands(d))
      return err;
    break;
  case Op::Bra: {
    if (Error err = expectOperands(d, 1))
      return err;
    addBranch(kernel.code.size(), labelPrefix + std::string(d.operands[0]));
    break;
  }
  case Op::Ret:
    if (!inlineStack.empty()) { // return from an inlined function
      inst.op = Op::Bra;
      addBranch(kernel.code.size(), returnLabel);
    }
    break;
  case Op::Exit:
  case Op::Membar:
    break;
  default:
    if (Error err = decodeArithmeticOperands(d))
      return err;
    break;
  }

  // Per-op operand counts and the types each needs.
  unsigned wantSrc = 0;
  switch (inst.op) {
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Rem:
  case Op::Min:
  case Op::Max:
  case Op::And:
  case Op::Or:
  case Op::Xor:
  case Op::Shl:
  case Op::Shr:
  case Op::Copysign:
  case Op::Mul24:
  case Op::Bmsk:
  case Op::Szext:
  case Op::Redux:
    wantSrc = 2;
    break;
  case Op::Setp:
    wantSrc = inst.subop != uint8_t(BoolOp::None) ? 3 : 2;
    break;
  case Op::Prmt:
  case Op::Slct:
  case Op::Mad24:
  case Op::Sad:
  case Op::Dp4a:
  case Op::Dp2a:
    wantSrc = 3;
    break;
  case Op::Lop3:
    wantSrc = 4;
    break;
  case Op::Bfind:
  case Op::Testp:
  case Op::Cnot:
    wantSrc = 1;
    break;
  case Op::Activemask:
  case Op::CpAsyncCommit:
  case Op::Mma:
    wantSrc = 0;
    break;
  case Op::Mad:
  case Op::Fma:
  case Op::Selp:
  case Op::Bfe:
  case Op::Shf:
    wantSrc = 3;
    break;
  case Op::Bfi:
    wantSrc = 4;
    break;
  case Op::Cvt:
    // cvt.rn.f16x2.f32 d, a, b and cvt.rn.satfinite.e4m3x2.f32 d, a, b
    // pack two conversions (cvt.rn.f16x2.e4m3x2 d, a unpacks two).
    wantSrc = (inst.type == Type::F16x2 || inst.type == Type::BF16x2 ||
               inst.type == Type::E4M3x2 || inst.type == Type::E5M2x2) &&
                      inst.srcType == Type::F32
                  ? 2
                  : 1;
    break;
  case Op::Neg:
  case Op::Abs:
  case Op::Not:
  case Op::Cvta:
  case Op::Ex2:
  case Op::Lg2:
  case Op::Rcp:
  case Op::Sqrt:
  case Op::Rsqrt:
  case Op::Sin:
  case Op::Cos:
  case Op::Tanh:
  case Op::Popc:
  case Op::Clz:
  case Op::Brev:
    wantSrc = 1;
    break;
  case Op::Shfl:
    wantSrc = 4;
    break;
  default:
    wantSrc = inst.numSrc;
    break;
  }
  if (inst.numSrc != wantSrc)
    return makeError("PTX line {}: '{}' takes {} source operands, got {}", line,
                     opcode, wantSrc, inst.numSrc);
  bool needsType = inst.op != Op::Bra && inst.op != Op::Ret &&
                   inst.op != Op::Exit && inst.op != Op::Bar &&
                   inst.op != Op::Membar && inst.op != Op::CpAsync &&
                   inst.op != Op::CpAsyncCommit && inst.op != Op::CpAsyncWait &&
                   inst.op != Op::Elect && inst.op != Op::Wgmma &&
                   inst.op != Op::BulkCopy && inst.op != Op::Mbarrier &&
                   inst.op != Op::ClusterBarrier;
  if (needsType && inst.type == Type::None)
    return makeError("PTX line {}: '{}' has no type", line, opcode);
  kernel.code.push_back(inst);
  kernel.opcodeText.emplace_back(opcode);
  return Error::success();
}

} // namespace kiln::runtime::emu::detail
