//===- AttentionKernels.h - Fused attention from a CUDA template -*- C++ -*-===//
//
// Scaled dot-product attention as one flash-attention-style kernel: for each
// (batch, head) and query row i,
//   s[j]  = score(b, h, i, j, sum_d Q[i][d] * K[j][d])   (scale, masks)
//   p     = softmax_j(s)
//   O[i]  = epilogue(b, h, i, c, sum_j p[j] * V[j][c])
// The scores never reach global memory: a block owns a tile of query rows,
// streams K and V tiles through shared memory (cp.async, double-buffered),
// and keeps a running row maximum and sum, rescaling its output accumulators
// when the maximum grows (online softmax). bf16/f16 inputs run both products
// on tensor cores (mma.sync m16n8k16, fp32 accumulation; P is rounded to the
// input type for the second product, as flash attention does); f32 inputs
// run on CUDA cores in fp32 (FFMA), a warp per query row.
//
// `score` and `epilogue` are CUDA C++ bodies generated from the fusion
// region (kiln-match-contractions): the scale, additive masks (read through
// extra pointers with the broadcast the region has) and causal selects.
// Operands are read where they lie: each of Q, K and V is given by element
// strides of its two leading (batch, head) dimensions and its row, with the
// head dimension contiguous; K and V may have fewer heads (GQA/MQA: query
// head h reads key/value head h / group, or a head stride of 0).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_ATTENTIONKERNELS_H
#define KILN_TARGET_CUDA_ATTENTIONKERNELS_H

#include "kiln/Target/CUDA/ContractionKernels.h"

namespace kiln::contraction {

/// Element strides of one operand: (outer, head, row); the last dimension is
/// contiguous.
struct AttentionStrides {
  uint64_t outer = 0, head = 0, row = 0;
  /// Elements from the pointer the kernel is given to the operand's first
  /// element (Q, K and V as slices of one fused projection GEMM).
  uint64_t offset = 0;
};

struct AttentionProblem {
  /// The two leading dimensions (batch, heads); a 3-D problem has outer 1.
  uint64_t outer = 1, heads = 1;
  uint64_t seqQ = 0, seqK = 0;
  /// Q/K head dimension and V's (the output's last dimension).
  uint64_t headDim = 0, valueDim = 0;
  /// Query head h reads key head h / keyHeadGroup and value head h /
  /// valueHeadGroup (GQA: both the group size; MQA: a head stride of 0).
  uint64_t keyHeadGroup = 1, valueHeadGroup = 1;
  /// Q, K and V share it: F32 (FFMA), BF16 or F16 (tensor cores).
  DType inputType = DType::BF16;
  /// The output is packed [outer][heads][seqQ][valueDim] of this type.
  DType outputType = DType::F32;
  AttentionStrides q, k, v;
  /// Key tiles wholly past j <= i + causalOffset are skipped (the score
  /// body masks them to -inf or less, so they add nothing).
  bool causalSkip = false;
  int64_t causalOffset = 0;
  /// Byte alignment of the Q, K, V base pointers (16 for Kiln's buffers).
  uint32_t alignQ = 16, alignK = 16, alignV = 16;
};

/// Generated CUDA C++ bodies over `unsigned batch, int row, int col, float
/// acc` and `const void *extra0..` (batch = outer * heads + head), each
/// ending in `return <float>;`. Empty: the score is acc, the output acc.
struct AttentionBodies {
  std::string score;
  std::vector<std::string> scoreOperands;
  std::string output;
  std::vector<std::string> outputOperands;
};

struct AttentionConfig {
  /// Query rows per block and keys per K/V tile.
  uint32_t blockM = 64, blockN = 64;
  uint32_t warps = 4;
  /// sm_90a only (bf16/f16): the wgmma kernel (AttentionWgmma.cuh), a
  /// producer warpgroup and blockM / 64 consumer warpgroups, with a
  /// `stages`-deep K/V ring.
  bool wgmma = false;
  uint32_t stages = 2;
  /// "attn_mma_f16 64x64 w4 d64", "attn_wgmma_f16 128x64 w12 s4 d64" or
  /// "attn_simt_f32 16x32 w4 d64".
  std::string describe(const AttentionProblem &problem) const;
};

/// Why the kernel cannot compute the problem (empty when it can).
std::string unsupportedReason(const AttentionProblem &problem);

/// Why the sm_90 wgmma kernel does not take a problem the mma.sync kernel
/// computes (empty when it does): f32 inputs (the FFMA kernel runs them).
std::string wgmmaUnsupportedReason(const AttentionProblem &problem);

/// The configuration the kernel uses for the problem: on sm_90 with
/// `wgmma`, the wgmma kernel where wgmmaUnsupportedReason allows it, else
/// the mma.sync (bf16/f16) or FFMA (f32) one.
AttentionConfig pickAttentionConfig(const AttentionProblem &problem,
                                    uint32_t smVersion = 80,
                                    bool wgmma = false);

/// The CUDA C++ source (no NVRTC needed).
runtime::Expected<std::string>
generateAttentionSource(const AttentionProblem &problem,
                        const AttentionConfig &config,
                        const AttentionBodies &bodies,
                        const GenerateOptions &options);

/// One kernel: parameters Q, K, V, O, then the score's and the output
/// epilogue's extra pointers ("score0".., "out0"..).
runtime::Expected<GemmKernels>
generateAttention(const AttentionProblem &problem,
                  const AttentionConfig &config, const AttentionBodies &bodies,
                  const GenerateOptions &options);
/// generateAttention without NVRTC (see specializeGemm).
runtime::Expected<GemmKernels>
specializeAttention(const AttentionProblem &problem,
                    const AttentionConfig &config,
                    const AttentionBodies &bodies,
                    const GenerateOptions &options);

} // namespace kiln::contraction

#endif // KILN_TARGET_CUDA_ATTENTIONKERNELS_H
