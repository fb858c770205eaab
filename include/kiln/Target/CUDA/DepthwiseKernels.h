//===- DepthwiseKernels.h - Depthwise NHWC convolution kernels --*- C++ -*-===//
//
// A depthwise convolution (groups = C: one input channel per group, O a
// multiple of C) has too little reuse for tensor cores (a GEMM per group would
// be 7/8 zeros in every K chunk), so it gets its own CUDA-core kernel
// (templates/Depthwise.cuh): each thread computes VEC consecutive channels
// of PIX consecutive output pixels with 16-byte loads and stores where the channel count
// and alignment allow, the filter read as [KH][KW][C], fp32 accumulation,
// and the fusion region's epilogue (row = output pixel, col = channel) on
// every accumulator. Compiled by NVRTC like the GEMM templates.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_DEPTHWISEKERNELS_H
#define KILN_TARGET_CUDA_DEPTHWISEKERNELS_H

#include "kiln/Target/CUDA/ContractionKernels.h"

namespace kiln::contraction {

/// Whether `problem` is a depthwise convolution this kernel computes;
/// empty when it is, else why not.
std::string depthwiseUnsupportedReason(const ConvProblem &problem);

/// Output channels one thread computes: the most (up to 16 bytes of
/// inputs) that divide O and keep every vector access aligned.
uint32_t depthwiseVector(const ConvProblem &problem);

/// Output pixels (along a row) one thread computes.
uint32_t depthwisePixels(const ConvProblem &problem);

/// Threads per block.
constexpr uint32_t kDepthwiseThreads = 256;

/// "dw_simt v8 x2" (the kernel, its vector width and pixels a thread).
std::string describeDepthwise(const ConvProblem &problem);

/// The kernel's shape: output channels and pixels one thread computes.
struct DepthwiseConfig {
  uint32_t vector = 1, pixels = 1;
};

/// depthwiseVector and depthwisePixels.
DepthwiseConfig pickDepthwiseConfig(const ConvProblem &problem);

/// Why the kernel cannot compute `problem` with `config` (empty when it
/// can): the vector must divide O and keep every vector access aligned.
std::string depthwiseUnsupportedReason(const ConvProblem &problem,
                                       const DepthwiseConfig &config);

std::string describeDepthwise(const DepthwiseConfig &config);

/// The filter [O][KH][KW] (any trailing unit dimension) as the kernel reads
/// it: [KH][KW][O]. `elementBytes` 2 or 4.
std::vector<uint8_t> reorderDepthwiseFilter(const ConvProblem &problem,
                                            const void *okhkw,
                                            size_t elementBytes);

/// The CUDA C++ source, and the compiled kernel: parameters A (the NHWC
/// image), B (the reordered filter), C (the NHWC output), then one pointer
/// per `epilogue.customOperands` entry, named as they are.
runtime::Expected<std::string>
generateDepthwiseSource(const ConvProblem &problem, const Epilogue &epilogue,
                        const GenerateOptions &options);
runtime::Expected<GemmKernels>
generateDepthwise(const ConvProblem &problem, const Epilogue &epilogue,
                  const GenerateOptions &options);
/// The same with a given config (the ones above use pickDepthwiseConfig).
runtime::Expected<std::string>
generateDepthwiseSource(const ConvProblem &problem,
                        const DepthwiseConfig &config,
                        const Epilogue &epilogue,
                        const GenerateOptions &options);
runtime::Expected<GemmKernels>
generateDepthwise(const ConvProblem &problem, const DepthwiseConfig &config,
                  const Epilogue &epilogue, const GenerateOptions &options);
/// generateDepthwise without NVRTC (see specializeGemm).
runtime::Expected<GemmKernels>
specializeDepthwise(const ConvProblem &problem, const DepthwiseConfig &config,
                    const Epilogue &epilogue, const GenerateOptions &options);

} // namespace kiln::contraction

#endif // KILN_TARGET_CUDA_DEPTHWISEKERNELS_H
