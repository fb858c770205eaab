//===- Recurrence.cuh - The persistent RNN/GRU/LSTM time loop -------------===//
//
// One launch runs every step of one direction (RecurrenceKernels.h has the
// design). The batch is cut into chunks of Cfg::B rows (sequences are
// independent), one cluster of Cfg::BLOCKS blocks each (one block on
// sm_80): chunk c = blockIdx.x / BLOCKS computes batch rows [c B, c B + B)
// of the Cfg::BATCH; rows past BATCH in the last chunk compute zeros and
// store nothing. Block q of a cluster owns hidden units [q U, q U + U) and
// the G rows of R of each (row j = g U + u of its slice is R's row
// g H + q U + u); its shared memory holds (B the chunk's rows):
//
//   weights  [G U][WSTRIDE] of the input type (Cfg::R_SHARED),
//   hidden   [2][H][B] fp32: the full h of the last step and of this one,
//   gates    [G U][B] fp32: this step's recurrent products,
//   cell     [U][B] fp32: the LSTM cell state of its units,
//   rh       [H][B] fp32: GRU (no linear_before_reset): r * h of every unit.
//
// h is stored [unit][batch] so that a warp's threads (one row each) read
// the same h words (a broadcast), and R rows are padded (WSTRIDE) so that
// they read distinct banks. The generated prelude defines Cfg and the
// activations act0, act1, act2.
//
//===----------------------------------------------------------------------===//

namespace kiln_rnn {

enum { kRnn = 0, kGru = 1, kLstm = 2 };

KILN_INLINE u32 clusterRank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
/// The shared::cluster address of shared address `address` in block `rank`.
KILN_INLINE u32 mapShared(u32 address, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(address), "r"(rank));
  return r;
}
KILN_INLINE void storeCluster(u32 address, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(v)
               : "memory");
}
/// The step barrier: every thread of every block has arrived, and the
/// shared-memory writes before it (remote ones included) are visible after.
KILN_INLINE void stepBarrier() {
  if (Cfg::BLOCKS > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
  else
    __syncthreads();
}

KILN_INLINE float clipped(float x) {
  if (Cfg::HAS_CLIP)
    return minNaN(maxNaN(x, -Cfg::CLIP), Cfg::CLIP);
  return x;
}

/// Stores `v` at element `index` of a [H][B] fp32 buffer in every block.
KILN_INLINE void broadcast(float *buffer, int index, float v) {
  if (Cfg::BLOCKS == 1) {
    buffer[index] = v;
  } else {
    u32 address = sharedAddress(buffer + index);
#pragma unroll
    for (int r = 0; r < Cfg::BLOCKS; ++r)
      storeCluster(mapShared(address, (u32)r), v);
  }
}

/// Sum over the KSPLIT consecutive lanes that share a row (butterfly).
KILN_INLINE float sumOverSplit(float v) {
#pragma unroll
  for (int lanes = Cfg::KSPLIT / 2; lanes > 0; lanes /= 2) {
    float other;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=f"(other)
                 : "f"(v), "r"(lanes));
    v += other;
  }
  return v;
}

/// gates[j][b] = sum_k R(j, k) v[k][b] for rows j in [row0, row0 + rows).
/// KSPLIT consecutive threads share a row, each summing every KSPLIT-th k
/// (R's padded rows put those lanes on distinct banks); every thread runs
/// the same number of passes, so the shuffles see whole warps.
KILN_INLINE void recurrentProduct(const void *R, const unsigned char *smem,
                                  float *gates, const float *v, int row0,
                                  int rows, int unit0) {
  constexpr int B = Cfg::B, H = Cfg::H, U = Cfg::U, BT = Cfg::BATCH_TILE,
                KS = Cfg::KSPLIT, PER_PASS = Cfg::THREADS / Cfg::KSPLIT;
  const int part = (int)threadIdx.x % KS;
  for (int base = 0; base < rows; base += PER_PASS) {
    const int local = base + (int)threadIdx.x / KS, j = row0 + local;
    const int g = j / U, unit = unit0 + j % U;
    const bool live = local < rows && unit < H;
    for (int b0 = 0; b0 < B; b0 += BT) {
      float acc[BT];
#pragma unroll
      for (int bb = 0; bb < BT; ++bb)
        acc[bb] = 0.0f;
      if (live) {
        const i64 rowR = Cfg::R_OFF + ((i64)g * H + unit) * H;
#pragma unroll 4
        for (int k = part; k < H; k += KS) {
          float w = Cfg::R_SHARED
                        ? loadAsFloat<Cfg::IN_CODE>(smem + Cfg::SM_WEIGHTS,
                                                    (i64)j * Cfg::WSTRIDE + k)
                        : loadAsFloat<Cfg::IN_CODE>(R, rowR + k);
          const float *vk = v + k * B + b0;
#pragma unroll
          for (int bb = 0; bb < BT; ++bb)
            if (b0 + bb < B)
              acc[bb] = fmaf(w, vk[bb], acc[bb]);
        }
      }
#pragma unroll
      for (int bb = 0; bb < BT; ++bb) {
        const float sum = KS > 1 ? sumOverSplit(acc[bb]) : acc[bb];
        if (live && part == 0 && b0 + bb < B)
          gates[j * B + b0 + bb] = sum;
      }
    }
  }
}

KILN_INLINE void recurrence(const void *X, const void *R, const void *H0,
                            const void *C0, const void *P, const int *L,
                            const void *RB, void *Y, void *YH, void *YC) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int B = Cfg::B, H = Cfg::H, U = Cfg::U, G = Cfg::G,
                T = Cfg::T, NT = Cfg::THREADS, BATCH = Cfg::BATCH;
  const int tid = threadIdx.x;
  const int unit0 = (Cfg::BLOCKS > 1 ? (int)clusterRank() : 0) * U;
  // This chunk's first batch row; row b of the chunk is batch row
  // batch0 + b, there when below BATCH.
  const int batch0 = (int)(blockIdx.x / Cfg::BLOCKS) * B;
  auto inBatch = [&](int b) { return batch0 + b < BATCH; };
  float *hidden = (float *)(smem + Cfg::SM_HIDDEN);
  float *gates = (float *)(smem + Cfg::SM_GATES);
  float *cell = (float *)(smem + Cfg::SM_CELL);
  float *rh = (float *)(smem + Cfg::SM_RH);

  // All of it zeroed first: the compiler may widen a few float loads of a
  // buffer into one 16-byte load (every buffer is 16-byte aligned and
  // padded), and the padding it reads is then written too.
  for (int i = tid; i < Cfg::SM_TOTAL / 4; i += NT)
    ((u32 *)smem)[i] = 0;
  __syncthreads();
  // This block's rows of R, the full h0 and its units' c0.
  if (Cfg::R_SHARED) {
    for (int i = tid; i < G * U * H; i += NT) {
      const int j = i / H, k = i % H, g = j / U, unit = unit0 + j % U;
      const i64 at = (i64)j * Cfg::WSTRIDE + k;
      const i64 from = Cfg::R_OFF + ((i64)g * H + unit) * H + k;
      if (Cfg::IN_CODE == kElementF32)
        ((float *)(smem + Cfg::SM_WEIGHTS))[at] =
            unit < H ? ((const float *)R)[from] : 0.0f;
      else
        ((u16 *)(smem + Cfg::SM_WEIGHTS))[at] =
            unit < H ? ((const u16 *)R)[from] : (u16)0;
    }
  }
  for (int i = tid; i < H * B; i += NT)
    hidden[i] = inBatch(i % B)
                    ? loadAsFloat<Cfg::IN_CODE>(
                          H0, Cfg::H0_OFF + (i64)(batch0 + i % B) * H + i / B)
                    : 0.0f;
  for (int i = tid; i < U * B; i += NT) {
    const int unit = unit0 + i / B;
    cell[i] = Cfg::CELL == kLstm && unit < H && inBatch(i % B)
                  ? loadAsFloat<Cfg::IN_CODE>(
                        C0, Cfg::C0_OFF + (i64)(batch0 + i % B) * H + unit)
                  : 0.0f;
  }
  __syncthreads();
  // Every block has started (and initialised) before any stores into it.
  stepBarrier();

  for (int s = 0; s < T; ++s) {
    const int t = Cfg::REVERSE ? T - 1 - s : s;
    const float *hp = hidden + (s & 1) * H * B;
    float *hn = hidden + ((s + 1) & 1) * H * B;
    auto projection = [&](int b, int g, int unit) {
      return inBatch(b) ? loadAsFloat<Cfg::IN_CODE>(
                              X, Cfg::X_OFF +
                                     ((i64)t * BATCH + batch0 + b) * G * H +
                                     (i64)g * H + unit)
                        : 0.0f;
    };
    if (Cfg::CELL == kGru && !Cfg::LBR) {
      // z and r first; r * h of every unit before the h gate's product.
      recurrentProduct(R, smem, gates, hp, 0, 2 * U, unit0);
      __syncthreads();
      for (int i = tid; i < U * B; i += NT) {
        const int u = i / B, b = i % B, unit = unit0 + u;
        if (unit >= H)
          continue;
        const float r =
            act0(clipped(projection(b, 1, unit) + gates[(U + u) * B + b]));
        broadcast(rh, unit * B + b, r * hp[unit * B + b]);
      }
      stepBarrier();
      recurrentProduct(R, smem, gates, rh, 2 * U, U, unit0);
    } else {
      recurrentProduct(R, smem, gates, hp, 0, G * U, unit0);
    }
    __syncthreads();

    for (int i = tid; i < U * B; i += NT) {
      const int u = i / B, b = i % B, unit = unit0 + u;
      if (unit >= H)
        continue;
      auto pre = [&](int g) {
        return projection(b, g, unit) + gates[(g * U + u) * B + b];
      };
      const float hprev = hp[unit * B + b];
      float hnew, cnew = 0.0f;
      const float c = cell[i];
      if (Cfg::CELL == kLstm) {
        float gi = pre(0), go = pre(1), gf = pre(2);
        if (Cfg::PEEP) {
          gi += loadAsFloat<Cfg::IN_CODE>(P, Cfg::P_OFF + unit) * c;
          gf += loadAsFloat<Cfg::IN_CODE>(P, Cfg::P_OFF + 2 * H + unit) * c;
        }
        const float ig = act0(clipped(gi));
        const float fg = Cfg::INPUT_FORGET ? 1.0f - ig : act0(clipped(gf));
        const float cg = act1(clipped(pre(3)));
        cnew = fg * c + ig * cg;
        if (Cfg::PEEP)
          go += loadAsFloat<Cfg::IN_CODE>(P, Cfg::P_OFF + H + unit) * cnew;
        hnew = act0(clipped(go)) * act2(cnew);
      } else if (Cfg::CELL == kGru) {
        const float z = act0(clipped(pre(0)));
        float candidate;
        if (Cfg::LBR) {
          const float r = act0(clipped(pre(1)));
          float hh = gates[(2 * U + u) * B + b];
          if (Cfg::RBIAS)
            hh += loadAsFloat<Cfg::IN_CODE>(RB, Cfg::RB_OFF + unit);
          candidate = act1(clipped(projection(b, 2, unit) + r * hh));
        } else {
          candidate = act1(clipped(pre(2)));
        }
        hnew = candidate + z * (hprev - candidate);
      } else {
        hnew = act0(clipped(pre(0)));
      }
      float y = hnew;
      if (Cfg::LENS && inBatch(b) && !(t < L[Cfg::L_OFF + batch0 + b])) {
        y = 0.0f;
        hnew = hprev;
        cnew = c;
      }
      if (inBatch(b))
        storeOut<Cfg::IN_CODE>(Y, ((i64)t * BATCH + batch0 + b) * H + unit,
                               y);
      if (Cfg::CELL == kLstm)
        cell[i] = cnew;
      broadcast(hn, unit * B + b, hnew);
    }
    stepBarrier();
  }

  // The final states; a row of length 0 has none: zeros, as onnxruntime's
  // LSTM and GRU give.
  const float *last = hidden + (T & 1) * H * B;
  for (int i = tid; i < U * B; i += NT) {
    const int b = i % B, unit = unit0 + i / B;
    if (unit >= H || !inBatch(b))
      continue;
    const bool empty = Cfg::LENS && L[Cfg::L_OFF + batch0 + b] <= 0;
    storeOut<Cfg::IN_CODE>(YH, (i64)(batch0 + b) * H + unit,
                           empty ? 0.0f : last[unit * B + b]);
    if (Cfg::CELL == kLstm)
      storeOut<Cfg::IN_CODE>(YC, (i64)(batch0 + b) * H + unit,
                             empty ? 0.0f : cell[i]);
  }
}

} // namespace kiln_rnn
