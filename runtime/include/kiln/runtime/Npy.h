//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// The .npy format (versions 1.0, 2.0 and 3.0 headers) for the dtypes Kiln
// knows, little-endian and C order only. bf16, which NumPy lacks, is written
// as the 2-byte void type '<V2' (what np.save writes for ml_dtypes.bfloat16)
// and '<V2', '|V2' or 'bfloat16' read back as bf16. The float8 types are
// written as '|V1' (what np.save writes for ml_dtypes' float8 arrays), which
// reads back as f8e4m3fn: see npyDTypeMatches.
//
// Stability: stable (as Runtime.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_NPY_H
#define KILN_RUNTIME_NPY_H

#include "kiln/runtime/DType.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

struct NpyArray {
  DType dtype = DType::F32;
  Shape shape;
  /// The elements in C order, little-endian.
  std::vector<uint8_t> data;
  /// A NumPy Unicode array ('<U7': fixed-width UTF-32, what np.save writes
  /// for a str array without pickling): its elements as UTF-8 in `strings`
  /// (trailing NULs dropped, as NumPy drops them); dtype and data unused.
  bool isString = false;
  std::vector<std::string> strings;
};

/// Reads a .npy file. Errors start with the path and say what is wrong:
/// Fortran order, big-endian or object data, an unknown dtype, a malformed
/// header, truncated or trailing data.
Expected<NpyArray> readNpy(const std::string &path);

/// As readNpy, for the bytes of a file; `displayName` starts every message.
Expected<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                            std::string_view displayName);

/// The bytes of a .npy file holding the tensor (version 1.0 unless the
/// header needs 2.0). `size` must equal the tensor's byte size.
Expected<std::vector<uint8_t>> encodeNpy(DType dtype, const Shape &shape,
                                         const void *data, uint64_t size);

/// The bytes of a .npy file holding UTF-8 `strings` as a '<UN' array (N:
/// the longest string's code points, at least 1). Invalid UTF-8 is an
/// error.
Expected<std::vector<uint8_t>>
encodeNpyStrings(const Shape &shape, const std::vector<std::string> &strings);
Error writeNpyStrings(const std::string &path, const Shape &shape,
                      const std::vector<std::string> &strings);

/// Writes a .npy file through a temporary file and a rename.
Error writeNpy(const std::string &path, DType dtype, const Shape &shape,
               const void *data, uint64_t size);

/// The NumPy descr for a dtype: "<f4", "|b1", "<V2" (bf16), "|V1" (every
/// float8 type), ...
std::string_view npyDescr(DType dtype);

/// Whether an array read as `fromFile` holds `wanted`'s elements: the same
/// dtype, or '|V1' bytes (read as f8e4m3fn) for any float8 type, which .npy
/// cannot tell apart; the artifact's signature says which it is.
bool npyDTypeMatches(DType fromFile, DType wanted);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_NPY_H
