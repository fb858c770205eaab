//===- Training.cpp - kiln._native: training sessions ---------------------===//
//
// Binds TrainingSession (kiln/runtime/Training.h) and the training-loop
// pieces kiln-train uses (kiln/runtime/Trainer.h: batch signature, dataset
// checks, the epoch order, validation), so kiln.Trainer (kiln/training.py)
// runs the same loop as kiln-train: the same batches in the same order, the
// same checks and messages, checkpoints either one resumes. Host arrays
// only: a training step binds host batches as kiln-train does. The GIL is
// released around steps, evaluation and file I/O; a mutex makes calls on
// one trainer run one at a time.
//
//===----------------------------------------------------------------------===//

#include "Bindings.h"
#include "Tensors.h"

#include "kiln/runtime/Trainer.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fmt/core.h>

#include <mutex>
#include <optional>

namespace nb = nanobind;
using namespace nb::literals;
using namespace kiln::runtime;
using kiln::python::InputArray;
using kiln::python::InputView;
using kiln::python::NativeError;
using kiln::python::PyArtifact;
using kiln::python::throwIfFailed;
using kiln::python::unwrap;

namespace {

/// A host copy of a caller's array (`what` names it in errors).
NpyArray hostCopy(const std::string &what, const InputArray &array) {
  return kiln::python::hostCopy(
      what, array,
      what + ": training takes host arrays (copy the tensor to the host)");
}

HostTensor hostTensor(NpyArray array) {
  HostTensor tensor;
  tensor.dtype = array.dtype;
  tensor.shape = std::move(array.shape);
  tensor.data = std::move(array.data);
  return tensor;
}

class PyTrainer {
public:
  PyTrainer(const PyArtifact &artifact, const std::string &deviceSpec,
            const std::string &name, double collectiveTimeout,
            const std::string &collectiveEngine)
      : name(name) {
    nb::gil_scoped_release release;
    // Under mpirun (docs/runtime.md "Data-parallel training"): join the
    // job, one GPU per rank from the local rank. The engine is chosen as
    // kiln-train's --collective-engine.
    if (collectiveEngine != "auto" && collectiveEngine != "mpi" &&
        collectiveEngine != "nccl")
      throw NativeError(fmt::format("collective_engine '{}' is not auto, mpi "
                                    "or nccl",
                                    collectiveEngine));
    bool emu = deviceSpec == "emu";
    if (collectiveEngine == "nccl" && emu)
      throw NativeError("collective_engine 'nccl' reduces GPU memory: "
                        "device 'emu' uses the MPI engine");
    WorldInfo world = unwrap(detectWorld());
    bool collectives = world.size > 1 || collectiveEngine == "nccl";
    std::string engine = collectiveEngine;
    if (engine == "auto")
      engine = collectives && !emu && loadNcclLibrary() ? "nccl" : "mpi";
    if (engine == "nccl")
      unwrap(loadNcclLibrary());
    std::string spec = deviceSpec;
    std::shared_ptr<Communicator> communicator;
    if (collectives && world.size == 1) {
      communicator = createLocalCommunicator();
    } else if (collectives) {
      communicator = unwrap(createMpiCommunicator({collectiveTimeout}));
      if (spec == "cuda")
        spec = fmt::format("cuda:{}", world.localRank);
    }
    std::shared_ptr<Device> device(unwrap(createDevice(spec)).release());
    if (communicator && engine == "nccl")
      communicator = unwrap(createNcclCommunicator({collectiveTimeout},
                                                   communicator, device));
    training = unwrap(TrainingSession::create(artifact.artifact, device));
    if (communicator && !training->isDataParallel())
      throw NativeError(fmt::format(
          "{}: {} ranks, but the artifact has no gradient all-reduce: "
          "compile it with kilnc --train --data-parallel",
          name, world.size));
    training->setCommunicator(communicator);
    info = device->info();
  }

  bool shardsOptimizer() const { return training->shardsOptimizer(); }
  int rank() const {
    const auto &comm = training->getCommunicator();
    return comm ? comm->rank() : 0;
  }
  int worldSize() const {
    const auto &comm = training->getCommunicator();
    return comm ? comm->size() : 1;
  }

  const DeviceInfo &deviceInfo() const { return info; }

  nb::list entryInputs(const std::string &entry) const {
    return kiln::python::signatureList(training->entryInputs(entry));
  }
  nb::list entryOutputs(const std::string &entry) const {
    return kiln::python::signatureList(training->entryOutputs(entry));
  }
  std::vector<std::string> stateNames() const {
    std::vector<std::string> names;
    for (const StateTensor &tensor : training->artifact().state)
      names.push_back(tensor.name);
    return names;
  }

  /// (data, labels, batch, eval output or None, smallest batch), as
  /// kiln-train reads them.
  nb::tuple batchSignature() {
    const BatchSignature &sig = signature();
    return nb::make_tuple(sig.dataName, sig.labelsName, sig.batch,
                          sig.evalOutput ? nb::cast(sig.evalOutputName)
                                         : nb::none(),
                          sig.minBatch);
  }

  void bind(const std::map<std::string, InputArray> &batch) {
    std::vector<std::pair<std::string, HostTensor>> tensors;
    for (const auto &[input, array] : batch)
      tensors.emplace_back(input,
                           hostTensor(hostCopy("input '" + input + "'", array)));
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    for (const auto &[input, tensor] : tensors)
      throwIfFailed(training->bindBatch(input, tensor));
  }

  float step() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    throwIfFailed(training->step());
    return unwrap(training->loss());
  }

  nb::dict evaluate() {
    std::vector<std::pair<std::string, HostTensor>> outputs;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      throwIfFailed(training->evaluate());
      for (const TensorSignature *output : training->entryOutputs("eval")) {
        std::string plain = output->name.substr(output->name.find(':') + 1);
        outputs.emplace_back(plain, unwrap(training->readEvalOutput(plain)));
      }
    }
    nb::dict result;
    for (auto &[output, tensor] : outputs)
      result[nb::str(output.c_str())] =
          kiln::python::hostOutput(std::move(tensor));
    return result;
  }

  /// Stores a dataset ("train" or "val") after kiln-train's checks.
  uint64_t setDataset(const std::string &kind, const InputArray &data,
                      const InputArray &labels, const std::string &dataName,
                      const std::string &labelsName) {
    Dataset set;
    set.data = hostCopy(dataName, data);
    set.labels = hostCopy(labelsName, labels);
    const BatchSignature &sig = signature();
    nb::gil_scoped_release release;
    throwIfFailed(checkDataset(set, sig, dataName, labelsName));
    if (kind == "train" && set.count < sig.minBatch)
      throw NativeError(
          fmt::format("{}: {} samples, fewer than one batch of {}", dataName,
                      set.count, sig.minBatch));
    if (kind == "val" && set.count == 0)
      throw NativeError(dataName + ": no samples");
    std::lock_guard<std::mutex> lock(busy);
    (kind == "train" ? train : val) = std::move(set);
    return (kind == "train" ? train : val)->count;
  }

  /// One train_step on the training samples `indices` (a batch of them;
  /// fewer when kilnc --train --dim made the batch a run-time size).
  /// `globalSamples` > 0: they are this rank's part of a global batch of
  /// that many (an epoch's smaller last batch, split unevenly over the
  /// ranks: TrainingSession::setBatchShare).
  float stepOn(const std::vector<uint64_t> &indices, uint64_t globalSamples) {
    const BatchSignature &sig = signature();
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    if (!train)
      throw NativeError("no training data: call set_dataset first");
    if (indices.size() > sig.batch || indices.size() < sig.minBatch)
      throw NativeError(sig.minBatch == sig.batch
                            ? fmt::format("{} indices for a batch of {}",
                                          indices.size(), sig.batch)
                            : fmt::format("{} indices for a batch of {} to {}",
                                          indices.size(), sig.minBatch,
                                          sig.batch));
    for (uint64_t i : indices)
      if (i >= train->count)
        throw NativeError(fmt::format("sample {} of {}", i, train->count));
    throwIfFailed(training->bindBatch(
        sig.dataName, gatherSamples(train->data, indices, *sig.data)));
    throwIfFailed(training->bindBatch(
        sig.labelsName, gatherSamples(train->labels, indices, *sig.labels)));
    throwIfFailed(training->setBatchShare(globalSamples ? indices.size() : 0,
                                          globalSamples));
    Error stepped = training->step();
    Expected<float> loss =
        stepped ? Expected<float>(std::move(stepped)) : training->loss();
    throwIfFailed(training->setBatchShare(0, 0));
    return unwrap(std::move(loss));
  }

  std::pair<std::string, double> validateOn() {
    const BatchSignature &sig = signature();
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    if (!val)
      throw NativeError("no validation data: give val_data and val_labels");
    Metric metric = unwrap(validate(*training, *val, sig));
    return {metric.name, metric.value};
  }

  nb::object state(const std::string &stateName) {
    HostTensor tensor;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      tensor = unwrap(training->readState(stateName));
    }
    return kiln::python::hostOutput(std::move(tensor));
  }

  void setState(const std::string &stateName, const InputArray &array) {
    HostTensor tensor =
        hostTensor(hostCopy("state '" + stateName + "'", array));
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    throwIfFailed(training->writeState(stateName, tensor));
  }

  bool scalesLoss() const { return training->scalesLoss(); }

  /// (loss scale, whether the last step was skipped), or None without
  /// loss scaling.
  nb::object lossScaling() {
    std::optional<std::pair<float, bool>> result;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      if (training->scalesLoss())
        result = std::make_pair(unwrap(training->lossScale()),
                                unwrap(training->lastStepSkipped()));
    }
    if (!result)
      return nb::none();
    return nb::make_tuple(result->first, result->second);
  }

  uint64_t stepCount() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    return unwrap(training->stepCount());
  }

  nb::dict weights() {
    std::map<std::string, HostTensor> values;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      values = unwrap(training->weights());
    }
    nb::dict result;
    for (auto &[weight, tensor] : values)
      result[nb::str(weight.c_str())] =
          kiln::python::hostOutput(std::move(tensor));
    return result;
  }

  void saveCheckpoint(const std::string &path,
                      const std::map<std::string, std::string> &metadata) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    throwIfFailed(training->saveCheckpoint(path, metadata));
  }

  std::map<std::string, std::string> loadCheckpoint(const std::string &path) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    return unwrap(training->loadCheckpoint(path));
  }

  void exportOnnx(const std::string &model, const std::string &output) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(busy);
    std::map<std::string, HostTensor> values = unwrap(training->weights());
    throwIfFailed(exportOnnxWeights(model, output, values));
  }

private:
  const BatchSignature &signature() {
    if (!sig)
      sig = unwrap(kiln::runtime::batchSignature(*training, name));
    return *sig;
  }

  std::string name;
  DeviceInfo info;
  std::unique_ptr<TrainingSession> training;
  std::optional<BatchSignature> sig;
  std::optional<Dataset> train, val;
  std::mutex busy;
};

} // namespace

void kiln::python::bindTraining(nb::module_ &m) {
  nb::class_<PyTrainer>(m, "Trainer")
      .def(nb::init<const PyArtifact &, const std::string &,
                    const std::string &, double, const std::string &>(),
           "artifact"_a, "device"_a, "name"_a, "collective_timeout"_a = 300.0,
           "collective_engine"_a = "auto")
      .def_prop_ro("rank", &PyTrainer::rank)
      .def_prop_ro("world_size", &PyTrainer::worldSize)
      .def_prop_ro("shards_optimizer",
                   [](const PyTrainer &self) { return self.shardsOptimizer(); })
      .def_prop_ro("device_name",
                   [](const PyTrainer &self) { return self.deviceInfo().name; })
      .def("entry_inputs", &PyTrainer::entryInputs, "entry"_a)
      .def("entry_outputs", &PyTrainer::entryOutputs, "entry"_a)
      .def_prop_ro("state_names", &PyTrainer::stateNames)
      .def("batch_signature", &PyTrainer::batchSignature)
      .def("bind", &PyTrainer::bind, "batch"_a)
      .def("step", &PyTrainer::step)
      .def("evaluate", &PyTrainer::evaluate)
      .def("set_dataset", &PyTrainer::setDataset, "kind"_a, "data"_a,
           "labels"_a, "data_name"_a, "labels_name"_a)
      .def("step_on", &PyTrainer::stepOn, "indices"_a, "global_samples"_a = 0)
      .def("validate", &PyTrainer::validateOn)
      .def("state", &PyTrainer::state, "name"_a)
      .def("set_state", &PyTrainer::setState, "name"_a, "value"_a)
      .def("step_count", &PyTrainer::stepCount)
      .def("loss_scaling", &PyTrainer::lossScaling)
      .def_prop_ro("scales_loss", &PyTrainer::scalesLoss)
      .def("weights", &PyTrainer::weights)
      .def("save_checkpoint", &PyTrainer::saveCheckpoint, "path"_a,
           "metadata"_a)
      .def("load_checkpoint", &PyTrainer::loadCheckpoint, "path"_a)
      .def("export_onnx", &PyTrainer::exportOnnx, "model"_a, "output"_a);

  m.def(
      "last_share",
      [](uint64_t samples, uint64_t rank, uint64_t ranks) {
        BatchShare share = lastShare(samples, rank, ranks);
        return std::make_pair(share.first, share.size);
      },
      "samples"_a, "rank"_a, "ranks"_a,
      "(first, size): a rank's part of an epoch's smaller last global "
      "batch, first relative to that batch's start (kiln-train's split)");
  m.def("epoch_order", &epochOrder, "count"_a, "seed"_a, "epoch"_a,
        "The sample order of an epoch, as kiln-train draws it");
  m.attr("META_EPOCHS_DONE") = std::string(kMetaEpochsDone);
  m.attr("META_SEED") = std::string(kMetaSeed);
  m.attr("META_HISTORY") = std::string(kMetaHistory);
  m.attr("HISTORY_HEADER") = std::string(kHistoryHeader);
}
