//===- Sizes.h - kiln-run --sizes: sizes of symbolic dims -------*- C++ -*-===//
//
// `--sizes N=5` runs an artifact compiled with `kilnc --dim N=1..16` at
// N = 5 (random inputs of that size); `--bench R --sizes N=1,8,16` times
// each size and prints one line per size. docs/runtime.md "Sizes at run
// time".
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TOOLS_KILN_RUN_SIZES_H
#define KILN_RUNTIME_TOOLS_KILN_RUN_SIZES_H

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SymbolicDims.h"

#include <string>
#include <vector>

namespace kiln::runtime::tools {

/// One --sizes flag: a symbol and the values to run it at.
struct SizeFlag {
  std::string symbol;
  std::vector<int64_t> values;
};

/// Parses "N=1,8,32" (values at least 1).
Expected<SizeFlag> parseSizeFlag(const std::string &text);

/// The runs --sizes asks for: one SymbolSizes per run (the compiled sizes
/// where a symbol is not given). At most one symbol may take several
/// values. Errors name the unknown symbol and list the artifact's.
Expected<std::vector<SymbolSizes>>
sizesToRun(const Artifact &artifact, const std::vector<SizeFlag> &flags);

/// "N=8" or "N=8,S=64": the values of every symbol, for the sweep's lines.
std::string describeSizes(const Artifact &artifact, const SymbolSizes &sizes);

} // namespace kiln::runtime::tools

#endif // KILN_RUNTIME_TOOLS_KILN_RUN_SIZES_H
