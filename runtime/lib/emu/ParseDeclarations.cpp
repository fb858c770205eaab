//===- ParseDeclarations.cpp - Entry headers, variables, .func ------------===//
//
// What is not an instruction: a kernel's .entry header (its parameters'
// offsets in the parameter buffer, .maxntid), .reg, .shared/.local/.param
// declarations, the directives a body may hold, calls to .func functions
// (inlined at each call site) and module-level .global/.const variables.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime::emu::detail {

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
  size_t cluster = text.find(".reqnctapercluster");
  if (cluster != std::string_view::npos) {
    std::string_view rest = text.substr(cluster + 18);
    size_t end = rest.find_first_of(".{");
    uint32_t dims[3] = {1, 1, 1};
    size_t k = 0;
    for (std::string_view dim : splitOperands(rest.substr(0, end))) {
      int64_t v = 0;
      if (k >= 3 || !parseInteger(dim, v) || v < 1 || v > 16)
        return makeError("PTX line {}: cannot read .reqnctapercluster '{}'",
                         kernel.line, trim(rest.substr(0, end)));
      dims[k++] = static_cast<uint32_t>(v);
    }
    kernel.clusterX = dims[0];
    kernel.clusterY = dims[1];
    kernel.clusterZ = dims[2];
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
  auto declare = [&](int64_t count) -> Error {
    if (declaredRegisters + uint64_t(count) > kMaxModuleRegisters)
      return makeError("PTX line {}: the module declares more than {} "
                       "registers",
                       line, kMaxModuleRegisters);
    declaredRegisters += uint64_t(count);
    return Error::success();
  };
  for (std::string_view name : splitOperands(text.substr(space))) {
    size_t angle = name.find('<');
    if (angle == std::string_view::npos) {
      if (Error err = declare(1))
        return err;
      registers[std::string(name)] = addSlot(bits);
      continue;
    }
    int64_t count = 0;
    if (!parseInteger(name.substr(angle + 1, name.size() - angle - 2), count) ||
        count < 0 || count > (1 << 20))
      return makeError("PTX line {}: bad register range '{}'", line, name);
    if (Error err = declare(count))
      return err;
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

Error KernelBuilder::statement(const Statement &st) {
  for (const std::string &label : st.labels) {
    uint32_t index = static_cast<uint32_t>(kernel.code.size());
    labels[(scopePath.empty() ? "" : scopePath + "|") + labelPrefix + label] =
        index;
    if (!scopePath.empty()) // a branch from outside: the first such label
      labels.emplace("~" + labelPrefix + label, index);
  }
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
    addBranch(kernel.code.size(), prefix + "return");
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

} // namespace kiln::runtime::emu::detail
