//===- Checkpoint.cpp - safetensors files for training checkpoints --------===//
//
// safetensors (https://huggingface.co/docs/safetensors): a u64 little-endian
// header length, a JSON object naming each tensor's dtype, shape and byte
// range in the data that follows, and an optional "__metadata__" object of
// strings. The runtime has no JSON dependency, so this file reads the subset
// safetensors allows (objects, arrays, strings, non-negative integers) with a
// strict recursive-descent parser and rejects anything else; every offset is
// checked against the file before a byte is read.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Training.h"

#include <map>
#include <memory>
#include <variant>

namespace kiln::runtime {

namespace {

/// safetensors dtype names.
std::optional<std::string_view> safetensorsName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::F64: return "F64";
  case DType::I8: return "I8";
  case DType::I16: return "I16";
  case DType::I32: return "I32";
  case DType::I64: return "I64";
  case DType::U8: return "U8";
  case DType::U16: return "U16";
  case DType::U32: return "U32";
  case DType::U64: return "U64";
  case DType::Bool: return "BOOL";
  }
  return std::nullopt;
}

std::optional<DType> dtypeFromSafetensors(std::string_view name) {
  for (DType dtype : allDTypes())
    if (safetensorsName(dtype) == name)
      return dtype;
  return std::nullopt;
}

std::string quote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// A JSON value of the subset safetensors uses.
struct Json {
  enum Kind { Object, Array, String, Integer } kind = Integer;
  std::vector<std::pair<std::string, Json>> members;
  std::vector<Json> elements;
  std::string text;
  uint64_t integer = 0;

  const Json *member(std::string_view key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

class JsonParser {
public:
  explicit JsonParser(std::string_view text) : text(text) {}

  Expected<Json> parseDocument() {
    Json value;
    if (!parseValue(value, 0))
      return makeError("header: {}", problem);
    skipSpace();
    if (pos != text.size())
      return makeError("header: unexpected text after the JSON object at "
                       "byte {}",
                       pos);
    return value;
  }

private:
  bool fail(std::string message) {
    if (problem.empty())
      problem = fmt::format("{} at byte {}", message, pos);
    return false;
  }
  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t' ||
            text[pos] == '\r'))
      ++pos;
  }
  bool parseString(std::string &out) {
    if (pos >= text.size() || text[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated escape");
      char e = text[pos++];
      switch (e) {
      case '"': case '\\': case '/': out += e; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (pos + 4 > text.size())
          return fail("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[pos++];
          code <<= 4;
          if (h >= '0' && h <= '9') code |= h - '0';
          else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
          else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
          else return fail("bad \\u escape");
        }
        if (code >= 0x80)
          return fail("non-ASCII \\u escapes are not supported");
        out += static_cast<char>(code);
        break;
      }
      default:
        return fail("unknown escape");
      }
    }
    if (pos >= text.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }
  bool parseValue(Json &out, int depth) {
    if (depth > 8)
      return fail("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end");
    char c = text[pos];
    if (c == '{') {
      out.kind = Json::Object;
      ++pos;
      skipSpace();
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return true;
      }
      while (true) {
        skipSpace();
        std::string key;
        if (!parseString(key))
          return false;
        skipSpace();
        if (pos >= text.size() || text[pos] != ':')
          return fail("expected ':'");
        ++pos;
        Json value;
        if (!parseValue(value, depth + 1))
          return false;
        if (out.member(key))
          return fail("duplicate key '" + key + "'");
        out.members.push_back({std::move(key), std::move(value)});
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == '}') {
          ++pos;
          return true;
        }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.kind = Json::Array;
      ++pos;
      skipSpace();
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return true;
      }
      while (true) {
        Json value;
        if (!parseValue(value, depth + 1))
          return false;
        out.elements.push_back(std::move(value));
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == ']') {
          ++pos;
          return true;
        }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.kind = Json::String;
      return parseString(out.text);
    }
    if (c >= '0' && c <= '9') {
      out.kind = Json::Integer;
      uint64_t value = 0;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        std::optional<uint64_t> next = checkedMul(value, 10);
        next = next ? checkedAdd(*next, uint64_t(text[pos] - '0')) : next;
        if (!next)
          return fail("integer overflows 64 bits");
        value = *next;
        ++pos;
      }
      out.integer = value;
      return true;
    }
    return fail("unsupported JSON value");
  }

  std::string_view text;
  size_t pos = 0;
  std::string problem;
};

} // namespace

Error writeSafetensors(const std::string &path, const Checkpoint &checkpoint) {
  std::string header = "{";
  if (!checkpoint.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool firstEntry = true;
    for (const auto &[key, value] : checkpoint.metadata) {
      header += (firstEntry ? "" : ",") + quote(key) + ":" + quote(value);
      firstEntry = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : checkpoint.tensors) {
    std::optional<std::string_view> dtype = safetensorsName(tensor.dtype);
    std::optional<uint64_t> size = tensorByteSize(tensor.dtype, tensor.shape);
    if (!dtype || !size || *size != tensor.data.size())
      return makeError("{}: tensor '{}' does not hold {} {}", path, name,
                       dtypeName(tensor.dtype), formatShape(tensor.shape));
    std::string shape;
    for (size_t i = 0; i < tensor.shape.size(); ++i)
      shape += (i ? "," : "") + std::to_string(tensor.shape[i]);
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],"
                          "\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", quote(name), *dtype,
                          shape, offset, offset + *size);
    offset += *size;
  }
  header += "}";
  // Pad the header with spaces so the data starts 8-byte aligned.
  while ((8 + header.size()) % 8 != 0)
    header += ' ';
  Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.takeError();
  uint64_t length = header.size();
  if (Error err = writer->write(&length, 8))
    return err;
  if (Error err = writer->write(header.data(), header.size()))
    return err;
  for (const auto &[name, tensor] : checkpoint.tensors)
    if (Error err = writer->write(tensor.data.data(), tensor.data.size()))
      return err;
  return writer->commit();
}

Expected<Checkpoint> readSafetensors(const std::string &path) {
  Expected<Blob> file = mapFile(path);
  if (!file)
    return file.takeError();
  return parseSafetensors(file->data(), file->size(), path);
}

Expected<Checkpoint> parseSafetensors(const uint8_t *bytes, uint64_t size,
                                      std::string_view displayName) {
  auto fail = [&](const std::string &message) {
    return Error::failure(std::string(displayName) + ": " + message);
  };
  if (size < 8)
    return fail(fmt::format("truncated: {} bytes, not a safetensors file",
                            size));
  uint64_t headerSize;
  std::memcpy(&headerSize, bytes, 8);
  if (headerSize > size - 8)
    return fail(fmt::format("truncated: the header needs {} bytes, the file "
                            "has {} after the length",
                            headerSize, size - 8));
  Expected<Json> json =
      JsonParser(std::string_view(reinterpret_cast<const char *>(bytes + 8),
                                  headerSize))
          .parseDocument();
  if (!json)
    return fail(json.error().message());
  if (json->kind != Json::Object)
    return fail("header: not a JSON object");
  uint64_t dataStart = 8 + headerSize;
  uint64_t dataSize = size - dataStart;
  Checkpoint checkpoint;
  uint64_t covered = 0;
  for (const auto &[name, value] : json->members) {
    if (name == "__metadata__") {
      if (value.kind != Json::Object)
        return fail("header: __metadata__ is not an object");
      for (const auto &[key, text] : value.members) {
        if (text.kind != Json::String)
          return fail("header: metadata '" + key + "' is not a string");
        checkpoint.metadata[key] = text.text;
      }
      continue;
    }
    const Json *dtype = value.member("dtype");
    const Json *shape = value.member("shape");
    const Json *offsets = value.member("data_offsets");
    if (value.kind != Json::Object || !dtype || dtype->kind != Json::String ||
        !shape || shape->kind != Json::Array || !offsets ||
        offsets->kind != Json::Array || offsets->elements.size() != 2)
      return fail("tensor '" + name +
                  "': needs dtype, shape and data_offsets [begin, end]");
    std::optional<DType> type = dtypeFromSafetensors(dtype->text);
    if (!type)
      return fail("tensor '" + name + "': unsupported dtype '" + dtype->text +
                  "'");
    HostTensor tensor;
    tensor.dtype = *type;
    for (const Json &dim : shape->elements) {
      if (dim.kind != Json::Integer || dim.integer > uint64_t(INT64_MAX))
        return fail("tensor '" + name + "': a dimension is not an integer");
      tensor.shape.push_back(static_cast<int64_t>(dim.integer));
    }
    uint64_t begin = offsets->elements[0].integer;
    uint64_t end = offsets->elements[1].integer;
    std::optional<uint64_t> expected = tensorByteSize(tensor.dtype, tensor.shape);
    if (offsets->elements[0].kind != Json::Integer ||
        offsets->elements[1].kind != Json::Integer || begin > end ||
        !expected || end - begin != *expected)
      return fail("tensor '" + name + "': data_offsets do not hold " +
                  std::string(dtypeName(tensor.dtype)) + " " +
                  formatShape(tensor.shape));
    if (end > dataSize)
      return fail(fmt::format("truncated: tensor '{}' ends at data byte {} "
                              "but the file has {} data bytes",
                              name, end, dataSize));
    covered += end - begin;
    tensor.data.assign(bytes + dataStart + begin, bytes + dataStart + end);
    checkpoint.tensors[name] = std::move(tensor);
  }
  if (covered != dataSize)
    return fail(fmt::format("{} data bytes, but the tensors cover {}",
                            dataSize, covered));
  return checkpoint;
}

} // namespace kiln::runtime
