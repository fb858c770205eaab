//===- FileIO.h - Atomic file writes for tools ------------------*- C++ -*-===//
//
// The runtime's one way to write a file (runtime/lib/FileIO.cpp): a
// temporary file beside the destination, fsync, rename. A process killed at
// any point leaves the previous file as it was, an error leaves no partial
// file, and temporaries left by killed writers are removed by the next
// writer of the same destination (docs/reliability.md "Faults").
//
// Stability: internal (for the tools; runtime/lib/Support.h declares the
// same function for the runtime's own sources).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_FILEIO_H
#define KILN_RUNTIME_FILEIO_H

#include "kiln/runtime/Error.h"

#include <cstddef>
#include <string>

namespace kiln::runtime {

/// Writes `size` bytes to `path` atomically. Errors name the file and the
/// system's reason ("cannot write 'x.kiln': File too large").
Error writeFileAtomically(const std::string &path, const void *data,
                          size_t size);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_FILEIO_H
