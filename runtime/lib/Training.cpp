//===- Training.cpp - TrainingSession: step, eval, checkpoints ------------===//
//
// A thin layer over Session for artifacts with train_step and eval entry
// points: batches bind to every entry point that reads them, the loss and
// eval outputs are read by their plain names, and checkpoints hold every
// state tensor (the weights split into their ONNX initializers, so other
// tools can read them) plus the artifact's state fingerprint.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Training.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace kiln::runtime {

namespace {
constexpr std::string_view kTrainStep = "train_step";
constexpr std::string_view kTrainUpdate = "train_update";
constexpr std::string_view kEval = "eval";
constexpr const char *kFingerprintKey = "kiln.state_fingerprint";
/// ZeRO checkpoints: the world size their optimizer state was sharded over.
constexpr const char *kShardsKey = "kiln.shard_optimizer";

/// "train_step:x" -> "x" when it belongs to `entry`.
std::optional<std::string> plainName(std::string_view entry,
                                     const std::string &name) {
  std::string prefix = std::string(entry) + ":";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  return name.substr(prefix.size());
}

/// The checkpoint key of a state tensor that is not split into weights.
std::string stateKey(const StateTensor &tensor) {
  return std::string(kStatePrefix) + tensor.name;
}
} // namespace

Expected<std::unique_ptr<TrainingSession>>
TrainingSession::create(std::shared_ptr<const Artifact> artifact,
                        std::shared_ptr<Device> device) {
  if (!artifact)
    return makeError("TrainingSession::create: no artifact");
  for (std::string_view entry : {kTrainStep, kEval})
    if (!artifact->findEntryPoint(entry))
      return makeError("the artifact has no '{}' entry point: compile it "
                       "with kilnc --train",
                       entry);
  if (!artifact->findOutput(std::string(kTrainStep) + ":" +
                            std::string(kLossOutput)))
    return makeError("the artifact's train_step has no 'loss' output");
  if (artifact->shardOptimizer.squaredNorm != ShardOptimizerConfig::kNone &&
      !artifact->findEntryPoint("train_grad_norm"))
    return makeError("the artifact shards the optimizer with a squared-norm "
                     "state but has no 'train_grad_norm' entry point");
  if (!artifact->collectives.empty() && !artifact->findEntryPoint(kTrainUpdate))
    return makeError("the artifact has collective steps but no '{}' entry "
                     "point",
                     kTrainUpdate);
  Expected<std::unique_ptr<Session>> session =
      Session::create(std::move(artifact), std::move(device));
  if (!session)
    return session.takeError();
  return std::unique_ptr<TrainingSession>(new TrainingSession(session.take()));
}

std::vector<const TensorSignature *>
TrainingSession::entryInputs(std::string_view entry) const {
  std::vector<const TensorSignature *> result;
  // Size masks are the runtime's to fill (kilnc --train --dim), not bound.
  if (const EntryPoint *e = artifact().findEntryPoint(entry))
    for (uint32_t i : e->inputs)
      if (!artifact().findSizeMask(artifact().inputs[i].name))
        result.push_back(&artifact().inputs[i]);
  return result;
}

std::vector<const TensorSignature *>
TrainingSession::entryOutputs(std::string_view entry) const {
  std::vector<const TensorSignature *> result;
  if (const EntryPoint *e = artifact().findEntryPoint(entry))
    for (uint32_t o : e->outputs)
      result.push_back(&artifact().outputs[o]);
  return result;
}

Error TrainingSession::bindBatch(std::string_view name,
                                 const HostTensor &tensor) {
  bool bound = false;
  for (const TensorSignature &input : artifact().inputs) {
    bool ours = false;
    for (std::string_view entry : {kTrainStep, kEval})
      ours |= plainName(entry, input.name) == std::string(name);
    if (!ours)
      continue;
    if (Error err = session->bindInput(input.name, tensor))
      return err;
    bound = true;
  }
  if (!bound) {
    std::string names;
    for (const TensorSignature *input : entryInputs(kTrainStep))
      names += (names.empty() ? "'" : ", '") +
               *plainName(kTrainStep, input->name) + "'";
    return makeError("no input named '{}' (train_step reads {})", name,
                     names.empty() ? "none" : names);
  }
  return Error::success();
}

std::string TrainingSession::stepOutput(std::string_view name) const {
  for (std::string_view entry : {kTrainStep, kTrainUpdate}) {
    std::string full = std::string(entry) + ":" + std::string(name);
    if (artifact().findOutput(full))
      return full;
  }
  return std::string(kTrainStep) + ":" + std::string(name);
}

namespace {
/// Queues each fp32 gradient bucket's all-reduce on the engine's stream
/// right after the launch that completes it (Artifact::collectives'
/// afterLaunch), on the bytes train_step writes the gradients to; buckets
/// whose launch never comes are queued after the last launch.
class BucketScheduler final : public LaunchObserver {
public:
  BucketScheduler(const Artifact &artifact, Session &session,
                  DeviceCollectives &engine)
      : artifact(artifact), session(session), engine(engine),
        queued(artifact.collectives.size(), false) {}

  Error afterLaunch(uint32_t index, StreamHandle stream) override {
    for (size_t i = 0; i < artifact.collectives.size(); ++i)
      if (artifact.collectives[i].afterLaunch == index)
        if (Error err = enqueue(i, stream))
          return err;
    return Error::success();
  }
  Error beforeWait(StreamHandle stream) override {
    for (size_t i = 0; i < artifact.collectives.size(); ++i)
      if (Error err = enqueue(i, stream))
        return err;
    return engine.finish(stream);
  }
  /// The collective steps queued, in queue order.
  const std::vector<size_t> &order() const { return queueOrder; }

private:
  Error enqueue(size_t i, StreamHandle stream) {
    const CollectiveStep &step = artifact.collectives[i];
    if (queued[i] || step.kind != CollectiveKind::AllReduceMean)
      return Error::success();
    queued[i] = true;
    queueOrder.push_back(i);
    Expected<DevicePtr> base = gradientOutput(step.state);
    if (!base)
      return base.takeError();
    return engine.enqueueAllReduceMean(
        *base + step.elementOffset * sizeof(float), step.elementCount, stream,
        fmt::format("gradient bucket {} ({} elements of state '{}')", i,
                    step.elementCount, artifact.state[step.state].name));
  }
  /// Where train_step writes the new value of state `state`.
  Expected<DevicePtr> gradientOutput(uint32_t state) {
    if (const EntryPoint *entry = artifact.findEntryPoint(kTrainStep))
      for (const StateUpdate &update : entry->updates)
        if (update.state == state)
          return session.outputAddress(artifact.outputs[update.output].name);
    return makeError("train_step does not write state '{}', which a "
                     "collective step reduces",
                     artifact.state[state].name);
  }

  const Artifact &artifact;
  Session &session;
  DeviceCollectives &engine;
  std::vector<bool> queued;
  std::vector<size_t> queueOrder;
};

/// The host engine (MPI) behind the device-engine interface: each fp32
/// bucket is reduced as soon as the launch that completes it has run (the
/// stream is synchronized, the bucket copied to the host, averaged across
/// the ranks and copied back), at the same point of train_step as NCCL
/// reduces it. So a bucket's afterLaunch is exercised on every device,
/// emu included: one placed before its last write would average a partial
/// bucket, which a later launch then overwrites with this rank's own.
class StagedCollectives final : public DeviceCollectives {
public:
  StagedCollectives(Device &device, Communicator &communicator)
      : device(device), communicator(communicator) {}
  Error enqueueAllReduceMean(DevicePtr data, uint64_t count, StreamHandle after,
                             std::string_view what) override {
    if (Error err = device.synchronize(after))
      return err;
    buffer.resize(count);
    if (Error err =
            device.copyToHost(buffer.data(), data, count * sizeof(float)))
      return err;
    if (Error err = communicator.allReduceMean(buffer.data(), count, what))
      return err;
    return device.copyToDevice(data, buffer.data(), count * sizeof(float));
  }
  Error finish(StreamHandle) override { return Error::success(); }
  void setTiming(bool) override {}
  Expected<std::vector<std::pair<double, double>>>
  takeTimes(EventHandle) override {
    return std::vector<std::pair<double, double>>{};
  }

private:
  Device &device;
  Communicator &communicator;
  std::vector<float> buffer;
};

/// Records an event before an entry point's launches and after each one
/// (kiln-train --trace on cuda), then hands each launch to `inner`.
class LaunchTimer final : public LaunchObserver {
public:
  LaunchTimer(Device &device, LaunchObserver *inner)
      : device(device), inner(inner) {}
  ~LaunchTimer() override {
    for (EventHandle event : events)
      (void)device.destroyEvent(event);
  }
  Error beforeLaunches(StreamHandle stream) override {
    Expected<EventHandle> event = record(stream);
    if (!event)
      return event.takeError();
    start = *event;
    return inner ? inner->beforeLaunches(stream) : Error::success();
  }
  Error afterLaunch(uint32_t index, StreamHandle stream) override {
    Expected<EventHandle> event = record(stream);
    if (!event)
      return event.takeError();
    ends.push_back({index, *event});
    return inner ? inner->afterLaunch(index, stream) : Error::success();
  }
  Error beforeWait(StreamHandle stream) override {
    return inner ? inner->beforeWait(stream) : Error::success();
  }

  EventHandle start;
  std::vector<std::pair<uint32_t, EventHandle>> ends;

private:
  Expected<EventHandle> record(StreamHandle stream) {
    Expected<EventHandle> event = device.createEvent();
    if (!event)
      return event.takeError();
    events.push_back(*event);
    if (Error err = device.recordEvent(*event, stream))
      return err;
    return *event;
  }

  Device &device;
  LaunchObserver *inner;
  std::vector<EventHandle> events;
};

/// The compute slices of one timed entry point, in ms after `origin`.
Error addLaunchSlices(Device &device, EventHandle origin,
                      const LaunchTimer &timer, const Artifact &artifact,
                      std::string_view entry, StepTimeline &timeline) {
  Expected<float> from = device.elapsedMilliseconds(origin, timer.start);
  if (!from)
    return from.takeError();
  double clock = *from;
  for (auto [launch, event] : timer.ends) {
    Expected<float> end = device.elapsedMilliseconds(origin, event);
    if (!end)
      return end.takeError();
    StepSlice slice;
    slice.track = "compute";
    slice.name = artifact.kernels[artifact.launches[launch].kernel].name;
    slice.index = launch;
    slice.startMicros = clock * 1e3;
    slice.durationMicros = std::max(0.0, (*end - clock) * 1e3);
    slice.entry = std::string(entry);
    timeline.slices.push_back(std::move(slice));
    clock = *end;
  }
  return Error::success();
}
} // namespace

Error TrainingSession::runCollectives(bool skipPlain) {
  const Artifact &a = artifact();
  if (!communicator || communicator->size() == 1)
    return Error::success();
  // The state is read and written whole: on emu that is a copy in host
  // memory, and every bucket of a step lies in the one gradient tensor.
  std::map<uint32_t, HostTensor> tensors;
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveStep &step = a.collectives[i];
    if (skipPlain && step.kind == CollectiveKind::AllReduceMean)
      continue; // reduced on the device already
    auto it = tensors.find(step.state);
    if (it == tensors.end()) {
      Expected<HostTensor> value = session->readState(a.state[step.state].name);
      if (!value)
        return value.takeError();
      it = tensors.emplace(step.state, value.take()).first;
    }
    float *data = reinterpret_cast<float *>(it->second.data.data()) +
                  step.elementOffset;
    if (batchWeight != 1)
      for (uint64_t e = 0; e < step.elementCount; ++e)
        data[e] = float(data[e] * batchWeight);
    std::string what =
        fmt::format("gradient bucket {} ({} elements of state '{}')", i,
                    step.elementCount, a.state[step.state].name);
    Error err = Error::success();
    if (step.kind == CollectiveKind::AllReduceMean) {
      err = communicator->allReduceMean(data, step.elementCount, what);
    } else if (step.kind == CollectiveKind::AllReducePowerSgd) {
      std::vector<PowerSgdBlock> blocks;
      const PowerSgdConfig &config = a.powerSgd;
      for (size_t m = 0; m < config.matrices.size(); ++m)
        if (config.matrices[m].step == i)
          blocks.push_back({config.matrices[m].elementOffset -
                                step.elementOffset,
                            config.matrices[m].rows, config.matrices[m].cols,
                            m});
      powerSgdMemory.resize(a.collectives.size());
      err = allReduceMeanPowerSgd(*communicator, data, step.elementCount,
                                  blocks, config.rank, config.seed,
                                  powerSgdMemory[i], what);
    } else {
      residuals.resize(a.collectives.size());
      err = allReduceMeanCompressed(
          *communicator, data, step.elementCount,
          step.kind == CollectiveKind::AllReduceMeanBf16 ? DType::BF16
                                                         : DType::F16,
          residuals[i], what);
    }
    if (err)
      return err;
  }
  for (auto &[state, tensor] : tensors)
    if (Error err = writeState(a.state[state].name, tensor))
      return err;
  return Error::success();
}

Error TrainingSession::step() {
  if (shardsOptimizer())
    return stepSharded();
  DeviceCollectives *onDevice =
      communicator && isDataParallel() ? communicator->deviceCollectives()
                                       : nullptr;
  // Unequal batch shares (a smaller last batch split over the ranks):
  // every bucket weighted and reduced on the host after train_step.
  if (batchWeight != 1 && communicator && communicator->size() > 1 &&
      isDataParallel())
    onDevice = nullptr;
  // The host engine reduces the fp32 buckets at the same points, staged
  // through host memory, when there is anybody to reduce with.
  std::optional<StagedCollectives> staged;
  if (!onDevice && batchWeight == 1 && communicator &&
      communicator->size() > 1 && isDataParallel()) {
    staged.emplace(session->device(), *communicator);
    onDevice = &*staged;
  }
  if (!onDevice) {
    if (Error err = session->runEntryPoint(kTrainStep))
      return err;
    if (!isDataParallel())
      return Error::success();
    if (Error err = runCollectives(/*skipPlain=*/false))
      return err;
    return session->runEntryPoint(kTrainUpdate);
  }
  // A device engine (NCCL) reduces the fp32 buckets on its own stream while
  // train_step still runs, also at world size 1 (the device check runs the
  // engine there); compressed buckets take the host path afterwards.
  BucketScheduler scheduler(artifact(), *session, *onDevice);
  if (Error err = session->runEntryPoint(kTrainStep, &scheduler))
    return err;
  if (Error err = runCollectives(/*skipPlain=*/true))
    return err;
  return session->runEntryPoint(kTrainUpdate);
}

Expected<StepTimeline> TrainingSession::timedStep() {
  if (shardsOptimizer())
    return makeError("a timed step (kiln-train --trace) of a ZeRO-1 artifact "
                     "(--shard-optimizer) is not supported yet");
  Device &device = session->device();
  DeviceCollectives *onDevice =
      communicator && isDataParallel() ? communicator->deviceCollectives()
                                       : nullptr;
  std::optional<BucketScheduler> scheduler;
  if (onDevice) {
    scheduler.emplace(artifact(), *session, *onDevice);
    onDevice->setTiming(true);
  }
  LaunchTimer stepTimer(device, scheduler ? &*scheduler : nullptr);
  Error ran = session->runEntryPoint(kTrainStep, &stepTimer);
  if (onDevice)
    onDevice->setTiming(false);
  if (ran)
    return ran;
  std::optional<LaunchTimer> updateTimer;
  if (isDataParallel()) {
    if (Error err = runCollectives(/*skipPlain=*/onDevice != nullptr))
      return err;
    updateTimer.emplace(device, nullptr);
    if (Error err = session->runEntryPoint(kTrainUpdate, &*updateTimer))
      return err;
  }
  StepTimeline timeline;
  timeline.timeSource = "measured";
  timeline.subject = device.info().name;
  timeline.ring.ranks = communicator ? uint32_t(communicator->size()) : 1;
  EventHandle origin = stepTimer.start;
  if (Error err = addLaunchSlices(device, origin, stepTimer, artifact(),
                                  kTrainStep, timeline))
    return err;
  if (onDevice) {
    Expected<std::vector<std::pair<double, double>>> times =
        onDevice->takeTimes(origin);
    if (!times)
      return times.takeError();
    for (size_t n = 0; n < times->size() && n < scheduler->order().size();
         ++n) {
      size_t i = scheduler->order()[n];
      const CollectiveStep &step = artifact().collectives[i];
      StepSlice slice;
      slice.track = "collectives";
      slice.name = fmt::format("all-reduce bucket {}", i);
      slice.index = uint32_t(i);
      slice.startMicros = (*times)[n].first * 1e3;
      slice.durationMicros =
          std::max(0.0, ((*times)[n].second - (*times)[n].first) * 1e3);
      slice.bytes = step.elementCount * sizeof(float);
      slice.elements = step.elementCount;
      slice.afterLaunch = step.afterLaunch;
      timeline.slices.push_back(std::move(slice));
    }
  }
  if (updateTimer) {
    // What lies between train_step's last launch and train_update's first
    // is host work: the state update, and the host-path collectives.
    double stepEnd = 0;
    for (const StepSlice &slice : timeline.slices)
      if (slice.track == "compute")
        stepEnd = std::max(stepEnd, slice.startMicros + slice.durationMicros);
    Expected<float> updateStart =
        device.elapsedMilliseconds(origin, updateTimer->start);
    if (!updateStart)
      return updateStart.takeError();
    bool hostCollectives =
        communicator && communicator->size() > 1 &&
        std::any_of(artifact().collectives.begin(),
                    artifact().collectives.end(),
                    [&](const CollectiveStep &step) {
                      return !onDevice ||
                             step.kind != CollectiveKind::AllReduceMean;
                    });
    StepSlice host;
    host.track = hostCollectives ? "collectives" : "compute";
    host.name = hostCollectives ? "host: state update and host-path "
                                  "all-reduces"
                                : "host: state update";
    host.index = uint32_t(artifact().collectives.size());
    host.startMicros = stepEnd;
    host.durationMicros = std::max(0.0, *updateStart * 1e3 - stepEnd);
    host.entry = "host";
    timeline.slices.push_back(std::move(host));
    if (Error err = addLaunchSlices(device, origin, *updateTimer, artifact(),
                                    kTrainUpdate, timeline))
      return err;
  }
  return timeline;
}

Expected<float> TrainingSession::loss() {
  Expected<HostTensor> loss = session->readOutput(stepOutput(kLossOutput));
  if (!loss)
    return loss.takeError();
  if (loss->dtype != DType::F32 || loss->data.size() != 4)
    return makeError("the loss is {} {}, not an f32 scalar",
                     dtypeName(loss->dtype), formatShape(loss->shape));
  float value;
  std::memcpy(&value, loss->data.data(), 4);
  if (communicator && communicator->size() > 1) {
    value = float(value * batchWeight);
    if (Error err = communicator->allReduceMean(&value, 1, "the loss"))
      return err;
  }
  return value;
}

Error TrainingSession::setBatchShare(uint64_t samples, uint64_t globalSamples) {
  if (samples == 0 && globalSamples == 0) {
    batchWeight = 1;
    return Error::success();
  }
  int ranks = communicator ? communicator->size() : 1;
  if (samples == 0 || samples > globalSamples)
    return makeError("a batch share of {} of {} samples: each rank needs at "
                     "least one sample, and no more than the global batch",
                     samples, globalSamples);
  batchWeight = double(ranks) * double(samples) / double(globalSamples);
  return Error::success();
}

bool TrainingSession::scalesLoss() const {
  return artifact().findState(kLossScaleState) != nullptr;
}

namespace {
/// An f32 scalar's value.
Expected<float> scalarValue(Expected<HostTensor> tensor, std::string_view what) {
  if (!tensor)
    return tensor.takeError();
  if (tensor->dtype != DType::F32 || tensor->data.size() != 4)
    return makeError("{} is {} {}, not an f32 scalar", what,
                     dtypeName(tensor->dtype), formatShape(tensor->shape));
  float value;
  std::memcpy(&value, tensor->data.data(), 4);
  return value;
}
} // namespace

Expected<float> TrainingSession::lossScale() {
  return scalarValue(session->readState(kLossScaleState), "the loss scale");
}

Expected<bool> TrainingSession::lastStepSkipped() {
  Expected<float> flag = scalarValue(
      session->readOutput(stepOutput(kSkippedOutput)), "the skipped flag");
  if (!flag)
    return flag.takeError();
  return *flag != 0;
}

Error TrainingSession::evaluate() { return session->runEntryPoint(kEval); }

Expected<HostTensor> TrainingSession::readEvalOutput(std::string_view name) {
  return session->readOutput(std::string(kEval) + ":" + std::string(name));
}

Expected<HostTensor> TrainingSession::readState(std::string_view name) {
  return session->readState(name);
}

Error TrainingSession::writeState(std::string_view name,
                                  const HostTensor &tensor) {
  return session->writeState(name, tensor.dtype, tensor.shape,
                             tensor.data.data(), tensor.data.size());
}

Expected<uint64_t> TrainingSession::stepCount() {
  Expected<HostTensor> step = session->readState("opt.step");
  if (!step)
    return step.takeError();
  float value = 0;
  if (step->data.size() == 4)
    std::memcpy(&value, step->data.data(), 4);
  return static_cast<uint64_t>(value);
}

Expected<std::map<std::string, HostTensor>> TrainingSession::weights() {
  std::map<std::string, HostTensor> result;
  for (const StateTensor &tensor : artifact().state) {
    if (tensor.segments.empty())
      continue;
    Expected<HostTensor> value = session->readState(tensor.name);
    if (!value)
      return value.takeError();
    uint64_t element = dtypeSize(tensor.dtype);
    for (const StateSegment &segment : tensor.segments) {
      HostTensor weight;
      weight.dtype = tensor.dtype;
      weight.shape = segment.shape;
      uint64_t bytes = *tensorByteSize(tensor.dtype, segment.shape);
      const uint8_t *start = value->data.data() + segment.elementOffset * element;
      weight.data.assign(start, start + bytes);
      result[segment.name] = std::move(weight);
    }
  }
  return result;
}

Error TrainingSession::saveCheckpoint(
    const std::string &path, const std::map<std::string, std::string> &extra) {
  Checkpoint checkpoint;
  checkpoint.metadata = extra;
  checkpoint.metadata[kFingerprintKey] = stateFingerprint(artifact());
  checkpoint.metadata["format"] = "pt";
  if (shardsOptimizer()) {
    if (Error err = checkWorldSize())
      return err;
    checkpoint.metadata[kShardsKey] =
        std::to_string(artifact().shardOptimizer.shards);
  }
  for (uint32_t i = 0; i < artifact().state.size(); ++i) {
    const StateTensor &tensor = artifact().state[i];
    if (!tensor.segments.empty() || isTransientShardState(i))
      continue; // Weights are saved weight by weight below.
    Expected<HostTensor> value = isShardedState(i)
                                     ? gatherShardedState(i)
                                     : session->readState(tensor.name);
    if (!value)
      return value.takeError();
    checkpoint.tensors[stateKey(tensor)] = value.take();
  }
  if (worldRank() != 0)
    return Error::success(); // ZeRO: the others only helped gather.
  Expected<std::map<std::string, HostTensor>> weightTensors = weights();
  if (!weightTensors)
    return weightTensors.takeError();
  for (auto &[name, tensor] : *weightTensors) {
    if (checkpoint.tensors.count(name))
      return makeError("{}: weight '{}' clashes with a state tensor's name",
                       path, name);
    checkpoint.tensors[name] = std::move(tensor);
  }
  return writeSafetensors(path, checkpoint);
}

Expected<std::map<std::string, std::string>>
TrainingSession::loadCheckpoint(const std::string &path) {
  Expected<Checkpoint> checkpoint = readSafetensors(path);
  if (!checkpoint)
    return checkpoint.takeError();
  auto fingerprint = checkpoint->metadata.find(kFingerprintKey);
  std::string expected = stateFingerprint(artifact());
  if (fingerprint == checkpoint->metadata.end())
    return makeError("{}: not a Kiln training checkpoint (no {} metadata)",
                     path, kFingerprintKey);
  // ZeRO's shards are per world size: say so before the fingerprint does.
  auto shards = checkpoint->metadata.find(kShardsKey);
  std::string written =
      shards == checkpoint->metadata.end() ? "" : shards->second;
  std::string expectedShards =
      shardsOptimizer() ? std::to_string(artifact().shardOptimizer.shards) : "";
  if (written != expectedShards)
    return makeError(
        "{}: the checkpoint's optimizer state is {}, this artifact's is {}: "
        "resume with an artifact compiled as the checkpoint's was (a ZeRO "
        "checkpoint loads only with the same --shard-optimizer=N)",
        path,
        written.empty() ? "not sharded" : "sharded over " + written + " ranks",
        expectedShards.empty() ? "not sharded"
                               : "sharded over " + expectedShards + " ranks");
  if (fingerprint->second != expected)
    return makeError("{}: the checkpoint is from another model (state "
                     "fingerprint {}, this artifact's is {})",
                     path, fingerprint->second, expected);
  // Assemble every state tensor first; write only when all are complete.
  std::vector<std::pair<const StateTensor *, HostTensor>> values;
  for (uint32_t i = 0; i < artifact().state.size(); ++i) {
    const StateTensor &tensor = artifact().state[i];
    HostTensor value;
    value.dtype = tensor.dtype;
    value.shape = tensor.shape;
    if (isTransientShardState(i))
      continue;
    if (isShardedState(i)) {
      auto it = checkpoint->tensors.find(stateKey(tensor));
      if (it == checkpoint->tensors.end())
        return makeError("{}: tensor '{}' is missing", path, stateKey(tensor));
      Expected<HostTensor> mine = shardOfCheckpointTensor(i, it->second, path);
      if (!mine)
        return mine.takeError();
      value = mine.take();
    } else if (tensor.segments.empty()) {
      auto it = checkpoint->tensors.find(stateKey(tensor));
      if (it == checkpoint->tensors.end())
        return makeError("{}: tensor '{}' is missing", path, stateKey(tensor));
      if (it->second.dtype != tensor.dtype || it->second.shape != tensor.shape)
        return makeError("{}: tensor '{}' is {} {}, the artifact's is {} {}",
                         path, it->first, dtypeName(it->second.dtype),
                         formatShape(it->second.shape), dtypeName(tensor.dtype),
                         formatShape(tensor.shape));
      value.data = it->second.data;
    } else {
      value.data.assign(*tensorByteSize(tensor.dtype, tensor.shape), 0);
      uint64_t element = dtypeSize(tensor.dtype);
      for (const StateSegment &segment : tensor.segments) {
        auto it = checkpoint->tensors.find(segment.name);
        if (it == checkpoint->tensors.end())
          return makeError("{}: weight '{}' is missing", path, segment.name);
        if (it->second.dtype != tensor.dtype ||
            it->second.shape != segment.shape)
          return makeError("{}: weight '{}' is {} {}, the artifact's is {} {}",
                           path, segment.name, dtypeName(it->second.dtype),
                           formatShape(it->second.shape),
                           dtypeName(tensor.dtype),
                           formatShape(segment.shape));
        std::memcpy(value.data.data() + segment.elementOffset * element,
                    it->second.data.data(), it->second.data.size());
      }
    }
    values.push_back({&tensor, std::move(value)});
  }
  for (auto &[tensor, value] : values)
    if (Error err = writeState(tensor->name, value))
      return err;
  return checkpoint->metadata;
}

} // namespace kiln::runtime
