//===- Reports.h - What kilnc prints besides IR and artifacts ---*- C++ -*-===//

#ifndef KILN_TOOLS_KILNC_REPORTS_H
#define KILN_TOOLS_KILNC_REPORTS_H

#include "kiln/Compiler/Compiler.h"
#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace kiln::kilnc {

/// --summary: one line of inputs, outputs, op counts by kind, weights.
void printSummary(mlir::ModuleOp module, llvm::raw_ostream &os);
/// --emit=ptx: the PTX text of every kernel module, each under a comment
/// naming it.
void printPtx(mlir::ModuleOp module, llvm::raw_ostream &os);
/// --list-onnx-ops: the importer's handler registry as a Markdown table.
void printOnnxOps(llvm::raw_ostream &os);
/// --stats: kernels and bytes, fused and unfused, arena, weights, a static
/// roofline per kernel on `target`'s figures, the contraction and
/// rematerialisation reports.
void printStats(const CompileStats &stats, const std::string &target,
                llvm::raw_ostream &os);
/// --train --stats: each entry point's kernels, each state tensor, then
/// the activations kept and recomputed and the arena.
void printTrainingStats(const CompileStats &stats,
                        const runtime::Artifact &artifact,
                        llvm::raw_ostream &os);

} // namespace kiln::kilnc

#endif // KILN_TOOLS_KILNC_REPORTS_H
