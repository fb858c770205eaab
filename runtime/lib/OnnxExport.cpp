//===- OnnxExport.cpp - Trained weights into a copy of an ONNX model ------===//
//
// The runtime links no protobuf library, so this edits the ONNX file at the
// wire-format level: it walks ModelProto -> graph (field 7) -> initializer
// (field 5) and, for each TensorProto whose name (field 8) has a trained
// value, drops the old data fields (float_data 4, raw_data 9) and appends
// raw_data with the new little-endian bytes. Every other field, known or
// not, is copied byte for byte, so the rest of the model is untouched.
// Initializers stored as external data are refused (their bytes are not in
// the file).
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Training.h"

#include <set>

namespace kiln::runtime {

namespace {

struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  uint64_t varint = 0;                  // wire type 0
  const uint8_t *data = nullptr;        // wire types 1, 2, 5
  uint64_t size = 0;
  const uint8_t *raw = nullptr;         // the whole field, tag included
  uint64_t rawSize = 0;
};

bool readVarint(const uint8_t *&p, const uint8_t *end, uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= end)
      return false;
    uint8_t byte = *p++;
    value |= uint64_t(byte & 0x7F) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

Expected<std::vector<Field>> parseMessage(const uint8_t *data, uint64_t size,
                                          std::string_view what) {
  std::vector<Field> fields;
  const uint8_t *p = data, *end = data + size;
  while (p < end) {
    Field field;
    field.raw = p;
    uint64_t tag;
    if (!readVarint(p, end, tag))
      return makeError("{}: truncated field tag", what);
    field.number = static_cast<uint32_t>(tag >> 3);
    field.wireType = static_cast<uint32_t>(tag & 7);
    switch (field.wireType) {
    case 0:
      if (!readVarint(p, end, field.varint))
        return makeError("{}: truncated varint", what);
      break;
    case 1:
    case 5: {
      uint64_t n = field.wireType == 1 ? 8 : 4;
      if (uint64_t(end - p) < n)
        return makeError("{}: truncated fixed field", what);
      field.data = p;
      field.size = n;
      p += n;
      break;
    }
    case 2: {
      uint64_t n;
      if (!readVarint(p, end, n) || n > uint64_t(end - p))
        return makeError("{}: truncated length-delimited field {}", what,
                         field.number);
      field.data = p;
      field.size = n;
      p += n;
      break;
    }
    default:
      return makeError("{}: unsupported wire type {} (field {})", what,
                       field.wireType, field.number);
    }
    field.rawSize = static_cast<uint64_t>(p - field.raw);
    fields.push_back(field);
  }
  return fields;
}

void writeVarint(std::vector<uint8_t> &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<uint8_t>(value));
}

void writeBytesField(std::vector<uint8_t> &out, uint32_t number,
                     const std::vector<uint8_t> &bytes) {
  writeVarint(out, (uint64_t(number) << 3) | 2);
  writeVarint(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}

void copyField(std::vector<uint8_t> &out, const Field &field) {
  out.insert(out.end(), field.raw, field.raw + field.rawSize);
}

/// ONNX TensorProto.DataType codes of the dtypes a weight can have.
int onnxDataType(DType dtype) {
  switch (dtype) {
  case DType::F32: return 1;
  case DType::F16: return 10;
  case DType::BF16: return 16;
  case DType::F64: return 11;
  default: return -1;
  }
}

/// The TensorProto with its data replaced, or an error naming it.
Expected<std::vector<uint8_t>> rewriteTensor(const std::vector<Field> &fields,
                                             const std::string &name,
                                             const HostTensor &value) {
  Shape dims;
  int64_t dataType = 0;
  for (const Field &field : fields) {
    if (field.number == 1 && field.wireType == 0)
      dims.push_back(static_cast<int64_t>(field.varint));
    if (field.number == 1 && field.wireType == 2) { // packed dims
      const uint8_t *p = field.data, *end = field.data + field.size;
      uint64_t d;
      while (p < end && readVarint(p, end, d))
        dims.push_back(static_cast<int64_t>(d));
    }
    if (field.number == 2 && field.wireType == 0)
      dataType = static_cast<int64_t>(field.varint);
    if (field.number == 14 && field.wireType == 0 && field.varint == 1)
      return makeError("initializer '{}' is stored as external data, which "
                       "--export does not rewrite",
                       name);
  }
  if (dims != value.shape || dataType != onnxDataType(value.dtype))
    return makeError("initializer '{}' is ONNX type {} with shape {}, the "
                     "trained weight is {} {}",
                     name, dataType, formatShape(dims), dtypeName(value.dtype),
                     formatShape(value.shape));
  std::vector<uint8_t> out;
  for (const Field &field : fields)
    if (field.number != 4 && field.number != 9 && field.number != 10)
      copyField(out, field);
  writeBytesField(out, 9, value.data);
  return out;
}

} // namespace

Error exportOnnxWeights(const std::string &modelPath,
                        const std::string &outputPath,
                        const std::map<std::string, HostTensor> &weights) {
  Expected<Blob> file = mapFile(modelPath);
  if (!file)
    return file.takeError();
  Expected<std::vector<Field>> model =
      parseMessage(file->data(), file->size(), modelPath);
  if (!model)
    return model.takeError();
  std::set<std::string> written;
  std::vector<uint8_t> out;
  bool sawGraph = false;
  for (const Field &field : *model) {
    if (field.number != 7 || field.wireType != 2) {
      copyField(out, field);
      continue;
    }
    sawGraph = true;
    Expected<std::vector<Field>> graph =
        parseMessage(field.data, field.size, modelPath + ": graph");
    if (!graph)
      return graph.takeError();
    std::vector<uint8_t> graphBytes;
    for (const Field &g : *graph) {
      if (g.number != 5 || g.wireType != 2) {
        copyField(graphBytes, g);
        continue;
      }
      Expected<std::vector<Field>> tensor =
          parseMessage(g.data, g.size, modelPath + ": initializer");
      if (!tensor)
        return tensor.takeError();
      std::string name;
      for (const Field &t : *tensor)
        if (t.number == 8 && t.wireType == 2)
          name.assign(reinterpret_cast<const char *>(t.data), t.size);
      auto it = weights.find(name);
      if (it == weights.end()) {
        copyField(graphBytes, g);
        continue;
      }
      Expected<std::vector<uint8_t>> rewritten =
          rewriteTensor(*tensor, name, it->second);
      if (!rewritten)
        return rewritten.error().withContext(modelPath);
      writeBytesField(graphBytes, 5, *rewritten);
      written.insert(name);
    }
    writeBytesField(out, 7, graphBytes);
  }
  if (!sawGraph)
    return makeError("{}: not an ONNX model (no graph)", modelPath);
  for (const auto &[name, value] : weights)
    if (!written.count(name))
      return makeError("{}: has no initializer '{}' (the artifact was "
                       "compiled from another model?)",
                       modelPath, name);
  if (outputPath.empty())
    return Error::success(); // Checked only.
  return writeFileAtomically(outputPath, out.data(), out.size());
}

} // namespace kiln::runtime
