//===- NativeModule.cpp - kiln._native: the runtime for Python ------------===//
//
// Binds the runtime's C++ API (runtime/include/kiln/runtime): artifacts
// (read, parse, save, signature, stats) and sessions (bind DLPack tensors,
// run, read outputs, benchmark); Training.cpp adds training sessions. The
// GIL is released around everything that reads files, touches a device or
// runs kernels. Each Session holds a mutex,
// so one Python Session used from two threads runs one call at a time;
// different sessions run in parallel. kiln/__init__.py wraps these classes
// and turns NativeError into kiln.RuntimeError.
//
//===----------------------------------------------------------------------===//

#include "Bindings.h"
#include "Tensors.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SignatureGroups.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fmt/core.h>

#include <map>
#include <mutex>
#include <set>

namespace nb = nanobind;
using namespace nb::literals;
using namespace kiln::runtime;
using kiln::python::InputArray;
using kiln::python::InputView;
using kiln::python::NativeError;
using kiln::python::PyArtifact;
using kiln::python::throwIfFailed;
using kiln::python::unwrap;

nb::list kiln::python::signatureList(
    const std::vector<const TensorSignature *> &tensors) {
  nb::list list;
  for (const TensorSignature *tensor : tensors) {
    nb::list shape;
    for (int64_t d : tensor->shape)
      shape.append(d);
    list.append(nb::make_tuple(tensor->name,
                               std::string(dtypeName(tensor->dtype)),
                               nb::tuple(shape)));
  }
  return list;
}

namespace {

/// The tensors the user binds or reads: a size mask, which the runtime fills
/// from the run's sizes, is left out.
nb::list signatureOf(const Artifact &artifact,
                     const std::vector<TensorSignature> &tensors) {
  std::vector<const TensorSignature *> pointers;
  for (const TensorSignature &tensor : tensors)
    if (&tensors != &artifact.inputs || !artifact.findSizeMask(tensor.name))
      pointers.push_back(&tensor);
  return kiln::python::signatureList(pointers);
}

/// (name, kind, present, first, count) per sequence or optional group.
nb::list groupsOf(const std::vector<SignatureGroup> &groups) {
  nb::list list;
  for (const SignatureGroup &group : groups)
    list.append(nb::make_tuple(group.name,
                               std::string(signatureGroupKindName(group.kind)),
                               group.present, group.first, group.count));
  return list;
}

nb::dict statsOf(const Artifact &artifact) {
  nb::dict stats;
  stats["kernels"] = artifact.kernels.size();
  stats["launches"] = artifact.launches.size();
  stats["arena_bytes"] = artifact.memoryPlan.arenaSize;
  stats["weights"] = artifact.weights.size();
  stats["weight_bytes"] =
      artifact.weightData.size() + artifact.strippedWeightBytes;
  stats["stripped_weight_bytes"] = artifact.strippedWeightBytes;
  stats["target"] = artifact.target;
  stats["format_version"] =
      fmt::format("{}.{}", artifact.formatMajor, artifact.formatMinor);
  stats["compiler_version"] = artifact.compilerVersion;
  stats["compiler_options"] = artifact.compilerOptions;
  // kilnc --dim: {name: {min, max, opt, separable, reason, size_masks}}
  // (size_masks: the mask inputs the runtime fills for the symbol).
  nb::dict symbolic;
  for (size_t s = 0; s < artifact.symbolicDims.size(); ++s) {
    const SymbolicDim &dim = artifact.symbolicDims[s];
    nb::dict entry;
    entry["min"] = dim.min;
    entry["max"] = dim.max;
    entry["opt"] = dim.opt;
    entry["separable"] = dim.separable;
    entry["reason"] = dim.reason;
    nb::list masks;
    for (const SizeMask &mask : artifact.sizeMasks)
      if (mask.symbol == s)
        masks.append(artifact.inputs[mask.input].name);
    entry["size_masks"] = masks;
    symbolic[nb::str(dim.name.c_str())] = entry;
  }
  stats["symbolic_dims"] = symbolic;
  return stats;
}

/// A host copy of an initializer given to Session(weights=...).
NpyArray hostArray(const std::string &name, const InputArray &array) {
  return kiln::python::hostCopy(
      name, array,
      fmt::format("weight '{}': initializer values must be host arrays",
                  name));
}

class PySession {
public:
  PySession(const PyArtifact &artifact, const std::string &deviceSpec,
            bool useGraph, const std::map<std::string, InputArray> &weights)
      : spec(deviceSpec) {
    std::shared_ptr<const Artifact> model = artifact.artifact;
    if (!weights.empty()) {
      std::map<std::string, NpyArray> values;
      for (const auto &[name, array] : weights)
        values.emplace(name, hostArray(name, array));
      Artifact bound = *model;
      nb::gil_scoped_release release;
      throwIfFailed(bindWeights(
          bound,
          [&](const std::string &name) -> Expected<std::optional<NpyArray>> {
            auto it = values.find(name);
            if (it == values.end())
              return std::optional<NpyArray>();
            return std::optional<NpyArray>(it->second);
          }));
      model = std::make_shared<const Artifact>(std::move(bound));
    }
    nb::gil_scoped_release release;
    device = unwrap(createDevice(deviceSpec));
    SessionOptions options;
    options.useGraph = useGraph;
    session = unwrap(Session::create(model, device, options));
  }

  const DeviceInfo &info() const { return device->info(); }
  bool onCuda() const { return device->info().kind == "cuda"; }
  int ordinal() const {
    size_t colon = spec.find(':');
    return colon == std::string::npos ? 0 : std::stoi(spec.substr(colon + 1));
  }

  /// Binds every input given; returns whether one of them was a CUDA tensor.
  /// The arrays must stay alive until the run that reads them ends (the
  /// caller holds them).
  bool bind(const std::map<std::string, InputArray> &inputs) {
    // A CUDA input is bound by pointer, and its owner may have freed it
    // since: it must be given again on every run.
    for (const std::string &name : deviceBound)
      if (!inputs.count(name))
        throw NativeError(fmt::format(
            "input '{}' was a CUDA tensor in the last run: pass it again "
            "(the session keeps only its address)",
            name));
    deviceBound.clear();
    bool anyOnDevice = false;
    for (const auto &[name, array] : inputs) {
      InputView view = kiln::python::viewInput(name, array);
      if (view.deviceType == nb::device::cuda::value) {
        if (!onCuda())
          throw NativeError(fmt::format(
              "input '{}' is a CUDA tensor, but the {} device runs host "
              "arrays (copy it to the host first)",
              name, device->info().kind));
        if (view.deviceId != ordinal())
          throw NativeError(
              fmt::format("input '{}' is on cuda:{}, the session on cuda:{}",
                          name, view.deviceId, ordinal()));
        throwIfFailed(session->bindDeviceInput(
            name, view.dtype, view.shape,
            reinterpret_cast<DevicePtr>(view.data), view.size));
        deviceBound.insert(name);
        anyOnDevice = true;
      } else if (view.deviceType == nb::device::cpu::value) {
        throwIfFailed(session->bindInput(name, view.dtype, view.shape,
                                         view.data, view.size));
      } else {
        throw NativeError(fmt::format(
            "input '{}': DLPack device type {} is neither host memory nor "
            "CUDA",
            name, view.deviceType));
      }
    }
    return anyOnDevice;
  }

  /// Runs and returns {name: array}: on the device when `where` is
  /// "device", or "auto" and an input was a CUDA tensor; else numpy arrays.
  nb::dict run(const std::map<std::string, InputArray> &inputs,
               const std::string &where) {
    if (where != "auto" && where != "host" && where != "device")
      throw NativeError(
          fmt::format("outputs='{}' is not one of auto, host, device", where));
    if (where == "device" && !onCuda())
      throw NativeError(
          fmt::format("outputs='device' needs a cuda session, not {}",
                      device->info().kind));
    std::vector<HostTensor> host;
    std::vector<DevicePtr> onDevice;
    std::vector<Shape> outputShapes;
    std::vector<std::pair<std::string, HostTensor>> hostStepOutputs;
    bool toDevice = where == "device";
    {
      // The mutex is taken without the GIL (another thread may hold it
      // while it waits for the GIL) and let go before the GIL is retaken.
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      {
        nb::gil_scoped_acquire acquire;
        toDevice |= bind(inputs) && where == "auto";
      }
      throwIfFailed(session->run());
      const Artifact &model = session->artifact();
      for (const TensorSignature &output : model.outputs) {
        if (model.host.hidesDeviceOutput(output.name))
          continue; // a device result only host steps read
        if (!toDevice) {
          host.push_back(unwrap(session->readOutput(output.name)));
          continue;
        }
        // At the run's sizes (symbolic dims), not necessarily the
        // compiled shape.
        Shape shape = unwrap(session->outputShape(output.name));
        outputShapes.push_back(shape);
        uint64_t size = *tensorByteSize(output.dtype, shape);
        Expected<DevicePtr> ptr = device->allocate(size ? size : 1);
        Error err = ptr ? session->readOutputToDevice(output.name, *ptr, size)
                        : ptr.takeError();
        if (ptr)
          onDevice.push_back(*ptr);
        if (err) {
          for (DevicePtr p : onDevice)
            (void)device->deallocate(p);
          throwIfFailed(err);
        }
      }
      // Outputs host steps make (strings, data-dependent shapes) are host
      // arrays whatever `where` says.
      for (const HostTensorDecl &decl : model.host.outputs)
        hostStepOutputs.emplace_back(decl.name,
                                     unwrap(session->readOutput(decl.name)));
    }
    nb::dict outputs;
    const Artifact &model = session->artifact();
    size_t i = 0;
    for (const TensorSignature &output : model.outputs) {
      if (model.host.hidesDeviceOutput(output.name))
        continue;
      outputs[nb::str(output.name.c_str())] =
          toDevice ? kiln::python::deviceOutput(device, onDevice[i],
                                                output.dtype,
                                                outputShapes[i], ordinal())
                   : kiln::python::hostOutput(std::move(host[i]));
      ++i;
    }
    for (auto &[name, tensor] : hostStepOutputs)
      outputs[nb::str(name.c_str())] =
          tensor.isString ? kiln::python::stringOutput(tensor)
                          : kiln::python::hostOutput(std::move(tensor));
    return outputs;
  }

  nb::dict bench(unsigned iterations, unsigned warmup,
                 const std::map<std::string, InputArray> &inputs) {
    if (iterations == 0)
      throw NativeError("bench expects at least 1 run");
    BenchmarkResult result;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(busy);
      {
        nb::gil_scoped_acquire acquire;
        (void)bind(inputs);
      }
      result = unwrap(session->benchmark(warmup, iterations));
    }
    nb::dict out;
    out["run_ms"] = result.runMilliseconds;
    nb::dict kernels;
    for (const KernelTiming &kernel : result.kernels)
      kernels[nb::str(kernel.kernel.c_str())] = kernel.milliseconds;
    out["kernel_ms"] = kernels;
    if (result.energyJoules)
      out["energy_joules"] = *result.energyJoules;
    return out;
  }

private:
  std::string spec;
  std::shared_ptr<Device> device;
  std::unique_ptr<Session> session;
  /// Inputs bound to a CUDA tensor's address in the last run.
  std::set<std::string> deviceBound;
  std::mutex busy;
};

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "Kiln's runtime (runtime/include/kiln/runtime) for Python; use "
            "the kiln package, which wraps it";
  nb::exception<NativeError>(m, "Error");

  nb::class_<PyArtifact>(m, "Artifact")
      .def_static(
          "read",
          [](const std::string &path) {
            nb::gil_scoped_release release;
            return PyArtifact{
                std::make_shared<const Artifact>(unwrap(readArtifact(path)))};
          },
          "path"_a)
      .def_static(
          "parse",
          [](nb::bytes image, const std::string &name) {
            Blob blob = Blob::copyOf(image.c_str(), image.size());
            nb::gil_scoped_release release;
            return PyArtifact{std::make_shared<const Artifact>(
                unwrap(parseArtifact(blob, name)))};
          },
          "image"_a, "name"_a)
      .def(
          "save",
          [](const PyArtifact &self, const std::string &path) {
            nb::gil_scoped_release release;
            throwIfFailed(writeArtifact(*self.artifact, path));
          },
          "path"_a)
      .def("to_bytes",
           [](const PyArtifact &self) {
             std::vector<uint8_t> image =
                 unwrap(serializeArtifact(*self.artifact));
             return nb::bytes(reinterpret_cast<const char *>(image.data()),
                              image.size());
           })
      .def_prop_ro("inputs",
                   [](const PyArtifact &self) {
                     return signatureOf(*self.artifact, self.artifact->inputs);
                   })
      .def_prop_ro("outputs",
                   [](const PyArtifact &self) {
                     return signatureOf(*self.artifact, self.artifact->outputs);
                   })
      .def_prop_ro("input_groups",
                   [](const PyArtifact &self) {
                     return groupsOf(self.artifact->inputGroups);
                   })
      .def_prop_ro("output_groups",
                   [](const PyArtifact &self) {
                     return groupsOf(self.artifact->outputGroups);
                   })
      .def(
          "check_sequence_input",
          [](const PyArtifact &self, const std::string &name, size_t count) {
            throwIfFailed(checkSequenceInput(*self.artifact, name, count));
          },
          "name"_a, "count"_a)
      .def_prop_ro("stats", [](const PyArtifact &self) {
        return statsOf(*self.artifact);
      });

  nb::class_<PySession>(m, "Session")
      .def(nb::init<const PyArtifact &, const std::string &, bool,
                    const std::map<std::string, InputArray> &>(),
           "artifact"_a, "device"_a, "use_graph"_a, "weights"_a)
      .def_prop_ro("device_kind",
                   [](const PySession &self) { return self.info().kind; })
      .def_prop_ro("device_name",
                   [](const PySession &self) { return self.info().name; })
      .def("run", &PySession::run, "inputs"_a, "outputs"_a)
      .def("bench", &PySession::bench, "iterations"_a, "warmup"_a, "inputs"_a);

  kiln::python::bindTraining(m);
}
