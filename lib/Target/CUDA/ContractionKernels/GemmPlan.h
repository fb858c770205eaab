//===- GemmPlan.h - What one (problem, config) pair implies -----*- C++ -*-===//
//
// The facts the source generator, the compiler driver and the heuristic all
// derive from a GemmProblem and a GemmConfig: copy and store widths from the
// alignment, shared memory, grid and the split of K. Kept in one place so
// the kernel that is generated is the kernel that is costed and launched.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_CUDA_CONTRACTIONKERNELS_GEMMPLAN_H
#define KILN_LIB_TARGET_CUDA_CONTRACTIONKERNELS_GEMMPLAN_H

#include "kiln/Target/CUDA/ContractionKernels.h"

#include "templates/ElementType.cuh"

namespace kiln::contraction {

uint32_t dtypeBytes(DType type);

/// The NVRTC options every template source compiles with: the virtual
/// architecture (compute_<sm>, with the "a" suffix for sm_90a's wgmma and
/// setmaxnreg), no headers, C++17, restrict pointers.
inline std::vector<std::string> templateNvrtcOptions(uint32_t smVersion,
                                                     bool archSpecific) {
  return {"--gpu-architecture=compute_" + std::to_string(smVersion) +
              (archSpecific ? "a" : ""),
          "-default-device", "--std=c++17", "-restrict"};
}

// The templates' element types are runtime::DType's codes.
static_assert(kElementF32 == static_cast<int>(DType::F32) &&
                  kElementF16 == static_cast<int>(DType::F16) &&
                  kElementBF16 == static_cast<int>(DType::BF16) &&
                  kElementS8 == static_cast<int>(DType::I8) &&
                  kElementS32 == static_cast<int>(DType::I32) &&
                  kElementU8 == static_cast<int>(DType::U8) &&
                  kElementE4M3 == static_cast<int>(DType::F8E4M3FN) &&
                  kElementE5M2 == static_cast<int>(DType::F8E5M2),
              "ElementType.cuh and runtime::DType disagree");

/// The name generated source uses for `type` ("kElementBF16"), one of
/// ElementType.cuh's; "kElementNone" for a type no template stores.
const char *elementTypeName(DType type);

/// The sm_90a warp-specialised wgmma kernel (GemmWgmma.cuh), in any
/// input type.
inline bool isWgmma(Family family) { return isWgmmaFamily(family); }

/// The int8 families (s8/u8 inputs, s32 accumulators, the integer
/// epilogue).
inline bool isInt8(Family family) {
  return family == Family::MmaS8 || family == Family::WgmmaS8;
}

/// The fp8 families (e4m3/e5m2 inputs, fp32 accumulators).
inline bool isFp8(Family family) {
  return family == Family::MmaF8 || family == Family::WgmmaF8;
}

/// The fp8 operand types the tensor cores read: OCP e4m3 and e5m2 (not the
/// FNUZ variants, which no NVIDIA instruction reads).
inline bool isFp8Operand(DType type) {
  return type == DType::F8E4M3FN || type == DType::F8E5M2;
}

/// Bytes of one element of the int8 family's operands and outputs (I8,
/// U8: 1, I32: 4; 0 for any other type).
uint32_t integerBytes(DType type);

/// Bytes of one element of C for this family (0: a type it cannot store).
uint32_t outputBytes(const GemmProblem &p, const GemmConfig &c);

struct GemmPlan {
  uint32_t inBytes = 2, outBytes = 4;
  /// Elements one global→shared copy moves for A and B (16 bytes at most),
  /// and one output store writes.
  uint32_t vecA = 1, vecB = 1, vecC = 1;
  /// Whether A (B) is stored with K contiguous.
  bool aKContiguous = true, bKContiguous = false;
  uint32_t sharedBytes = 0;
  /// K tiles in all and per split.
  uint64_t kTiles = 0, kTilesPerSplit = 0;
  runtime::Dim3 grid, block;
};

/// The most elements (a power of two, at most 16 bytes) one access may
/// move when every start is a multiple of `ld` and `batchStride` elements
/// from a base aligned to `align` bytes.
uint32_t vectorElements(uint32_t elemBytes, uint64_t ld, uint64_t batchStride,
                        uint32_t align);

/// The plan; its fields are meaningful only when unsupportedReason is empty.
GemmPlan planGemm(const GemmProblem &problem, const GemmConfig &config);

/// Shared memory a block may use on the sm (TargetInfo.h).
uint32_t maxSharedBytesPerBlock(uint32_t smVersion);

/// The kernel's parameter list (GemmSource.cpp writes the same order):
/// A, B, C, aux, the epilogue's pointers, with split-K the workspace and
/// the semaphores, then M and the batch strides; with config.tma, the
/// tensor maps of A and B come last.
std::vector<KernelParameter> gemmMainParameters(const GemmProblem &problem,
                                                const Epilogue &epilogue,
                                                const GemmConfig &config);

/// The TMA producer's tensor map of A or B (GemmWgmma.cuh): the operand in
/// its memory order, dimension 0 contiguous, a batch dimension when it has
/// a batch stride, the box one stage copy moves, 128-byte swizzle and zero
/// fill past every edge. `addressParam` is left for the caller.
runtime::TensorMapRecord tmaOperandMap(const GemmProblem &problem,
                                       const GemmConfig &config, bool isA);

/// The generated `EpilogueArgs` and `kilnEpilogue` for `e`, and the entry
/// point's statements that fill an `EpilogueArgs ep` from its parameters
/// (a convolution's: the residual has no batch stride). Other kernel kinds
/// (DepthwiseSource.cpp) share them with the GEMMs.
std::string generatedEpilogue(const Epilogue &e);
std::string generatedEpilogueInit(const Epilogue &e);

} // namespace kiln::contraction

#endif // KILN_LIB_TARGET_CUDA_CONTRACTIONKERNELS_GEMMPLAN_H
