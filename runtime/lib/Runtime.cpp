//===- Runtime.cpp - Sessions: bind, run, read, benchmark -----------------===//
//
// Everything a run needs is prepared once in Session::create (device memory,
// modules, functions, every launch's packed parameters), so run() is a loop
// of launches, or a single graph launch when graph replay is on.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Runtime.h"

#include "Support.h"

#include <chrono>
#include <optional>

namespace kiln::runtime {

Error checkInput(const Artifact &artifact, std::string_view name, DType dtype,
                 const Shape &shape, uint64_t size) {
  const TensorSignature *input = artifact.findInput(name);
  if (!input) {
    std::string names;
    for (const TensorSignature &known : artifact.inputs)
      names += (names.empty() ? "'" : ", '") + known.name + "'";
    return makeError("no input named '{}' (the inputs are {})", name,
                     names.empty() ? "none" : names);
  }
  if (dtype != input->dtype)
    return makeError("input '{}': dtype {} does not match the signature's {}",
                     name, dtypeName(dtype), dtypeName(input->dtype));
  if (shape != input->shape)
    return makeError("input '{}': shape {} does not match the signature's {}",
                     name, formatShape(shape), formatShape(input->shape));
  uint64_t expected = *tensorByteSize(input->dtype, input->shape);
  if (size != expected)
    return makeError("input '{}': {} bytes given, {} {} has {}", name, size,
                     dtypeName(dtype), formatShape(shape), expected);
  return Error::success();
}

struct Session::Impl {
  std::shared_ptr<const Artifact> artifact;
  std::shared_ptr<Device> device;
  SessionOptions options;

  std::optional<DevicePtr> arena;
  std::optional<DevicePtr> weights;
  StreamHandle stream;
  std::vector<ModuleHandle> modules;
  /// One per kernel.
  std::vector<FunctionHandle> functions;
  /// One per launch.
  std::vector<PackedParams> params;
  std::vector<LaunchConfig> configs;
  GraphHandle graph;
  /// What an input is bound to: bytes on the host, or a range of the
  /// device's own memory (bindDeviceInput).
  struct BoundInput {
    std::vector<uint8_t> host;
    std::optional<DevicePtr> onDevice;
    uint64_t size = 0;
  };
  /// One per input; empty until bound.
  std::vector<std::optional<BoundInput>> inputs;
  bool haveRun = false;
  /// Whether the zeroed buffers (Artifact::zeroedBuffers) may hold anything
  /// but zeros: before the first run, and after a run that failed or did
  /// not run every block. Kernels leave them zero otherwise.
  bool zeroedStale = true;

  ~Impl();
  Error zeroBuffers();
  /// Runs `body` (one run's launches), zeroing the zeroed buffers first
  /// when they are stale.
  template <typename Body> Error guardZeroed(Body &&body);
  Error prepare();
  Error uploadInputs();
  Error uploadInput(size_t i);
  Error uploadInitialState();
  Error launchAll(const std::vector<EventHandle> *launchEvents);
  Error enqueueRun();
};

Session::Impl::~Impl() {
  // Teardown errors cannot be reported to anyone; release what we can.
  if (graph.valid())
    (void)device->destroyGraph(graph);
  if (stream.valid())
    (void)device->destroyStream(stream);
  for (ModuleHandle module : modules)
    (void)device->unloadModule(module);
  if (arena)
    (void)device->deallocate(*arena);
  if (weights)
    (void)device->deallocate(*weights);
}

Error Session::Impl::prepare() {
  const Artifact &model = *artifact;
  const DeviceInfo &info = device->info();
  uint32_t sm = model.targetSm();
  bool archSpecific = !model.target.empty() && (model.target.back() == 'a' ||
                                                model.target.back() == 'f');
  if (info.computeCapability != 0 &&
      (info.computeCapability < sm ||
       (archSpecific && info.computeCapability / 10 != sm / 10)))
    return makeError("the artifact targets {} but the device '{}' is sm_{}",
                     model.target, info.name, info.computeCapability);

  if (model.strippedWeightBytes != 0)
    return makeError("the artifact's weights were stripped (kilnc "
                     "--strip-weights): bind them first (kiln-run --weights "
                     "DIR)");
  if (model.memoryPlan.arenaSize != 0) {
    Expected<DevicePtr> ptr = device->allocate(model.memoryPlan.arenaSize);
    if (!ptr)
      return ptr.error().withContext(fmt::format(
          "allocating the arena ({} bytes)", model.memoryPlan.arenaSize));
    arena = *ptr;
  }
  if (!model.weightData.empty()) {
    Expected<DevicePtr> ptr = device->allocate(model.weightData.size());
    if (!ptr)
      return ptr.error().withContext(fmt::format(
          "allocating the weights ({} bytes)", model.weightData.size()));
    weights = *ptr;
    if (Error err = device->copyToDevice(*weights, model.weightData.data(),
                                         model.weightData.size()))
      return err.withContext("uploading the weights");
  }
  Expected<StreamHandle> newStream = device->createStream();
  if (!newStream)
    return newStream.takeError();
  stream = *newStream;

  for (const Kernel &kernel : model.kernels) {
    ModuleImage image;
    image.kernelName = kernel.name;
    image.ptx = kernel.ptx;
    image.cubin = kernel.cubin.data();
    image.cubinSize = kernel.cubin.size();
    image.cubinSm = kernel.cubinSm;
    Expected<ModuleHandle> module = device->loadModule(image);
    if (!module)
      return module.takeError();
    modules.push_back(*module);
    Expected<FunctionHandle> function =
        device->getFunction(*module, kernel.name);
    if (!function)
      return function.takeError();
    functions.push_back(*function);
  }

  DevicePtr arenaBase = arena.value_or(0);
  DevicePtr weightsBase = weights.value_or(0);
  auto pointerValue = [&](const Kernel &kernel, const Launch &launch,
                          size_t a) {
    return (kernel.params[a].kind == ParamKind::WeightsPointer ? weightsBase
                                                               : arenaBase) +
           launch.args[a];
  };
  // The tensor a pointer argument of launch `l` points into, for messages:
  // a signature tensor, a weight, or the memory plan's buffer.
  auto tensorAt = [&](ParamKind kind, uint64_t offset,
                      size_t l) -> std::string {
    if (kind == ParamKind::WeightsPointer) {
      for (const Weight &w : model.weights)
        if (offset >= w.offset &&
            offset - w.offset < tensorByteSize(w.dtype, w.shape).value_or(0))
          return "weight '" + w.name + "'";
      return "the weights";
    }
    for (const auto *list : {&model.inputs, &model.outputs})
      for (const TensorSignature &t : *list)
        if (t.arenaOffset == offset)
          return "tensor '" + t.name + "'";
    for (const ArenaBuffer &b : model.memoryPlan.buffers)
      if (offset >= b.offset && offset - b.offset < b.size &&
          b.firstUse <= l && l <= b.lastUse)
        return "buffer '" + b.name + "'";
    return "the arena";
  };
  for (size_t l = 0; l < model.launches.size(); ++l) {
    const Launch &launch = model.launches[l];
    const Kernel &kernel = model.kernels[launch.kernel];
    PackedParams packed;
    for (size_t a = 0; a < launch.args.size(); ++a) {
      uint64_t value = launch.args[a];
      switch (kernel.params[a].kind) {
      case ParamKind::TensorMap: {
        // Built now: the memory plan has given every buffer its address
        // (verifyArtifact checked the record and its address parameter).
        const TensorMapRecord &map = model.tensorMaps[value];
        const KernelParam &source = kernel.params[map.addressParam];
        std::string subject = fmt::format(
            "launch {}: kernel '{}' tensor map {} over {} (parameter {})", l,
            kernel.name, value,
            tensorAt(source.kind, launch.args[map.addressParam], l),
            map.addressParam);
        alignas(64) uint8_t bytes[128] = {};
        if (Error err = device->encodeTensorMap(
                map, pointerValue(kernel, launch, map.addressParam), subject,
                bytes))
          return err;
        packed.addBytes(bytes, sizeof(bytes), 64);
        break;
      }
      case ParamKind::ArenaPointer:
        packed.addU64(arenaBase + value);
        break;
      case ParamKind::WeightsPointer:
        packed.addU64(weightsBase + value);
        break;
      case ParamKind::Scalar32:
        packed.addU32(static_cast<uint32_t>(value));
        break;
      case ParamKind::Scalar64:
        packed.addU64(value);
        break;
      }
    }
    params.push_back(std::move(packed));
    configs.push_back({kernel.grid, kernel.block, kernel.dynamicSharedBytes});
  }
  inputs.resize(model.inputs.size());
  return uploadInitialState();
}

Error Session::Impl::uploadInitialState() {
  for (const StateTensor &tensor : artifact->state) {
    uint64_t size = *tensorByteSize(tensor.dtype, tensor.shape);
    if (size == 0)
      continue;
    std::vector<uint8_t> zeros;
    const void *data = tensor.initial.data();
    if (tensor.initial.empty()) {
      zeros.assign(size, 0);
      data = zeros.data();
    }
    if (Error err = device->copyToDevice(
            arena.value_or(0) + tensor.arenaOffset, data, size))
      return err.withContext(
          fmt::format("initialising state '{}'", tensor.name));
  }
  return Error::success();
}

Error Session::Impl::zeroBuffers() {
  for (uint32_t index : artifact->zeroedBuffers) {
    const ArenaBuffer &buffer = artifact->memoryPlan.buffers[index];
    std::vector<uint8_t> zeros(buffer.size, 0);
    if (Error err = device->copyToDevice(arena.value_or(0) + buffer.offset,
                                         zeros.data(), zeros.size()))
      return err.withContext(
          fmt::format("zeroing buffer '{}'", buffer.name));
  }
  zeroedStale = false;
  return Error::success();
}

template <typename Body> Error Session::Impl::guardZeroed(Body &&body) {
  if (zeroedStale && !artifact->zeroedBuffers.empty())
    if (Error err = zeroBuffers())
      return err;
  Error err = body();
  zeroedStale = err || !device->runsEveryBlock();
  return err;
}

Error Session::Impl::uploadInput(size_t i) {
  const TensorSignature &input = artifact->inputs[i];
  if (!inputs[i])
    return makeError("input '{}' is not bound", input.name);
  if (inputs[i]->size == 0)
    return Error::success();
  DevicePtr dst = arena.value_or(0) + input.arenaOffset;
  Error err =
      inputs[i]->onDevice
          ? device->copyOnDevice(dst, *inputs[i]->onDevice, inputs[i]->size)
          : device->copyToDevice(dst, inputs[i]->host.data(), inputs[i]->size);
  if (err)
    return err.withContext(fmt::format("uploading input '{}'", input.name));
  return Error::success();
}

Error Session::Impl::uploadInputs() {
  if (!artifact->entryPoints.empty()) {
    std::string names;
    for (const EntryPoint &entry : artifact->entryPoints)
      names += (names.empty() ? "" : ", ") + entry.name;
    return makeError("the artifact has entry points ({}): run one at a time "
                     "(Session::runEntryPoint, kiln-train)",
                     names);
  }
  for (size_t i = 0; i < artifact->inputs.size(); ++i)
    if (Error err = uploadInput(i))
      return err;
  return Error::success();
}

Error Session::Impl::launchAll(const std::vector<EventHandle> *launchEvents) {
  const std::vector<Launch> &launches = artifact->launches;
  for (size_t i = 0; i < launches.size(); ++i) {
    if (launchEvents)
      if (Error err = device->recordEvent((*launchEvents)[i], stream))
        return err;
    if (Error err = device->launch(functions[launches[i].kernel], configs[i],
                                   params[i], stream))
      return err.withContext(fmt::format("launch {}", i));
  }
  if (launchEvents)
    return device->recordEvent(launchEvents->back(), stream);
  return Error::success();
}

Error Session::Impl::enqueueRun() {
  if (!options.useGraph || !device->supportsGraphs())
    return launchAll(nullptr);
  if (!graph.valid()) {
    if (Error err = device->beginCapture(stream))
      return err;
    Error launched = launchAll(nullptr);
    Expected<GraphHandle> captured = device->endCapture(stream);
    if (launched)
      return launched.withContext("capturing the launch list");
    if (!captured)
      return captured.takeError();
    graph = *captured;
  }
  return device->launchGraph(graph, stream);
}

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

Session::Session(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Session::~Session() = default;

Expected<std::unique_ptr<Session>>
Session::create(std::shared_ptr<const Artifact> artifact,
                std::shared_ptr<Device> device, const SessionOptions &options) {
  if (!artifact)
    return makeError("Session::create: no artifact");
  if (!device)
    return makeError("Session::create: no device");
  // An Artifact built in memory has not been through the reader's checks.
  if (Error err = verifyArtifact(*artifact))
    return err;
  auto impl = std::make_unique<Impl>();
  impl->artifact = std::move(artifact);
  impl->device = std::move(device);
  impl->options = options;
  if (Error err = impl->prepare())
    return err;
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const Artifact &Session::artifact() const { return *impl->artifact; }
Device &Session::device() { return *impl->device; }

Error Session::bindInput(std::string_view name, DType dtype, const Shape &shape,
                         const void *data, uint64_t size) {
  if (Error err = checkInput(*impl->artifact, name, dtype, shape, size))
    return err;
  const std::vector<TensorSignature> &inputs = impl->artifact->inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name != name)
      continue;
    const auto *bytes = static_cast<const uint8_t *>(data);
    impl->inputs[i] = Impl::BoundInput{
        std::vector<uint8_t>(bytes, bytes + size), std::nullopt, size};
  }
  return Error::success();
}

Error Session::bindDeviceInput(std::string_view name, DType dtype,
                               const Shape &shape, DevicePtr data,
                               uint64_t size) {
  if (Error err = checkInput(*impl->artifact, name, dtype, shape, size))
    return err;
  const std::vector<TensorSignature> &inputs = impl->artifact->inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name)
      impl->inputs[i] = Impl::BoundInput{{}, data, size};
  return Error::success();
}

Error Session::bindInput(std::string_view name, const HostTensor &tensor) {
  return bindInput(name, tensor.dtype, tensor.shape, tensor.data.data(),
                   tensor.data.size());
}

Error Session::run() {
  if (Error err = impl->uploadInputs())
    return err;
  if (Error err = impl->guardZeroed([&] { return impl->enqueueRun(); }))
    return err;
  if (Error err = impl->device->synchronize(impl->stream)) {
    impl->zeroedStale = true;
    return err.withContext("running the launch list (to find the failing "
                           "kernel, rerun with CUDA_LAUNCH_BLOCKING=1)");
  }
  impl->haveRun = true;
  return Error::success();
}

Error Session::runEntryPoint(std::string_view name) {
  const Artifact &model = *impl->artifact;
  const EntryPoint *entry = model.findEntryPoint(name);
  if (!entry)
    return makeError("no entry point named '{}'", name);
  for (uint32_t i : entry->inputs)
    if (Error err = impl->uploadInput(i))
      return err.withContext(fmt::format("entry point '{}'", name));
  Device &device = *impl->device;
  if (Error err = impl->guardZeroed([&]() -> Error {
        for (uint32_t l = entry->firstLaunch;
             l < entry->firstLaunch + entry->launchCount; ++l)
          if (Error err = device.launch(
                  impl->functions[model.launches[l].kernel], impl->configs[l],
                  impl->params[l], impl->stream))
            return err.withContext(
                fmt::format("entry point '{}': launch {}", name, l));
        return Error::success();
      }))
    return err;
  if (Error err = device.synchronize(impl->stream)) {
    impl->zeroedStale = true;
    return err.withContext(fmt::format("running entry point '{}'", name));
  }
  // The new state replaces the old only once every launch has finished.
  DevicePtr base = impl->arena.value_or(0);
  std::vector<uint8_t> staging;
  for (const StateUpdate &update : entry->updates) {
    const TensorSignature &from = model.outputs[update.output];
    const StateTensor &to = model.state[update.state];
    staging.resize(*tensorByteSize(to.dtype, to.shape));
    if (staging.empty())
      continue;
    if (Error err = device.copyToHost(staging.data(), base + from.arenaOffset,
                                      staging.size()))
      return err.withContext(fmt::format("updating state '{}'", to.name));
    if (Error err = device.copyToDevice(base + to.arenaOffset, staging.data(),
                                        staging.size()))
      return err.withContext(fmt::format("updating state '{}'", to.name));
  }
  impl->haveRun = true;
  return Error::success();
}

Expected<HostTensor> Session::readState(std::string_view name) {
  const StateTensor *tensor = impl->artifact->findState(name);
  if (!tensor)
    return makeError("no state tensor named '{}'", name);
  HostTensor result;
  result.dtype = tensor->dtype;
  result.shape = tensor->shape;
  result.data.resize(*tensorByteSize(tensor->dtype, tensor->shape));
  if (!result.data.empty())
    if (Error err = impl->device->copyToHost(
            result.data.data(), impl->arena.value_or(0) + tensor->arenaOffset,
            result.data.size()))
      return err.withContext(fmt::format("reading state '{}'", name));
  return result;
}

Error Session::writeState(std::string_view name, DType dtype,
                          const Shape &shape, const void *data,
                          uint64_t size) {
  const StateTensor *tensor = impl->artifact->findState(name);
  if (!tensor)
    return makeError("no state tensor named '{}'", name);
  if (dtype != tensor->dtype || shape != tensor->shape ||
      size != *tensorByteSize(tensor->dtype, tensor->shape))
    return makeError("state '{}': {} {} given, the artifact's is {} {}", name,
                     dtypeName(dtype), formatShape(shape),
                     dtypeName(tensor->dtype), formatShape(tensor->shape));
  if (size == 0)
    return Error::success();
  return impl->device
      ->copyToDevice(impl->arena.value_or(0) + tensor->arenaOffset, data, size)
      .withContext(fmt::format("writing state '{}'", name));
}

namespace {
/// Where output `name` of the last run lies in the arena, once its size
/// has been checked against `size`.
Expected<uint64_t> outputOffset(const Artifact &artifact, bool haveRun,
                                std::string_view name, uint64_t size) {
  const TensorSignature *output = artifact.findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  uint64_t expected = *tensorByteSize(output->dtype, output->shape);
  if (size != expected)
    return makeError("output '{}': a {}-byte buffer given, {} {} has {}", name,
                     size, dtypeName(output->dtype), formatShape(output->shape),
                     expected);
  if (!haveRun)
    return makeError("output '{}': the session has not run yet", name);
  return output->arenaOffset;
}
} // namespace

Error Session::readOutput(std::string_view name, void *dst, uint64_t size) {
  Expected<uint64_t> offset =
      outputOffset(*impl->artifact, impl->haveRun, name, size);
  if (!offset)
    return offset.takeError();
  if (size == 0)
    return Error::success();
  return impl->device->copyToHost(dst, impl->arena.value_or(0) + *offset, size)
      .withContext(fmt::format("reading output '{}'", name));
}

Error Session::readOutputToDevice(std::string_view name, DevicePtr dst,
                                  uint64_t size) {
  Expected<uint64_t> offset =
      outputOffset(*impl->artifact, impl->haveRun, name, size);
  if (!offset)
    return offset.takeError();
  if (size == 0)
    return Error::success();
  return impl->device
      ->copyOnDevice(dst, impl->arena.value_or(0) + *offset, size)
      .withContext(fmt::format("reading output '{}'", name));
}

Expected<HostTensor> Session::readOutput(std::string_view name) {
  const TensorSignature *output = impl->artifact->findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  HostTensor tensor;
  tensor.dtype = output->dtype;
  tensor.shape = output->shape;
  tensor.data.resize(*tensorByteSize(output->dtype, output->shape));
  if (Error err = readOutput(name, tensor.data.data(), tensor.data.size()))
    return err;
  return tensor;
}

Expected<BenchmarkResult> Session::benchmark(unsigned warmup,
                                             unsigned iterations) {
  if (iterations == 0)
    return makeError("benchmark: at least one iteration is needed");
  for (unsigned i = 0; i < warmup; ++i)
    if (Error err = run())
      return err.withContext("benchmark warm-up");

  Device &device = *impl->device;
  const std::vector<Launch> &launches = impl->artifact->launches;
  std::vector<EventHandle> events;
  auto releaseEvents = [&] {
    for (EventHandle event : events)
      (void)device.destroyEvent(event);
  };
  for (size_t i = 0; i < launches.size() + 1; ++i) {
    Expected<EventHandle> event = device.createEvent();
    if (!event) {
      releaseEvents();
      return event.takeError();
    }
    events.push_back(*event);
  }

  BenchmarkResult result;
  auto measure = [&]() -> Error {
    // Energy brackets exactly the timed runs (each waits for its end event).
    Expected<uint64_t> energyBefore = device.energyMillijoules();
    auto startTime = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < iterations; ++i) {
      if (Error err = impl->uploadInputs())
        return err;
      if (Error err = device.recordEvent(events.front(), impl->stream))
        return err;
      if (Error err = impl->guardZeroed([&] { return impl->enqueueRun(); }))
        return err;
      if (Error err = device.recordEvent(events.back(), impl->stream))
        return err;
      Expected<float> ms =
          device.elapsedMilliseconds(events.front(), events.back());
      if (!ms)
        return ms.takeError();
      result.runMilliseconds.push_back(*ms);
    }
    if (energyBefore) {
      Expected<uint64_t> energyAfter = device.energyMillijoules();
      if (energyAfter && *energyAfter >= *energyBefore) {
        result.energyJoules = double(*energyAfter - *energyBefore) / 1000.0;
        result.energySeconds = std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - startTime)
                                   .count();
      } else {
        result.energyUnavailable =
            energyAfter ? "the energy counter went backwards"
                        : energyAfter.error().message();
      }
    } else {
      result.energyUnavailable = energyBefore.error().message();
    }
    // Per kernel: separate runs with an event before every launch (no graph,
    // since events between launches are the point).
    std::vector<size_t> slot(impl->artifact->kernels.size(), SIZE_MAX);
    for (const Launch &launch : launches) {
      if (slot[launch.kernel] == SIZE_MAX) {
        slot[launch.kernel] = result.kernels.size();
        KernelTiming timing;
        timing.kernel = impl->artifact->kernels[launch.kernel].name;
        result.kernels.push_back(std::move(timing));
      }
      ++result.kernels[slot[launch.kernel]].launchesPerRun;
    }
    for (unsigned i = 0; i < iterations; ++i) {
      if (Error err = impl->uploadInputs())
        return err;
      if (Error err = impl->guardZeroed([&] { return impl->launchAll(&events); }))
        return err;
      for (KernelTiming &timing : result.kernels)
        timing.milliseconds.push_back(0);
      result.launches.assign(launches.size(), LaunchTiming());
      for (size_t l = 0; l < launches.size(); ++l) {
        Expected<float> ms =
            device.elapsedMilliseconds(events[l], events[l + 1]);
        if (!ms)
          return ms.takeError();
        result.kernels[slot[launches[l].kernel]].milliseconds.back() += *ms;
        result.launches[l].milliseconds = *ms;
        if (l > 0) {
          Expected<float> start =
              device.elapsedMilliseconds(events[0], events[l]);
          if (!start)
            return start.takeError();
          result.launches[l].startMilliseconds = *start;
        }
      }
    }
    return device.synchronize(impl->stream);
  };
  Error err = measure();
  releaseEvents();
  if (err)
    return err.withContext("benchmark");
  impl->haveRun = true;
  return result;
}

} // namespace kiln::runtime
