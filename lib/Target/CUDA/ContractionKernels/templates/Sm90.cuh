//===- Sm90.cuh - mbarrier, async-proxy and wgmma helpers (sm_90a) --------===//
//
// What the warp-specialised sm_90a kernels (GemmWgmma.cuh, AttentionWgmma.cuh)
// share: mbarrier phases, cp.async completion on an mbarrier, the
// generic-to-async proxy fence, 128B-swizzled shared-memory matrix
// descriptors and the wgmma fence / commit / wait. Appended after
// Common.cuh (KILN_INLINE, u32, u64) by GemmSource.cpp and
// AttentionSource.cpp when they build a wgmma kernel.
//
//===----------------------------------------------------------------------===//

namespace sm90 {

KILN_INLINE void mbarrierInit(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count)
               : "memory");
}
KILN_INLINE void mbarrierArrive(u32 bar) {
  asm volatile("{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, "
               "[%0]; }" ::"r"(bar)
               : "memory");
}
/// Spins until the phase of parity `parity` has completed.
KILN_INLINE void mbarrierWait(u32 bar, u32 parity) {
  asm volatile("{\n"
               "  .reg .pred done;\n"
               "kiln_wait_%=:\n"
               "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "  @!done bra kiln_wait_%=;\n"
               "}" ::"r"(bar),
               "r"(parity)
               : "memory");
}
/// The mbarrier's pending count drops by one when every cp.async this
/// thread issued before has completed.
KILN_INLINE void cpAsyncArriveNoinc(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar)
               : "memory");
}
/// Waits for every cp.async this thread issued (none is in a commit group).
KILN_INLINE void cpAsyncWaitAll() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
/// Orders this thread's generic-proxy shared-memory writes before the
/// async proxy's (wgmma's) reads.
KILN_INLINE void fenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/// A shared-memory matrix descriptor with 128-byte swizzling.
KILN_INLINE u64 descriptor(u32 address, u32 leadingBytes, u32 strideBytes) {
  return (u64)((address & 0x3FFFF) >> 4) |
         ((u64)((leadingBytes >> 4) & 0x3FFF) << 16) |
         ((u64)((strideBytes >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
KILN_INLINE void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
KILN_INLINE void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> KILN_INLINE void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

} // namespace sm90
