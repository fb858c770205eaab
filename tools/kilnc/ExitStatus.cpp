//===- ExitStatus.cpp - kilnc's errors, warnings and exit statuses --------===//

#include "ExitStatus.h"

#include "Progress.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <csignal>
#include <unistd.h>

namespace kiln::kilnc {

namespace {

constexpr const char *kReportBug =
    "this is a Kiln bug: please report it with the model and the command line";

/// The compile's progress line, erased before a message is printed (on a
/// terminal the message would otherwise continue the line).
Progress *progressLine = nullptr;

void eraseProgress() {
  if (progressLine)
    progressLine->finish();
}

/// Runs in a signal handler: only async-signal-safe calls.
void exitOnCrashSignal(void *) {
  static const char message[] = "kilnc: internal error: crashed (this is a "
                                "Kiln bug: please report it with the model "
                                "and the command line)\n";
  ssize_t ignored = ::write(2, message, sizeof(message) - 1);
  (void)ignored;
  ::_exit(kExitInternalError);
}

void exitOnFatalError(void *, const char *reason, bool) {
  llvm::errs() << "kilnc: internal error: " << reason << " (" << kReportBug
               << ")\n";
  llvm::errs().flush();
  // Removes temporary output files, as the signal handlers do.
  llvm::sys::RunInterruptHandlers();
  ::_exit(kExitInternalError);
}

} // namespace

int error(const llvm::Twine &message) {
  eraseProgress();
  llvm::errs() << "kilnc: error: " << message << "\n";
  return kExitUserError;
}

void warning(const llvm::Twine &message) {
  eraseProgress();
  llvm::errs() << "kilnc: warning: " << message << "\n";
}

int internalError(const llvm::Twine &message) {
  eraseProgress();
  llvm::errs() << "kilnc: internal error: " << message << " (" << kReportBug
               << ")\n";
  return kExitInternalError;
}

void setProgressLine(Progress *progress) { progressLine = progress; }

void installCrashHandlers() {
  llvm::setBugReportMsg(
      "PLEASE report this Kiln bug with the model and the command line.\n");
  // After InitLLVM's handler, which prints the stack trace.
  llvm::sys::AddSignalHandler(exitOnCrashSignal, nullptr);
  llvm::install_fatal_error_handler(exitOnFatalError);
  // A write past the file-size limit (ulimit -f) is a write error, reported
  // with the file's name like a full disk, not a crash: LLVM's handlers
  // (just installed) count SIGXFSZ as one, so it is ignored and write()
  // returns EFBIG instead (docs/reliability.md "Faults").
  std::signal(SIGXFSZ, SIG_IGN);
}

} // namespace kiln::kilnc
