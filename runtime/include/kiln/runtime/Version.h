//===- Version.h - What this build of Kiln is -------------------*- C++ -*-===//
//
// The Kiln version (project(VERSION) in the top-level CMakeLists.txt, the one
// place it is set), the git commit the build was configured from, and the
// CUDA headers it was built against. `kilnc --version` and `kiln-run
// --version` print these. Stability: stable (as Runtime.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_VERSION_H
#define KILN_RUNTIME_VERSION_H

#include <string>

namespace kiln::runtime {

struct BuildInfo {
  /// "0.1.0".
  const char *version;
  /// The abbreviated commit hash of HEAD when CMake last configured (a new
  /// commit reconfigures); "unknown" when not built from a git checkout.
  const char *gitCommit;
  /// "13.0" from the CUDA toolkit's cuda.h, or "none" when the runtime was
  /// built without it (then the cuda device reports that it was not built).
  const char *cudaVersion;
};

/// This build's version facts.
const BuildInfo &buildInfo();

/// "<tool> <version> (commit <hash>)".
std::string versionLine(const char *tool);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_VERSION_H
