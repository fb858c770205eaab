//===- SetWhileKernel.cpp - The embedded kiln_set_while cubins ------------===//

#include "SetWhileKernel.h"

namespace kiln::runtime {

namespace {
// kSetWhileCubinTable: {sm, bytes, size} per cubin, then {0, nullptr, 0}.
#include "SetWhileCubins.inc"
} // namespace

std::vector<SetWhileCubin> setWhileCubins() {
  std::vector<SetWhileCubin> cubins;
  for (const SetWhileCubin *cubin = kSetWhileCubinTable; cubin->data; ++cubin)
    cubins.push_back(*cubin);
  return cubins;
}

const SetWhileCubin *findSetWhileCubin(uint32_t computeCapability) {
  // SASS runs on later minors of its own major only (sm_80 on sm_86 and
  // sm_89; sm_90 on sm_90 alone).
  const SetWhileCubin *best = nullptr;
  for (const SetWhileCubin *cubin = kSetWhileCubinTable; cubin->data; ++cubin)
    if (cubin->sm / 10 == computeCapability / 10 &&
        cubin->sm <= computeCapability && (!best || cubin->sm > best->sm))
      best = cubin;
  return best;
}

} // namespace kiln::runtime
