//===- TargetInfo.cpp - The compiler's view of the target table ------------===//
//
// One TargetInfo per entry of the built-in table, made once.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/TargetInfo.h"

#include <algorithm>
#include <vector>

namespace kiln {

namespace {
const std::vector<TargetInfo> &allTargets() {
  static const std::vector<TargetInfo> targets = [] {
    std::vector<TargetInfo> list;
    for (const runtime::GpuTarget &figures : runtime::builtinTargetTable())
      list.emplace_back(figures);
    return list;
  }();
  return targets;
}
} // namespace

const TargetInfo *TargetInfo::forChip(std::string_view chip) {
  uint32_t sm = runtime::smOfTarget(chip);
  for (const TargetInfo &target : allTargets())
    if (sm && target.sm() == sm)
      return &target;
  return nullptr;
}

const TargetInfo &TargetInfo::forSm(uint32_t sm) {
  const TargetInfo *best = nullptr, *smallest = nullptr;
  for (const TargetInfo &target : allTargets()) {
    if (!smallest || target.sm() < smallest->sm())
      smallest = &target;
    if (target.sm() <= sm && (!best || target.sm() > best->sm()))
      best = &target;
  }
  // builtinTargetTable() is never empty (ProfileTest checks it).
  return best ? *best : *smallest;
}

std::string TargetInfo::supportedChips() {
  std::vector<uint32_t> sms;
  for (const TargetInfo &target : allTargets())
    if (std::find(sms.begin(), sms.end(), target.sm()) == sms.end())
      sms.push_back(target.sm());
  std::sort(sms.begin(), sms.end());
  std::string list;
  for (uint32_t sm : sms)
    list += (list.empty() ? "sm_" : ", sm_") + std::to_string(sm);
  return list;
}

} // namespace kiln
