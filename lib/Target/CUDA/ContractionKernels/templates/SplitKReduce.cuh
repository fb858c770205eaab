//===- SplitKReduce.cuh - Sum split-K partials, then the epilogue ---------===//
//
// The second kernel of a split-K GEMM: one thread per output adds the
// SPLITK fp32 partials in split order (so the result does not depend on
// which block ran first, unlike atomics), applies the epilogue once and
// stores C (and the second output, the epilogue's `which` 1, when there is
// one). Consecutive threads take consecutive columns: both the
// workspace reads and the C writes are coalesced.
//
//===----------------------------------------------------------------------===//

namespace splitk {

constexpr int kThreads = 256;

KILN_INLINE void reduce(const float *workspace, void *cPtr, u32 M,
                        u64 batchStrideC, const EpilogueArgs &ep) {
  const u64 perBatch = (u64)M * Cfg::N;
  const u64 total = perBatch * Cfg::BATCH;
  const u64 index = (u64)blockIdx.x * kThreads + threadIdx.x;
  if (index >= total)
    return;
  const unsigned batch = (unsigned)(index / perBatch);
  const u64 inBatch = index % perBatch;
  const int row = (int)(inBatch / Cfg::N), col = (int)(inBatch % Cfg::N);
  float sum = 0.0f;
#pragma unroll
  for (int s = 0; s < Cfg::SPLITK; ++s)
    sum += workspace[(u64)s * total + index];
  const int epiCol = col + batch * Cfg::EPI_COL_PER_BATCH;
  // Both outputs before either store, so their epilogues share the work.
  float second = 0.0f;
  if constexpr (Cfg::AUX_CODE != kElementNone)
    second = kilnEpilogue(batch, row, epiCol, sum, ep, 1);
  float v = kilnEpilogue(batch, row, epiCol, sum, ep);
  storeOut<Cfg::OUT_CODE>((char *)cPtr + batch * batchStrideC * Cfg::OUT_BYTES,
                          (i64)row * Cfg::LDC + col, v);
  if constexpr (Cfg::AUX_CODE != kElementNone)
    storeOut<Cfg::AUX_CODE>(
        (char *)ep.aux + batch * batchStrideC * Cfg::AUX_BYTES,
        (i64)row * Cfg::LDC + col, second);
}

} // namespace splitk
