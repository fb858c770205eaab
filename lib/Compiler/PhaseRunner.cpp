//===- PhaseRunner.cpp - Runs a compile's pass managers with its hooks ----===//

#include "PhaseRunner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace kiln {

PhaseRunner::PhaseRunner(MLIRContext &context, const CompileHooks &hooks)
    : context(context), hooks(hooks) {}

void PhaseRunner::captureDiagnostics() {
  if (capture)
    return;
  capture.emplace(&context, [this](Diagnostic &diag) {
    if (firstError.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      firstError = diag.str();
    // Warnings (a tune cache ignored, a candidate rejected) are shown.
    if (diag.getSeverity() == DiagnosticSeverity::Warning && hooks.warning)
      hooks.warning(diag.str());
    return success();
  });
}

void PhaseRunner::startPhase(llvm::StringRef name) {
  if (hooks.phaseStarted)
    hooks.phaseStarted(name);
}

std::optional<TimingScope> PhaseRunner::timePhase(llvm::StringRef name) {
  if (!hooks.timing)
    return std::nullopt;
  return hooks.timing->nest(name);
}

LogicalResult PhaseRunner::run(PassManager &pm, ModuleOp module) {
  if (hooks.configure && failed(hooks.configure(pm)))
    return failure();
  return pm.run(module);
}

LogicalResult PhaseRunner::runPhases(ModuleOp module, Phase first, Phase last,
                                     const PipelineOptions &options,
                                     llvm::StringRef prefix) {
  captureDiagnostics();
  for (Phase phase : kAllPhases) {
    if (phase < first || phase > last)
      continue;
    std::string name = (prefix + phaseName(phase)).str();
    PassManager pm = PassManager::on<ModuleOp>(&context);
    addPhase(pm, phase, options);
    startPhase(name);
    std::optional<TimingScope> timing = timePhase(name);
    if (timing)
      pm.enableTiming(*timing);
    if (failed(run(pm, module)))
      return failure();
  }
  return success();
}

std::string PhaseRunner::diagnosticOr(llvm::StringRef fallback) const {
  return firstError.empty() ? fallback.str() : firstError;
}

} // namespace kiln
