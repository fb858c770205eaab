//===- DepthwiseSource.cpp - Specialise and compile the depthwise kernel --===//
//
// The source NVRTC compiles is: templates/Common.cuh, a generated `struct
// Cfg`, the generated epilogue (shared with the GEMMs, GemmSource.cpp),
// templates/Depthwise.cuh and one `extern "C"` entry point.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/DepthwiseKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"

#include <algorithm>
#include <cstring>

namespace kiln::contraction {
namespace {

#include "ContractionKernelTemplates.inc"

uint64_t outputPixels(const ConvProblem &p) { return p.n * p.p * p.q; }

std::vector<KernelParameter> depthwiseParameters(const Epilogue &e) {
  using K = KernelParameter::Kind;
  std::vector<KernelParameter> params = {
      {K::Pointer, "A"}, {K::Pointer, "B"}, {K::Pointer, "C"}};
  for (const std::string &name : e.customOperands)
    params.push_back({K::Pointer, name});
  return params;
}

} // namespace

std::string depthwiseUnsupportedReason(const ConvProblem &p) {
  if (p.groups < 2 || p.groups != p.c || p.o % p.c != 0)
    return "not depthwise (groups = input channels, outputs a multiple)";
  if (!p.n || !p.h || !p.w || !p.c || !p.p || !p.q || !p.kh || !p.kw)
    return "an empty dimension";
  if (p.inputType != DType::F32 && p.inputType != DType::BF16 &&
      p.inputType != DType::F16)
    return "inputs are not f32, bf16 or f16";
  if (!dtypeBytes(p.outputType))
    return "the output is not f32, bf16 or f16";
  if (outputPixels(p) * p.o >= (uint64_t(1) << 31) * kDepthwiseThreads)
    return "more outputs than one grid covers";
  if (outputPixels(p) > (uint64_t(1) << 31))
    return "more than 2^31 output pixels";
  return "";
}

uint32_t depthwiseVector(const ConvProblem &p) {
  uint32_t inBytes = dtypeBytes(p.inputType);
  uint32_t outBytes = dtypeBytes(p.outputType);
  // With a channel multiplier only the filter and output are vectors.
  bool vectorImage = p.o == p.c;
  for (uint32_t vec = 16 / inBytes; vec > 1; vec /= 2)
    if (p.o % vec == 0 && p.alignFilter % (vec * inBytes) == 0 &&
        p.alignY % std::min(16u, vec * outBytes) == 0 &&
        (!vectorImage || p.alignX % (vec * inBytes) == 0))
      return vec;
  return 1;
}

uint32_t depthwisePixels(const ConvProblem &p) {
  // Two pixels share each filter load. On the emulator's model of a 3x3
  // bf16 layer (docs/benchmarks.md) two cut the instructions by 28% at 56
  // registers (50% occupancy); four cut no more and halve the occupancy.
  return static_cast<uint32_t>(std::min<uint64_t>(2, p.q));
}

std::string describeDepthwise(const ConvProblem &p) {
  return describeDepthwise(pickDepthwiseConfig(p));
}

DepthwiseConfig pickDepthwiseConfig(const ConvProblem &p) {
  return {depthwiseVector(p), depthwisePixels(p)};
}

std::string depthwiseUnsupportedReason(const ConvProblem &p,
                                       const DepthwiseConfig &c) {
  if (std::string why = depthwiseUnsupportedReason(p); !why.empty())
    return why;
  uint32_t inBytes = dtypeBytes(p.inputType);
  uint32_t outBytes = dtypeBytes(p.outputType);
  bool vectorImage = p.o == p.c;
  uint32_t vec = c.vector;
  if (!vec || (vec & (vec - 1)) || vec * inBytes > 16)
    return "a vector of " + std::to_string(vec) +
           " channels (1 to 16 bytes of inputs, a power of two)";
  if (p.o % vec)
    return "a vector of " + std::to_string(vec) +
           " channels does not divide the " + std::to_string(p.o) +
           " output channels";
  if (p.alignFilter % (vec * inBytes) ||
      p.alignY % std::min(16u, vec * outBytes) ||
      (vectorImage && p.alignX % (vec * inBytes)))
    return "a vector of " + std::to_string(vec) +
           " channels is not aligned in memory";
  if (c.pixels != 1 && c.pixels != 2)
    return "pixels must be 1 or 2";
  return "";
}

std::string describeDepthwise(const DepthwiseConfig &c) {
  return "dw_simt v" + std::to_string(c.vector) + " x" +
         std::to_string(c.pixels);
}

std::vector<uint8_t> reorderDepthwiseFilter(const ConvProblem &p,
                                            const void *okhkw,
                                            size_t elementBytes) {
  uint64_t taps = uint64_t(p.kh) * p.kw;
  std::vector<uint8_t> out(p.o * taps * elementBytes);
  const auto *in = static_cast<const uint8_t *>(okhkw);
  for (uint64_t c = 0; c < p.o; ++c)
    for (uint64_t t = 0; t < taps; ++t)
      std::memcpy(&out[(t * p.o + c) * elementBytes],
                  in + (c * taps + t) * elementBytes, elementBytes);
  return out;
}

runtime::Expected<std::string>
generateDepthwiseSource(const ConvProblem &p, const Epilogue &e,
                        const GenerateOptions &options) {
  return generateDepthwiseSource(p, pickDepthwiseConfig(p), e, options);
}

runtime::Expected<std::string>
generateDepthwiseSource(const ConvProblem &p, const DepthwiseConfig &c,
                        const Epilogue &e, const GenerateOptions &options) {
  if (std::string why = depthwiseUnsupportedReason(p, c); !why.empty())
    return runtime::Error::failure("depthwise convolution: " + why);
  if (e.aux)
    return runtime::Error::failure(
        "depthwise convolution: no second output (the GEMM kernels only)");
  auto i = [](uint64_t v) { return std::to_string(v); };
  std::string s = "// Generated by Kiln: " + describeDepthwise(c) + "\n";
  s += kElementTypeTemplate;
  s += kCommonTemplate;
  s += "\nstruct Cfg {\n";
  s += "  static constexpr int H = " + i(p.h) + ", W = " + i(p.w) +
       ", C = " + i(p.c) + ", O = " + i(p.o) + ", MULT = " + i(p.o / p.c) +
       ", P = " + i(p.p) + ", Q = " + i(p.q) + ";\n";
  s += "  static constexpr int KH = " + i(p.kh) + ", KW = " + i(p.kw) +
       ", SH = " + i(p.strideH) + ", SW = " + i(p.strideW) + ";\n";
  s += "  static constexpr int PH = " + i(p.padH) + ", PW = " + i(p.padW) +
       ", DH = " + i(p.dilationH) + ", DW = " + i(p.dilationW) + ";\n";
  s += "  static constexpr int VEC = " + i(c.vector) +
       ", PIX = " + i(c.pixels) +
       ", THREADS = " + i(kDepthwiseThreads) + ";\n";
  s += "  static constexpr int IN_CODE = " +
       std::string(elementTypeName(p.inputType)) +
       ", OUT_CODE = " + elementTypeName(p.outputType) + ";\n";
  s += "  static constexpr i64 M = " + i(outputPixels(p)) + ";\n};\n\n";
  s += generatedEpilogue(e);
  s += kDepthwiseTemplate;
  s += "\n";
  std::string list;
  for (const KernelParameter &param : depthwiseParameters(e))
    list += std::string(list.empty() ? "" : ", ") +
            (param.name == "C" ? "void *__restrict__ "
                               : "const void *__restrict__ ") +
            param.name;
  s += "extern \"C\" __global__ void __launch_bounds__(" +
       i(kDepthwiseThreads) + ") " + options.name + "(" + list + ") {\n";
  s += generatedEpilogueInit(e);
  s += "  kiln_dw::depthwise(A, B, C, ep);\n}\n";
  return s;
}

runtime::Expected<GemmKernels>
generateDepthwise(const ConvProblem &p, const Epilogue &e,
                  const GenerateOptions &options) {
  return generateDepthwise(p, pickDepthwiseConfig(p), e, options);
}

runtime::Expected<GemmKernels>
generateDepthwise(const ConvProblem &p, const DepthwiseConfig &c,
                  const Epilogue &e, const GenerateOptions &options) {
  runtime::Expected<GemmKernels> kernels =
      specializeDepthwise(p, c, e, options);
  if (!kernels)
    return kernels;
  if (runtime::Error err = compileKernels(*kernels, options.name))
    return err;
  return kernels;
}

runtime::Expected<GemmKernels>
specializeDepthwise(const ConvProblem &p, const DepthwiseConfig &c,
                    const Epilogue &e, const GenerateOptions &options) {
  if (options.smVersion != 80 && options.smVersion != 90)
    return runtime::Error::failure(
        "depthwise kernels target sm_80 or sm_90, not sm_" +
        std::to_string(options.smVersion));
  runtime::Expected<std::string> source =
      generateDepthwiseSource(p, c, e, options);
  if (!source)
    return source.takeError();
  GemmKernels result;
  result.source = source.take();
  result.nvrtcOptions = templateNvrtcOptions(options.smVersion, false);
  GemmKernel kernel;
  kernel.name = options.name;
  kernel.block = {kDepthwiseThreads, 1, 1};
  // Threads: (N P) rows x ceil(Q / PIX) pixel groups x O / VEC vectors;
  // per output pixel (M = N P Q) that is the factor below over Q.
  uint64_t perRow =
      (p.q + c.pixels - 1) / c.pixels * (p.o / c.vector);
  kernel.gridXPerM = perRow;
  kernel.gridXDivisor = p.q * kDepthwiseThreads;
  kernel.grid = {1, 1, 1};
  kernel.grid = kernel.gridFor(outputPixels(p));
  kernel.params = depthwiseParameters(e);
  result.kernels.push_back(std::move(kernel));
  return result;
}

} // namespace kiln::contraction
