//===- TrainingCompile.h - kilnc --train: two entry points, one artifact -===//
//
// After kiln-optimizer has built @train_step and @eval, each is compiled on
// its own by the ordinary pipeline (the same layout, precision, fusion and
// kernel passes as inference) and packed by buildArtifact; the two
// artifacts are joined by runtime::combineEntryPoints with the persistent
// state (the flat trainable weights with their initial values and ONNX
// names, the optimizer state, the step counter).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILNC_TRAININGCOMPILE_H
#define KILN_TOOLS_KILNC_TRAININGCOMPILE_H

#include "kiln/Pipelines/Pipelines.h"
#include "kiln/Target/CUDA/ArtifactBuilder.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace kiln {

/// Parses `--optimizer=NAME[:key=value,...]` into kiln-optimizer's textual
/// options ("optimizer=adamw lr=0.001 weight-decay=0.01"); keys may use
/// '_' or '-'. Errors name the bad key.
llvm::Expected<std::string> parseOptimizerSpec(llvm::StringRef spec,
                                               double gradClip);

/// Compiles a module that kiln-optimizer has already run on into a
/// training artifact. The module is consumed (cloned per entry point).
/// `diagnostic` receives the first compiler error.
llvm::Expected<runtime::Artifact>
compileTrainingArtifact(mlir::ModuleOp module, const PipelineOptions &pipeline,
                        const ArtifactOptions &artifact);

} // namespace kiln

#endif // KILN_TOOLS_KILNC_TRAININGCOMPILE_H
