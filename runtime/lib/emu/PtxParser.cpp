//===- PtxParser.cpp - PTX text to decoded kernels ------------------------===//
//
// Two steps: split the text into statements (ending at ';', '{' or '}'),
// remembering each one's line and labels, then decode the statements of
// each .entry into Instructions. Branch targets are resolved once the whole
// body is read. This file holds the types, the statement splitter, bodies
// and the module; declarations, operands and each instruction family's
// decoding have files of their own (ParserInternal.h lists them).
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

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
  case Type::E4M3:
  case Type::E5M2:
    return 1;
  case Type::B16:
  case Type::U16:
  case Type::S16:
  case Type::F16:
  case Type::BF16:
  case Type::E4M3x2:
  case Type::E5M2x2:
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
    {"f64", Type::F64},   {"tf32", Type::TF32},     {"e4m3", Type::E4M3},
    {"e5m2", Type::E5M2}, {"e4m3x2", Type::E4M3x2}, {"e5m2x2", Type::E5M2x2},
};

} // namespace

const char *typeName(Type type) {
  for (const TypeName &entry : kTypeNames)
    if (entry.type == type)
      return entry.name;
  return "none";
}

namespace detail {

Type parseType(std::string_view name) {
  for (const TypeName &entry : kTypeNames)
    if (name == entry.name)
      return entry.type;
  return Type::None;
}

namespace {

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

} // namespace

Error KernelBuilder::body(size_t &i) {
  const Statement &head = all[i];
  int depth = 1;
  for (++i; i < all.size(); ++i) {
    const Statement &st = all[i];
    if (st.end == '{' && st.text.empty()) {
      // A scope: its registers join the kernel's; labels before it
      // ("$L__BB0_14: { .reg ...") name its first instruction. Labels
      // inside it are its own.
      if (Error err = statement(st))
        return err;
      ++depth;
      scopePath += "/" + std::to_string(++scopeCount);
      continue;
    }
    if (st.end == '}' && st.text.empty() && st.labels.empty()) {
      if (--depth == 0)
        return Error::success();
      scopePath.resize(scopePath.rfind('/'));
      continue;
    }
    if (st.end == '{')
      return makeError("PTX line {}: unexpected '{{'", st.line);
    if (Error err = statement(st))
      return err;
    if (st.end == '}') {
      if (--depth == 0)
        return Error::success();
      scopePath.resize(scopePath.rfind('/'));
    }
  }
  return makeError("PTX line {}: body is not closed", head.line);
}

Expected<Kernel> KernelBuilder::finish() {
  for (const PendingBranch &branch : branches) {
    const size_t index = branch.index;
    const std::string &label = branch.label;
    // The innermost scope that declares the label, then the top level.
    auto it = labels.end();
    for (std::string scope = branch.scope; it == labels.end();) {
      if (scope.empty()) {
        it = labels.find(label);
        break;
      }
      it = labels.find(scope + "|" + label);
      scope.resize(scope.rfind('/'));
    }
    if (it == labels.end()) // a label inside a block, from outside it
      it = labels.find("~" + label);
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

} // namespace detail

Expected<Module> parsePtx(std::string_view text) {
  using namespace detail;
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
  auto isModuleShared = [](std::string_view t) {
    return startsWith(t, ".shared") || startsWith(t, ".extern .shared") ||
           startsWith(t, ".visible .shared");
  };
  // Functions first: a kernel may call one defined after it; and the
  // module-scope shared variables, which every kernel declares.
  std::unordered_map<std::string, FunctionDef> functions;
  std::vector<Statement> moduleShared;
  for (size_t i = 0; i < all.size(); ++i) {
    const Statement &st = all[i];
    if (st.end != '{') {
      if (isModuleShared(st.text)) {
        Statement shared = st;
        if (startsWith(shared.text, ".visible"))
          shared.text = std::string(trim(std::string_view(shared.text).substr(8)));
        moduleShared.push_back(std::move(shared));
      }
      continue;
    }
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
  uint64_t declaredRegisters = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Statement &st = all[i];
    std::string_view t = st.text;
    if (st.end == '{' && t.find(".entry") != std::string_view::npos) {
      KernelBuilder builder(globalIndex, all, functions, declaredRegisters);
      if (Error err = builder.header(st))
        return err;
      for (const Statement &shared : moduleShared)
        if (Error err = builder.declareModuleShared(shared))
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
        startsWith(t, ".section") || isModuleShared(t))
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
