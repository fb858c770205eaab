//===- HostStringOps.cpp - Cast, StringSplit, RegexFullMatch, ... ---------===//
//
// The host ops that look inside strings (and LabelEncoder, which maps
// strings to values through a table). RegexFullMatch uses RE2: the ONNX
// spec defines its patterns in RE2 syntax, and RE2 runs in time linear in
// the input (no backtracking blow-up on a hostile pattern), which matters
// for a runtime that takes patterns from model files. Without RE2 (a build
// that did not find libre2-dev) RegexFullMatch is refused with that reason.
//
//===----------------------------------------------------------------------===//

#include "HostStringOps.h"

#include "HostDataOps.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>

#ifdef KILN_HAVE_RE2
#include <re2/re2.h>
#endif

namespace kiln::runtime {

Error stepError(const HostStep &step, const std::string &message) {
  return makeError("{}: {}", step.describe(), message);
}

namespace {

/// The dtypes Cast converts to and from strings on the host.
bool castableDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::F64:
  case DType::I8:
  case DType::I16:
  case DType::I32:
  case DType::I64:
  case DType::U8:
  case DType::U16:
  case DType::U32:
  case DType::U64:
  case DType::Bool:
    return true;
  default:
    return false;
  }
}

/// Cast's `to`: "string" or a dtype name.
struct CastTarget {
  bool isString = false;
  DType dtype = DType::F32;
};

Expected<CastTarget> castTarget(const HostStep &step) {
  const HostAttribute *to = step.findAttribute("to");
  if (!to || to->values.size() != 1)
    return stepError(step, "attribute 'to' is missing");
  if (to->values[0] == "string")
    return CastTarget{true, DType::F32};
  std::optional<DType> dtype = parseDType(to->values[0]);
  if (!dtype || !castableDType(*dtype))
    return stepError(step, fmt::format("cast to '{}' is not supported on the "
                                       "host (strings convert to and from "
                                       "f32, f64, integers and bool)",
                                       to->values[0]));
  return CastTarget{false, *dtype};
}

std::string attributeString(const HostStep &step, std::string_view name,
                            std::string fallback) {
  const HostAttribute *attribute = step.findAttribute(name);
  return attribute && !attribute->values.empty() ? attribute->values[0]
                                                 : fallback;
}

int64_t attributeInt(const HostStep &step, std::string_view name,
                     int64_t fallback) {
  const HostAttribute *attribute = step.findAttribute(name);
  if (!attribute || attribute->values.empty())
    return fallback;
  return std::strtoll(attribute->values[0].c_str(), nullptr, 10);
}

template <typename T> std::string formatFloat(T value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "INF" : "-INF";
  if (value == 0)
    return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  auto scientific = std::to_chars(buffer, buffer + sizeof(buffer), value,
                                  std::chars_format::scientific);
  std::string text(buffer, scientific.ptr);
  // NumPy's rule is on the value, not on its shortest digits: float32's
  // 0.0001 is 9.99999975e-05, so it prints "1e-04".
  double magnitude = std::fabs(static_cast<double>(value));
  if (magnitude < 1e-4 || magnitude >= 1e16)
    return text;
  // Positional from the shortest digits (to_chars' fixed form prints the
  // exact binary value instead: 123456792 where NumPy writes 123456790.0).
  bool negative = text[0] == '-';
  size_t e = text.find('e');
  int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (text[i] != '.')
      digits.push_back(text[i]);
  std::string out = negative ? "-" : "";
  if (exponent < 0) {
    out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
  } else {
    size_t integral = size_t(exponent) + 1;
    if (digits.size() <= integral)
      out += digits + std::string(integral - digits.size(), '0') + ".0";
    else
      out += digits.substr(0, integral) + "." + digits.substr(integral);
  }
  return out;
}

template <typename T> T load(const uint8_t *element) {
  T value;
  std::memcpy(&value, element, sizeof(T));
  return value;
}

template <typename T> void store(uint8_t *element, T value) {
  std::memcpy(element, &value, sizeof(T));
}

std::string trimmed(const std::string &text) {
  size_t begin = text.find_first_not_of(" \t\n\r\f\v");
  if (begin == std::string::npos)
    return std::string();
  size_t end = text.find_last_not_of(" \t\n\r\f\v");
  return text.substr(begin, end - begin + 1);
}

template <typename T> bool parseInteger(const std::string &text, T &out) {
  const char *begin = text.c_str();
  const char *end = begin + text.size();
  if (begin != end && *begin == '+')
    ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec == std::errc() && ptr == end)
    return true;
  // "100.5" or "1e3": the value read as a float, truncated toward zero.
  char *stop = nullptr;
  double value = std::strtod(text.c_str(), &stop);
  if (text.empty() || *stop != '\0' || !std::isfinite(value))
    return false;
  double truncated = std::trunc(value);
  if (truncated < static_cast<double>(std::numeric_limits<T>::lowest()) ||
      truncated > static_cast<double>(std::numeric_limits<T>::max()))
    return false;
  out = static_cast<T>(truncated);
  return true;
}

//===- Case mapping ------------------------------------------------------===//
// Simple (one code point to one) mappings for ASCII, Latin-1, Greek and
// Cyrillic: what StringNormalizer's default locale (en_US) changes in the
// ONNX node tests and in common text. Other code points stay as they are.

uint32_t toUpper(uint32_t c) {
  if (c >= 'a' && c <= 'z')
    return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 &&
                                                c != 0x3C2) ||
      (c >= 0x430 && c <= 0x44F))
    return c - 32;
  if (c >= 0x450 && c <= 0x45F)
    return c - 80;
  return c;
}

uint32_t toLower(uint32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 &&
                                                c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F))
    return c + 32;
  if (c >= 0x400 && c <= 0x40F)
    return c + 80;
  return c;
}

/// `text` with each UTF-8 code point mapped by `map`; bytes that are not
/// valid UTF-8 are kept as they are.
std::string mapCase(const std::string &text, uint32_t (*map)(uint32_t)) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t length = utf8SequenceLength(byte);
    bool valid = length != 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k)
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (!valid || length > 2) {
      // Outside the ranges mapCase changes (or not UTF-8): copied as is.
      size_t n = valid ? length : 1;
      out.append(text, i, n);
      i += n;
      continue;
    }
    uint32_t c = length == 1 ? byte
                             : ((byte & 0x1F) << 6) |
                                   (static_cast<unsigned char>(text[i + 1]) &
                                    0x3F);
    uint32_t mapped = map(c);
    if (mapped < 0x80) {
      out.push_back(static_cast<char>(mapped));
    } else {
      out.push_back(static_cast<char>(0xC0 | (mapped >> 6)));
      out.push_back(static_cast<char>(0x80 | (mapped & 0x3F)));
    }
    i += length;
  }
  return out;
}

//===- The ops -----------------------------------------------------------===//

Error runCast(const HostStep &step,
              std::map<std::string, HostValue, std::less<>> &values) {
  Expected<CastTarget> target = castTarget(step);
  if (!target)
    return target.takeError();
  const HostValue &in = values.find(step.inputs[0])->second;
  uint64_t count = elementCount(in.shape).value_or(0);
  HostValue out;
  out.shape = in.shape;
  out.isString = target->isString;
  out.dtype = target->dtype;
  if (in.isString && target->isString) {
    out.strings = in.strings;
  } else if (target->isString) {
    if (!castableDType(in.dtype))
      return stepError(step, fmt::format("cast from {} to string is not "
                                         "supported on the host",
                                         dtypeName(in.dtype)));
    uint64_t size = dtypeSize(in.dtype);
    out.strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
      out.strings.push_back(
          formatHostNumber(in.dtype, in.data.data() + i * size));
  } else if (in.isString) {
    uint64_t size = dtypeSize(out.dtype);
    out.data.resize(count * size);
    for (uint64_t i = 0; i < count; ++i)
      if (!parseHostNumber(in.strings[i], out.dtype,
                           out.data.data() + i * size))
        return stepError(step, fmt::format("element {} ('{}') is not {} "
                                           "number",
                                           i, printable(in.strings[i]),
                                           dtypeName(out.dtype)));
  } else {
    Expected<HostValue> cast = castNumbers(step, in, target->dtype);
    if (!cast)
      return cast.takeError();
    out = cast.take();
  }
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

/// Python's str.split: with a delimiter, every occurrence splits (empty
/// pieces kept); without, runs of whitespace split and the ends are
/// trimmed. At most `maxSplit` splits when it is >= 0.
std::vector<std::string> splitOne(const std::string &text,
                                  const std::string &delimiter,
                                  int64_t maxSplit) {
  std::vector<std::string> pieces;
  if (!delimiter.empty()) {
    size_t start = 0;
    while (maxSplit < 0 || static_cast<int64_t>(pieces.size()) < maxSplit) {
      size_t at = text.find(delimiter, start);
      if (at == std::string::npos)
        break;
      pieces.push_back(text.substr(start, at - start));
      start = at + delimiter.size();
    }
    pieces.push_back(text.substr(start));
    return pieces;
  }
  auto isSpace = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
  };
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isSpace(text[i]))
      ++i;
    if (i == text.size())
      break;
    if (maxSplit >= 0 && static_cast<int64_t>(pieces.size()) == maxSplit) {
      size_t end = text.size();
      while (end > i && isSpace(text[end - 1]))
        --end;
      pieces.push_back(text.substr(i, end - i));
      break;
    }
    size_t start = i;
    while (i < text.size() && !isSpace(text[i]))
      ++i;
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

Error runStringSplit(const HostStep &step,
                     std::map<std::string, HostValue, std::less<>> &values) {
  const HostValue &in = values.find(step.inputs[0])->second;
  if (!in.isString)
    return stepError(step, "the input must be strings");
  std::string delimiter = attributeString(step, "delimiter", "");
  int64_t maxSplit = attributeInt(step, "maxsplit", -1);
  std::vector<std::vector<std::string>> pieces;
  size_t widest = 0;
  for (const std::string &text : in.strings) {
    pieces.push_back(splitOne(text, delimiter, maxSplit));
    widest = std::max(widest, pieces.back().size());
  }
  HostValue substrings;
  substrings.isString = true;
  substrings.shape = in.shape;
  substrings.shape.push_back(static_cast<int64_t>(widest));
  HostValue lengths;
  lengths.dtype = DType::I64;
  lengths.shape = in.shape;
  for (const std::vector<std::string> &row : pieces) {
    for (size_t k = 0; k < widest; ++k)
      substrings.strings.push_back(k < row.size() ? row[k] : std::string());
    int64_t length = static_cast<int64_t>(row.size());
    const auto *bytes = reinterpret_cast<const uint8_t *>(&length);
    lengths.data.insert(lengths.data.end(), bytes, bytes + 8);
  }
  values[step.outputs[0]] = std::move(substrings);
  if (step.outputs.size() > 1)
    values[step.outputs[1]] = std::move(lengths);
  return Error::success();
}

Error runRegexFullMatch(const HostStep &step,
                        std::map<std::string, HostValue, std::less<>> &values) {
#ifdef KILN_HAVE_RE2
  const HostValue &in = values.find(step.inputs[0])->second;
  if (!in.isString)
    return stepError(step, "the input must be strings");
  RE2::Options options;
  options.set_log_errors(false);
  RE2 pattern(attributeString(step, "pattern", ""), options);
  if (!pattern.ok())
    return stepError(step, "pattern does not compile: " + pattern.error());
  HostValue out;
  out.dtype = DType::Bool;
  out.shape = in.shape;
  for (const std::string &text : in.strings)
    out.data.push_back(RE2::FullMatch(text, pattern) ? 1 : 0);
  values[step.outputs[0]] = std::move(out);
  return Error::success();
#else
  return stepError(step, "this Kiln was built without RE2 (install "
                         "libre2-dev and rebuild)");
#endif
}

Error runStringNormalizer(const HostStep &step,
                          std::map<std::string, HostValue, std::less<>> &values) {
  const HostValue &in = values.find(step.inputs[0])->second;
  if (!in.isString)
    return stepError(step, "the input must be strings");
  bool twoDims = in.shape.size() == 2;
  if (!(in.shape.size() == 1 || (twoDims && in.shape[0] == 1)))
    return stepError(step, fmt::format("the input must be [C] or [1, C], "
                                       "not {}",
                                       formatShape(in.shape)));
  std::string action = attributeString(step, "case_change_action", "NONE");
  bool caseSensitive = attributeInt(step, "is_case_sensitive", 0) != 0;
  std::vector<std::string> stopwords;
  if (const HostAttribute *words = step.findAttribute("stopwords"))
    for (const std::string &word : words->values)
      stopwords.push_back(caseSensitive ? word : mapCase(word, toLower));
  HostValue out;
  out.isString = true;
  for (const std::string &text : in.strings) {
    std::string key = caseSensitive ? text : mapCase(text, toLower);
    if (std::find(stopwords.begin(), stopwords.end(), key) != stopwords.end())
      continue;
    if (action == "LOWER")
      out.strings.push_back(mapCase(text, toLower));
    else if (action == "UPPER")
      out.strings.push_back(mapCase(text, toUpper));
    else
      out.strings.push_back(text);
  }
  // Everything removed: one empty string, as the spec says.
  if (out.strings.empty())
    out.strings.push_back(std::string());
  int64_t kept = static_cast<int64_t>(out.strings.size());
  out.shape = twoDims ? Shape{1, kept} : Shape{kept};
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

//===- LabelEncoder ------------------------------------------------------===//
// The compiler writes the attributes in one form whatever the ONNX node used
// (keys_strings or keys_tensor, values_int64s, values_floats, values_strings
// or values_tensor, and the matching default): `keys` (strings), `values`
// and `default` (text: strings as they are, numbers as parseHostNumber
// reads them) and `to` ("string" or the values' dtype name).

struct LabelTable {
  bool isString = false;
  DType dtype = DType::I64;
  std::unordered_map<std::string, size_t> index; // key -> position in values
  /// One element per key, then the default last: strings or packed bytes.
  std::vector<std::string> strings;
  std::vector<uint8_t> data;
};

/// The dtypes LabelEncoder maps strings to on the host.
bool labelDType(DType dtype) {
  return castableDType(dtype) && dtype != DType::Bool;
}

Expected<LabelTable> labelTable(const HostStep &step) {
  const HostAttribute *keys = step.findAttribute("keys");
  const HostAttribute *values = step.findAttribute("values");
  const HostAttribute *fallback = step.findAttribute("default");
  const HostAttribute *to = step.findAttribute("to");
  if (!keys || !values)
    return stepError(step, "attributes 'keys' and 'values' are missing");
  if (!fallback || fallback->values.size() != 1)
    return stepError(step, "attribute 'default' must hold one value");
  if (!to || to->values.size() != 1)
    return stepError(step, "attribute 'to' is missing");
  if (keys->values.size() != values->values.size())
    return stepError(step,
                     fmt::format("{} keys but {} values", keys->values.size(),
                                 values->values.size()));
  LabelTable table;
  if (to->values[0] == "string") {
    table.isString = true;
  } else {
    std::optional<DType> dtype = parseDType(to->values[0]);
    if (!dtype || !labelDType(*dtype))
      return stepError(step, fmt::format("values of type '{}' are not "
                                         "supported on the host (strings, "
                                         "f32, f64 and integers are)",
                                         printable(to->values[0])));
    table.dtype = *dtype;
  }
  for (size_t i = 0; i < keys->values.size(); ++i)
    if (!table.index.emplace(keys->values[i], i).second)
      return stepError(step, fmt::format("key '{}' is listed twice",
                                         printable(keys->values[i])));
  std::vector<std::string> texts = values->values;
  texts.push_back(fallback->values[0]);
  if (table.isString) {
    table.strings = std::move(texts);
    return table;
  }
  uint64_t size = dtypeSize(table.dtype);
  table.data.resize(texts.size() * size);
  for (size_t i = 0; i < texts.size(); ++i)
    if (!parseHostNumber(texts[i], table.dtype, table.data.data() + i * size))
      return stepError(
          step, fmt::format("{} '{}' is not a number of type {}",
                            i + 1 == texts.size() ? "the default" : "value",
                            printable(texts[i]), dtypeName(table.dtype)));
  return table;
}

Error runLabelEncoder(const HostStep &step,
                      std::map<std::string, HostValue, std::less<>> &values) {
  Expected<LabelTable> table = labelTable(step);
  if (!table)
    return table.takeError();
  const HostValue &in = values.find(step.inputs[0])->second;
  if (!in.isString)
    return stepError(step, "the input must be strings on the host");
  size_t fallback = table->index.size();
  HostValue out;
  out.shape = in.shape;
  out.isString = table->isString;
  out.dtype = table->dtype;
  uint64_t size = table->isString ? 0 : dtypeSize(table->dtype);
  if (table->isString)
    out.strings.reserve(in.strings.size());
  else
    out.data.resize(in.strings.size() * size);
  for (size_t i = 0; i < in.strings.size(); ++i) {
    auto hit = table->index.find(in.strings[i]);
    size_t at = hit == table->index.end() ? fallback : hit->second;
    if (table->isString)
      out.strings.push_back(table->strings[at]);
    else
      std::memcpy(out.data.data() + i * size, table->data.data() + at * size,
                  size);
  }
  values[step.outputs[0]] = std::move(out);
  return Error::success();
}

} // namespace

std::string formatHostNumber(DType dtype, const uint8_t *element) {
  switch (dtype) {
  case DType::F32:
    return formatFloat(load<float>(element));
  case DType::F64:
    return formatFloat(load<double>(element));
  case DType::I8:
    return std::to_string(load<int8_t>(element));
  case DType::I16:
    return std::to_string(load<int16_t>(element));
  case DType::I32:
    return std::to_string(load<int32_t>(element));
  case DType::I64:
    return std::to_string(load<int64_t>(element));
  case DType::U8:
    return std::to_string(load<uint8_t>(element));
  case DType::U16:
    return std::to_string(load<uint16_t>(element));
  case DType::U32:
    return std::to_string(load<uint32_t>(element));
  case DType::U64:
    return std::to_string(load<uint64_t>(element));
  case DType::Bool:
    return load<uint8_t>(element) ? "True" : "False";
  default:
    return std::string();
  }
}

bool parseHostNumber(const std::string &raw, DType dtype, uint8_t *element) {
  std::string text = trimmed(raw);
  if (text.empty())
    return false;
  switch (dtype) {
  case DType::F32:
  case DType::F64: {
    char *stop = nullptr;
    // Read as double then rounded, as NumPy's astype(float32) does.
    double value = std::strtod(text.c_str(), &stop);
    if (*stop != '\0')
      return false;
    if (dtype == DType::F32)
      store(element, static_cast<float>(value));
    else
      store(element, value);
    return true;
  }
  case DType::Bool: {
    std::string lower = mapCase(text, toLower);
    if (lower == "true" || lower == "false") {
      store<uint8_t>(element, lower == "true");
      return true;
    }
    char *stop = nullptr;
    double value = std::strtod(text.c_str(), &stop);
    if (*stop != '\0')
      return false;
    store<uint8_t>(element, value != 0);
    return true;
  }
#define KILN_PARSE_INT(CODE, TYPE)                                             \
  case DType::CODE: {                                                          \
    TYPE value{};                                                              \
    if (!parseInteger(text, value))                                            \
      return false;                                                            \
    store(element, value);                                                     \
    return true;                                                               \
  }
    KILN_PARSE_INT(I8, int8_t)
    KILN_PARSE_INT(I16, int16_t)
    KILN_PARSE_INT(I32, int32_t)
    KILN_PARSE_INT(I64, int64_t)
    KILN_PARSE_INT(U8, uint8_t)
    KILN_PARSE_INT(U16, uint16_t)
    KILN_PARSE_INT(U32, uint32_t)
    KILN_PARSE_INT(U64, uint64_t)
#undef KILN_PARSE_INT
  default:
    return false;
  }
}

bool haveRegexSupport() {
#ifdef KILN_HAVE_RE2
  return true;
#else
  return false;
#endif
}

Error verifyStringOpAttributes(const HostStep &step) {
  if (step.op == "Cast") {
    Expected<CastTarget> target = castTarget(step);
    return target ? Error::success() : target.takeError();
  }
  if (step.op == "RegexFullMatch") {
    const HostAttribute *pattern = step.findAttribute("pattern");
    if (!pattern || pattern->values.size() != 1)
      return stepError(step, "attribute 'pattern' is missing");
#ifdef KILN_HAVE_RE2
    RE2::Options options;
    options.set_log_errors(false);
    RE2 compiled(pattern->values[0], options);
    if (!compiled.ok())
      return stepError(step, fmt::format("pattern '{}' is not a valid RE2 "
                                         "regular expression: {}",
                                         printable(pattern->values[0]),
                                         compiled.error()));
    return Error::success();
#else
    return stepError(step, "this Kiln was built without RE2 (install "
                           "libre2-dev and rebuild)");
#endif
  }
  if (step.op == "LabelEncoder") {
    Expected<LabelTable> table = labelTable(step);
    return table ? Error::success() : table.takeError();
  }
  if (step.op == "StringNormalizer") {
    std::string action = attributeString(step, "case_change_action", "NONE");
    if (action != "NONE" && action != "LOWER" && action != "UPPER")
      return stepError(step, fmt::format("case_change_action '{}' is not "
                                         "NONE, LOWER or UPPER",
                                         printable(action)));
  }
  return Error::success();
}

Error runStringOp(const HostStep &step,
                  std::map<std::string, HostValue, std::less<>> &values) {
  if (step.op == "Cast")
    return runCast(step, values);
  if (step.op == "StringSplit")
    return runStringSplit(step, values);
  if (step.op == "RegexFullMatch")
    return runRegexFullMatch(step, values);
  if (step.op == "StringNormalizer")
    return runStringNormalizer(step, values);
  if (step.op == "LabelEncoder")
    return runLabelEncoder(step, values);
  return stepError(step, "not an op the host runs");
}

} // namespace kiln::runtime
