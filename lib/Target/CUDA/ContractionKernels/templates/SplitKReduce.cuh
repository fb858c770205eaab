//===- SplitKReduce.cuh - Split-K in one launch: the last split finishes --===//
//
// Split-K without a second kernel. Each block of a split writes its fp32
// partial tile to the workspace `[split][batch][M][N]`, makes it visible
// device-wide and counts itself in the tile's semaphore (one u32 per
// output tile, zero before the launch). The block that arrives last,
// whichever split it is, adds the SPLITK partials of the tile in split
// order (so the sum does not depend on which block ran first, unlike
// atomics into C), applies the epilogue once on the full sum
// (activations are not additive) and stores C (and the second output, the
// epilogue's `which` 1, when there is one). It then resets the semaphore to
// zero, so the next launch, or the next GEMM sharing the semaphores,
// starts from zero again (the runtime zeroes them once, at load: a
// zeroed-buffers entry of the artifact).
//
// The handshake is the CUDA programming guide's "last block" pattern
// (threadfence, then an atomic on a counter): every thread fences its own
// partial stores, a barrier waits for all of them, one thread counts the
// block,
// and the last block fences again before it reads the other splits'
// partials, which it loads through L2 (ld.global.cg): they were written by
// other SMs during this launch.
//
//===----------------------------------------------------------------------===//

namespace splitk {

/// Counts this block in its tile's semaphore; true for the block that
/// completes the tile. Called by one thread of the block, after every
/// thread's __threadfence and a barrier (so every partial of the block is
/// written and fenced before the count), and before the barrier that
/// broadcasts the result.
KILN_INLINE bool arrive(unsigned *semaphores, unsigned batch) {
  const unsigned tile =
      (batch * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const bool last = atomicAdd(&semaphores[tile], 1u) == Cfg::SPLITK - 1;
  if (last) // every split has arrived: nothing else touches it this launch
    atomicExch(&semaphores[tile], 0u);
  return last;
}

/// The last block of a tile: output (row, col) of `batch` for every
/// element of the BM x BN tile at (m0, n0), `threads` threads from `tid`.
/// Consecutive threads take consecutive columns, so the workspace reads
/// and the C writes are coalesced.
template <int Threads>
KILN_INLINE void finishTile(const float *workspace, void *cPtr, u32 M,
                            u64 batchStrideC, const EpilogueArgs &ep,
                            unsigned batch, int m0, int n0, int tid) {
  const unsigned batches = gridDim.z / Cfg::SPLITK;
  const u64 perBatch = (u64)M * Cfg::N;
  const u64 total = perBatch * batches;
  for (int i = tid; i < Cfg::BM * Cfg::BN; i += Threads) {
    const int row = m0 + i / Cfg::BN, col = n0 + i % Cfg::BN;
    if (row >= (int)M || col >= (int)Cfg::N)
      continue;
    const u64 index = batch * perBatch + (u64)row * Cfg::N + col;
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < Cfg::SPLITK; ++s)
      sum += __ldcg(workspace + (u64)s * total + index);
    const int epiCol = col + batch * Cfg::EPI_COL_PER_BATCH;
    // Both outputs before either store, so their epilogues share the work.
    float second = 0.0f;
    if constexpr (Cfg::AUX_CODE != kElementNone)
      second = kilnEpilogue(batch, row, epiCol, sum, ep, 1);
    float v = kilnEpilogue(batch, row, epiCol, sum, ep);
    storeOut<Cfg::OUT_CODE>(
        (char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES,
        (i64)row * Cfg::LDC + col, v);
    if constexpr (Cfg::AUX_CODE != kElementNone)
      storeOut<Cfg::AUX_CODE>(
          (char *)ep.aux + batch * batchStrideC * Cfg::AUX_BYTES,
          (i64)row * Cfg::LDC + col, second);
  }
}

/// The whole-block form (mma.sync and SIMT kernels): after this block's
/// partial tile is in the workspace, the last block of the tile finishes
/// it. Every thread of the block calls it.
KILN_INLINE void finishIfLast(const float *workspace, void *cPtr, u32 M,
                              u64 batchStrideC, const EpilogueArgs &ep,
                              unsigned *semaphores, unsigned batch, int m0,
                              int n0) {
  __threadfence(); // this thread's partials, before the count (release)
  __syncthreads(); // ... every thread's, before thread 0 counts the block
  int last = 0;
  if (threadIdx.x == 0)
    last = arrive(semaphores, batch);
  if (!__syncthreads_or(last))
    return;
  __threadfence(); // the other splits' partials, after the count (acquire)
  finishTile<Cfg::THREADS>(workspace, cPtr, M, batchStrideC, ep, batch, m0,
                           n0, (int)threadIdx.x);
}

} // namespace splitk
