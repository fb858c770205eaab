//===- TensorDecoding.cpp - ONNX element types and TensorProto contents
//------===//

#include "NodeImporter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;

namespace kiln::onnx_frontend {

Type convertElementType(int32_t onnxType, MLIRContext *context) {
  Builder b(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  case onnx::TensorProto::INT8:
    return b.getIntegerType(8);
  case onnx::TensorProto::INT16:
    return b.getIntegerType(16);
  case onnx::TensorProto::INT32:
    return b.getIntegerType(32);
  case onnx::TensorProto::INT64:
    return b.getIntegerType(64);
  case onnx::TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::UINT16:
    return b.getIntegerType(16, false);
  case onnx::TensorProto::UINT32:
    return b.getIntegerType(32, false);
  case onnx::TensorProto::UINT64:
    return b.getIntegerType(64, false);
  case kOnnxFloat8E4M3FN:
    return b.getType<Float8E4M3FNType>();
  case kOnnxFloat8E4M3FNUZ:
    return b.getType<Float8E4M3FNUZType>();
  case kOnnxFloat8E5M2:
    return b.getType<Float8E5M2Type>();
  case kOnnxFloat8E5M2FNUZ:
    return b.getType<Float8E5M2FNUZType>();
  // 4-bit integers are held unpacked, one per byte (isFourBitType).
  case kOnnxInt4:
    return b.getIntegerType(8);
  case kOnnxUInt4:
    return b.getIntegerType(8, /*isSigned=*/false);
  default:
    return nullptr;
  }
}

bool isFourBitType(int32_t onnxType) {
  return onnxType == kOnnxInt4 || onnxType == kOnnxUInt4;
}

std::string onnxTypeName(int32_t onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(onnxType));
  // Types newer than the protobuf definitions we build against.
  switch (onnxType) {
  case 17:
    return "FLOAT8E4M3FN";
  case 18:
    return "FLOAT8E4M3FNUZ";
  case 19:
    return "FLOAT8E5M2";
  case 20:
    return "FLOAT8E5M2FNUZ";
  case 21:
    return "UINT4";
  case 22:
    return "INT4";
  case 23:
    return "FLOAT4E2M1";
  default:
    return "type " + std::to_string(onnxType);
  }
}

namespace {
/// Bytes per element in ONNX raw_data for the types we accept.
int64_t rawElementBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  return type.getIntOrFloatBitWidth() / 8;
}

/// Reads the external-data bytes of `tensor` from the file its `location`
/// names, relative to the model's directory.
FailureOr<std::string> readExternalData(const onnx::TensorProto &tensor,
                                        StringRef baseDir, std::string &error) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = std::strtoll(entry.value().c_str(), nullptr, 10);
    else if (entry.key() == "length")
      length = std::strtoll(entry.value().c_str(), nullptr, 10);
  }
  if (location.empty()) {
    error = "tensor '" + tensor.name() + "': external data has no location";
    return failure();
  }
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "tensor '" + tensor.name() + "': cannot read external data file '" +
            std::string(path) + "': " + buffer.getError().message();
    return failure();
  }
  int64_t size = static_cast<int64_t>((*buffer)->getBufferSize());
  if (length < 0)
    length = size - offset;
  if (offset < 0 || offset > size || length > size - offset) {
    error = "tensor '" + tensor.name() + "': external data range [" +
            std::to_string(offset) + ", +" + std::to_string(length) +
            ") is outside '" + std::string(path) + "' (" +
            std::to_string(size) + " bytes)";
    return failure();
  }
  return std::string((*buffer)->getBufferStart() + offset, length);
}

/// Little-endian raw bytes of the tensor, gathered from whichever field holds
/// them.
FailureOr<std::string> tensorBytes(const onnx::TensorProto &tensor,
                                   Type elementType, int64_t numElements,
                                   StringRef baseDir, std::string &error) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return readExternalData(tensor, baseDir, error);
  if (tensor.has_raw_data())
    return tensor.raw_data();
  int64_t width = rawElementBytes(elementType);
  // No reserve from the declared shape: a malformed model may declare far
  // more elements than it carries, and the size check comes after.
  std::string bytes;
  auto append = [&](auto value) {
    bytes.append(reinterpret_cast<const char *>(&value), width);
  };
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    for (float v : tensor.float_data())
      append(v);
    break;
  case onnx::TensorProto::DOUBLE:
    for (double v : tensor.double_data())
      append(v);
    break;
  case onnx::TensorProto::INT64:
    for (int64_t v : tensor.int64_data())
      append(v);
    break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    for (uint64_t v : tensor.uint64_data())
      append(v);
    break;
  default:
    // int8/16/32, uint8/16, bool, float16 and bfloat16 (as bit patterns) all
    // live in int32_data; `append` keeps the low `width` bytes.
    for (int32_t v : tensor.int32_data())
      append(v);
    break;
  }
  return bytes;
}
} // namespace

FailureOr<DecodedTensor> decodeTensorData(const onnx::TensorProto &tensor,
                                          StringRef baseDir,
                                          MLIRContext *context,
                                          std::string &error) {
  Type elementType = convertElementType(tensor.data_type(), context);
  if (!elementType) {
    error = "tensor '" + tensor.name() + "' has unsupported element type " +
            onnxTypeName(tensor.data_type());
    return failure();
  }
  SmallVector<int64_t> shape;
  int64_t numElements = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) {
      error = "tensor '" + tensor.name() + "' has a negative dimension";
      return failure();
    }
    shape.push_back(d);
    if (llvm::MulOverflow(numElements, d, numElements)) {
      error = "tensor '" + tensor.name() +
              "' has more elements than fit in 64 bits";
      return failure();
    }
  }
  DecodedTensor decoded;
  decoded.type = RankedTensorType::get(shape, elementType);
  FailureOr<std::string> bytes =
      tensorBytes(tensor, elementType, numElements, baseDir, error);
  if (failed(bytes))
    return failure();
  if (isFourBitType(tensor.data_type())) {
    // Two per byte, the first in the low nibble; an odd count leaves the
    // last high nibble unused. int32_data holds one packed byte per entry.
    int64_t packed = numElements / 2 + numElements % 2;
    if (static_cast<int64_t>(bytes->size()) != packed) {
      error = "tensor '" + tensor.name() + "' holds " +
              std::to_string(bytes->size()) + " bytes, expected " +
              std::to_string(packed) + " (4-bit, two per byte) for its shape";
      return failure();
    }
    bool isSigned = tensor.data_type() == kOnnxInt4;
    decoded.bytes.resize(numElements);
    for (int64_t i = 0; i < numElements; ++i) {
      uint8_t nibble = (static_cast<uint8_t>((*bytes)[i / 2]) >> (4 * (i % 2))) & 0xF;
      // Sign-extend INT4: 8..15 are -8..-1.
      if (isSigned && (nibble & 0x8))
        nibble |= 0xF0;
      decoded.bytes[i] = static_cast<char>(nibble);
    }
    return decoded;
  }
  int64_t expected = 0;
  if (llvm::MulOverflow(numElements, rawElementBytes(elementType), expected) ||
      static_cast<int64_t>(bytes->size()) != expected) {
    error = "tensor '" + tensor.name() + "' holds " +
            std::to_string(bytes->size()) + " bytes, expected " +
            (expected ? std::to_string(expected)
                      : std::string("more than 2^63")) +
            " for its shape";
    return failure();
  }
  decoded.bytes = std::move(*bytes);
  return decoded;
}

DenseElementsAttr toDenseElements(const DecodedTensor &tensor) {
  if (tensor.type.getElementType().isInteger(1)) {
    SmallVector<bool> values;
    for (char c : tensor.bytes)
      values.push_back(c != 0);
    return DenseElementsAttr::get(tensor.type, values);
  }
  return DenseElementsAttr::getFromRawBuffer(
      tensor.type, ArrayRef<char>(tensor.bytes.data(), tensor.bytes.size()));
}

FailureOr<DenseElementsAttr> decodeTensor(const onnx::TensorProto &tensor,
                                          StringRef baseDir,
                                          MLIRContext *context,
                                          std::string &error) {
  FailureOr<DecodedTensor> decoded =
      decodeTensorData(tensor, baseDir, context, error);
  if (failed(decoded))
    return failure();
  return toDenseElements(*decoded);
}

} // namespace kiln::onnx_frontend
