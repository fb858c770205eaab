//===- Runtime.cpp - Sessions: bind, run, read, benchmark -----------------===//
//
// Everything a run needs is prepared once in Session::create (device memory,
// modules, functions, every launch's packed parameters), so run() is a loop
// of launches, or a single graph launch when graph replay is on (device-side
// loops included, as conditional WHILE nodes, where the device has them).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SignatureGroups.h"
#include "kiln/runtime/SymbolicDims.h"

#include "HostRunner.h"
#include "Support.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

namespace kiln::runtime {

Error checkInput(const Artifact &artifact, std::string_view name, DType dtype,
                 const Shape &shape, uint64_t size) {
  const TensorSignature *input = artifact.findInput(name);
  if (Error err = checkTensorInputName(artifact, name))
    return err;
  if (!input) {
    std::string names;
    for (const TensorSignature &known : artifact.inputs)
      names += (names.empty() ? "'" : ", '") + known.name + "'";
    return makeError("no input named '{}' (the inputs are {})", name,
                     names.empty() ? "none" : names);
  }
  if (artifact.findSizeMask(name))
    return makeError("input '{}' is a size mask: the runtime fills it from "
                     "the run's sizes; it is not bound",
                     name);
  if (dtype != input->dtype)
    return makeError("input '{}': dtype {} does not match the signature's {}",
                     name, dtypeName(dtype), dtypeName(input->dtype));
  if (input->symbolicAxes.empty() && shape != input->shape)
    return makeError("input '{}': shape {} does not match the signature's {}",
                     name, formatShape(shape), formatShape(input->shape));
  if (!input->symbolicAxes.empty())
    if (Error err = checkInputShape(artifact, *input, shape))
      return err;
  uint64_t expected = *tensorByteSize(input->dtype, shape);
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
  /// Graph replay: one captured graph per run size seen (the launch grids
  /// follow the sizes when the artifact has launch-scales records; one
  /// graph, keyed by the compiled sizes, otherwise), most recent first, at
  /// most kMaxGraphs.
  static constexpr size_t kMaxGraphs = 4;
  std::vector<std::pair<SymbolSizes, GraphHandle>> graphs;
  /// What an input is bound to: bytes on the host, or a range of the
  /// device's own memory (bindDeviceInput).
  struct BoundInput {
    std::vector<uint8_t> host;
    std::optional<DevicePtr> onDevice;
    uint64_t size = 0;
    /// The shape given: the compiled one, or (symbolic dims) smaller.
    Shape shape;
  };
  /// One per input; empty until bound.
  std::vector<std::optional<BoundInput>> inputs;
  bool haveRun = false;
  /// Whether the zeroed buffers (Artifact::zeroedBuffers) may hold anything
  /// but zeros: before the first run, and after a run that failed or did
  /// not run every block. Kernels leave them zero otherwise.
  bool zeroedStale = true;
  /// Symbolic dims (docs/runtime.md "Sizes at run time"): the sizes of the
  /// run being prepared and of the last run, one per symbol.
  SymbolSizes sizes, lastRunSizes;
  /// Allocated at create, so a run at a smaller size allocates nothing: per
  /// input with symbolic dims, its compiled-shape bytes (an input padded
  /// with zeros); and one buffer of the largest such output's compiled
  /// bytes (an output read before it is sliced).
  std::vector<std::vector<uint8_t>> inputStaging;
  std::vector<uint8_t> outputStaging;
  /// One per size mask (Artifact::sizeMasks), its compiled bytes.
  std::vector<std::vector<uint8_t>> maskStaging;
  /// Format 1.9: the host steps' storage; null without a host program.
  std::unique_ptr<HostRunner> host;
  /// Format 1.12: how run() repeats the control regions (decided in
  /// create): inside the captured graph (graph replay on a device with
  /// conditional graph nodes), or by reading each flag on the host; and
  /// Session::deviceLoops' line saying which (empty without regions).
  bool loopsInGraph = false;
  std::string loopsPath;

  ~Impl();
  Error zeroBuffers();
  /// Runs `body` (one run's launches), zeroing the zeroed buffers first
  /// when they are stale.
  template <typename Body> Error guardZeroed(Body &&body);
  Error prepare();
  Error uploadInputs();
  Error uploadInput(size_t i);
  /// Fills and uploads the size masks for the run's sizes (only `entry`'s
  /// when given).
  Error uploadSizeMasks(const EntryPoint *entry = nullptr);
  Error uploadPaddedInput(size_t i, DevicePtr dst);
  /// The run's sizes from the bound inputs (only those `entry` reads when
  /// given: runEntryPoint).
  Error resolveRunSizes(const EntryPoint *entry = nullptr);
  Error uploadInitialState();
  /// How walkLaunches repeats a control region: the host reads its flag
  /// before every iteration (launches run as they are queued), or, while
  /// the stream is capturing, the device adds a conditional WHILE node whose
  /// body the region's launches are captured into.
  enum class LoopMode { HostReadsFlags, CaptureWhileNodes };
  /// Queues the whole launch list on `stream`. `launchEvents` (one per
  /// launch, then one after the last) are recorded before each launch; only
  /// for an artifact without control regions, whose launches each run once.
  Error launchAll(const std::vector<EventHandle> *launchEvents,
                  LoopMode loops = LoopMode::HostReadsFlags);
  using LaunchOne = std::function<Error(uint32_t, StreamHandle)>;
  /// Runs `launchOne` on launches [begin, end) in order, on `queue`,
  /// repeating each control region among them while its flag byte is
  /// nonzero, tested before every iteration (docs/runtime.md "Device-side
  /// loops"). With CaptureWhileNodes a region's launches go to the body
  /// stream of its WHILE node. Regions before record `region` are not
  /// looked at.
  Error walkLaunches(uint32_t begin, uint32_t end, size_t region,
                     StreamHandle queue, LoopMode loops,
                     const LaunchOne &launchOne);
  /// Whether control region `index`'s flag byte is nonzero, once every
  /// launch queued on `queue` before it has finished.
  Expected<bool> readFlag(size_t index, StreamHandle queue);
  /// Format 1.12: the launches the last walk ran, in order, a loop body's
  /// once per iteration (lastRunLaunches with control regions); empty after
  /// a run whose loops ran in a graph (the host does not see them).
  std::vector<uint32_t> ranLaunches;
  /// Decides loopsInGraph and loopsPath.
  void chooseLoopPath();
  Error enqueueRun();
  /// Host steps before the launches, and the device inputs they compute.
  Error runHostBefore();
  /// The device outputs the host reads, then the host steps after.
  Error runHostAfter();
  Error bindDevice(size_t i, const void *data, uint64_t size,
                   const Shape &shape);
};

Session::Impl::~Impl() {
  // Teardown errors cannot be reported to anyone; release what we can.
  for (auto &[key, graph] : graphs)
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
  // Both allocations checked against the device's memory before either is
  // made (and before any launch): one error naming what the model needs.
  uint64_t arenaBytes = model.memoryPlan.arenaSize;
  uint64_t weightBytes = model.weightData.size();
  if (info.totalMemory != 0 && (arenaBytes > info.totalMemory ||
                                weightBytes > info.totalMemory - arenaBytes))
    return makeError(
        "the model needs {} bytes of device memory (arena {}, weights {}), "
        "more than the {} bytes the device '{}' has{}",
        // Only a damaged artifact's sizes can pass 2^64 together.
        arenaBytes > UINT64_MAX - weightBytes
            ? fmt::format("{} + {}", arenaBytes, weightBytes)
            : fmt::format("{}", arenaBytes + weightBytes),
        arenaBytes, weightBytes, info.totalMemory, info.name,
        info.kind == "emu" ? " (KILN_EMU_DEVICE_MEMORY)" : "");
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
  sizes = lastRunSizes = compiledSizes(model);
  inputStaging.resize(model.inputs.size());
  for (size_t i = 0; i < model.inputs.size(); ++i)
    if (!model.inputs[i].symbolicAxes.empty())
      inputStaging[i].resize(
          *tensorByteSize(model.inputs[i].dtype, model.inputs[i].shape));
  uint64_t largestOutput = 0;
  for (const TensorSignature &output : model.outputs)
    if (!output.symbolicAxes.empty())
      largestOutput =
          std::max(largestOutput, *tensorByteSize(output.dtype, output.shape));
  outputStaging.resize(largestOutput);
  maskStaging.resize(model.sizeMasks.size());
  for (size_t k = 0; k < model.sizeMasks.size(); ++k)
    maskStaging[k].reserve(*tensorByteSize(
        model.inputs[model.sizeMasks[k].input].dtype,
        model.inputs[model.sizeMasks[k].input].shape));
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
  if (inputs[i]->shape != input.shape)
    return uploadPaddedInput(i, dst);
  Error err =
      inputs[i]->onDevice
          ? device->copyOnDevice(dst, *inputs[i]->onDevice, inputs[i]->size)
          : device->copyToDevice(dst, inputs[i]->host.data(), inputs[i]->size);
  if (err)
    return err.withContext(fmt::format("uploading input '{}'", input.name));
  return Error::success();
}

/// An input bound at a smaller size than compiled: its bytes go to the
/// front of each slice of the compiled shape and the rest is zero. Zeros
/// are safe because the compiler proved every op keeps the slices along the
/// dim independent (SeparableDims), so the padding never reaches the
/// slices that are read back.
Error Session::Impl::uploadPaddedInput(size_t i, DevicePtr dst) {
  const TensorSignature &input = artifact->inputs[i];
  const BoundInput &bound = *inputs[i];
  std::vector<uint8_t> &staging = inputStaging[i];
  uint64_t elementSize = dtypeSize(input.dtype);
  std::fill(staging.begin(), staging.end(), 0);
  if (!bound.onDevice)
    copyBox(bound.host.data(), bound.shape, staging.data(), input.shape,
            elementSize);
  Error err = device->copyToDevice(dst, staging.data(), staging.size());
  if (!err && bound.onDevice)
    forEachBoxRun(bound.shape, input.shape, elementSize,
                  [&](uint64_t from, uint64_t to, uint64_t bytes) {
                    if (!err)
                      err = device->copyOnDevice(dst + to,
                                                 *bound.onDevice + from, bytes);
                  });
  if (err)
    return err.withContext(fmt::format("uploading input '{}' (padded from {} "
                                       "to {})",
                                       input.name, formatShape(bound.shape),
                                       formatShape(input.shape)));
  return Error::success();
}

Error Session::Impl::resolveRunSizes(const EntryPoint *entry) {
  if (artifact->symbolicDims.empty())
    return Error::success();
  std::vector<std::optional<Shape>> shapes(artifact->inputs.size());
  auto take = [&](size_t i) {
    if (inputs[i])
      shapes[i] = inputs[i]->shape;
  };
  if (entry)
    for (uint32_t i : entry->inputs)
      take(i);
  else
    for (size_t i = 0; i < inputs.size(); ++i)
      take(i);
  Expected<SymbolSizes> resolved = resolveSizes(*artifact, shapes);
  if (!resolved)
    return resolved.takeError();
  sizes = *resolved;
  return Error::success();
}

Error Session::Impl::bindDevice(size_t i, const void *data, uint64_t size,
                               const Shape &shape) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  inputs[i] = BoundInput{std::vector<uint8_t>(bytes, bytes + size),
                         std::nullopt, size, shape};
  return Error::success();
}

Error Session::Impl::runHostBefore() {
  if (!host)
    return Error::success();
  if (Error err = host->start())
    return err;
  if (Error err = host->runPhase(HostPhase::Before))
    return err;
  for (const std::string &name : artifact->host.toDevice) {
    const HostValue *value = host->find(name);
    if (!value || value->isString)
      return makeError("host step: device input '{}' was not computed", name);
    Shape shape = value->shape;
    if (Error err = checkInput(*artifact, name, value->dtype, shape,
                               value->data.size()))
      return err.withContext("host step");
    for (size_t i = 0; i < artifact->inputs.size(); ++i)
      if (artifact->inputs[i].name == name)
        (void)bindDevice(i, value->data.data(), value->data.size(), shape);
  }
  return Error::success();
}

Error Session::Impl::runHostAfter() {
  if (!host)
    return Error::success();
  for (const std::string &name : artifact->host.fromDevice) {
    const TensorSignature *output = artifact->findOutput(name);
    HostValue value;
    value.dtype = output->dtype;
    value.shape = shapeAt(*output, lastRunSizes);
    value.data.resize(*tensorByteSize(value.dtype, value.shape));
    if (!value.data.empty())
      if (Error err = device->copyToHost(
              value.data.data(), arena.value_or(0) + output->arenaOffset,
              value.data.size()))
        return err.withContext(fmt::format("reading output '{}'", name));
    host->set(name, std::move(value));
  }
  if (Error err = host->runPhase(HostPhase::After))
    return err;
  host->markRun();
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
  if (Error err = runHostBefore())
    return err;
  if (Error err = resolveRunSizes())
    return err;
  for (size_t i = 0; i < artifact->inputs.size(); ++i)
    if (!artifact->findSizeMask(artifact->inputs[i].name))
      if (Error err = uploadInput(i))
        return err;
  return uploadSizeMasks();
}

Error Session::Impl::uploadSizeMasks(const EntryPoint *entry) {
  for (size_t k = 0; k < artifact->sizeMasks.size(); ++k) {
    const SizeMask &mask = artifact->sizeMasks[k];
    if (entry && std::find(entry->inputs.begin(), entry->inputs.end(),
                           mask.input) == entry->inputs.end())
      continue;
    const TensorSignature &input = artifact->inputs[mask.input];
    fillSizeMask(*artifact, mask, sizes[mask.symbol], maskStaging[k]);
    if (Error err = device->copyToDevice(arena.value_or(0) + input.arenaOffset,
                                         maskStaging[k].data(),
                                         maskStaging[k].size()))
      return err.withContext(
          fmt::format("uploading size mask '{}'", input.name));
  }
  return Error::success();
}

Expected<bool> Session::Impl::readFlag(size_t index, StreamHandle queue) {
  const ControlRegion &region = artifact->controlRegions[index];
  // The launches before the test must have written the flag. The emu
  // device runs each launch as it is queued; on cuda this waits for the
  // stream, a round trip per iteration (no conditional graph nodes:
  // chooseLoopPath).
  uint8_t flag = 0;
  Error err = device->synchronize(queue);
  if (!err)
    err = device->copyToHost(&flag, arena.value_or(0) + region.flagOffset, 1);
  if (err)
    return err.withContext(fmt::format(
        "control region {} (launches [{}, {})): reading its flag", index,
        region.firstLaunch, uint64_t(region.firstLaunch) + region.launchCount));
  return flag != 0;
}

Error Session::Impl::walkLaunches(uint32_t begin, uint32_t end, size_t region,
                                  StreamHandle queue, LoopMode loops,
                                  const LaunchOne &launchOne) {
  const std::vector<ControlRegion> &regions = artifact->controlRegions;
  uint32_t l = begin;
  while (l < end) {
    // Regions that start before `l` lie inside one already run (or before
    // the range): verifyArtifact keeps them sorted and nested.
    while (region < regions.size() && regions[region].firstLaunch < l)
      ++region;
    uint32_t stop = region < regions.size()
                        ? std::min(end, regions[region].firstLaunch)
                        : end;
    for (; l < stop; ++l)
      if (Error err = launchOne(l, queue))
        return err;
    if (l == end)
      break;
    // Region `region` starts at `l` and ends by `end`; the regions after it
    // that start inside it are nested in it.
    const ControlRegion &record = regions[region];
    uint32_t regionEnd = l + record.launchCount;
    if (loops == LoopMode::CaptureWhileNodes) {
      // One WHILE node: its body is the region's launches, captured once;
      // the device tests the flag before each iteration.
      auto context = [&](std::string_view what) {
        return fmt::format("control region {} (launches [{}, {})): {}", region,
                           l, regionEnd, what);
      };
      Expected<StreamHandle> body = device->beginWhileCapture(
          queue, arena.value_or(0) + record.flagOffset);
      if (!body)
        return body.error().withContext(context("adding its WHILE node"));
      Error walked =
          walkLaunches(l, regionEnd, region + 1, *body, loops, launchOne);
      // The body's capture ends (and its stream goes) even after a failure.
      Error ended = device->endWhileCapture(*body);
      if (walked)
        return walked;
      if (ended)
        return ended.withContext(context("ending its WHILE node's body"));
      l = regionEnd;
      ++region;
      continue;
    }
    for (;;) {
      Expected<bool> again = readFlag(region, queue);
      if (!again)
        return again.takeError();
      if (!*again)
        break;
      if (Error err =
              walkLaunches(l, regionEnd, region + 1, queue, loops, launchOne))
        return err;
    }
    l = regionEnd;
    ++region;
  }
  return Error::success();
}

Error Session::Impl::launchAll(const std::vector<EventHandle> *launchEvents,
                               LoopMode loops) {
  const std::vector<Launch> &launches = artifact->launches;
  // In a graph the iterations happen on the device, out of the host's sight.
  bool recordRan =
      !artifact->controlRegions.empty() && loops == LoopMode::HostReadsFlags;
  ranLaunches.clear();
  auto launchOne = [&](uint32_t i, StreamHandle queue) -> Error {
    if (launchEvents)
      if (Error err = device->recordEvent((*launchEvents)[i], queue))
        return err;
    // Size buckets: a guarded launch runs only at the sizes of its bucket
    // (docs/runtime.md "Size buckets").
    if (!artifact->launchGuards.empty() && !launchRunsAt(*artifact, i, sizes))
      return Error::success();
    LaunchConfig config = configs[i];
    // Sizes at run time: a scaled launch runs only the blocks the run's
    // sizes need (docs/runtime.md "Sizes at run time").
    if (!artifact->launchScales.empty())
      config.grid = launchGridAt(*artifact, i, sizes);
    if (Error err = device->launch(functions[launches[i].kernel], config,
                                   params[i], queue))
      return err.withContext(fmt::format("launch {}", i));
    if (recordRan)
      ranLaunches.push_back(i);
    return Error::success();
  };
  if (Error err = walkLaunches(0, static_cast<uint32_t>(launches.size()), 0,
                               stream, loops, launchOne))
    return err;
  if (launchEvents)
    return device->recordEvent(launchEvents->back(), stream);
  return Error::success();
}

void Session::Impl::chooseLoopPath() {
  if (artifact->controlRegions.empty())
    return;
  // Checked here, before any capture: the cuda device loads its setter
  // kernel on the first call.
  std::string why;
  if (!options.useGraph)
    why = "graph replay is off";
  else if (!device->supportsGraphs())
    why = fmt::format("the {} device has no graphs", device->info().kind);
  else if (Error err = device->checkConditionalGraphs())
    why = err.message();
  loopsInGraph = why.empty();
  loopsPath = loopsInGraph ? "conditional graph nodes"
                           : fmt::format("host-read flags ({})", why);
}

Error Session::Impl::enqueueRun() {
  // Device-side loops (format 1.12) are captured as conditional WHILE nodes
  // where the device has them; otherwise the host reads each flag between
  // launches, which a captured graph cannot, so the artifact is launched
  // directly (docs/runtime.md "Device-side loops").
  bool loops = !artifact->controlRegions.empty();
  if (!options.useGraph || !device->supportsGraphs() ||
      (loops && !loopsInGraph))
    return launchAll(nullptr);
  // Grids (and guarded launches) differ between sizes only when some launch
  // scales or is guarded.
  SymbolSizes key =
      artifact->launchScales.empty() && artifact->launchGuards.empty()
          ? compiledSizes(*artifact)
          : sizes;
  auto hit = std::find_if(graphs.begin(), graphs.end(),
                          [&](const auto &entry) { return entry.first == key; });
  if (hit != graphs.end()) {
    std::rotate(graphs.begin(), hit, hit + 1); // most recent first
  } else {
    if (Error err = device->beginCapture(stream))
      return err;
    Error launched = launchAll(nullptr, loops ? LoopMode::CaptureWhileNodes
                                              : LoopMode::HostReadsFlags);
    Expected<GraphHandle> captured = device->endCapture(stream);
    if (launched)
      return launched.withContext("capturing the launch list");
    if (!captured)
      return captured.takeError();
    if (graphs.size() == kMaxGraphs) {
      (void)device->destroyGraph(graphs.back().second);
      graphs.pop_back();
    }
    graphs.insert(graphs.begin(), {key, *captured});
  }
  ranLaunches.clear();
  return device->launchGraph(graphs.front().second, stream);
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
  if (!impl->artifact->host.empty())
    impl->host = std::make_unique<HostRunner>(impl->artifact->host);
  if (Error err = impl->prepare())
    return err;
  impl->chooseLoopPath();
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const Artifact &Session::artifact() const { return *impl->artifact; }
Device &Session::device() { return *impl->device; }

Error Session::bindInput(std::string_view name, DType dtype, const Shape &shape,
                         const void *data, uint64_t size) {
  const HostProgram &host = impl->artifact->host;
  if (host.writesDeviceInput(name))
    return makeError("input '{}' is computed by the model's host steps; it "
                     "is not bound",
                     name);
  if (host.findInput(name)) {
    HostValue value;
    value.dtype = dtype;
    value.shape = shape;
    const auto *bytes = static_cast<const uint8_t *>(data);
    value.data.assign(bytes, bytes + size);
    if (Error err = impl->host->bind(name, std::move(value)))
      return err;
    if (!impl->artifact->findInput(name))
      return Error::success();
  }
  if (Error err = checkInput(*impl->artifact, name, dtype, shape, size))
    return err;
  const std::vector<TensorSignature> &inputs = impl->artifact->inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name != name)
      continue;
    const auto *bytes = static_cast<const uint8_t *>(data);
    impl->inputs[i] = Impl::BoundInput{
        std::vector<uint8_t>(bytes, bytes + size), std::nullopt, size, shape};
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
      impl->inputs[i] = Impl::BoundInput{{}, data, size, shape};
  return Error::success();
}

Error Session::bindInput(std::string_view name, const HostTensor &tensor) {
  if (tensor.isString) {
    if (!impl->artifact->host.findInput(name))
      return makeError("input '{}' is not a string input", name);
    HostValue value;
    value.isString = true;
    value.shape = tensor.shape;
    value.strings = tensor.strings;
    return impl->host->bind(name, std::move(value));
  }
  return bindInput(name, tensor.dtype, tensor.shape, tensor.data.data(),
                   tensor.data.size());
}

Error Session::bindSequence(std::string_view name,
                            const std::vector<HostTensor> &tensors) {
  if (Error err = checkSequenceInput(*impl->artifact, name, tensors.size()))
    return err;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (Error err = bindInput(sequenceElementName(name, i), tensors[i]))
      return err;
  return Error::success();
}

Expected<std::vector<HostTensor>> Session::readSequence(std::string_view name) {
  const SignatureGroup *group = impl->artifact->findOutputGroup(name);
  if (!group || !group->isSequence())
    return makeError("no sequence output named '{}'", name);
  std::vector<HostTensor> tensors;
  for (uint32_t i = 0; i < group->count; ++i) {
    Expected<HostTensor> tensor =
        readOutput(impl->artifact->outputs[group->first + i].name);
    if (!tensor)
      return tensor.takeError();
    tensors.push_back(tensor.take());
  }
  return tensors;
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
  impl->lastRunSizes = impl->sizes;
  return impl->runHostAfter();
}

LaunchObserver::~LaunchObserver() = default;

Expected<DevicePtr> Session::outputAddress(std::string_view name) const {
  const TensorSignature *output = impl->artifact->findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  return impl->arena.value_or(0) + output->arenaOffset;
}

Error Session::runEntryPoint(std::string_view name) {
  return runEntryPoint(name, nullptr);
}

Error Session::runEntryPoint(std::string_view name,
                             LaunchObserver *observer) {
  const Artifact &model = *impl->artifact;
  const EntryPoint *entry = model.findEntryPoint(name);
  if (!entry)
    return makeError("no entry point named '{}'", name);
  // kilnc --train --dim: the entry's inputs give the run's sizes (a
  // smaller last batch); its inputs are padded and its size masks filled
  // from them, as Session::run does.
  if (Error err = impl->resolveRunSizes(entry))
    return err.withContext(fmt::format("entry point '{}'", name));
  for (uint32_t i : entry->inputs)
    if (!model.findSizeMask(model.inputs[i].name))
      if (Error err = impl->uploadInput(i))
        return err.withContext(fmt::format("entry point '{}'", name));
  if (Error err = impl->uploadSizeMasks(entry))
    return err.withContext(fmt::format("entry point '{}'", name));
  Device &device = *impl->device;
  bool loops = !model.controlRegions.empty();
  impl->ranLaunches.clear();
  auto launchOne = [&](uint32_t l, StreamHandle) -> Error {
    // A launch its size bucket leaves out (launch-guards) is skipped; the
    // observer still hears of it, as the launch that ran in its place came
    // before it. In a device-side loop it hears of each iteration's.
    if (model.launchGuards.empty() || launchRunsAt(model, l, impl->sizes)) {
      if (Error err =
              device.launch(impl->functions[model.launches[l].kernel],
                            impl->configs[l], impl->params[l], impl->stream))
        return err.withContext(
            fmt::format("entry point '{}': launch {}", name, l));
      if (loops)
        impl->ranLaunches.push_back(l);
    }
    if (observer)
      return observer->afterLaunch(l, impl->stream);
    return Error::success();
  };
  if (Error err = impl->guardZeroed([&]() -> Error {
        if (observer)
          if (Error err = observer->beforeLaunches(impl->stream))
            return err;
        if (Error err = impl->walkLaunches(
                entry->firstLaunch, entry->firstLaunch + entry->launchCount, 0,
                impl->stream, Impl::LoopMode::HostReadsFlags, launchOne))
          return err;
        if (observer)
          return observer->beforeWait(impl->stream);
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
  impl->lastRunSizes = impl->sizes;
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
/// Output `name` of the last run: its signature and the shape the last
/// run's sizes give it, once `size` has been checked against that shape.
Expected<std::pair<const TensorSignature *, Shape>>
outputAt(const Artifact &artifact, bool haveRun, const SymbolSizes &sizes,
         std::string_view name, uint64_t size) {
  const TensorSignature *output = artifact.findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  Shape shape = shapeAt(*output, sizes);
  uint64_t expected = *tensorByteSize(output->dtype, shape);
  if (size != expected)
    return makeError("output '{}': a {}-byte buffer given, {} {} has {}", name,
                     size, dtypeName(output->dtype), formatShape(shape),
                     expected);
  if (!haveRun)
    return makeError("output '{}': the session has not run yet", name);
  return std::make_pair(output, shape);
}
} // namespace

Error Session::readOutput(std::string_view name, void *dst, uint64_t size) {
  if (impl->artifact->host.findOutput(name)) {
    Expected<HostTensor> tensor = readOutput(name);
    if (!tensor)
      return tensor.takeError();
    if (tensor->isString || tensor->data.size() != size)
      return makeError("output '{}': a {}-byte buffer given for a {} {}",
                       name, size,
                       describeHostType(tensor->isString, tensor->dtype),
                       formatShape(tensor->shape));
    std::copy(tensor->data.begin(), tensor->data.end(),
              static_cast<uint8_t *>(dst));
    return Error::success();
  }
  auto found =
      outputAt(*impl->artifact, impl->haveRun, impl->lastRunSizes, name, size);
  if (!found)
    return found.takeError();
  auto [output, shape] = *found;
  if (size == 0)
    return Error::success();
  DevicePtr src = impl->arena.value_or(0) + output->arenaOffset;
  if (shape == output->shape)
    return impl->device->copyToHost(dst, src, size)
        .withContext(fmt::format("reading output '{}'", name));
  // Run at a smaller size: the whole compiled tensor, then its slice.
  std::vector<uint8_t> &staging = impl->outputStaging;
  uint64_t compiled = *tensorByteSize(output->dtype, output->shape);
  if (Error err = impl->device->copyToHost(staging.data(), src, compiled))
    return err.withContext(fmt::format("reading output '{}'", name));
  copyBox(staging.data(), output->shape, dst, shape, dtypeSize(output->dtype));
  return Error::success();
}

Error Session::readOutputToDevice(std::string_view name, DevicePtr dst,
                                  uint64_t size) {
  auto found =
      outputAt(*impl->artifact, impl->haveRun, impl->lastRunSizes, name, size);
  if (!found)
    return found.takeError();
  auto [output, shape] = *found;
  if (size == 0)
    return Error::success();
  DevicePtr src = impl->arena.value_or(0) + output->arenaOffset;
  Error err;
  forEachBoxRun(output->shape, shape, dtypeSize(output->dtype),
                [&](uint64_t from, uint64_t to, uint64_t bytes) {
                  if (!err)
                    err =
                        impl->device->copyOnDevice(dst + to, src + from, bytes);
                });
  return err.withContext(fmt::format("reading output '{}'", name));
}

const std::string &Session::deviceLoops() const { return impl->loopsPath; }

std::vector<uint32_t> Session::lastRunLaunches() const {
  if (!impl->artifact->controlRegions.empty())
    return impl->ranLaunches;
  return launchesAt(*impl->artifact, impl->lastRunSizes);
}

Expected<Shape> Session::outputShape(std::string_view name) const {
  if (impl->artifact->host.findOutput(name)) {
    const HostValue *value = impl->host->find(name);
    if (!value || !impl->host->hasRun())
      return makeError("output '{}': the session has not run yet", name);
    return value->shape;
  }
  const TensorSignature *output = impl->artifact->findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  return shapeAt(*output, impl->lastRunSizes);
}

Expected<HostTensor> Session::readOutput(std::string_view name) {
  if (impl->artifact->host.findOutput(name)) {
    const HostValue *value = impl->host->find(name);
    if (!value || !impl->host->hasRun())
      return makeError("output '{}': the session has not run yet", name);
    HostTensor tensor;
    tensor.isString = value->isString;
    tensor.dtype = value->dtype;
    tensor.shape = value->shape;
    tensor.data = value->data;
    tensor.strings = value->strings;
    return tensor;
  }
  const TensorSignature *output = impl->artifact->findOutput(name);
  if (!output)
    return makeError("no output named '{}'", name);
  HostTensor tensor;
  tensor.dtype = output->dtype;
  tensor.shape = shapeAt(*output, impl->lastRunSizes);
  tensor.data.resize(*tensorByteSize(output->dtype, tensor.shape));
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
  // Device-side loops (format 1.12): how often a launch runs depends on the
  // data (and, with host-read flags, each iteration waits for the host), so
  // only whole runs are timed (two events).
  bool loops = !impl->artifact->controlRegions.empty();
  std::vector<EventHandle> events;
  auto releaseEvents = [&] {
    for (EventHandle event : events)
      (void)device.destroyEvent(event);
  };
  for (size_t i = 0; i < (loops ? 2 : launches.size() + 1); ++i) {
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
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - startTime)
                           .count();
      if (energyAfter && *energyAfter > *energyBefore) {
        result.energyJoules = double(*energyAfter - *energyBefore) / 1000.0;
        result.energySeconds = seconds;
      } else if (energyAfter && *energyAfter == *energyBefore) {
        // NVML refreshes the counter every few tens of milliseconds: over a
        // shorter window it does not move, which is not 0 J (the H200 run
        // of 2026-12-04 printed "0 (0 W)" for every loop of 23 ms or less).
        result.energyUnavailable = fmt::format(
            "the energy counter did not advance over the {:.3f} s of timed "
            "runs (it updates every few tens of ms): time more runs",
            seconds);
      } else {
        result.energyUnavailable =
            energyAfter ? "the energy counter went backwards"
                        : energyAfter.error().message();
      }
    } else {
      result.energyUnavailable = energyBefore.error().message();
    }
    if (loops) {
      result.launchTimingsUnavailable =
          "the artifact has device-side loops (control regions): launches "
          "per run depend on the data, so only whole runs are timed";
      return device.synchronize(impl->stream);
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
  impl->lastRunSizes = impl->sizes;
  return result;
}

} // namespace kiln::runtime
