//===- TmaEncodeShim.cpp - cuTensorMapEncodeTiled without a driver --------===//
//
// CUTLASS's host code encodes TMA descriptors with the driver's
// cuTensorMapEncodeTiled (through cutlass::call_cuTensorMapEncodeTiled;
// the harness compiles with CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, so the
// call binds to a symbol named cuTensorMapEncodeTiled, and this file is
// that symbol: libcuda is never linked). It records the arguments in the
// emulator's own encoding (runtime/lib/emu/TensorMap.h), so the 128-byte
// CUtensorMap inside the kernel's Params is one the emulator decodes.
//
// Arguments the driver would reject are rejected here too, with a line on
// stderr naming the argument, so a harness bug cannot hide behind the
// emulator's own checks.
//
//===----------------------------------------------------------------------===//

#include "emu/TensorMap.h"

#include <cuda.h>

#include <cstdio>
#include <cstring>

using kiln::runtime::emu::EmuTensorMap;
using kiln::runtime::emu::kTensorMapMaxRank;

static_assert(sizeof(CUtensorMap) == sizeof(EmuTensorMap),
              "CUtensorMap and the emulator's map are both 128 bytes");

namespace {
CUresult reject(const char *what, unsigned long long value) {
  std::fprintf(stderr, "cuTensorMapEncodeTiled (harness shim): %s (%llu)\n",
               what, value);
  return CUDA_ERROR_INVALID_VALUE;
}
} // namespace

extern "C" CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap *tensorMap, CUtensorMapDataType dataType, cuuint32_t rank,
    void *globalAddress, const cuuint64_t *globalDim,
    const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
    const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion /*l2Promotion*/,
    CUtensorMapFloatOOBfill oobFill) {
  if (!tensorMap || reinterpret_cast<uintptr_t>(tensorMap) % 64)
    return reject("tensorMap is not 64-byte aligned",
                  reinterpret_cast<uintptr_t>(tensorMap));
  if (rank < 1 || rank > kTensorMapMaxRank)
    return reject("rank out of 1..5", rank);
  if (reinterpret_cast<uintptr_t>(globalAddress) % 16)
    return reject("globalAddress is not 16-byte aligned",
                  reinterpret_cast<uintptr_t>(globalAddress));
  EmuTensorMap map;
  map.dataType = static_cast<uint8_t>(dataType);
  map.rank = static_cast<uint8_t>(rank);
  map.swizzle = static_cast<uint8_t>(swizzle);
  map.interleave = static_cast<uint8_t>(interleave);
  map.oobFill = static_cast<uint8_t>(oobFill);
  map.globalAddress = reinterpret_cast<uintptr_t>(globalAddress);
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (globalDim[i] < 1 || globalDim[i] > (1ull << 32))
      return reject("globalDim out of 1..2^32", globalDim[i]);
    if (boxDim[i] < 1 || boxDim[i] > 256)
      return reject("boxDim out of 1..256", boxDim[i]);
    if (elementStrides[i] < 1 || elementStrides[i] > 8)
      return reject("elementStrides out of 1..8", elementStrides[i]);
    map.globalDims[i] = static_cast<uint32_t>(globalDim[i]);
    map.boxDims[i] = boxDim[i];
    map.elementStrides[i] = static_cast<uint8_t>(elementStrides[i]);
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (globalStrides[i] % 16 || globalStrides[i] >= (1ull << 40))
      return reject("globalStrides not a multiple of 16 below 2^40",
                    globalStrides[i]);
    map.globalStrides[i] = globalStrides[i];
  }
  std::memcpy(tensorMap, &map, sizeof(map));
  return CUDA_SUCCESS;
}
