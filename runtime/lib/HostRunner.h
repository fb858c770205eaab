//===- HostRunner.h - A session's host storage and host steps ---*- C++ -*-===//
//
// Internal to runtime/lib: what Session keeps for an artifact with a
// `host-steps` section. It holds the host inputs the user bound and, during
// and after a run, every host value (strings included), and runs the steps
// of one phase at a time. The session moves numeric values across: into
// the device inputs the host computes, out of the device outputs it reads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_HOSTRUNNER_H
#define KILN_RUNTIME_LIB_HOSTRUNNER_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/HostSteps.h"

#include <map>
#include <string>

namespace kiln::runtime {

class HostRunner {
public:
  explicit HostRunner(const HostProgram &program) : program(program) {}

  /// Binds host input `name` (checked against its declaration).
  Error bind(std::string_view name, HostValue value);
  /// Starts a run: every input must be bound; the values are reset to the
  /// bound inputs and the constants.
  Error start();
  /// Runs the steps of `phase`, in order.
  Error runPhase(HostPhase phase);
  /// A value of the current run (or the last one).
  const HostValue *find(std::string_view name) const;
  void set(const std::string &name, HostValue value) {
    values[name] = std::move(value);
  }
  bool hasRun() const { return ran; }
  void markRun() { ran = true; }

private:
  const HostProgram &program;
  std::map<std::string, HostValue, std::less<>> bound;
  std::map<std::string, HostValue, std::less<>> values;
  bool ran = false;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_HOSTRUNNER_H
