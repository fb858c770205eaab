//===- DType.cpp - Element types and shapes of runtime tensors ------------===//

#include "kiln/runtime/DType.h"

#include "Support.h"

namespace kiln::runtime {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  uint64_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4},   {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2},
    {DType::F64, "f64", 8},   {DType::I8, "i8", 1},   {DType::I16, "i16", 2},
    {DType::I32, "i32", 4},   {DType::I64, "i64", 8}, {DType::U8, "u8", 1},
    {DType::U16, "u16", 2},   {DType::U32, "u32", 4}, {DType::U64, "u64", 8},
    {DType::Bool, "bool", 1}, {DType::F8E4M3FN, "f8e4m3fn", 1},
    {DType::F8E4M3FNUZ, "f8e4m3fnuz", 1}, {DType::F8E5M2, "f8e5m2", 1},
    {DType::F8E5M2FNUZ, "f8e5m2fnuz", 1},
};

const DTypeInfo &infoOf(DType type) {
  // Codes are dense from 1. A value outside the enum (a bad cast) gets an
  // entry that verifyArtifact and encodeNpy reject instead of a wild read.
  static constexpr DTypeInfo invalid = {DType(0), "invalid", 0};
  unsigned code = static_cast<unsigned>(type);
  return code >= 1 && code <= std::size(kDTypes) ? kDTypes[code - 1] : invalid;
}
} // namespace

const std::vector<DType> &allDTypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> types;
    for (const DTypeInfo &info : kDTypes)
      types.push_back(info.type);
    return types;
  }();
  return all;
}

std::optional<DType> dtypeFromCode(uint32_t code) {
  if (code < 1 || code > std::size(kDTypes))
    return std::nullopt;
  return kDTypes[code - 1].type;
}

uint64_t dtypeSize(DType type) { return infoOf(type).size; }

std::string_view dtypeName(DType type) { return infoOf(type).name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &info : kDTypes)
    if (info.name == name)
      return info.type;
  return std::nullopt;
}

bool isFloatDType(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 ||
         type == DType::F64;
}

bool isFloat8DType(DType type) {
  return type == DType::F8E4M3FN || type == DType::F8E4M3FNUZ ||
         type == DType::F8E5M2 || type == DType::F8E5M2FNUZ;
}

bool isSignedIntDType(DType type) {
  return type == DType::I8 || type == DType::I16 || type == DType::I32 ||
         type == DType::I64;
}

std::string formatShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::optional<uint64_t> elementCount(const Shape &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    std::optional<uint64_t> product =
        checkedMul(count, static_cast<uint64_t>(dim));
    if (!product)
      return std::nullopt;
    count = *product;
  }
  return count;
}

std::optional<uint64_t> tensorByteSize(DType type, const Shape &shape) {
  std::optional<uint64_t> count = elementCount(shape);
  if (!count)
    return std::nullopt;
  return checkedMul(*count, dtypeSize(type));
}

} // namespace kiln::runtime
