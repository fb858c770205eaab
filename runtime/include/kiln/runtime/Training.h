//===- Training.h - Training artifacts and sessions -------------*- C++ -*-===//
//
// A training artifact (format 1.3) has entry points (`train_step`, `eval`),
// each a range of the launch list, and persistent state: arena tensors that
// live across runs (the trainable weights laid out flat, optimizer state,
// the step counter). The compiler builds one artifact per entry point and
// joins them with combineEntryPoints; the runtime runs them through a
// TrainingSession:
//
//   Expected<std::unique_ptr<TrainingSession>> training =
//       TrainingSession::create(artifact, device);
//   (*training)->bindBatch("x", images);      // train_step and eval inputs
//   (*training)->bindBatch("labels", labels);
//   (*training)->step();                      // one optimizer step
//   Expected<float> loss = (*training)->loss();
//   (*training)->saveCheckpoint("ckpt/step-100.safetensors");
//
// Checkpoints are safetensors files holding every state tensor (each weight
// under its ONNX initializer name), written to a temporary file, fsynced and
// renamed; loading one checks it belongs to this artifact before touching
// any state.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINING_H
#define KILN_RUNTIME_TRAINING_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Collective.h"
#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Runtime.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Names the compiler gives state tensors in each entry point's artifact:
/// input `kiln.state.<S>` is state S, output `kiln.state.<S>.next` its new
/// value.
constexpr std::string_view kStatePrefix = "kiln.state.";
constexpr std::string_view kNextSuffix = ".next";
/// The name of train_step's loss output.
constexpr std::string_view kLossOutput = "loss";
/// Loss scaling: the scale's state and train_step's skipped-step flag.
constexpr std::string_view kLossScaleState = "loss_scale";
constexpr std::string_view kSkippedOutput = "skipped";

/// One compiled function, as buildArtifact made it.
struct EntryPointArtifact {
  std::string name;
  Artifact artifact;
};

/// What combineEntryPoints needs to know about a state tensor besides its
/// signature: its initial value (empty: zeros) and the weights it holds.
struct StateSpec {
  std::string name;
  std::vector<uint8_t> initial;
  std::vector<StateSegment> segments;
};

/// Joins single-function artifacts into one artifact with an entry point per
/// part, in order. Each part's launches, kernels, weights and arena are laid
/// end to end (the arena regions do not overlap, so an entry point never
/// clobbers another's outputs); each state tensor lives where the first part
/// that reads it has it, live across the whole launch list, and the other
/// parts' launches are pointed there. Signature tensors become
/// "<entry>:<name>". Every spec must name a state input of some part.
Expected<Artifact> combineEntryPoints(std::vector<EntryPointArtifact> parts,
                                      const std::vector<StateSpec> &state);

/// A fingerprint of an artifact's state layout (names, dtypes, shapes,
/// segments): checkpoints record it, and a checkpoint with another one is
/// from another model.
std::string stateFingerprint(const Artifact &artifact);

/// A checkpoint in memory: tensors by name, and the string metadata.
struct Checkpoint {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// safetensors I/O. writeSafetensors writes a temporary file in the
/// destination's directory, fsyncs it and renames it into place.
Error writeSafetensors(const std::string &path, const Checkpoint &checkpoint);
Expected<Checkpoint> readSafetensors(const std::string &path);
/// As readSafetensors, for a file image in memory; `displayName` starts
/// every error message (the fuzz target's entry point, fuzz/).
Expected<Checkpoint> parseSafetensors(const uint8_t *bytes, uint64_t size,
                                      std::string_view displayName);

/// Writes a copy of the ONNX model at `modelPath` to `outputPath` with each
/// initializer named in `weights` replaced by its value (dtype and shape
/// must match; every name must exist). The rest of the file is copied
/// unchanged. Written atomically; an empty `outputPath` only checks.
Error exportOnnxWeights(const std::string &modelPath,
                        const std::string &outputPath,
                        const std::map<std::string, HostTensor> &weights);

class TrainingSession {
public:
  /// Fails for an artifact without `train_step` and `eval` entry points.
  static Expected<std::unique_ptr<TrainingSession>>
  create(std::shared_ptr<const Artifact> artifact,
         std::shared_ptr<Device> device);

  const Artifact &artifact() const { return session->artifact(); }
  Session &base() { return *session; }

  /// The inputs of an entry point the caller binds ("train_step:x"; not
  /// the size masks the runtime fills).
  std::vector<const TensorSignature *> entryInputs(std::string_view entry) const;
  std::vector<const TensorSignature *> entryOutputs(std::string_view entry) const;

  /// Binds `name` for every entry point that reads it (train_step reads the
  /// inputs and the labels, eval the inputs). An error when none does.
  Error bindBatch(std::string_view name, const HostTensor &tensor);
  /// One train_step: forward, loss, backward, optimizer update. A
  /// data-parallel artifact (kilnc --data-parallel) runs train_step (the
  /// gradients, into state `grad`), its collective steps (each gradient
  /// bucket averaged across the ranks of the communicator, when there is
  /// one with more than one rank) and train_update. With ZeRO stage 1
  /// (kilnc --shard-optimizer=N) the gradients are reduce-scattered
  /// instead, the update runs on this rank's shard and the weights are
  /// all-gathered; the communicator must then have exactly N ranks (or be
  /// absent with N = 1).
  Error step();
  /// step(), timed with the device's events (kiln-train --trace on cuda):
  /// every launch of train_step and train_update, every all-reduce a device
  /// engine (NCCL) ran, and the host work between the two entry points, in
  /// microseconds after train_step's first launch was queued.
  Expected<StepTimeline> timedStep();
  /// The loss of the last step; with a communicator of several ranks, the
  /// mean over the ranks (a collective: every rank must call it), each
  /// rank's loss weighted by its batch share.
  Expected<float> loss();
  /// Data parallelism with a run-time batch (kilnc --train --dim): the
  /// next steps' share of this rank in the global batch, `samples` of
  /// `globalSamples` (an epoch's smaller last batch splits unevenly). Each
  /// rank's gradients (the mean over its samples) and loss are weighted by
  /// N x samples / globalSamples before the mean over the N ranks, so the
  /// result is the mean over the global batch, as one process would
  /// compute it. 0, 0 (the default): equal shares, weight 1.
  Error setBatchShare(uint64_t samples, uint64_t globalSamples);
  /// Data-parallel training: the ranks to average the gradients over.
  /// Without one (or with one rank) a data-parallel artifact trains alone.
  void setCommunicator(std::shared_ptr<Communicator> communicator) {
    this->communicator = std::move(communicator);
  }
  const std::shared_ptr<Communicator> &getCommunicator() const {
    return communicator;
  }
  /// Whether the artifact was compiled with --data-parallel.
  bool isDataParallel() const { return !artifact().collectives.empty(); }
  /// Whether the artifact was compiled with --shard-optimizer (ZeRO stage
  /// 1): then saveCheckpoint is a collective too (every rank calls it;
  /// rank 0 writes).
  bool shardsOptimizer() const;
  /// An error unless the communicator's world size (1 without one) is the
  /// one a --shard-optimizer artifact was compiled for.
  Error checkWorldSize() const;
  /// Mixed precision with loss scaling (kilnc --loss-scale): whether the
  /// artifact has it, the current scale (state `loss_scale`), and whether
  /// the last step was skipped for an inf/NaN gradient (output `skipped`).
  bool scalesLoss() const;
  Expected<float> lossScale();
  Expected<bool> lastStepSkipped();
  /// Runs eval on the current weights.
  Error evaluate();
  /// An output of the last eval ("y").
  Expected<HostTensor> readEvalOutput(std::string_view name);

  Expected<HostTensor> readState(std::string_view name);
  Error writeState(std::string_view name, const HostTensor &tensor);
  /// The step counter (state `opt.step`).
  Expected<uint64_t> stepCount();
  /// Each model weight by ONNX initializer name (the segments of the state).
  Expected<std::map<std::string, HostTensor>> weights();

  /// Every state tensor, and `extra` metadata (the trainer's epoch, its RNG).
  /// With --shard-optimizer every rank must call it: the optimizer state is
  /// gathered whole, and only rank 0 writes the file.
  Error saveCheckpoint(const std::string &path,
                       const std::map<std::string, std::string> &extra = {});
  /// Checks that the checkpoint is this artifact's (fingerprint, every
  /// tensor's dtype and shape) before writing any state; returns its
  /// metadata.
  Expected<std::map<std::string, std::string>>
  loadCheckpoint(const std::string &path);

private:
  explicit TrainingSession(std::unique_ptr<Session> session)
      : session(std::move(session)) {}
  /// The name of `entry:name` for the entry point of train_step or
  /// train_update that has output `name`.
  std::string stepOutput(std::string_view name) const;
  /// The collective steps through the communicator's host collectives;
  /// `skipPlain` leaves out the fp32 ones (a device engine reduced them).
  Error runCollectives(bool skipPlain);
  /// setBatchShare's weight: N x samples / globalSamples (1: equal shares).
  double batchWeight = 1;
  /// ZeRO stage 1 (TrainingShard.cpp).
  Error stepSharded();
  int worldRank() const;
  int worldSize() const;
  /// S, the elements of one rank's shard; and the weights' elements.
  uint64_t shardElements() const;
  uint64_t weightElements() const;
  /// grad.shard, params.shard, grad.sqnorm: rewritten every step, not
  /// checkpointed.
  bool isTransientShardState(uint32_t index) const;
  /// opt.m, opt.v under ZeRO: one shard per rank, whole in checkpoints.
  bool isShardedState(uint32_t index) const;
  Expected<HostTensor> gatherShardedState(uint32_t index);
  Expected<HostTensor> shardOfCheckpointTensor(uint32_t index,
                                               const HostTensor &whole,
                                               const std::string &path);
  std::unique_ptr<Session> session;
  std::shared_ptr<Communicator> communicator;
  /// Compressed all-reduce: each collective step's error-feedback residual
  /// (this rank's; not checkpointed: a resumed run restarts it at zero).
  std::vector<std::vector<float>> residuals;
  /// PowerSGD: each collective step's error feedback and warm-start Q
  /// (this rank's; not checkpointed either).
  std::vector<PowerSgdMemory> powerSgdMemory;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_TRAINING_H
