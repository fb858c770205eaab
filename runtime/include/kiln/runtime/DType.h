//===- DType.h - Element types and shapes of tensors ------------*- C++ -*-===//
//
// The element types a Kiln artifact, a .npy file and a runtime session agree
// on. The numeric codes are part of the artifact format
// (docs/artifact-format.md) and never change meaning.
//
// Stability: stable (as Runtime.h); the codes are fixed by the format.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DTYPE_H
#define KILN_RUNTIME_DTYPE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

enum class DType : uint8_t {
  F32 = 1,
  F16 = 2,
  BF16 = 3,
  F64 = 4,
  I8 = 5,
  I16 = 6,
  I32 = 7,
  I64 = 8,
  U8 = 9,
  U16 = 10,
  U32 = 11,
  U64 = 12,
  Bool = 13,
  // Format 1.6: ONNX's float8 storage types (one byte each, no arithmetic
  // in the runtime). A .npy carries any of them as '|V1' raw bytes.
  F8E4M3FN = 14,
  F8E4M3FNUZ = 15,
  F8E5M2 = 16,
  F8E5M2FNUZ = 17,
};

/// Every element type, in code order.
const std::vector<DType> &allDTypes();

/// The dtype with this artifact code, if there is one.
std::optional<DType> dtypeFromCode(uint32_t code);

/// Bytes per element (bool is one byte).
uint64_t dtypeSize(DType type);

/// The short name: "f32", "bf16", "i64", "bool", ...
std::string_view dtypeName(DType type);

/// Parses a short name as printed by dtypeName.
std::optional<DType> parseDType(std::string_view name);

bool isFloatDType(DType type);
bool isSignedIntDType(DType type);
/// The float8 storage types (not in isFloatDType: the runtime does no
/// arithmetic on them).
bool isFloat8DType(DType type);

/// A static shape; every dimension is >= 0. Rank 0 is a scalar.
using Shape = std::vector<int64_t>;

/// "[2, 3]"; "[]" for a scalar.
std::string formatShape(const Shape &shape);

/// The number of elements, or nothing when a dimension is negative or the
/// product overflows 64 bits.
std::optional<uint64_t> elementCount(const Shape &shape);

/// The size in bytes of a dense tensor, or nothing on a negative dimension or
/// overflow.
std::optional<uint64_t> tensorByteSize(DType type, const Shape &shape);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_DTYPE_H
