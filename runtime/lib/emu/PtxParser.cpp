//===- PtxParser.cpp - PTX text to decoded kernels for the emulator -------===//
//
// Two steps: split the text into statements (ending at ';', '{' or '}'),
// remembering each one's line and labels, then decode the statements of
// each .entry into Instructions. Branch targets are resolved once the whole
// body is read.
//
//===----------------------------------------------------------------------===//

#include "PtxParser.h"

#include "../Support.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <unordered_map>

namespace kiln::runtime::emu {

unsigned typeBytes(Type type) {
  switch (type) {
  case Type::None:
    return 0;
  case Type::Pred:
  case Type::B8:
  case Type::U8:
  case Type::S8:
    return 1;
  case Type::B16:
  case Type::U16:
  case Type::S16:
  case Type::F16:
  case Type::BF16:
    return 2;
  case Type::B32:
  case Type::U32:
  case Type::S32:
  case Type::F32:
  case Type::F16x2:
  case Type::BF16x2:
  case Type::TF32:
    return 4;
  case Type::B64:
  case Type::U64:
  case Type::S64:
  case Type::F64:
    return 8;
  }
  return 0;
}

bool isSigned(Type type) {
  return type == Type::S8 || type == Type::S16 || type == Type::S32 ||
         type == Type::S64;
}

bool isFloat(Type type) {
  return type == Type::F16 || type == Type::F16x2 || type == Type::BF16 ||
         type == Type::BF16x2 || type == Type::F32 || type == Type::F64 ||
         type == Type::TF32;
}

namespace {

struct TypeName {
  const char *name;
  Type type;
};
constexpr TypeName kTypeNames[] = {
    {"pred", Type::Pred}, {"b8", Type::B8},         {"b16", Type::B16},
    {"b32", Type::B32},   {"b64", Type::B64},       {"u8", Type::U8},
    {"u16", Type::U16},   {"u32", Type::U32},       {"u64", Type::U64},
    {"s8", Type::S8},     {"s16", Type::S16},       {"s32", Type::S32},
    {"s64", Type::S64},   {"f16", Type::F16},       {"f16x2", Type::F16x2},
    {"bf16", Type::BF16}, {"bf16x2", Type::BF16x2}, {"f32", Type::F32},
    {"f64", Type::F64},   {"tf32", Type::TF32},
};

Type parseType(std::string_view name) {
  for (const TypeName &entry : kTypeNames)
    if (name == entry.name)
      return entry.type;
  return Type::None;
}

} // namespace

const char *typeName(Type type) {
  for (const TypeName &entry : kTypeNames)
    if (entry.type == type)
      return entry.name;
  return "none";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

/// True when `text` is just a label name ($L__BB0_2, LBB1).
bool isLabel(std::string_view text) {
  text = trim(text);
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'))
      return false;
  return true;
}

/// One statement: the text between separators, with its first line.
struct Statement {
  std::string text;
  uint32_t line = 0;
  /// '{' (a body or scope opens after it), '}' (a scope closes) or ';'.
  char end = ';';
  std::vector<std::string> labels;
};

/// Splits PTX into statements, dropping comments. A '{' opens a scope when
/// the statement so far is empty or a function header; inside an operand
/// list it is a vector brace and stays in the text.
Expected<std::vector<Statement>> splitStatements(std::string_view text) {
  std::vector<Statement> out;
  std::string current;
  std::vector<std::string> pendingLabels;
  uint32_t line = 1, startLine = 0;
  int vectorDepth = 0;
  auto flush = [&](char end) {
    Statement st;
    st.end = end;
    st.line = startLine ? startLine : line;
    std::string_view body = trim(current);
    // Leading labels: `name:` (but not `::` inside an opcode).
    while (true) {
      size_t i = 0;
      while (i < body.size() && isIdentChar(body[i]) && body[i] != '.' &&
             body[i] != '%')
        ++i;
      if (i == 0 || i >= body.size() || body[i] != ':' ||
          (i + 1 < body.size() && body[i + 1] == ':'))
        break;
      st.labels.emplace_back(body.substr(0, i));
      body = trim(body.substr(i + 1));
    }
    st.text = std::string(body);
    st.labels.insert(st.labels.begin(), pendingLabels.begin(),
                     pendingLabels.end());
    pendingLabels.clear();
    if (!st.text.empty() || !st.labels.empty() || end != ';')
      out.push_back(std::move(st));
    current.clear();
    startLine = 0;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      if (i < text.size())
        ++line;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t close = text.find("*/", i + 2);
      if (close == std::string_view::npos)
        return makeError("PTX line {}: unterminated comment", line);
      for (size_t j = i; j < close; ++j)
        line += text[j] == '\n';
      i = close + 1;
      continue;
    }
    if (c == '\n') {
      // .version, .target and .address_size end at the end of their line.
      std::string_view sofar = trim(current);
      if (startsWith(sofar, ".version") || startsWith(sofar, ".target") ||
          startsWith(sofar, ".address_size"))
        flush(';');
      ++line;
      current += ' ';
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c)) && startLine == 0 &&
        trim(current).empty())
      startLine = line;
    // A label ends at its colon and does not need a ';'; the statement
    // after it starts on its own line.
    if (c == ':' && vectorDepth == 0 &&
        (i + 1 >= text.size() || text[i + 1] != ':') && isLabel(current)) {
      pendingLabels.emplace_back(trim(current));
      current.clear();
      startLine = 0;
      continue;
    }
    if (c == ';') {
      if (vectorDepth != 0)
        return makeError("PTX line {}: unbalanced braces", line);
      flush(';');
      continue;
    }
    if (c == '{') {
      std::string_view sofar = trim(current);
      bool header = sofar.empty() || sofar.back() == ':' ||
                    sofar.find(".entry") != std::string_view::npos ||
                    sofar.find(".func") != std::string_view::npos;
      if (header && vectorDepth == 0) {
        flush('{');
        continue;
      }
      ++vectorDepth;
    } else if (c == '}') {
      if (vectorDepth == 0) {
        if (!trim(current).empty())
          return makeError("PTX line {}: missing ';' before '}}'", line);
        flush('}');
        continue;
      }
      --vectorDepth;
    }
    current += c;
  }
  if (!trim(current).empty())
    return makeError("PTX line {}: statement without ';' at end of text", line);
  return out;
}

/// Splits at top-level commas (not inside [] or {}).
std::vector<std::string_view> splitOperands(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[' || s[i] == '{')
      ++depth;
    else if (s[i] == ']' || s[i] == '}')
      --depth;
    else if (s[i] == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = trim(s.substr(start));
  if (!last.empty() || !out.empty())
    out.push_back(last);
  return out;
}

bool parseInteger(std::string_view s, int64_t &value) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (!s.empty() && (s.back() == 'U' || s.back() == 'u'))
    s.remove_suffix(1);
  if (s.empty())
    return false;
  uint64_t v = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (char c : s.substr(2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        return false;
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(c))
                        ? c - '0'
                        : (std::tolower(c) - 'a' + 10));
    }
  } else if (s.size() > 1 && s[0] == '0' &&
             std::isdigit(static_cast<unsigned char>(s[1]))) {
    for (char c : s.substr(1)) {
      if (c < '0' || c > '7')
        return false;
      v = v * 8 + (c - '0');
    }
  } else {
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c)))
        return false;
      v = v * 10 + (c - '0');
    }
  }
  value = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

/// 0fXXXXXXXX (f32 bits) and 0dXXXXXXXXXXXXXXXX (f64 bits).
bool parseFloatBits(std::string_view s, uint64_t &bits, bool &isF32) {
  if (s.size() < 3 || s[0] != '0' ||
      (s[1] != 'f' && s[1] != 'F' && s[1] != 'd' && s[1] != 'D'))
    return false;
  isF32 = s[1] == 'f' || s[1] == 'F';
  size_t digits = isF32 ? 8 : 16;
  if (s.size() != 2 + digits)
    return false;
  uint64_t v = 0;
  for (char c : s.substr(2)) {
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      return false;
    v = v * 16 + (std::isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : (std::tolower(c) - 'a' + 10));
  }
  bits = v;
  return true;
}

struct SpecialName {
  const char *name;
  Special which;
};
constexpr SpecialName kSpecials[] = {
    {"%tid.x", Special::TidX},
    {"%tid.y", Special::TidY},
    {"%tid.z", Special::TidZ},
    {"%ntid.x", Special::NtidX},
    {"%ntid.y", Special::NtidY},
    {"%ntid.z", Special::NtidZ},
    {"%ctaid.x", Special::CtaidX},
    {"%ctaid.y", Special::CtaidY},
    {"%ctaid.z", Special::CtaidZ},
    {"%nctaid.x", Special::NctaidX},
    {"%nctaid.y", Special::NctaidY},
    {"%nctaid.z", Special::NctaidZ},
    {"%laneid", Special::LaneId},
    {"%warpid", Special::WarpId},
    {"%nwarpid", Special::NWarpId},
    {"%lanemask_eq", Special::LanemaskEq},
    {"%lanemask_lt", Special::LanemaskLt},
    {"%lanemask_le", Special::LanemaskLe},
    {"%lanemask_gt", Special::LanemaskGt},
    {"%lanemask_ge", Special::LanemaskGe},
    {"%smid", Special::Smid},
    {"%nsmid", Special::Nsmid},
    {"%gridid", Special::GridId},
    {"%dynamic_smem_size", Special::DynamicSmemSize},
    {"%total_smem_size", Special::TotalSmemSize},
};

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
};

struct SubopName {
  const char *name;
  uint8_t value;
};
constexpr SubopName kAtomOps[] = {
    {"add", uint8_t(AtomOp::Add)},   {"min", uint8_t(AtomOp::Min)},
    {"max", uint8_t(AtomOp::Max)},   {"inc", uint8_t(AtomOp::Inc)},
    {"dec", uint8_t(AtomOp::Dec)},   {"and", uint8_t(AtomOp::And)},
    {"or", uint8_t(AtomOp::Or)},     {"xor", uint8_t(AtomOp::Xor)},
    {"exch", uint8_t(AtomOp::Exch)}, {"cas", uint8_t(AtomOp::Cas)},
};
constexpr SubopName kVoteModes[] = {
    {"all", uint8_t(VoteMode::All)},
    {"any", uint8_t(VoteMode::Any)},
    {"uni", uint8_t(VoteMode::Uni)},
    {"ballot", uint8_t(VoteMode::Ballot)},
};
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
Expected<FunctionDef> parseFunctionHeader(std::string_view text,
                                          uint32_t line) {
  FunctionDef def;
  def.line = line;
  size_t func = text.find(".func");
  std::string_view rest = trim(text.substr(func + 5));
  // The last word of each parameter is its name (without [N]).
  auto names = [&](std::string_view list, std::vector<std::string> &out) {
    for (std::string_view param : splitOperands(list)) {
      param = trim(param);
      if (param.empty())
        continue;
      size_t space = param.find_last_of(" \t");
      std::string_view name =
          space == std::string_view::npos ? param : param.substr(space + 1);
      name = name.substr(0, name.find('['));
      out.emplace_back(name);
    }
  };
  auto parenthesised = [&](std::string_view &s) -> Expected<std::string_view> {
    size_t close = s.find(')');
    if (s.empty() || s[0] != '(' || close == std::string_view::npos)
      return makeError("PTX line {}: cannot read the .func header", line);
    std::string_view inside = s.substr(1, close - 1);
    s = trim(s.substr(close + 1));
    return inside;
  };
  if (!rest.empty() && rest[0] == '(') {
    Expected<std::string_view> returns = parenthesised(rest);
    if (!returns)
      return returns.takeError();
    names(*returns, def.returns);
  }
  size_t end = 0;
  while (end < rest.size() && isIdentChar(rest[end]))
    ++end;
  def.name = std::string(rest.substr(0, end));
  if (def.name.empty())
    return makeError("PTX line {}: .func without a name", line);
  rest = trim(rest.substr(end));
  if (!rest.empty() && rest[0] == '(') {
    Expected<std::string_view> params = parenthesised(rest);
    if (!params)
      return params.takeError();
    names(*params, def.params);
  }
  return def;
}

/// Builds one kernel from the statements of its .entry. Calls to .func
/// functions are inlined: the body is decoded again at each call site, with
/// its own registers and labels, its parameters in the thread's local
/// memory, and `ret` a branch to the instruction after the call.
class KernelBuilder {
public:
  KernelBuilder(const std::unordered_map<std::string, uint32_t> &globalIndex,
                const std::vector<Statement> &all,
                const std::unordered_map<std::string, FunctionDef> &functions)
      : globalIndex(globalIndex), all(all), functions(functions) {}

  Error header(const Statement &st);
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
  /// Symbols with a fixed value: params (offsets) and shared variables.
  std::unordered_map<std::string, uint64_t> symbols;
  std::unordered_map<uint64_t, uint32_t> constantSlots;
  std::unordered_map<int, uint32_t> specialSlots;
  std::unordered_map<std::string, uint32_t> labels;
  /// (instruction index, label) for branches to resolve at the end.
  std::vector<std::pair<size_t, std::string>> branches;
  std::vector<std::string> dynamicSharedSymbols;
  bool hasDynamicShared = false;
  uint64_t dynamicSharedAlign = 1;
};

Error KernelBuilder::header(const Statement &st) {
  std::string_view text = st.text;
  kernel.line = st.line;
  size_t entry = text.find(".entry");
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  std::string_view nameText = trim(text.substr(
      entry + 6,
      (open == std::string_view::npos ? text.size() : open) - entry - 6));
  size_t nameEnd = 0;
  while (nameEnd < nameText.size() && isIdentChar(nameText[nameEnd]))
    ++nameEnd;
  kernel.name = std::string(nameText.substr(0, nameEnd));
  if (kernel.name.empty())
    return makeError("PTX line {}: .entry without a name", st.line);
  if (open != std::string_view::npos) {
    if (close == std::string_view::npos || close < open)
      return makeError("PTX line {}: unbalanced parameter list", st.line);
    uint32_t offset = 0;
    for (std::string_view param :
         splitOperands(text.substr(open + 1, close - open - 1))) {
      if (param.empty())
        continue;
      // .param .u64 .ptr .align 1 name   |   .param .align 8 .b8 name[16]
      std::vector<std::string_view> words;
      size_t i = 0;
      while (i < param.size()) {
        while (i < param.size() &&
               std::isspace(static_cast<unsigned char>(param[i])))
          ++i;
        size_t start = i;
        while (i < param.size() &&
               !std::isspace(static_cast<unsigned char>(param[i])))
          ++i;
        if (i > start)
          words.push_back(param.substr(start, i - start));
      }
      if (words.size() < 3 || words[0] != ".param")
        return makeError("PTX line {}: cannot read parameter '{}'", st.line,
                         param);
      Type type = Type::None;
      uint32_t align = 0;
      for (size_t w = 1; w + 1 < words.size(); ++w) {
        if (words[w] == ".align" && w + 2 < words.size()) {
          int64_t a = 0;
          if (!parseInteger(words[w + 1], a))
            return makeError("PTX line {}: bad .align in '{}'", st.line, param);
          // For pointers, .align is the pointee's alignment.
          if (type == Type::None)
            align = static_cast<uint32_t>(a);
          ++w;
        } else if (words[w][0] == '.' &&
                   parseType(words[w].substr(1)) != Type::None) {
          type = parseType(words[w].substr(1));
        }
      }
      std::string_view name = words.back();
      uint32_t size = typeBytes(type);
      size_t bracket = name.find('[');
      if (bracket != std::string_view::npos) {
        int64_t count = 0;
        if (!parseInteger(name.substr(bracket + 1, name.size() - bracket - 2),
                          count))
          return makeError("PTX line {}: bad array parameter '{}'", st.line,
                           name);
        size *= static_cast<uint32_t>(count);
        name = name.substr(0, bracket);
      } else {
        align = typeBytes(type);
      }
      if (size == 0)
        return makeError("PTX line {}: parameter '{}' has no type", st.line,
                         name);
      if (align == 0)
        align = 1;
      offset = (offset + align - 1) / align * align;
      kernel.params.push_back({std::string(name), offset, size});
      symbols[std::string(name)] = offset;
      offset += size;
    }
    kernel.paramBytes = offset;
    text = text.substr(close + 1);
  }
  size_t maxntid = text.find(".maxntid");
  if (maxntid != std::string_view::npos) {
    uint64_t product = 1;
    std::string_view rest = text.substr(maxntid + 8);
    size_t end = rest.find('.');
    for (std::string_view dim : splitOperands(rest.substr(0, end))) {
      int64_t v = 0;
      if (parseInteger(dim, v))
        product *= static_cast<uint64_t>(v);
    }
    kernel.maxThreads = static_cast<uint32_t>(product);
  }
  return Error::success();
}

Error KernelBuilder::declareRegisters(std::string_view text, uint32_t line) {
  // .reg .b32 %r<63>;  .reg .f32 %f1, %f2;
  text = trim(text.substr(4));
  size_t space = text.find_first_of(" \t");
  if (space == std::string_view::npos || text[0] != '.')
    return makeError("PTX line {}: cannot read '.reg {}'", line, text);
  Type type = parseType(text.substr(1, space - 1));
  if (type == Type::None)
    return makeError("PTX line {}: unknown register type '{}'", line,
                     text.substr(0, space));
  uint8_t bits = type == Type::Pred ? 1 : typeBytes(type) * 8;
  for (std::string_view name : splitOperands(text.substr(space))) {
    size_t angle = name.find('<');
    if (angle == std::string_view::npos) {
      registers[std::string(name)] = addSlot(bits);
      continue;
    }
    int64_t count = 0;
    if (!parseInteger(name.substr(angle + 1, name.size() - angle - 2), count) ||
        count < 0 || count > (1 << 20))
      return makeError("PTX line {}: bad register range '{}'", line, name);
    std::string prefix(name.substr(0, angle));
    for (int64_t i = 0; i < count; ++i)
      registers[prefix + std::to_string(i)] = addSlot(bits);
  }
  return Error::success();
}

/// `.shared .align 4 .b8 name[128]` or `.extern .shared .align 16 .b8 n[]`.
Error KernelBuilder::declareShared(std::string_view text, uint32_t line,
                                   bool isLocal, std::string *declared) {
  bool isExtern = startsWith(text, ".extern");
  uint64_t align = 1, elementBytes = 0;
  std::string_view rest = text;
  std::string_view name;
  while (!rest.empty()) {
    rest = trim(rest);
    size_t end = rest.find_first_of(" \t");
    std::string_view word = rest.substr(0, end);
    rest =
        end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (word == ".align") {
      rest = trim(rest);
      size_t e = rest.find_first_of(" \t");
      int64_t a = 0;
      if (!parseInteger(rest.substr(0, e), a) || a <= 0)
        return makeError("PTX line {}: bad .align", line);
      align = static_cast<uint64_t>(a);
      rest = e == std::string_view::npos ? std::string_view() : rest.substr(e);
    } else if (word[0] == '.') {
      Type type = parseType(word.substr(1));
      if (type != Type::None)
        elementBytes = typeBytes(type);
    } else {
      name = word;
    }
  }
  uint64_t count = 1;
  size_t bracket = name.find('[');
  if (bracket != std::string_view::npos) {
    std::string_view inside =
        name.substr(bracket + 1, name.find(']') - bracket - 1);
    int64_t n = 0;
    if (inside.empty() && isExtern)
      n = 0;
    else if (!parseInteger(inside, n) || n < 0)
      return makeError("PTX line {}: bad shared array size", line);
    count = static_cast<uint64_t>(n);
    name = name.substr(0, bracket);
  }
  if (name.empty() || elementBytes == 0)
    return makeError("PTX line {}: cannot read shared declaration '{}'", line,
                     text);
  if (isExtern) {
    hasDynamicShared = true;
    dynamicSharedAlign = std::max(dynamicSharedAlign, align);
    // Resolved in finish(), after all static shared variables.
    dynamicSharedSymbols.emplace_back(name);
    return Error::success();
  }
  // Local variables get offsets in the thread's local memory, shared ones in
  // the block's shared memory; both are addressed by their symbol.
  uint64_t &bytes = isLocal ? kernel.localBytes : kernel.staticSharedBytes;
  uint64_t offset = (bytes + align - 1) / align * align;
  symbols[std::string(name)] = offset;
  if (declared)
    *declared = std::string(name);
  bytes = offset + count * elementBytes;
  return Error::success();
}

uint32_t KernelBuilder::constantSlot(uint64_t value, int32_t globalVar) {
  if (globalVar == -1) {
    auto it = constantSlots.find(value);
    if (it != constantSlots.end())
      return it->second;
  }
  uint32_t slot = addSlot(64);
  kernel.constants.push_back({slot, value, globalVar});
  if (globalVar == -1)
    constantSlots[value] = slot;
  return slot;
}

Expected<uint32_t> KernelBuilder::sourceSlot(std::string_view operand,
                                             uint32_t line) {
  operand = trim(operand);
  if (operand.empty())
    return makeError("PTX line {}: empty operand", line);
  if (operand[0] != '%') { // registers need no '%' ("{ .reg .b32 tmp; ...")
    auto it = registers.find(std::string(operand));
    if (it != registers.end())
      return it->second;
  }
  if (operand[0] == '%') {
    auto it = registers.find(std::string(operand));
    if (it != registers.end())
      return it->second;
    for (const SpecialName &special : kSpecials) {
      if (operand == special.name) {
        auto found = specialSlots.find(static_cast<int>(special.which));
        if (found != specialSlots.end())
          return found->second;
        uint32_t slot = addSlot(32);
        kernel.specials.push_back({slot, special.which});
        specialSlots[static_cast<int>(special.which)] = slot;
        return slot;
      }
    }
    return makeError("PTX line {}: unknown register '{}'", line, operand);
  }
  uint64_t bits = 0;
  bool isF32 = false;
  if (parseFloatBits(operand, bits, isF32))
    return constantSlot(bits);
  int64_t value = 0;
  if (parseInteger(operand, value))
    return constantSlot(static_cast<uint64_t>(value));
  auto symbol = symbols.find(std::string(operand));
  if (symbol != symbols.end())
    return constantSlot(symbol->second);
  for (const std::string &name : dynamicSharedSymbols)
    if (operand == name)
      return constantSlot(0, kDynamicSharedMarker);
  auto global = globalIndex.find(std::string(operand));
  if (global != globalIndex.end())
    return constantSlot(0, static_cast<int32_t>(global->second));
  return makeError("PTX line {}: cannot read operand '{}'", line, operand);
}

Expected<uint32_t> KernelBuilder::destSlot(std::string_view operand,
                                           uint32_t line) {
  operand = trim(operand);
  if (operand == "_")
    return kNoSlot;
  auto it = registers.find(std::string(operand));
  if (it == registers.end())
    return makeError("PTX line {}: '{}' is not a declared register", line,
                     operand);
  return it->second;
}

/// [%rd1], [%rd1+8], [%rd1+-4], [sym], [sym+4], [1024].
Error KernelBuilder::address(std::string_view operand, uint32_t line,
                             Instruction &inst) {
  operand = trim(operand);
  if (operand.size() < 2 || operand.front() != '[' || operand.back() != ']')
    return makeError("PTX line {}: expected an address, got '{}'", line,
                     operand);
  std::string_view inside = trim(operand.substr(1, operand.size() - 2));
  size_t plus = inside.find('+', 1);
  size_t minus = inside.find('-', 1);
  size_t split = std::min(plus, minus);
  std::string_view base = trim(inside.substr(0, split));
  int64_t offset = 0;
  if (split != std::string_view::npos) {
    std::string_view rest = trim(inside.substr(split + (inside[split] == '+')));
    if (!parseInteger(rest, offset))
      return makeError("PTX line {}: bad address offset in '{}'", line,
                       operand);
  }
  int64_t absolute = 0;
  lastAddressIsCallParam = false;
  if (parseInteger(base, absolute)) {
    inst.src[0] = constantSlot(0);
    inst.offset = absolute + offset;
    return Error::success();
  }
  lastAddressIsCallParam = callParams.count(std::string(base)) != 0;
  Expected<uint32_t> slot = sourceSlot(base, line);
  if (!slot)
    return slot.takeError();
  inst.src[0] = *slot;
  inst.offset = offset;
  return Error::success();
}

Error KernelBuilder::statement(const Statement &st) {
  for (const std::string &label : st.labels)
    labels[labelPrefix + label] = static_cast<uint32_t>(kernel.code.size());
  std::string_view text = st.text;
  if (text.empty())
    return Error::success();
  if (startsWith(text, ".reg"))
    return declareRegisters(text, st.line);
  if (startsWith(text, ".shared") || startsWith(text, ".extern .shared"))
    return declareShared(text, st.line);
  if (startsWith(text, ".local"))
    return declareShared(text, st.line, /*isLocal=*/true);
  if (startsWith(text, ".param")) {
    // A call sequence's argument or return value: thread-local storage.
    std::string name;
    if (Error err = declareShared(text, st.line, /*isLocal=*/true, &name))
      return err;
    callParams[name] = true;
    return Error::success();
  }
  std::string_view directive = text.substr(0, text.find_first_of(" \t"));
  if (directive == ".loc" || directive == ".pragma" || directive == ".file")
    return Error::success();
  if (text[0] == '.')
    return makeError("PTX line {}: unsupported directive '{}' in kernel '{}'",
                     st.line, text.substr(0, text.find_first_of(" \t")),
                     kernel.name);
  return instruction(text, st.line);
}

Error KernelBuilder::instruction(std::string_view text, uint32_t line) {
  Instruction inst;
  inst.line = line;
  if (text[0] == '@') {
    size_t end = text.find_first_of(" \t");
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
  if (opcode == "call" || startsWith(opcode, "call."))
    return inlineCall(opEnd == std::string_view::npos
                          ? std::string_view()
                          : trim(text.substr(opEnd)),
                      inst, line);
  std::string_view operandText = opEnd == std::string_view::npos
                                     ? std::string_view()
                                     : trim(text.substr(opEnd));
  std::vector<std::string_view> parts;
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
  auto unknown = [&]() {
    return makeError("PTX line {}: unsupported instruction '{}' in kernel "
                     "'{}'",
                     line, opcode, kernel.name);
  };
  if (!known)
    return unknown();
  inst.carryIn = parts[0] == "madc" || parts[0] == "addc" || parts[0] == "subc";
  if (inst.op == Op::CpAsync && (parts.size() < 2 || parts[1] != "async"))
    return unknown();
  std::string_view mmaShape;
  std::vector<Type> types;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string_view m = parts[i];
    Type type = parseType(m);
    if (type != Type::None) {
      types.push_back(type);
      continue;
    }
    // Op-specific modifiers first: their names overlap general ones.
    uint8_t subop = 0;
    if ((inst.op == Op::Atom || inst.op == Op::Red || inst.op == Op::Redux) &&
        lookupSubop(kAtomOps, m, subop)) {
      inst.subop = subop;
      continue;
    }
    if (inst.op == Op::Match && (m == "any" || m == "all")) {
      inst.subop = m == "all";
      continue;
    }
    if (inst.op == Op::Vote && lookupSubop(kVoteModes, m, subop)) {
      inst.subop = subop;
      continue;
    }
    if (inst.op == Op::Prmt && lookupSubop(kPrmtModes, m, subop)) {
      inst.subop = subop;
      continue;
    }
    if (inst.op == Op::Testp && lookupSubop(kTestpOps, m, subop)) {
      inst.subop = subop;
      continue;
    }
    if (inst.op == Op::Bar && (m == "arrive" || m == "red" || m == "popc" ||
                               m == "and" || m == "or")) {
      if (m == "arrive")
        inst.subop = uint8_t(BarMode::Arrive);
      else if (m == "popc")
        inst.subop = uint8_t(BarMode::RedPopc);
      else if (m == "and")
        inst.subop = uint8_t(BarMode::RedAnd);
      else if (m == "or")
        inst.subop = uint8_t(BarMode::RedOr);
      continue;
    }
    if ((inst.op == Op::Setp || inst.op == Op::Set) &&
        (m == "and" || m == "or" || m == "xor")) {
      inst.subop = uint8_t(m == "and"  ? BoolOp::And
                           : m == "or" ? BoolOp::Or
                                       : BoolOp::Xor);
      continue;
    }
    if (inst.op == Op::Bfind && m == "shiftamt") {
      inst.shiftLeft = true;
      continue;
    }
    if ((inst.op == Op::Bmsk || inst.op == Op::Szext) &&
        (m == "clamp" || m == "wrap")) {
      inst.shiftClamp = m == "clamp";
      continue;
    }
    if (inst.op == Op::Ldmatrix || inst.op == Op::Stmatrix) {
      if (m == "m8n8")
        continue;
      if (m == "x1" || m == "x2" || m == "x4") {
        inst.vec = static_cast<uint8_t>(m[1] - '0');
        continue;
      }
      if (m == "trans") {
        inst.transpose = true;
        continue;
      }
    }
    if (inst.op == Op::Mma) {
      if (m == "m16n8k16" || m == "m16n8k8") {
        mmaShape = m;
        continue;
      }
      if (m == "row" || m == "col")
        continue;
    }
    if (inst.op == Op::CpAsync) {
      if (m == "async")
        continue;
      if (m == "commit_group") {
        inst.op = Op::CpAsyncCommit;
        continue;
      }
      if (m == "wait_group" || m == "wait_all") {
        inst.op = Op::CpAsyncWait;
        continue;
      }
    }
    if (m == "shared::cta" || m == "shared::cluster") {
      inst.space = Space::Shared;
      continue;
    }
    if (m == "cc")
      inst.carryOut = true;
    else if (inst.op == Op::Shf && (m == "l" || m == "r"))
      inst.shiftLeft = m == "l";
    else if (inst.op == Op::Shf && (m == "wrap" || m == "clamp"))
      inst.shiftClamp = m == "clamp";
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
             m == "gpu" || m == "sys" || m == "ptr" ||
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
        return unknown();
    }
  }
  if (inst.op == Op::Cvt || inst.op == Op::Slct || inst.op == Op::Dp4a ||
      inst.op == Op::Set || inst.op == Op::Dp2a) {
    if (types.size() != 2)
      return unknown();
    inst.type = types[0];
    inst.srcType = types[1];
  } else if (inst.op == Op::Mma) {
    // mma.sync.aligned.shape.row.col.dtype.atype.btype.ctype
    if (types.size() != 4 || types[1] != types[2] || types[0] != types[3])
      return unknown();
    inst.type = types[0];
    inst.srcType = types[1];
    Type in = types[1];
    bool halfIn = in == Type::F16 || in == Type::BF16;
    if (mmaShape == "m16n8k16" && halfIn && inst.type == Type::F32)
      inst.subop = uint8_t(MmaShape::M16N8K16F32);
    else if (mmaShape == "m16n8k16" && in == Type::F16 &&
             inst.type == Type::F16)
      inst.subop = uint8_t(MmaShape::M16N8K16F16);
    else if (mmaShape == "m16n8k8" && halfIn && inst.type == Type::F32)
      inst.subop = uint8_t(MmaShape::M16N8K8F32);
    else if (mmaShape == "m16n8k8" && in == Type::TF32 &&
             inst.type == Type::F32)
      inst.subop = uint8_t(MmaShape::M16N8K8Tf32);
    else
      return unknown();
  } else if (inst.op == Op::Mul || inst.op == Op::Mad) {
    if (types.size() != 1)
      return unknown();
    inst.type = types[0];
    if (isFloat(inst.type))
      inst.mulMode = MulMode::None;
    else if (inst.mulMode == MulMode::None)
      return unknown(); // integer mul/mad needs .lo, .hi or .wide
  } else if (!types.empty()) {
    if (types.size() != 1)
      return unknown();
    inst.type = types[0];
  }

  std::vector<std::string_view> operands = splitOperands(operandText);
  auto expect = [&](size_t n) -> Error {
    if (operands.size() != n)
      return makeError("PTX line {}: '{}' takes {} operands, got {}", line,
                       opcode, n, operands.size());
    return Error::success();
  };
  auto sources = [&](size_t first) -> Error {
    for (size_t i = first; i < operands.size(); ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[i], line);
      if (!slot)
        return slot.takeError();
      if (inst.numSrc == std::size(inst.src))
        return makeError("PTX line {}: too many source operands", line);
      inst.src[inst.numSrc++] = *slot;
    }
    return Error::success();
  };
  auto dest = [&](std::string_view operand) -> Error {
    Expected<uint32_t> slot = destSlot(operand, line);
    if (!slot)
      return slot.takeError();
    inst.dst[inst.numDst++] = *slot;
    return Error::success();
  };
  /// "d|p": the destination and a second (predicate) one. `padMissing`
  /// keeps the second slot (kNoSlot) when "|p" is absent.
  auto pairedDest = [&](std::string_view operand, bool padMissing) -> Error {
    size_t bar = operand.find('|');
    if (Error err = dest(operand.substr(0, bar)))
      return err;
    if (bar != std::string_view::npos)
      return dest(operand.substr(bar + 1));
    if (padMissing)
      inst.dst[inst.numDst++] = kNoSlot;
    return Error::success();
  };
  /// "{%r1, %r2}" into its elements.
  auto vectorElements =
      [&](std::string_view operand) -> Expected<std::vector<std::string_view>> {
    operand = trim(operand);
    if (operand.size() < 2 || operand.front() != '{' || operand.back() != '}')
      return makeError("PTX line {}: expected a vector operand, got '{}'", line,
                       operand);
    return splitOperands(operand.substr(1, operand.size() - 2));
  };

  /// A source predicate that may be negated ("!%p1").
  auto negatableSource = [&](std::string_view operand) -> Error {
    operand = trim(operand);
    if (!operand.empty() && operand[0] == '!') {
      inst.negateSrc = true;
      operand.remove_prefix(1);
    }
    Expected<uint32_t> slot = sourceSlot(operand, line);
    if (!slot)
      return slot.takeError();
    inst.src[inst.numSrc++] = *slot;
    return Error::success();
  };

  switch (inst.op) {
  case Op::Atom:
  case Op::Red: {
    // atom.op.type d, [a], b{, c};  red.op.type [a], b
    bool isAtom = inst.op == Op::Atom;
    if (inst.subop == uint8_t(AtomOp::None))
      return unknown();
    size_t values = inst.subop == uint8_t(AtomOp::Cas) ? 2 : 1;
    if (Error err = expect((isAtom ? 2 : 1) + values))
      return err;
    if (isAtom) {
      if (Error err = dest(operands[0]))
        return err;
    }
    inst.numSrc = 1;
    if (Error err = address(operands[isAtom ? 1 : 0], line, inst))
      return err;
    if (Error err = sources(isAtom ? 2 : 1))
      return err;
    break;
  }
  case Op::Vote: {
    // vote.sync.mode.type d, {!}a, membermask (or vote.mode d, {!}a).
    if (operands.size() != 2 && operands.size() != 3)
      return makeError("PTX line {}: '{}' takes 3 operands", line, opcode);
    if (Error err = dest(operands[0]))
      return err;
    if (Error err = negatableSource(operands[1]))
      return err;
    if (operands.size() == 3)
      if (Error err = sources(2))
        return err;
    break;
  }
  case Op::Activemask: {
    if (Error err = expect(1))
      return err;
    if (Error err = dest(operands[0]))
      return err;
    break;
  }
  case Op::Stmatrix: {
    if (Error err = expect(2))
      return err;
    inst.numSrc = 1;
    if (Error err = address(operands[0], line, inst))
      return err;
    Expected<std::vector<std::string_view>> elements =
        vectorElements(operands[1]);
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
    break;
  }
  case Op::Set: {
    // set.cmp{.bool}.dtype.stype d, a, b{, {!}c}
    bool combine = inst.subop != uint8_t(BoolOp::None);
    if (Error err = expect(combine ? 4 : 3))
      return err;
    if (Error err = dest(operands[0]))
      return err;
    for (size_t i = 1; i < 3; ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[i], line);
      if (!slot)
        return slot.takeError();
      inst.src[inst.numSrc++] = *slot;
    }
    if (combine)
      if (Error err = negatableSource(operands[3]))
        return err;
    break;
  }
  case Op::Ldmatrix: {
    if (Error err = expect(2))
      return err;
    Expected<std::vector<std::string_view>> elements =
        vectorElements(operands[0]);
    if (!elements)
      return elements.takeError();
    if (elements->size() != inst.vec)
      return makeError("PTX line {}: ldmatrix .x{} writes {} registers", line,
                       inst.vec, inst.vec);
    for (std::string_view e : *elements)
      if (Error err = dest(e))
        return err;
    inst.numSrc = 1;
    if (Error err = address(operands[1], line, inst))
      return err;
    break;
  }
  case Op::Mma: {
    if (Error err = expect(4))
      return err;
    MmaShape shape = MmaShape(inst.subop);
    unsigned want[4] = {4, 4, 2, 4};
    if (shape == MmaShape::M16N8K16F16)
      want[0] = want[3] = 2;
    if (shape == MmaShape::M16N8K8F32)
      want[1] = 2, want[2] = 1;
    inst.target = static_cast<uint32_t>(kernel.operandLists.size());
    for (unsigned k = 0; k < 4; ++k) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(operands[k]);
      if (!elements)
        return elements.takeError();
      if (elements->size() != want[k])
        return makeError("PTX line {}: '{}' operand {} needs {} registers, "
                         "got {}",
                         line, opcode, k + 1, want[k], elements->size());
      for (std::string_view e : *elements) {
        Expected<uint32_t> slot =
            k == 0 ? destSlot(e, line) : sourceSlot(e, line);
        if (!slot)
          return slot.takeError();
        kernel.operandLists.push_back(*slot);
      }
    }
    break;
  }
  case Op::CpAsync: {
    // cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size}
    if (operands.size() != 3 && operands.size() != 4)
      return makeError("PTX line {}: '{}' takes 3 or 4 operands", line, opcode);
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
    if (Error err = sources(2))
      return err;
    break;
  }
  case Op::CpAsyncCommit:
    if (Error err = expect(0))
      return err;
    break;
  case Op::CpAsyncWait:
    if (operands.size() > 1)
      return makeError("PTX line {}: '{}' takes at most 1 operand", line,
                       opcode);
    if (Error err = sources(0))
      return err;
    break;
  case Op::Bra: {
    if (Error err = expect(1))
      return err;
    branches.emplace_back(kernel.code.size(),
                          labelPrefix + std::string(operands[0]));
    break;
  }
  case Op::Ret:
    if (!inlineStack.empty()) { // return from an inlined function
      inst.op = Op::Bra;
      branches.emplace_back(kernel.code.size(), returnLabel);
    }
    break;
  case Op::Exit:
  case Op::Membar:
    break;
  case Op::Bar: {
    // bar{.cta}.sync a{, b}; bar.arrive a, b; barrier{.cta}.sync{.aligned}
    // a{, b}; bar.red.popc.u32 d, a{, b}, {!}c; bar.red.{and,or}.pred d,
    // a{, b}, {!}c. src[0] = barrier, src[1] = thread count (or kNoSlot),
    // src[2] = bar.red's predicate.
    BarMode mode = BarMode(inst.subop);
    bool known = false;
    for (size_t i = 1; i < parts.size(); ++i)
      known |= parts[i] == "sync" || parts[i] == "arrive" || parts[i] == "red";
    if (!known)
      return unknown();
    bool red = mode == BarMode::RedPopc || mode == BarMode::RedAnd ||
               mode == BarMode::RedOr;
    size_t first = red ? 1 : 0;
    size_t count = operands.size() - first - (red ? 1 : 0);
    if (operands.size() < first + 1 || count < 1 || count > 2 ||
        (mode == BarMode::Arrive && count != 2))
      return makeError("PTX line {}: wrong operands for '{}'", line, opcode);
    if (red)
      if (Error err = dest(operands[0]))
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
      if (Error err = negatableSource(operands.back()))
        return err;
    }
    break;
  }
  case Op::Ld: {
    if (Error err = expect(2))
      return err;
    if (inst.vec > 1) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(operands[0]);
      if (!elements)
        return elements.takeError();
      if (elements->size() != inst.vec)
        return makeError("PTX line {}: vector width mismatch", line);
      for (std::string_view e : *elements)
        if (Error err = dest(e))
          return err;
    } else if (Error err = dest(operands[0])) {
      return err;
    }
    inst.numSrc = 1;
    if (Error err = address(operands[1], line, inst))
      return err;
    if (lastAddressIsCallParam && inst.space == Space::Param)
      inst.space = Space::Local;
    break;
  }
  case Op::St: {
    if (Error err = expect(2))
      return err;
    inst.numSrc = 1;
    if (Error err = address(operands[0], line, inst))
      return err;
    if (lastAddressIsCallParam && inst.space == Space::Param)
      inst.space = Space::Local;
    std::vector<std::string_view> values;
    if (inst.vec > 1) {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(operands[1]);
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
    break;
  }
  case Op::Mov: {
    if (Error err = expect(2))
      return err;
    // Packing: mov.b64 %rd1, {%r1, %r2}; unpacking: mov.b64 {%r1, %r2}, %rd1.
    if (trim(operands[1]).front() == '{') {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(operands[1]);
      if (!elements)
        return elements.takeError();
      if (Error err = dest(operands[0]))
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
        return unknown();
      break;
    }
    if (trim(operands[0]).front() == '{') {
      Expected<std::vector<std::string_view>> elements =
          vectorElements(operands[0]);
      if (!elements)
        return elements.takeError();
      for (std::string_view e : *elements)
        if (Error err = dest(e))
          return err;
      inst.vec = static_cast<uint8_t>(elements->size());
      if (inst.vec != 2 && inst.vec != 4)
        return unknown();
      if (Error err = sources(1))
        return err;
      break;
    }
    if (Error err = dest(operands[0]))
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
      break;
    }
    if (Error err = sources(1))
      return err;
    break;
  }
  case Op::Setp: {
    // setp.cmp{.bool}.type p[|q], a, b{, {!}c}
    bool combine = inst.subop != uint8_t(BoolOp::None);
    if (Error err = expect(combine ? 4 : 3))
      return err;
    if (Error err = pairedDest(operands[0], /*padMissing=*/false))
      return err;
    for (size_t i = 1; i < 3; ++i) {
      Expected<uint32_t> slot = sourceSlot(operands[i], line);
      if (!slot)
        return slot.takeError();
      inst.src[inst.numSrc++] = *slot;
    }
    if (combine)
      if (Error err = negatableSource(operands[3]))
        return err;
    break;
  }
  case Op::Match:
  case Op::Shfl: {
    // match.sync.mode.type d{|p}, a, membermask
    // shfl.sync.mode.b32 d[|p], a, b, c, membermask
    if (Error err = expect(inst.op == Op::Match ? 3 : 5))
      return err;
    if (Error err = pairedDest(operands[0], /*padMissing=*/true))
      return err;
    if (Error err = sources(1))
      return err;
    break;
  }
  default: {
    // Plain `op d, a, b, ...`.
    if (operands.empty())
      return makeError("PTX line {}: '{}' needs operands", line, opcode);
    if (operands.size() > 5)
      return makeError("PTX line {}: too many operands for '{}'", line, opcode);
    if (Error err = dest(operands[0]))
      return err;
    if (Error err = sources(1))
      return err;
    break;
  }
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
    // cvt.rn.f16x2.f32 d, a, b packs two conversions.
    wantSrc = inst.type == Type::F16x2 || inst.type == Type::BF16x2 ? 2 : 1;
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
                   inst.op != Op::CpAsyncCommit && inst.op != Op::CpAsyncWait;
  if (needsType && inst.type == Type::None)
    return makeError("PTX line {}: '{}' has no type", line, opcode);
  kernel.code.push_back(inst);
  kernel.opcodeText.emplace_back(opcode);
  return Error::success();
}

Error KernelBuilder::body(size_t &i) {
  const Statement &head = all[i];
  int depth = 1;
  for (++i; i < all.size(); ++i) {
    const Statement &st = all[i];
    if (st.end == '{' && st.text.empty()) {
      // A scope: its registers join the kernel's; labels before it
      // ("$L__BB0_14: { .reg ...") name its first instruction.
      if (Error err = statement(st))
        return err;
      ++depth;
      continue;
    }
    if (st.end == '}' && st.text.empty() && st.labels.empty()) {
      if (--depth == 0)
        return Error::success();
      continue;
    }
    if (st.end == '{')
      return makeError("PTX line {}: unexpected '{{'", st.line);
    if (Error err = statement(st))
      return err;
    if (st.end == '}' && --depth == 0)
      return Error::success();
  }
  return makeError("PTX line {}: body is not closed", head.line);
}

/// call{.uni} (r0, ...), name, (a0, ...);  call name, (a0);  call name;
Error KernelBuilder::inlineCall(std::string_view text, const Instruction &guard,
                                uint32_t line) {
  auto bad = [&]() {
    return makeError("PTX line {}: cannot read call '{}'", line, text);
  };
  auto list = [&](std::string_view &s, std::vector<std::string> &out) -> bool {
    size_t close = s.find(')');
    if (s.empty() || s[0] != '(' || close == std::string_view::npos)
      return false;
    for (std::string_view name : splitOperands(s.substr(1, close - 1)))
      if (!name.empty())
        out.emplace_back(trim(name));
    s = trim(s.substr(close + 1));
    if (!s.empty() && s[0] == ',')
      s = trim(s.substr(1));
    return true;
  };
  std::vector<std::string> returns, args;
  std::string_view rest = trim(text);
  if (!rest.empty() && rest[0] == '(' && !list(rest, returns))
    return bad();
  size_t end = 0;
  while (end < rest.size() && isIdentChar(rest[end]))
    ++end;
  std::string name(rest.substr(0, end));
  rest = trim(rest.substr(end));
  if (!rest.empty() && rest[0] == ',')
    rest = trim(rest.substr(1));
  if (!rest.empty() && !list(rest, args))
    return bad();
  if (!rest.empty()) // a prototype: an indirect call
    return makeError("PTX line {}: indirect calls are not emulated", line);
  if (name.empty() || name[0] == '%')
    return makeError("PTX line {}: indirect calls are not emulated", line);
  auto it = functions.find(name);
  if (it == functions.end())
    return makeError("PTX line {}: call to '{}', which has no body in this "
                     "module",
                     line, name);
  const FunctionDef &def = it->second;
  if (std::find(inlineStack.begin(), inlineStack.end(), name) !=
      inlineStack.end())
    return makeError("PTX line {}: recursive call to '{}' is not emulated",
                     line, name);
  if (def.params.size() != args.size() || def.returns.size() != returns.size())
    return makeError("PTX line {}: call to '{}' passes {} arguments and {} "
                     "return values; it takes {} and {}",
                     line, name, args.size(), returns.size(), def.params.size(),
                     def.returns.size());
  // The function's parameters are the caller's call-sequence variables.
  std::unordered_map<std::string, uint64_t> bound;
  auto bind = [&](const std::string &formal,
                  const std::string &actual) -> Error {
    auto sym = symbols.find(actual);
    if (sym == symbols.end() || !callParams.count(actual))
      return makeError("PTX line {}: call argument '{}' is not a .param "
                       "variable",
                       line, actual);
    bound[formal] = sym->second;
    return Error::success();
  };
  for (size_t k = 0; k < args.size(); ++k)
    if (Error err = bind(def.params[k], args[k]))
      return err;
  for (size_t k = 0; k < returns.size(); ++k)
    if (Error err = bind(def.returns[k], returns[k]))
      return err;
  std::string prefix = fmt::format("{}@{}:", name, ++inlineCount);
  // A predicated call branches around the body when its guard is off.
  if (guard.guard != kNoSlot) {
    Instruction skip = guard;
    skip.op = Op::Bra;
    skip.negateGuard = !guard.negateGuard;
    skip.line = line;
    branches.emplace_back(kernel.code.size(), prefix + "return");
    kernel.code.push_back(skip);
    kernel.opcodeText.emplace_back("call");
  }
  // Decode the body in its own scope.
  auto savedRegisters = std::move(registers);
  auto savedSymbols = symbols;
  auto savedCallParams = std::move(callParams);
  std::string savedPrefix = labelPrefix, savedReturn = returnLabel;
  registers.clear();
  callParams.clear();
  for (auto &[formal, offset] : bound) {
    symbols[formal] = offset;
    callParams[formal] = true;
  }
  labelPrefix = prefix;
  returnLabel = prefix + "return";
  inlineStack.push_back(name);
  size_t i = def.header;
  Error err = body(i);
  inlineStack.pop_back();
  labels[returnLabel] = static_cast<uint32_t>(kernel.code.size());
  registers = std::move(savedRegisters);
  symbols = std::move(savedSymbols);
  callParams = std::move(savedCallParams);
  labelPrefix = savedPrefix;
  returnLabel = savedReturn;
  if (err)
    return makeError("{} (inlined from the call at PTX line {})", err.message(),
                     line);
  return Error::success();
}

Expected<Kernel> KernelBuilder::finish() {
  for (auto &[index, label] : branches) {
    auto it = labels.find(label);
    if (it == labels.end())
      return makeError("PTX line {}: branch to unknown label '{}'",
                       kernel.code[index].line, label);
    kernel.code[index].target = it->second;
  }
  if (kernel.code.empty() ||
      (kernel.code.back().op != Op::Ret && kernel.code.back().op != Op::Exit &&
       kernel.code.back().op != Op::Bra)) {
    // Falling off the end of the body ends the thread.
    Instruction ret;
    ret.op = Op::Ret;
    ret.line = kernel.line;
    kernel.code.push_back(ret);
    kernel.opcodeText.emplace_back("ret");
  }
  uint64_t align = dynamicSharedAlign;
  kernel.dynamicSharedOffset =
      (kernel.staticSharedBytes + align - 1) / align * align;
  for (Constant &c : kernel.constants)
    if (c.globalVar == kDynamicSharedMarker) {
      c.value = kernel.dynamicSharedOffset;
      c.globalVar = -1;
    }
  kernel.numSlots = static_cast<uint32_t>(kernel.slotBits.size());
  return std::move(kernel);
}

/// `.global .align 4 .b8 name[16] = {1, 2, ...};` at module scope.
Error parseGlobal(std::string_view text, uint32_t line, Module &module) {
  GlobalVar var;
  var.space = startsWith(text, ".const") ? Space::Const : Space::Global;
  std::string_view init;
  size_t equals = text.find('=');
  if (equals != std::string_view::npos) {
    init = trim(text.substr(equals + 1));
    text = trim(text.substr(0, equals));
  }
  uint64_t elementBytes = 0;
  std::string_view name;
  Type elementType = Type::None;
  std::string_view rest = text;
  while (!rest.empty()) {
    rest = trim(rest);
    size_t end = rest.find_first_of(" \t");
    std::string_view word = rest.substr(0, end);
    rest =
        end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (word == ".align") {
      rest = trim(rest);
      size_t e = rest.find_first_of(" \t");
      int64_t a = 0;
      if (!parseInteger(rest.substr(0, e), a) || a <= 0)
        return makeError("PTX line {}: bad .align", line);
      var.align = static_cast<uint64_t>(a);
      rest = e == std::string_view::npos ? std::string_view() : rest.substr(e);
    } else if (word[0] == '.') {
      Type type = parseType(word.substr(1));
      if (type != Type::None) {
        elementType = type;
        elementBytes = typeBytes(type);
      }
    } else {
      name = word;
    }
  }
  uint64_t count = 1;
  size_t bracket = name.find('[');
  if (bracket != std::string_view::npos) {
    int64_t n = 0;
    if (!parseInteger(name.substr(bracket + 1, name.find(']') - bracket - 1),
                      n) ||
        n < 0)
      return makeError("PTX line {}: bad array size in '{}'", line, name);
    count = static_cast<uint64_t>(n);
    name = name.substr(0, bracket);
  }
  if (name.empty() || elementBytes == 0)
    return makeError("PTX line {}: cannot read variable '{}'", line, text);
  var.name = std::string(name);
  var.size = count * elementBytes;
  var.init.assign(var.size, 0);
  if (!init.empty()) {
    if (init.front() == '{')
      init = init.substr(1, init.size() - 2);
    std::vector<std::string_view> values = splitOperands(init);
    if (values.size() > count)
      return makeError("PTX line {}: too many initializers for '{}'", line,
                       name);
    for (size_t i = 0; i < values.size(); ++i) {
      uint64_t bits = 0;
      bool isF32 = false;
      int64_t v = 0;
      if (parseFloatBits(values[i], bits, isF32)) {
        if (isF32 && elementType == Type::F64)
          return makeError("PTX line {}: f32 initializer for an f64", line);
      } else if (parseInteger(values[i], v)) {
        bits = static_cast<uint64_t>(v);
      } else {
        return makeError("PTX line {}: cannot read initializer '{}'", line,
                         values[i]);
      }
      std::memcpy(var.init.data() + i * elementBytes, &bits, elementBytes);
    }
  }
  module.globals.push_back(std::move(var));
  return Error::success();
}

} // namespace

Expected<Module> parsePtx(std::string_view text) {
  Expected<std::vector<Statement>> statements = splitStatements(text);
  if (!statements)
    return statements.takeError();
  Module module;
  std::unordered_map<std::string, uint32_t> globalIndex;
  std::vector<Statement> &all = *statements;
  // Moves i from a body's opening statement to its last statement.
  auto skipBody = [&](size_t &i) {
    int depth = 1;
    for (++i; i < all.size() && depth > 0; ++i) {
      const Statement &st = all[i];
      if (st.end == '{')
        ++depth;
      else if (st.end == '}' && --depth == 0)
        break;
    }
  };
  // Functions first: a kernel may call one defined after it.
  std::unordered_map<std::string, FunctionDef> functions;
  for (size_t i = 0; i < all.size(); ++i) {
    const Statement &st = all[i];
    if (st.end != '{')
      continue;
    if (st.text.find(".func") != std::string_view::npos) {
      Expected<FunctionDef> def = parseFunctionHeader(st.text, st.line);
      if (!def)
        return def.takeError();
      FunctionDef function = def.take();
      function.header = i;
      std::string name = function.name;
      functions[name] = std::move(function);
    }
    if (!st.text.empty())
      skipBody(i);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const Statement &st = all[i];
    std::string_view t = st.text;
    if (st.end == '{' && t.find(".entry") != std::string_view::npos) {
      KernelBuilder builder(globalIndex, all, functions);
      if (Error err = builder.header(st))
        return err;
      if (Error err = builder.body(i))
        return err;
      Expected<Kernel> kernel = builder.finish();
      if (!kernel)
        return kernel.takeError();
      module.kernels.push_back(kernel.take());
      continue;
    }
    if (st.end == '{' && t.find(".func") != std::string_view::npos) {
      skipBody(i); // collected above, inlined at each call
      continue;
    }
    if (st.end == '{')
      return makeError("PTX line {}: unsupported block '{}' (only .entry "
                       "and .func bodies are read)",
                       st.line, t.substr(0, 40));
    if (t.find(".func") != std::string_view::npos)
      continue; // a declaration
    if (t.empty() || startsWith(t, ".version") || startsWith(t, ".target") ||
        startsWith(t, ".address_size") || startsWith(t, ".file") ||
        startsWith(t, ".section"))
      continue;
    if (startsWith(t, ".global") || startsWith(t, ".const") ||
        startsWith(t, ".visible .global") || startsWith(t, ".visible .const")) {
      if (startsWith(t, ".visible"))
        t = trim(t.substr(8));
      if (Error err = parseGlobal(t, st.line, module))
        return err;
      globalIndex[module.globals.back().name] =
          static_cast<uint32_t>(module.globals.size() - 1);
      continue;
    }
    return makeError("PTX line {}: unsupported module-level statement '{}'",
                     st.line, t.substr(0, 60));
  }
  return module;
}

} // namespace kiln::runtime::emu
