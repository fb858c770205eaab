//===- Flags.h - kilnc's command line, read into CompileOptions -*- C++ -*-===//
//
// Flags.cpp declares kilnc's own flags (input, output, training,
// diagnostics); PipelineFlags.cpp declares one flag per pipeline option,
// from include/kiln/Pipelines/PipelineOptions.def. Both are read into the
// compile library's CompileOptions here, so kilnc.cpp only drives.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILNC_FLAGS_H
#define KILN_TOOLS_KILNC_FLAGS_H

#include "Progress.h"

#include "kiln/Compiler/Compiler.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::kilnc {

/// What kilnc writes: a compilation phase's IR, or the artifact.
enum class Output { Kiln, Graph, Linalg, Gpu, Llvm, Ptx, Artifact };

/// --crash-for-testing: fail as a Kiln bug would (tests of exit status 2).
enum class CrashKind { None, Abort, Fatal };

/// The flags that shape what kilnc does besides the compile.
struct DriverFlags {
  std::string inputFile;
  std::string outputFile;
  Output output = Output::Kiln;
  /// Whether --emit was given (not inferred from -o).
  bool emitGiven = false;
  bool summary = false;
  bool printWeights = false;
  bool listOnnxOps = false;
  bool printPipeline = false;
  ProgressMode progress = ProgressMode::Auto;
  CrashKind crashForTesting = CrashKind::None;
};

/// Reads the parsed command line. `stats` and `timePasses` are kilnc's own
/// flags that main() takes out before LLVM's parser sees them.
llvm::Error readFlags(DriverFlags &driver, CompileOptions &compile,
                      bool stats);

/// The pipeline flags of PipelineOptions.def into `options`.
void readPipelineFlags(PipelineOptions &options);

/// Replaces deprecated flag names (PipelineOptions.def's
/// KILN_DEPRECATED_FLAG) by their new ones, with a warning each.
std::vector<std::string>
rewriteDeprecatedFlags(llvm::ArrayRef<std::string> args,
                       const std::function<void(const llvm::Twine &)> &warn);

/// Gives LLVM's options that kilnc reads itself (--stats, --time-passes)
/// Kiln's meaning in --help, lists MLIR's pass-manager options
/// (--mlir-print-ir-*, crash reproducers) under --help-hidden, and hides
/// every other option that is not Kiln's.
void describeOptions();

} // namespace kiln::kilnc

#endif // KILN_TOOLS_KILNC_FLAGS_H
