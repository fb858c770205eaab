//===- Checkpoint.cpp - safetensors files for training checkpoints --------===//
//
// safetensors (https://huggingface.co/docs/safetensors): a u64 little-endian
// header length, a JSON object naming each tensor's dtype, shape and byte
// range in the data that follows, and an optional "__metadata__" object of
// strings. The header is written and parsed by nlohmann::json (Json.h);
// this file then takes only what safetensors allows (dimensions and
// offsets that are non-negative integers, metadata that is strings, no key
// twice in an object, nesting at most 8 deep) and checks every offset
// against the file before a byte is read.
//
//===----------------------------------------------------------------------===//

#include "Json.h"
#include "Support.h"

#include "kiln/runtime/Training.h"

#include <algorithm>
#include <cstring>
#include <map>

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
  case DType::F8E4M3FN: return "F8_E4M3";
  case DType::F8E5M2: return "F8_E5M2";
  case DType::F8E4M3FNUZ:
  case DType::F8E5M2FNUZ:
    return std::nullopt; // safetensors has no name for them
  }
  return std::nullopt;
}

std::optional<DType> dtypeFromSafetensors(std::string_view name) {
  for (DType dtype : allDTypes())
    if (safetensorsName(dtype) == name)
      return dtype;
  return std::nullopt;
}

/// The header parsed, refusing what JSON allows but safetensors does not:
/// a key given twice in one object (nlohmann would keep the last) and
/// nesting deeper than a header needs.
Expected<Json> parseHeader(std::string_view text) {
  std::vector<std::vector<std::string>> keys;
  std::string problem;
  Json::parser_callback_t strict = [&](int depth, Json::parse_event_t event,
                                       Json &parsed) {
    if (depth > 8 && problem.empty())
      problem = "nesting too deep";
    if (event == Json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == Json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == Json::parse_event_t::key && !keys.empty()) {
      std::string key = parsed.get<std::string>();
      if (std::find(keys.back().begin(), keys.back().end(), key) !=
              keys.back().end() &&
          problem.empty())
        problem = "duplicate key '" + key + "'";
      keys.back().push_back(std::move(key));
    }
    return true;
  };
  Expected<Json> json = parseJson(text, "header", strict);
  if (json && !problem.empty())
    return makeError("header: {}", problem);
  return json;
}

/// A non-negative integer of the header (a dimension, an offset).
std::optional<uint64_t> count(const Json &value) {
  if (!value.is_number_unsigned())
    return std::nullopt;
  return value.get<uint64_t>();
}

} // namespace

Error writeSafetensors(const std::string &path, const Checkpoint &checkpoint) {
  Json json = Json::object();
  if (!checkpoint.metadata.empty()) {
    Json metadata = Json::object();
    for (const auto &[key, value] : checkpoint.metadata)
      metadata[key] = value;
    json["__metadata__"] = std::move(metadata);
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : checkpoint.tensors) {
    std::optional<std::string_view> dtype = safetensorsName(tensor.dtype);
    std::optional<uint64_t> size = tensorByteSize(tensor.dtype, tensor.shape);
    if (!dtype || !size || *size != tensor.data.size())
      return makeError("{}: tensor '{}' does not hold {} {}", path, name,
                       dtypeName(tensor.dtype), formatShape(tensor.shape));
    json[name] = {{"dtype", std::string(*dtype)},
                  {"shape", tensor.shape},
                  {"data_offsets", {offset, offset + *size}}};
    offset += *size;
  }
  std::string header = dumpJson(json);
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
  // Keys and names come from the file: printable() keeps a control
  // character in one from breaking the message over several lines.
  auto fail = [&](const std::string &message) {
    return Error::failure(std::string(displayName) + ": " + printable(message));
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
  Expected<Json> json = parseHeader(
      std::string_view(reinterpret_cast<const char *>(bytes + 8), headerSize));
  if (!json)
    return fail(json.error().message());
  if (!json->is_object())
    return fail("header: not a JSON object");
  uint64_t dataStart = 8 + headerSize;
  uint64_t dataSize = size - dataStart;
  Checkpoint checkpoint;
  uint64_t covered = 0;
  for (const auto &[name, value] : json->items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        return fail("header: __metadata__ is not an object");
      for (const auto &[key, text] : value.items()) {
        if (!text.is_string())
          return fail("header: metadata '" + key + "' is not a string");
        checkpoint.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    auto member = [&](const char *key) -> const Json * {
      auto it = value.find(key);
      return it == value.end() ? nullptr : &*it;
    };
    const Json *dtype = value.is_object() ? member("dtype") : nullptr;
    const Json *shape = value.is_object() ? member("shape") : nullptr;
    const Json *offsets = value.is_object() ? member("data_offsets") : nullptr;
    if (!dtype || !dtype->is_string() || !shape || !shape->is_array() ||
        !offsets || !offsets->is_array() || offsets->size() != 2)
      return fail("tensor '" + name +
                  "': needs dtype, shape and data_offsets [begin, end]");
    std::optional<DType> type =
        dtypeFromSafetensors(dtype->get<std::string>());
    if (!type)
      return fail("tensor '" + name + "': unsupported dtype '" +
                  dtype->get<std::string>() + "'");
    HostTensor tensor;
    tensor.dtype = *type;
    for (const Json &dim : *shape) {
      std::optional<uint64_t> extent = count(dim);
      if (!extent || *extent > uint64_t(INT64_MAX))
        return fail("tensor '" + name + "': a dimension is not an integer");
      tensor.shape.push_back(static_cast<int64_t>(*extent));
    }
    std::optional<uint64_t> begin = count((*offsets)[0]);
    std::optional<uint64_t> end = count((*offsets)[1]);
    std::optional<uint64_t> expected = tensorByteSize(tensor.dtype, tensor.shape);
    if (!begin || !end || *begin > *end || !expected ||
        *end - *begin != *expected)
      return fail("tensor '" + name + "': data_offsets do not hold " +
                  std::string(dtypeName(tensor.dtype)) + " " +
                  formatShape(tensor.shape));
    if (*end > dataSize)
      return fail(fmt::format("truncated: tensor '{}' ends at data byte {} "
                              "but the file has {} data bytes",
                              name, *end, dataSize));
    covered += *end - *begin;
    tensor.data.assign(bytes + dataStart + *begin, bytes + dataStart + *end);
    checkpoint.tensors[name] = std::move(tensor);
  }
  if (covered != dataSize)
    return fail(fmt::format("{} data bytes, but the tensors cover {}",
                            dataSize, covered));
  return checkpoint;
}

} // namespace kiln::runtime
