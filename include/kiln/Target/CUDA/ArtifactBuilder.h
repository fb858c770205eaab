//===- ArtifactBuilder.h - Compiled module to .kiln artifact ----*- C++ -*-===//
//
// Reads the module the ptx phase leaves (a host function of buffers and
// gpu.launch_func ops, gpu.binary kernels, memref.global weights) and packs
// it into the runtime's Artifact: signature, weights, kernels with launch
// geometry and parameter layout, the launch list, and a static memory plan in
// which buffers whose lifetimes do not overlap share arena space.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_ARTIFACTBUILDER_H
#define KILN_TARGET_CUDA_ARTIFACTBUILDER_H

#include "kiln/Target/CUDA/KernelCache.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace kiln {

struct ArtifactOptions {
  /// The host function to pack (`main`; a training compile packs
  /// `train_step` and `eval` one at a time).
  std::string function = "main";
  /// The GPU architecture the PTX was generated for ("sm_90").
  std::string target = "sm_90";
  /// Recorded in the artifact, for reproducing the build.
  std::string compilerOptions;
  /// ptxas to assemble each kernel into a cubin; empty skips cubins.
  std::string ptxasPath;
  /// Initializers the importer compiled in as constants
  /// (ImportOptions::inlinedInitializers), recorded for weight binding.
  std::vector<std::pair<std::string, mlir::DenseElementsAttr>>
      inlinedInitializers;
  /// Called after each kernel is assembled by ptxas (done of total), for a
  /// progress display (from the threads that assemble: it must be
  /// thread-safe; calls are serialised).
  std::function<void(size_t done, size_t total)> onKernelAssembled;
  /// Where NVRTC's PTX and ptxas's cubins are kept between compiles; null
  /// (or a cache that is off): every kernel is compiled.
  KernelCache *kernelCache = nullptr;
  /// When set, the template kernels' NVRTC compiles and ptxas are timed
  /// under it (kilnc --time-passes).
  mlir::TimingScope *timing = nullptr;
};

struct ArtifactStats {
  size_t kernels = 0;
  /// Template kernels: binaries, distinct sources, sources whose PTX came
  /// from the kernel cache; ptxas: modules assembled, and cubins that came
  /// from the cache.
  size_t templateBinaries = 0, templateSources = 0, templateCached = 0;
  size_t assembled = 0, assembledCached = 0;
  uint64_t arenaBytes = 0;
  uint64_t naiveArenaBytes = 0;
  uint64_t weightBytes = 0;
};

/// A packing failure the machine causes, not the model or Kiln: a temporary
/// file for ptxas that cannot be created or written (a full temporary
/// directory), or a ptxas that fails without a message. kilnc reports it
/// with exit status 1 (docs/reliability.md "Faults").
class EnvironmentError : public llvm::ErrorInfo<EnvironmentError> {
public:
  static char ID;
  explicit EnvironmentError(std::string message)
      : message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  std::string message;
};

/// Builds the artifact of `module` (after the ptx phase): compiles the
/// template kernels' sources first (TemplateEmission.h; the module's
/// gpu.binary objects become PTX), then packs it, running ptxas on distinct
/// kernels in parallel through the kernel cache. Errors name the host op or
/// kernel that could not be packed.
llvm::Expected<runtime::Artifact> buildArtifact(mlir::ModuleOp module,
                                                const ArtifactOptions &options,
                                                ArtifactStats *stats = nullptr);

/// The registers, static shared memory and stack frame `ptxas -v` reported
/// for the entry `entry` in `log`, or nothing when the log does not say.
std::optional<runtime::KernelResources>
parsePtxasResources(llvm::StringRef log, llvm::StringRef entry);

/// The ptxas found at build time or through $KILN_PTXAS, or empty.
std::string defaultPtxasPath();

} // namespace kiln

#endif // KILN_TARGET_CUDA_ARTIFACTBUILDER_H
