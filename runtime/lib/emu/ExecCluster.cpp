//===- ExecCluster.cpp - mapa (sm_90 thread-block clusters) ---------------===//
//
// Blocks of a cluster share their shared memory (distributed shared
// memory). The emulator runs clusters of one block (LaunchSpec::cluster
// 1 x 1 x 1; runKernel refuses larger ones), where the only block a
// shared::cluster address can name is the block itself: `mapa` to rank 0
// returns the address it was given (a shared::cta address is a valid
// shared::cluster address of the executing block, PTX ISA "State spaces")
// and any other rank faults.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"

namespace kiln::runtime::emu::detail {

bool BlockRunner::mapAddress(unsigned w, uint32_t pc, const Instruction &in,
                             uint32_t exec) {
  uint64_t *r = warpRegs(w);
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  const uint64_t *rank = r + static_cast<size_t>(in.src[1]) * 32;
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  uint32_t blocks = spec.cluster.x * spec.cluster.y * spec.cluster.z;
  uint32_t own = clusterRank(ctaid);
  for (uint32_t m = exec; m; m &= m - 1) {
    unsigned l = __builtin_ctz(m);
    uint64_t address = a[l];
    uint32_t target = static_cast<uint32_t>(rank[l]);
    if (target >= blocks)
      return fault(
          w, l, pc,
          fmt::format("mapa to block {} of a cluster of {}", target, blocks));
    uint64_t offset = address;
    if (in.space == Space::Generic) {
      if (address < kSharedWindow || address >= kSharedWindow + sharedBytes)
        return fault(w, l, pc,
                     fmt::format("mapa of generic address {:#x}, which is not "
                                 "in this block's shared memory",
                                 address));
      offset = address - kSharedWindow;
    }
    if (offset >= sharedBytes)
      return fault(w, l, pc,
                   fmt::format("mapa of shared offset {:#x}, outside the "
                               "block's {} bytes",
                               offset, sharedBytes));
    if (target != own)
      return fault(w, l, pc,
                   fmt::format("mapa to block {} of the cluster: clusters of "
                               "more than one block are not emulated",
                               target));
    d[l] = in.type == Type::U32 ? address & 0xffffffffu : address;
  }
  return true;
}

} // namespace kiln::runtime::emu::detail
