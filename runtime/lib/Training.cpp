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

#include <cstring>
#include <map>

namespace kiln::runtime {

namespace {
constexpr std::string_view kTrainStep = "train_step";
constexpr std::string_view kTrainUpdate = "train_update";
constexpr std::string_view kEval = "eval";
constexpr const char *kFingerprintKey = "kiln.state_fingerprint";

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
  if (const EntryPoint *e = artifact().findEntryPoint(entry))
    for (uint32_t i : e->inputs)
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

Error TrainingSession::runCollectives() {
  const Artifact &a = artifact();
  if (!communicator || communicator->size() == 1)
    return Error::success();
  // The state is read and written whole: on emu that is a copy in host
  // memory, and every bucket of a step lies in the one gradient tensor.
  std::map<uint32_t, HostTensor> tensors;
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveStep &step = a.collectives[i];
    auto it = tensors.find(step.state);
    if (it == tensors.end()) {
      Expected<HostTensor> value = session->readState(a.state[step.state].name);
      if (!value)
        return value.takeError();
      it = tensors.emplace(step.state, value.take()).first;
    }
    float *data = reinterpret_cast<float *>(it->second.data.data()) +
                  step.elementOffset;
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
  if (Error err = session->runEntryPoint(kTrainStep))
    return err;
  if (!isDataParallel())
    return Error::success();
  if (Error err = runCollectives())
    return err;
  return session->runEntryPoint(kTrainUpdate);
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
  if (communicator && communicator->size() > 1)
    if (Error err = communicator->allReduceMean(&value, 1, "the loss"))
      return err;
  return value;
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
  for (const StateTensor &tensor : artifact().state) {
    if (!tensor.segments.empty())
      continue; // Saved weight by weight below.
    Expected<HostTensor> value = session->readState(tensor.name);
    if (!value)
      return value.takeError();
    checkpoint.tensors[stateKey(tensor)] = value.take();
  }
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
  if (fingerprint->second != expected)
    return makeError("{}: the checkpoint is from another model (state "
                     "fingerprint {}, this artifact's is {})",
                     path, fingerprint->second, expected);
  // Assemble every state tensor first; write only when all are complete.
  std::vector<std::pair<const StateTensor *, HostTensor>> values;
  for (const StateTensor &tensor : artifact().state) {
    HostTensor value;
    value.dtype = tensor.dtype;
    value.shape = tensor.shape;
    if (tensor.segments.empty()) {
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
