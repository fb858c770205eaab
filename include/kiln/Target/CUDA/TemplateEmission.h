//===- TemplateEmission.h - Template kernels compiled at serialisation -*- C++ -*-===//
//
// kiln-match-contractions leaves each template kernel as its CUDA C++
// source in a gpu.binary (an `offload` object with the `kiln.cuda_source`
// property and the NVRTC options); the target step compiles them here, as
// IREE's HAL target backends serialise executables: every distinct source
// once, in parallel on the MLIR context's thread pool, through the
// persistent kernel cache (KernelCache.h). The objects become the PTX
// (`assembly`) objects the artifact builder reads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_TEMPLATEEMISSION_H
#define KILN_TARGET_CUDA_TEMPLATEEMISSION_H

#include "kiln/Target/CUDA/ContractionKernels.h"
#include "kiln/Target/CUDA/KernelCache.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace kiln {

/// The entry name a template is specialised with before it has a name of
/// its own (its gpu.binary's), so that identical kernels have identical
/// sources.
inline constexpr llvm::StringLiteral kEntryPlaceholder = "kiln_template_entry";

/// What makes two specialised template kernels one: their source and NVRTC
/// options (kernels with equal keys share one gpu.binary).
std::string templateKernelKey(const contraction::GemmKernels &kernels);

/// Gives kernels specialised with kEntryPlaceholder the entry name `name`,
/// in the source and in each kernel's name.
void nameTemplateKernels(contraction::GemmKernels &kernels,
                         llvm::StringRef name);

/// A gpu.binary object holding a template kernel's source, for the target
/// step to compile with `nvrtcOptions` for `chip`.
mlir::gpu::ObjectAttr
templateSourceObject(mlir::MLIRContext *ctx, llvm::StringRef chip,
                     llvm::StringRef source,
                     llvm::ArrayRef<std::string> nvrtcOptions);

/// Whether `object` is one of those.
bool isTemplateSource(mlir::gpu::ObjectAttr object);

struct TemplateEmissionStats {
  /// Template binaries, distinct sources among them, and how many of those
  /// came from the kernel cache.
  size_t binaries = 0, distinct = 0, cached = 0;
  /// NVRTC's own time, summed over the compiles that ran.
  double nvrtcSeconds = 0;
};

/// Compiles every template source object in `module` to PTX (distinct
/// sources once, in parallel, through `cache`, which may be off) and
/// replaces it with the PTX. An error names the kernel NVRTC refused, or
/// says that NVRTC is missing.
llvm::Error emitTemplateKernels(mlir::ModuleOp module, KernelCache &cache,
                                TemplateEmissionStats *stats = nullptr);

} // namespace kiln

#endif // KILN_TARGET_CUDA_TEMPLATEEMISSION_H
