//===- GemmCompile.cpp - Specialise a GEMM, describe its launches ---------===//
//
// specializeGemm fills the templates in and says how the kernels launch,
// without NVRTC (kiln-match-contractions; the target step compiles the
// source, lib/Target/CUDA/TemplateEmission.cpp); generateGemm also compiles
// it here (the unit tests, the tuner's candidates).
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/Nvrtc.h"

namespace kiln::contraction {

runtime::Error compileKernels(GemmKernels &kernels, const std::string &name) {
  runtime::Expected<nvrtc::CompileResult> compiled =
      nvrtc::compileToPtx(kernels.source, name, kernels.nvrtcOptions);
  if (!compiled)
    return compiled.takeError();
  kernels.compileSeconds = compiled->seconds;
  // One module holds every entry point; each kernel carries all of it, as
  // the artifact keeps one module per kernel.
  for (GemmKernel &kernel : kernels.kernels)
    kernel.ptx = compiled->ptx;
  return runtime::Error::success();
}

runtime::Expected<GemmKernels> generateGemm(const GemmProblem &p,
                                            const GemmConfig &c,
                                            const Epilogue &e,
                                            const GenerateOptions &options) {
  runtime::Expected<GemmKernels> kernels = specializeGemm(p, c, e, options);
  if (!kernels)
    return kernels;
  if (runtime::Error err = compileKernels(*kernels, options.name))
    return err;
  return kernels;
}

runtime::Expected<GemmKernels> specializeGemm(const GemmProblem &p,
                                              const GemmConfig &c,
                                              const Epilogue &e,
                                              const GenerateOptions &options) {
  if (options.smVersion != 80 && options.smVersion != 90)
    return runtime::Error::failure("contraction kernels target sm_80 or sm_90, "
                                   "not sm_" +
                                   std::to_string(options.smVersion));
  // wgmma and setmaxnreg exist only in sm_90a (the arch-specific ISA).
  bool wgmma = isWgmma(c.family);
  if (wgmma && options.smVersion != 90)
    return runtime::Error::failure("GEMM " + c.describe() +
                                   ": wgmma needs sm_90, not sm_" +
                                   std::to_string(options.smVersion));
  // fp8 mma.sync exists from sm_89 (Ada); of Kiln's targets, sm_90 only.
  if (isFp8(c.family) && options.smVersion < 89)
    return runtime::Error::failure("GEMM " + c.describe() +
                                   ": fp8 tensor cores need sm_89 or later, "
                                   "not sm_" +
                                   std::to_string(options.smVersion));
  runtime::Expected<std::string> source = generateGemmSource(p, c, e, options);
  if (!source)
    return source.takeError();
  GemmPlan plan = planGemm(p, c);
  GemmKernels result;
  result.config = c;
  result.source = source.take();
  result.nvrtcOptions = templateNvrtcOptions(options.smVersion, wgmma);

  GemmKernel main;
  main.name = options.name;
  main.block = plan.block;
  main.grid = plan.grid;
  main.gridXPerM = 1;
  main.gridXDivisor = c.blockM;
  main.dynamicSharedBytes = plan.sharedBytes;
  main.params = gemmMainParameters(p, e, c);
  result.kernels.push_back(std::move(main));

  if (c.splitK > 1) {
    result.workspaceBytes = uint64_t(c.splitK) * p.batch * p.m * p.n * 4;
    // One semaphore per output tile: the grid without its splits.
    result.semaphoreCount =
        uint64_t(plan.grid.x) * plan.grid.y * (plan.grid.z / c.splitK);
  }
  return result;
}

} // namespace kiln::contraction
