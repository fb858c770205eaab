//===- Progress.h - A compile's progress line on a terminal -----*- C++ -*-===//
//
// kilnc shows what it is doing when a compile runs long: on a terminal
// (stderr is a tty) once it has run for 2 seconds, one line rewritten in
// place: the elapsed time, the phase, the pass and, while ptxas assembles,
// the kernels assembled out of the total. --progress=always also prints, as
// lines from the start when stderr is not a terminal, each phase and the
// kernel count in tenths (for logs and tests);
// --progress=never is silent. The line is erased when the compile ends.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILNC_PROGRESS_H
#define KILN_TOOLS_KILNC_PROGRESS_H

#include "mlir/Pass/PassInstrumentation.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::kilnc {

enum class ProgressMode { Auto, Always, Never };

class Progress {
public:
  explicit Progress(ProgressMode mode);
  ~Progress();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

  /// A new phase ("import", "graph", "ptxas", ...); clears the step.
  void setPhase(const std::string &phase);
  /// What runs inside the phase (a pass's flag).
  void setStep(const std::string &step);
  /// `done` of `total` kernels assembled.
  void setKernels(size_t done, size_t total);
  /// Erases the line (also done by the destructor).
  void finish();

private:
  void tick();
  void showLocked(bool force);

  ProgressMode mode;
  bool enabled = false;
  bool interactive = false;
  std::chrono::steady_clock::time_point start;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool shown = false;
  std::string phase, step, lastLine;
  std::thread ticker;
};

/// Reports each pass a pass manager runs to `progress`.
class ProgressInstrumentation : public mlir::PassInstrumentation {
public:
  explicit ProgressInstrumentation(Progress &progress) : progress(progress) {}
  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override;

private:
  Progress &progress;
};

} // namespace kiln::kilnc

#endif // KILN_TOOLS_KILNC_PROGRESS_H
