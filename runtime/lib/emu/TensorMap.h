//===- TensorMap.h - The emulator's encoding of a TMA tensor map -*- C++ -*-===//
//
// A kernel that copies with TMA (cp.async.bulk.tensor) takes a 128-byte,
// 64-byte-aligned tensor map as a `.param .align 64 .b8 name[128]`
// parameter (CUDA's `const __grid_constant__ CUtensorMap`). On the `cuda`
// device the runtime fills it with cuTensorMapEncodeTiled through the
// driver table; the driver's encoding is opaque. On `emu` the runtime writes
// this struct instead, from the same arguments, and the emulator decodes it
// when it executes a TMA copy. The enum values are CUDA's
// (CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapInterleave,
// CUtensorMapFloatOOBfill), so both encoders take one set of arguments.
//
// Dimension 0 is the innermost (contiguous) one, as in CUDA; globalStrides
// are in bytes for dimensions 1..rank-1 (dimension 0 is contiguous).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_TENSORMAP_H
#define KILN_RUNTIME_LIB_EMU_TENSORMAP_H

#include <cstddef>
#include <cstdint>

namespace kiln::runtime::emu {

/// 'KTMA', little-endian: the first word of every map the emulator accepts.
constexpr uint32_t kTensorMapMagic = 0x414d544bu;
constexpr unsigned kTensorMapMaxRank = 5;

struct EmuTensorMap {
  uint32_t magic = kTensorMapMagic;
  uint8_t dataType = 0;   // CUtensorMapDataType
  uint8_t rank = 0;       // 1..5
  uint8_t swizzle = 0;    // CUtensorMapSwizzle: 0 none, 1 32B, 2 64B, 3 128B
  uint8_t interleave = 0; // CUtensorMapInterleave (only 0, none, is used)
  uint64_t globalAddress = 0;
  uint32_t globalDims[kTensorMapMaxRank] = {};
  uint32_t reserved0 = 0;
  uint64_t globalStrides[kTensorMapMaxRank - 1] = {}; // bytes, dims 1..rank-1
  uint32_t boxDims[kTensorMapMaxRank] = {};
  uint8_t elementStrides[kTensorMapMaxRank] = {};
  uint8_t oobFill = 0; // CUtensorMapFloatOOBfill: 0 zeros, 1 NaN (FMA)
  uint8_t reserved1[30] = {};
};

/// CUtensorMapDataType values of the dtypes Kiln's kernels copy with TMA.
constexpr uint8_t kTensorMapFloat16 = 6;
constexpr uint8_t kTensorMapFloat32 = 7;
constexpr uint8_t kTensorMapBFloat16 = 9;

static_assert(sizeof(EmuTensorMap) == 128, "a tensor map is 128 bytes");
static_assert(offsetof(EmuTensorMap, globalAddress) == 8);
static_assert(offsetof(EmuTensorMap, globalDims) == 16);
static_assert(offsetof(EmuTensorMap, globalStrides) == 40);
static_assert(offsetof(EmuTensorMap, boxDims) == 72);
static_assert(offsetof(EmuTensorMap, elementStrides) == 92);
static_assert(offsetof(EmuTensorMap, oobFill) == 97);

} // namespace kiln::runtime::emu

#endif // KILN_RUNTIME_LIB_EMU_TENSORMAP_H
