//===- Trainer.h - Datasets, batches and validation for training -*- C++ -*-===//
//
// What a training loop needs around a TrainingSession, shared by kiln-train
// and the Python package's kiln.Trainer so that both read a dataset, order
// its samples, fill batches, validate and name checkpoint metadata the same
// way (a checkpoint written by one resumes in the other):
//
//   Expected<BatchSignature> sig = batchSignature(session, "model.kiln");
//   Dataset train{readNpy("x.npy").take(), readNpy("y.npy").take()};
//   checkDataset(train, *sig, "x.npy", "y.npy");
//   for each epoch:
//     order = epochOrder(train.count, seed, epoch);
//     for each step s:
//       indices = order[s*B, (s+1)*B)
//       session.bindBatch(sig->dataName, gatherSamples(train.data, indices, *sig->data));
//       session.bindBatch(sig->labelsName, gatherSamples(train.labels, indices, *sig->labels));
//       session.step();
//     validate(session, val, *sig);
//
// Stability: experimental, like Training.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINER_H
#define KILN_RUNTIME_TRAINER_H

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Training.h"

#include <string>
#include <vector>

namespace kiln::runtime {

/// The checkpoint metadata a training loop records (kiln-train and
/// kiln.Trainer write and read the same keys).
constexpr std::string_view kMetaEpochsDone = "kiln-train.epochs_done";
constexpr std::string_view kMetaSeed = "kiln-train.seed";
constexpr std::string_view kMetaHistory = "kiln-train.history";
/// The loss history's CSV header (one row per step, one per validation).
constexpr std::string_view kHistoryHeader = "step,epoch,loss,metric,value\n";

/// What a training artifact expects of one batch: train_step reads one data
/// input (also read by eval) and one labels input (read only by train_step),
/// sharing a leading batch dimension.
struct BatchSignature {
  const TensorSignature *data = nullptr;   // train_step:x
  const TensorSignature *labels = nullptr; // train_step:labels
  std::string dataName, labelsName;        // plain names ("x", "labels")
  uint64_t batch = 0;
  /// The smallest batch train_step runs: `batch`, or the minimum of the
  /// symbol the data and labels share on dim 0 when kilnc --train --dim
  /// proved it separable (the last batch of an epoch may then be smaller).
  uint64_t minBatch = 0;
  /// eval's output, when it has exactly one.
  const TensorSignature *evalOutput = nullptr;
  std::string evalOutputName;
};

/// Errors name `model` (the artifact's file).
Expected<BatchSignature> batchSignature(const TrainingSession &session,
                                        const std::string &model);

/// Inputs and labels, `count` samples along the first axis of both.
struct Dataset {
  NpyArray data, labels;
  uint64_t count = 0;
};

/// Checks a dataset against the batch signature and sets `count`: dtypes,
/// per-sample shapes, equal sample counts, finite floats, integer labels
/// inside eval's classes. Errors name `dataName` or `labelsName` (the files,
/// or what the caller calls the arrays).
Error checkDataset(Dataset &dataset, const BatchSignature &sig,
                   const std::string &dataName, const std::string &labelsName);

/// Rank `rank`'s part of an epoch's smaller last global batch of `samples`
/// over `ranks` ranks: samples / ranks each, one more for the first
/// samples % ranks ranks, in rank order; `first` is relative to the start
/// of that global batch.
struct BatchShare {
  uint64_t first = 0;
  uint64_t size = 0;
};
BatchShare lastShare(uint64_t samples, uint64_t rank, uint64_t ranks);

/// The sample order of an epoch: Fisher-Yates with std::mt19937_64 seeded
/// from `seed` and `epoch` (the generator is specified exactly and the index
/// draw uses no library distribution, so the order is the same everywhere).
std::vector<uint64_t> epochOrder(uint64_t count, uint64_t seed,
                                 uint64_t epoch);

/// Samples `indices` of `array` stacked into one tensor of `input`'s dtype
/// and shape (indices.size() must be its batch).
HostTensor gatherSamples(const NpyArray &array,
                         const std::vector<uint64_t> &indices,
                         const TensorSignature &input);

/// A validation metric: "val_accuracy" (integer labels and a [B, C] f32
/// eval output) or "val_mse".
struct Metric {
  std::string name;
  double value = 0;
};

/// Runs eval over `val` in batches (the last one padded with its last
/// sample, the padding ignored) and computes the metric.
Expected<Metric> validate(TrainingSession &session, const Dataset &val,
                          const BatchSignature &sig);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_TRAINER_H
