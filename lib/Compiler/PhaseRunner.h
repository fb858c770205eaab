//===- PhaseRunner.h - Runs a compile's pass managers with its hooks -*- C++ -*-===//
//
// Internal to lib/Compiler. One pass manager per phase, so that progress
// and timing name the phase; each goes through CompileHooks::configure
// (kilnc: progress, --mlir-print-ir-*, crash reproducers) before it runs.
// While it captures, the first error diagnostic is kept for the one-line
// message and warnings go to CompileHooks::warning.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_PHASERUNNER_H
#define KILN_LIB_COMPILER_PHASERUNNER_H

#include "kiln/Compiler/Compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/Timing.h"

#include <optional>
#include <string>

namespace kiln {

/// A CompileError of `kind` (Compiler.cpp).
llvm::Error compileError(CompileError::Kind kind, const llvm::Twine &message);

class PhaseRunner {
public:
  PhaseRunner(mlir::MLIRContext &context, const CompileHooks &hooks);

  /// From now on, keep the first error diagnostic and pass warnings on.
  void captureDiagnostics();
  /// Tells the caller a phase starts (progress).
  void startPhase(llvm::StringRef name);
  /// A timer for `name` under the caller's root scope, if it times.
  std::optional<mlir::TimingScope> timePhase(llvm::StringRef name);
  /// Configures `pm` through the hooks and runs it on `module`.
  mlir::LogicalResult run(mlir::PassManager &pm, mlir::ModuleOp module);
  /// Runs the phases `first`..`last` on `module`, one pass manager each,
  /// named `prefix` + the phase's name.
  mlir::LogicalResult runPhases(mlir::ModuleOp module, Phase first, Phase last,
                                const PipelineOptions &options,
                                llvm::StringRef prefix = "");
  /// The first error diagnostic, or `fallback` when there was none.
  std::string diagnosticOr(llvm::StringRef fallback) const;
  mlir::MLIRContext &getContext() { return context; }
  const CompileHooks &getHooks() const { return hooks; }

private:
  mlir::MLIRContext &context;
  const CompileHooks &hooks;
  std::string firstError;
  std::optional<mlir::ScopedDiagnosticHandler> capture;
};

} // namespace kiln

#endif // KILN_LIB_COMPILER_PHASERUNNER_H
