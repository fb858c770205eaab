//===- RecurrenceKernels.h - The persistent RNN/GRU/LSTM kernel -*- C++ -*-===//
//
// One launch runs the whole time loop of one direction of a recurrent layer
// (kiln.recurrence; templates/Recurrence.cuh), as cuDNN's persistent RNNs
// do: the blocks stay resident for all T steps, each owns a slice of the
// hidden units (every gate of them), keeps its rows of R in shared memory
// (when they fit) and its cell state in shared memory, and the full h of
// the last step is replicated in every block. Per step a block multiplies
// its rows of R with h (fp32 accumulation), applies the cell, writes its
// part of y, and stores its new h units into every block's next h buffer;
// one step barrier follows. On sm_90 the blocks are one thread-block
// cluster (`__cluster_dims__`, hardware-co-scheduled): the new h goes
// through distributed shared memory (`mapa` + `st.shared::cluster`) and the
// step barrier is `barrier.cluster.arrive.release` / `wait.acquire`. On
// sm_80 it is one block and `__syncthreads`. GRU without
// linear_before_reset needs r * h of every unit before its h gate's
// product: two barriers per step.
//
// Plain C++17, no MLIR (like ContractionKernels.h): kiln-lower-recurrence
// fills a RecurrenceProblem from the op.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_RECURRENCEKERNELS_H
#define KILN_TARGET_CUDA_RECURRENCEKERNELS_H

#include "kiln/Target/CUDA/ContractionKernels.h"

#include <array>
#include <optional>

namespace kiln::contraction {

enum class RecurrentCell : uint8_t { Rnn, Gru, Lstm };

struct RecurrentActivation {
  /// Lower case, as kiln.recurrence spells it ("sigmoid", "tanh", ...).
  std::string name;
  float alpha = 0, beta = 0;
};

/// One kiln.recurrence. Every operand is read at an element offset from
/// its buffer (a direction's slice of a weight is read in place).
struct RecurrenceProblem {
  RecurrentCell cell = RecurrentCell::Lstm;
  uint64_t steps = 1, batch = 1, hidden = 1;
  /// The element type of every float operand and result.
  DType type = DType::F32;
  bool reverse = false;
  std::optional<float> clip;
  bool linearBeforeReset = false, inputForget = false;
  bool peepholes = false, sequenceLens = false, resetBias = false;
  std::vector<RecurrentActivation> activations;
  /// Element offsets into the buffers of: the input projection, R, h0, c0,
  /// the peepholes, sequence_lens and reset_bias.
  uint64_t offsetX = 0, offsetR = 0, offsetH0 = 0, offsetC0 = 0, offsetP = 0,
           offsetLens = 0, offsetResetBias = 0;

  uint64_t gates() const {
    return cell == RecurrentCell::Rnn ? 1 : cell == RecurrentCell::Gru ? 3 : 4;
  }
};

/// How the kernel runs a problem.
struct RecurrenceConfig {
  /// Blocks, one cluster (sm_90) or one block (1).
  uint32_t blocks = 1;
  /// Threads per block: rows of R a block owns x kSplit, rounded up to a
  /// warp, at least 64.
  uint32_t threads = 128;
  /// Consecutive threads sharing one row of R's product (each sums every
  /// kSplit-th term; a shuffle adds them): 1, 2, 4 or 8.
  uint32_t kSplit = 1;
  /// Batch rows one cluster (one block on sm_80) runs: the batch is cut
  /// into ceil(B / batchChunk) independent chunks, side by side in the
  /// grid. The shared-memory state is sized for one chunk.
  uint32_t batchChunk = 1;
  /// Whether each block's rows of R are kept in shared memory (else they
  /// are read from global memory, through L2, every step).
  bool recurrentWeightsShared = true;
};

/// The kernel's shared-memory layout, in bytes from the dynamic base.
struct RecurrenceSharedLayout {
  uint32_t weights = 0, hidden = 0, gates = 0, cell = 0, resetHidden = 0;
  /// Padded row stride of R in shared memory, in elements.
  uint32_t weightStride = 0;
  uint32_t total = 0;
};

/// Hidden units one block owns: ceil(H / blocks).
uint64_t recurrenceUnitsPerBlock(const RecurrenceProblem &problem,
                                 const RecurrenceConfig &config);

RecurrenceSharedLayout recurrenceLayout(const RecurrenceProblem &problem,
                                        const RecurrenceConfig &config);

/// The configuration for the chip: on sm_90 a cluster of up to 8 blocks
/// (the largest power of two up to min(8, H)), else one block; the largest
/// k-split up to 8 that keeps a block at 512 threads or fewer; batch
/// chunks of up to 16 rows; R in shared memory when every block's rows fit
/// in `maxSharedBytes` with the chunk's state, else in global memory, and
/// smaller chunks while the state alone does not fit.
RecurrenceConfig pickRecurrenceConfig(const RecurrenceProblem &problem,
                                      uint32_t smVersion,
                                      uint32_t maxSharedBytes);

/// Batch chunks: ceil(B / batchChunk); the grid is blocks x chunks.
uint64_t recurrenceChunks(const RecurrenceProblem &problem,
                          const RecurrenceConfig &config);

/// Threads for `blocks` and `kSplit` (RecurrenceConfig::threads).
uint32_t recurrenceThreads(const RecurrenceProblem &problem, uint32_t blocks,
                           uint32_t kSplit);

/// Why the kernel cannot run `problem` with `config` (empty when it can).
std::string recurrenceUnsupportedReason(const RecurrenceProblem &problem,
                                        const RecurrenceConfig &config,
                                        uint32_t smVersion,
                                        uint32_t maxSharedBytes);

/// "persistent lstm, cluster of 8 x 512 threads (k split 4), R in shared
/// memory".
std::string describeRecurrence(const RecurrenceProblem &problem,
                               const RecurrenceConfig &config);

/// The CUDA C++ source: parameters X, R, h0 (c0, P, lens, resetBias when
/// present), then the outputs y, lastH (lastC).
runtime::Expected<std::string>
generateRecurrenceSource(const RecurrenceProblem &problem,
                         const RecurrenceConfig &config,
                         const GenerateOptions &options);
/// The kernel without NVRTC (its source and launch geometry).
runtime::Expected<GemmKernels>
specializeRecurrence(const RecurrenceProblem &problem,
                     const RecurrenceConfig &config,
                     const GenerateOptions &options);
/// specializeRecurrence, then NVRTC.
runtime::Expected<GemmKernels>
generateRecurrence(const RecurrenceProblem &problem,
                   const RecurrenceConfig &config,
                   const GenerateOptions &options);

} // namespace kiln::contraction

#endif // KILN_TARGET_CUDA_RECURRENCEKERNELS_H
