//===- ParserInternal.h - The PTX parser's shared pieces --------*- C++ -*-===//
//
// Private to runtime/lib/emu: the statements the text splits into, the
// lexing helpers, and the kernel builder that each part of the parser adds
// member functions to: PtxParser.cpp (statements, bodies, the module),
// ParseDeclarations.cpp (.entry headers, .reg/.shared/.local/.param, .func
// inlining, module variables), ParseOperands.cpp (registers, immediates,
// addresses), DecodeInstruction.cpp (opcode, guard, general modifiers,
// operand counts) and one Decode*.cpp per instruction family.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_PARSERINTERNAL_H
#define KILN_RUNTIME_LIB_EMU_PARSERINTERNAL_H

#include "PtxParser.h"

#include "../Support.h"

#include <cctype>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::runtime::emu::detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

inline bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

inline bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

/// True when `text` is just a label name ($L__BB0_2, LBB1).
inline bool isLabel(std::string_view text) {
  text = trim(text);
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'))
      return false;
  return true;
}

/// The PTX type named `name` (without its dot), or Type::None.
Type parseType(std::string_view name);

/// Splits at top-level commas (not inside [] or {}).
std::vector<std::string_view> splitOperands(std::string_view s);
/// Decimal, hex (0x), octal (leading 0), with an optional sign and U.
bool parseInteger(std::string_view s, int64_t &value);
/// 0fXXXXXXXX (f32 bits) and 0dXXXXXXXXXXXXXXXX (f64 bits).
bool parseFloatBits(std::string_view s, uint64_t &bits, bool &isF32);

/// One statement: the text between separators, with its first line.
struct Statement {
  std::string text;
  uint32_t line = 0;
  /// '{' (a body or scope opens after it), '}' (a scope closes) or ';'.
  char end = ';';
  std::vector<std::string> labels;
};

/// Constant::globalVar of a dynamic shared symbol until finish() knows its
/// offset.
constexpr int32_t kDynamicSharedMarker = -2;

/// A .func definition: its parameter names and where its body is.
struct FunctionDef {
  std::string name;
  std::vector<std::string> returns;
  std::vector<std::string> params;
  /// Index of the header statement (the one ending in '{').
  size_t header = 0;
  uint32_t line = 0;
};

/// `.func (.param .b64 r) name(.param .b64 p0, ...)` -> name, r, p0...
Expected<FunctionDef> parseFunctionHeader(std::string_view text, uint32_t line);
/// `.global .align 4 .b8 name[16] = {1, 2, ...};` at module scope.
Error parseGlobal(std::string_view text, uint32_t line, Module &module);

/// A name-to-value table entry for an instruction's sub-operation.
struct SubopName {
  const char *name;
  uint8_t value;
};

template <size_t N>
bool lookupSubop(const SubopName (&table)[N], std::string_view name,
                 uint8_t &value) {
  for (const SubopName &entry : table)
    if (name == entry.name) {
      value = entry.value;
      return true;
    }
  return false;
}

/// add, min, ... cas: atom/red's operation, also redux's.
bool lookupAtomOp(std::string_view name, uint8_t &value);

/// One instruction while it is decoded: its opcode split at the dots, the
/// types among them, its operands, and what is known of it so far.
struct DecodedInstruction {
  Instruction inst;
  uint32_t line = 0;
  /// The whole opcode with its modifiers ("ld.global.v4.f32"), for
  /// messages.
  std::string_view opcode;
  /// The opcode at its dots: parts[0] is the instruction's name.
  std::vector<std::string_view> parts;
  std::vector<Type> types;
  /// mma's shape modifier ("m16n8k16"), read with its types.
  std::string_view mmaShape;
  std::vector<std::string_view> operands;
  /// The state spaces among the modifiers, in order (a bulk copy's first
  /// one is its destination).
  std::vector<std::string_view> spaces;
};

/// Builds one kernel from the statements of its .entry. Calls to .func
/// functions are inlined: the body is decoded again at each call site, with
/// its own registers and labels, its parameters in the thread's local
/// memory, and `ret` a branch to the instruction after the call.
class KernelBuilder {
public:
  /// `declaredRegisters` counts the module's declared registers across its
  /// kernels (and every inlined call), against kMaxModuleRegisters.
  KernelBuilder(const std::unordered_map<std::string, uint32_t> &globalIndex,
                const std::vector<Statement> &all,
                const std::unordered_map<std::string, FunctionDef> &functions,
                uint64_t &declaredRegisters)
      : globalIndex(globalIndex), all(all), functions(functions),
        declaredRegisters(declaredRegisters) {}

  /// The most registers a module may declare, all kernels together: each
  /// is a named slot, so a few `%r<1048576>` would cost seconds and
  /// gigabytes (a fuzz input, docs/reliability.md); real kernels declare
  /// thousands.
  static constexpr uint64_t kMaxModuleRegisters = uint64_t(1) << 20;

  Error header(const Statement &st);
  /// A module-scope `.shared` or `.extern .shared` variable (nvcc and NVRTC
  /// put `__shared__` arrays there): every kernel of the module gets its own
  /// copy in the block's shared memory, declared before the body's.
  Error declareModuleShared(const Statement &st) {
    return declareShared(st.text, st.line);
  }
  /// Decodes the body that opens at statement i; i ends at its last
  /// statement.
  Error body(size_t &i);
  Error statement(const Statement &st);
  Expected<Kernel> finish();

private:
  Error inlineCall(std::string_view text, const Instruction &guard,
                   uint32_t line);
  Error declareRegisters(std::string_view text, uint32_t line);
  Error declareShared(std::string_view text, uint32_t line,
                      bool isLocal = false, std::string *declared = nullptr);
  Error instruction(std::string_view text, uint32_t line);

  // Instruction decoding, one group per family (Decode*.cpp). A modifier
  // decoder returns true when it consumed the modifier `m`; an operand
  // decoder reads `d.operands` into `d.inst`.
  bool decodeArithmeticModifier(DecodedInstruction &d, std::string_view m);
  Error decodeArithmeticTypes(DecodedInstruction &d);
  Error decodeArithmeticOperands(DecodedInstruction &d);
  bool decodeMemoryModifier(DecodedInstruction &d, std::string_view m);
  Error decodeMemoryOperands(DecodedInstruction &d);
  bool decodeWarpModifier(DecodedInstruction &d, std::string_view m);
  Error decodeWarpOperands(DecodedInstruction &d);
  bool decodeTensorCoreModifier(DecodedInstruction &d, std::string_view m);
  Error decodeTensorCoreTypes(DecodedInstruction &d);
  Error decodeTensorCoreOperands(DecodedInstruction &d);
  bool decodeAsyncAndBarrierModifier(DecodedInstruction &d, std::string_view m);
  Error decodeAsyncAndBarrierOperands(DecodedInstruction &d);
  bool decodeWarpgroupModifier(DecodedInstruction &d, std::string_view m);
  Error decodeWarpgroupTypes(DecodedInstruction &d);
  Error decodeWarpgroupOperands(DecodedInstruction &d);
  bool decodeMbarrierModifier(DecodedInstruction &d, std::string_view m);
  Error decodeMbarrierOperands(DecodedInstruction &d);
  bool decodeBulkCopyModifier(DecodedInstruction &d, std::string_view m);
  Error decodeBulkCopyOperands(DecodedInstruction &d);
  bool decodeClusterModifier(DecodedInstruction &d, std::string_view m);
  Error decodeClusterOperands(DecodedInstruction &d);
  /// Appends an address operand ([%r1+16]) to Kernel::operandLists as
  /// three entries: the base slot and the offset's low and high words.
  Error pushAddress(std::string_view operand, uint32_t line);

  // Operand helpers the families share (ParseOperands.cpp).
  /// Fails unless there are exactly `n` operands.
  Error expectOperands(const DecodedInstruction &d, size_t n);
  /// Operands `first`.. as sources.
  Error readSources(DecodedInstruction &d, size_t first);
  Error readDest(DecodedInstruction &d, std::string_view operand);
  /// "d|p": the destination and a second (predicate) one. `padMissing`
  /// keeps the second slot (kNoSlot) when "|p" is absent.
  Error readPairedDest(DecodedInstruction &d, std::string_view operand,
                       bool padMissing);
  /// A source predicate that may be negated ("!%p1").
  Error readNegatableSource(DecodedInstruction &d, std::string_view operand);
  /// "{%r1, %r2}" into its elements.
  Expected<std::vector<std::string_view>>
  vectorElements(const DecodedInstruction &d, std::string_view operand);
  Error unknownInstruction(const DecodedInstruction &d) const;

  Expected<uint32_t> sourceSlot(std::string_view operand, uint32_t line);
  Expected<uint32_t> destSlot(std::string_view operand, uint32_t line);
  Error address(std::string_view operand, uint32_t line, Instruction &inst);
  uint32_t constantSlot(uint64_t value, int32_t globalVar = -1);
  uint32_t addSlot(uint8_t bits) {
    kernel.slotBits.push_back(bits);
    return static_cast<uint32_t>(kernel.slotBits.size() - 1);
  }

  const std::unordered_map<std::string, uint32_t> &globalIndex;
  const std::vector<Statement> &all;
  const std::unordered_map<std::string, FunctionDef> &functions;
  /// Names of .param variables of call sequences and of the inlined
  /// function's own parameters: they live in local memory.
  std::unordered_map<std::string, bool> callParams;
  bool lastAddressIsCallParam = false;
  /// Labels of an inlined body get this prefix (unique per call site).
  std::string labelPrefix;
  /// Functions being inlined (recursion is an error) and the label their
  /// `ret` branches to.
  std::vector<std::string> inlineStack;
  std::string returnLabel;
  unsigned inlineCount = 0;
  Kernel kernel;
  std::unordered_map<std::string, uint32_t> registers;
  uint64_t &declaredRegisters;
  /// Symbols with a fixed value: params (offsets) and shared variables.
  std::unordered_map<std::string, uint64_t> symbols;
  std::unordered_map<uint64_t, uint32_t> constantSlots;
  std::unordered_map<int, uint32_t> specialSlots;
  std::unordered_map<std::string, uint32_t> labels;
  /// Branches to resolve at the end: instruction index, label, and the
  /// scope the branch is in.
  struct PendingBranch {
    size_t index = 0;
    std::string label;
    std::string scope;
  };
  std::vector<PendingBranch> branches;
  void addBranch(size_t index, std::string label) {
    branches.push_back({index, std::move(label), scopePath});
  }
  /// The `{ }` scopes open around the statement being decoded, as
  /// "/1/4" (unique ids): labels declared inside one (inline asm blocks
  /// such as CUTLASS's try_wait loops, which repeat their labels) are
  /// visible only there; top-level labels are keyed by name alone.
  std::string scopePath;
  unsigned scopeCount = 0;
  std::vector<std::string> dynamicSharedSymbols;
  bool hasDynamicShared = false;
  uint64_t dynamicSharedAlign = 1;
};

} // namespace kiln::runtime::emu::detail

#endif // KILN_RUNTIME_LIB_EMU_PARSERINTERNAL_H
