//===- Progress.cpp - A compile's progress line on a terminal -------------===//
//
// A ticker thread redraws the line every 250 ms so the elapsed time moves
// during a long pass (NVRTC compiling template kernels, say); the compile
// thread only updates the state under the mutex.
//
//===----------------------------------------------------------------------===//

#include "Progress.h"

#include "mlir/Pass/Pass.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace std::chrono;

namespace kiln::kilnc {

namespace {
/// Compiles shorter than this show nothing on a terminal.
constexpr auto kQuietTime = seconds(2);
constexpr auto kRedrawInterval = milliseconds(250);
} // namespace

Progress::Progress(ProgressMode mode)
    : mode(mode), start(steady_clock::now()) {
  interactive = llvm::sys::Process::StandardErrIsDisplayed();
  enabled = mode == ProgressMode::Always ||
            (mode == ProgressMode::Auto && interactive);
  if (enabled && interactive)
    ticker = std::thread([this] { tick(); });
}

Progress::~Progress() { finish(); }

void Progress::setPhase(const std::string &newPhase) {
  std::lock_guard<std::mutex> lock(mutex);
  phase = newPhase;
  step.clear();
  showLocked(false);
}

// Lines for logs (not a terminal) follow phases and the kernel count in
// tenths, not every pass: passes on nested ops run in parallel and would
// interleave.
void Progress::setStep(const std::string &newStep) {
  std::lock_guard<std::mutex> lock(mutex);
  step = newStep;
  if (interactive)
    showLocked(false);
}

void Progress::setKernels(size_t done, size_t total) {
  std::lock_guard<std::mutex> lock(mutex);
  step = std::to_string(done) + "/" + std::to_string(total) + " kernels";
  if (interactive || done == total ||
      (done * 10 / total) != ((done - 1) * 10 / total))
    showLocked(false);
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping)
      return;
    stopping = true;
    if (shown && interactive)
      llvm::errs() << "\r\033[K";
    llvm::errs().flush();
  }
  wake.notify_all();
  if (ticker.joinable())
    ticker.join();
}

void Progress::tick() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, kRedrawInterval);
    if (!stopping)
      showLocked(true);
  }
}

/// On a terminal: the line, redrawn in place (the elapsed time changes, so
/// `force` redraws it unchanged otherwise). Elsewhere: a line per change.
void Progress::showLocked(bool force) {
  if (!enabled || stopping)
    return;
  auto elapsed = steady_clock::now() - start;
  if (interactive && mode == ProgressMode::Auto && elapsed < kQuietTime)
    return;
  std::string state = phase + (step.empty() ? "" : ": " + step);
  if (state == lastLine && !force)
    return;
  lastLine = state;
  if (interactive) {
    // Keep to one terminal line: a long pass name is cut.
    std::string text =
        llvm::formatv("kilnc: [{0,5:f1} s] {1}",
                      duration<double>(elapsed).count(), state)
            .str();
    if (text.size() > 79)
      text.resize(79);
    llvm::errs() << "\r\033[K" << text;
  } else {
    llvm::errs() << "kilnc: progress: " << state << "\n";
  }
  llvm::errs().flush();
  shown = true;
}

void ProgressInstrumentation::runBeforePass(mlir::Pass *pass,
                                            mlir::Operation *) {
  // Pass adaptors (the nested pipelines) have no flag and say nothing.
  llvm::StringRef flag = pass->getArgument();
  if (flag.empty())
    return;
  // Where a compile spends its time on contraction-heavy models.
  if (flag == "kiln-match-contractions")
    progress.setStep("kiln-match-contractions (NVRTC: template kernels)");
  else
    progress.setStep(flag.str());
}

} // namespace kiln::kilnc
