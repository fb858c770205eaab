//===- TrainingCompile.h - --train: two entry points, one artifact -*- C++ -*-===//
//
// Internal to lib/Compiler. After kiln-optimizer has built @train_step and
// @eval, each is compiled on its own through the same phases as inference
// (layout, precision, fusion, kernels), with the caller's hooks, and packed
// by buildArtifact; runtime::combineEntryPoints joins the two with the
// persistent state (the flat trainable weights with their initial values
// and ONNX names, the optimizer state, the step counter).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_TRAININGCOMPILE_H
#define KILN_LIB_COMPILER_TRAININGCOMPILE_H

#include "PhaseRunner.h"

namespace kiln {

/// kilnc --train on `module` as imported (or a .mlir module with
/// @train_grad): the gradients, kiln-optimizer, then (unless
/// options.stopAfter is Phase::Kiln, which returns the module after
/// kiln-optimizer) the training artifact.
llvm::Expected<CompileResult>
compileTraining(const CompileOptions &options,
                mlir::OwningOpRef<mlir::ModuleOp> module,
                const ArtifactOptions &artifactOptions, PhaseRunner &runner);

} // namespace kiln

#endif // KILN_LIB_COMPILER_TRAININGCOMPILE_H
