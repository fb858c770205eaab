//===- ProfileSupport.h - What the profile's files share --------*- C++ -*-===//
//
// Internal to runtime/lib: helpers ProfileReport.cpp and ProfileJson.cpp
// both use.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_PROFILESUPPORT_H
#define KILN_RUNTIME_LIB_PROFILESUPPORT_H

#include "kiln/runtime/Profile.h"

namespace kiln::runtime {

/// The DRAM-traffic estimate: distinct sectors read and written x 32.
uint64_t dramBytesOf(const LaunchCounters &counters);

/// Sets `report.total` to the sum of its kernels (estimates and measured
/// times only when every kernel has one).
void sumTotal(ProfileReport &report);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_PROFILESUPPORT_H
