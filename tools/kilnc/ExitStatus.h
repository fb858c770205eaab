//===- ExitStatus.h - kilnc's errors, warnings and exit statuses -*- C++ -*-===//
//
// Exit status 0 success, 1 the input, options or environment at fault, 2 a
// Kiln bug (a crash, an LLVM fatal error, ptxas rejecting generated PTX);
// docs/runtime.md "Exit status". Every message is one line on stderr,
// after the progress line is erased.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILNC_EXITSTATUS_H
#define KILN_TOOLS_KILNC_EXITSTATUS_H

#include "llvm/ADT/Twine.h"

namespace kiln::kilnc {

class Progress;

enum ExitStatus : int {
  kExitSuccess = 0,
  /// The input or the options are at fault: a bad or unsupported model, a
  /// bad flag, a file that cannot be read or written.
  kExitUserError = 1,
  /// Kiln is at fault: a crash, an LLVM fatal error, ptxas rejecting the
  /// PTX Kiln generated, an artifact Kiln built that does not verify.
  kExitInternalError = 2,
};

/// "kilnc: error: MESSAGE"; returns kExitUserError.
int error(const llvm::Twine &message);
/// "kilnc: warning: MESSAGE".
void warning(const llvm::Twine &message);
/// "kilnc: internal error: MESSAGE (this is a Kiln bug ...)"; returns
/// kExitInternalError.
int internalError(const llvm::Twine &message);

/// The line to erase before a message (none: nullptr).
void setProgressLine(Progress *progress);

/// Crashes and LLVM fatal errors exit with status 2 after LLVM's stack
/// trace.
void installCrashHandlers();

} // namespace kiln::kilnc

#endif // KILN_TOOLS_KILNC_EXITSTATUS_H
