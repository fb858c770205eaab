//===- CudaDevice.cpp - The `cuda` device over the driver API -------------===//
//
// One CudaDevice per GPU, on the device's primary context (shared with any
// CUDA runtime code in the process). Handles index slot vectors; the function
// slots remember their kernel's name so that every launch error names it.
// Copies are synchronous with respect to all queued work, so a session never
// has to reason about the legacy default stream. Device-side loops under
// graph replay become conditional WHILE nodes (beginWhileCapture), set by
// the embedded kiln_set_while kernel (SetWhileKernel.h).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Device.h"

#include "Support.h"

#if KILN_HAVE_CUDA_H

#include "CudaDriver.h"
#include "Nvml.h"
#include "SetWhileKernel.h"

#include <cstring>
#include <optional>

namespace kiln::runtime {

namespace {

/// Slot vectors behind the typed handles: handle id = index + 1.
template <typename T> class Slots {
public:
  uint64_t add(T value) {
    items.push_back(std::move(value));
    return items.size();
  }
  /// nullptr for an unknown or released handle.
  T *get(uint64_t id) {
    if (id == 0 || id > items.size() || !live(items[id - 1]))
      return nullptr;
    return &items[id - 1];
  }
  std::vector<T> &all() { return items; }

private:
  static bool live(const T &item) { return item.handle != nullptr; }
  std::vector<T> items;
};

struct ModuleSlot {
  CUmodule handle = nullptr;
  std::string kernelName;
};
struct FunctionSlot {
  CUfunction handle = nullptr;
  std::string kernelName;
  uint32_t maxDynamicShared = 48 * 1024; // what needs no opt-in
};
struct StreamSlot {
  CUstream handle = nullptr;
  /// A loop body's stream (beginWhileCapture): its WHILE node's handle and
  /// flag byte, which the setter at the body's end reads.
  bool loopBody = false;
  CUgraphConditionalHandle condition = 0;
  CUdeviceptr flag = 0;
};
struct EventSlot {
  CUevent handle = nullptr;
};
struct GraphSlot {
  CUgraphExec handle = nullptr;
};

/// Joins a multi-line JIT log into one line.
std::string oneLine(const char *log) {
  std::string text;
  for (const char *p = log; *p; ++p) {
    if (*p == '\n') {
      if (!text.empty() && text.back() != ' ')
        text += " | ";
    } else if (*p != '\r') {
      text += *p;
    }
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '|'))
    text.pop_back();
  return text;
}

class CudaDevice final : public Device {
public:
  CudaDevice(const CudaDriver &cu, CUdevice device, CUcontext context,
             DeviceInfo info)
      : cu(cu), device(device), context(context), deviceInfo(std::move(info)) {}
  ~CudaDevice() override;

  const DeviceInfo &info() const override { return deviceInfo; }

  Expected<DevicePtr> allocate(uint64_t size) override;
  Error deallocate(DevicePtr ptr) override;
  Error copyToDevice(DevicePtr dst, const void *src, uint64_t size) override;
  Error copyToHost(void *dst, DevicePtr src, uint64_t size) override;
  Error copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size) override;

  Expected<ModuleHandle> loadModule(const ModuleImage &image) override;
  Error unloadModule(ModuleHandle module) override;
  Expected<FunctionHandle> getFunction(ModuleHandle module,
                                       std::string_view name) override;

  Expected<StreamHandle> createStream() override;
  Error destroyStream(StreamHandle stream) override;
  Error synchronize(StreamHandle stream) override;
  Error launch(FunctionHandle function, const LaunchConfig &config,
               const PackedParams &params, StreamHandle stream) override;

  Error encodeTensorMap(const TensorMapRecord &map, DevicePtr address,
                        std::string_view subject, uint8_t *out128) override;

  Expected<EventHandle> createEvent() override;
  Error destroyEvent(EventHandle event) override;
  Error recordEvent(EventHandle event, StreamHandle stream) override;
  Expected<float> elapsedMilliseconds(EventHandle start,
                                      EventHandle end) override;
  Error waitEvent(StreamHandle stream, EventHandle event) override;
  Expected<bool> eventDone(EventHandle event) override;
  Expected<void *> nativeStream(StreamHandle stream) override;

  bool supportsGraphs() const override { return cu.hasGraphs; }
  Error beginCapture(StreamHandle stream) override;
  Expected<GraphHandle> endCapture(StreamHandle stream) override;
  Error launchGraph(GraphHandle graph, StreamHandle stream) override;
  Error destroyGraph(GraphHandle graph) override;

  Error checkConditionalGraphs() override;
  Expected<StreamHandle> beginWhileCapture(StreamHandle stream,
                                           DevicePtr flag) override;
  Error endWhileCapture(StreamHandle body) override;

  Expected<uint64_t> energyMillijoules() override;

private:
  /// Makes the device's context current on the calling thread.
  Error enter() {
    return cu.check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent", "");
  }
  Expected<CUstream> streamOf(StreamHandle stream, std::string_view call);
  /// Loads the kiln_set_while cubin for this GPU, or says why it cannot.
  Error loadSetWhile();
  /// Queues kiln_set_while(condition, flag) on `stream`.
  Error launchSetWhile(CUstream stream, CUgraphConditionalHandle condition,
                       CUdeviceptr flag);

  const CudaDriver &cu;
  CUdevice device;
  CUcontext context;
  DeviceInfo deviceInfo;
  Slots<ModuleSlot> modules;
  Slots<FunctionSlot> functions;
  Slots<StreamSlot> streams;
  Slots<EventSlot> events;
  Slots<GraphSlot> graphs;
  /// Scratch for cuLaunchKernel's argument pointer array.
  std::vector<void *> argumentPointers;
  /// This GPU in NVML, found on first use (or why it was not).
  std::optional<Expected<NvmlDevice>> nvmlDevice;
  /// checkConditionalGraphs' answer, found on first use; the setter kernel
  /// when it is success.
  std::optional<Error> conditionalGraphs;
  CUmodule setWhileModule = nullptr;
  CUfunction setWhileFunction = nullptr;
};

CudaDevice::~CudaDevice() {
  // Best effort: nothing useful can be done with errors while tearing down.
  (void)cu.cuCtxSetCurrent(context);
  for (GraphSlot &graph : graphs.all())
    if (graph.handle)
      (void)cu.cuGraphExecDestroy(graph.handle);
  for (EventSlot &event : events.all())
    if (event.handle)
      (void)cu.cuEventDestroy(event.handle);
  for (StreamSlot &stream : streams.all())
    if (stream.handle)
      (void)cu.cuStreamDestroy(stream.handle);
  for (ModuleSlot &module : modules.all())
    if (module.handle)
      (void)cu.cuModuleUnload(module.handle);
  if (setWhileModule)
    (void)cu.cuModuleUnload(setWhileModule);
  (void)cu.cuDevicePrimaryCtxRelease(device);
}

Expected<DevicePtr> CudaDevice::allocate(uint64_t size) {
  if (Error err = enter())
    return err;
  CUdeviceptr ptr = 0;
  if (Error err = cu.check(cu.cuMemAlloc(&ptr, size), "cuMemAlloc",
                           fmt::format("{} bytes", size)))
    return err;
  return static_cast<DevicePtr>(ptr);
}

Error CudaDevice::deallocate(DevicePtr ptr) {
  if (Error err = enter())
    return err;
  return cu.check(cu.cuMemFree(static_cast<CUdeviceptr>(ptr)), "cuMemFree", "");
}

Error CudaDevice::copyToDevice(DevicePtr dst, const void *src, uint64_t size) {
  if (Error err = enter())
    return err;
  // The synchronous copy may return before the DMA from pageable memory
  // ends, so wait for the context: later launches on any stream see the data.
  if (Error err =
          cu.check(cu.cuMemcpyHtoD(static_cast<CUdeviceptr>(dst), src, size),
                   "cuMemcpyHtoD", fmt::format("{} bytes", size)))
    return err;
  return cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize", "after a copy");
}

Error CudaDevice::copyToHost(void *dst, DevicePtr src, uint64_t size) {
  if (Error err = enter())
    return err;
  // Wait for every stream (ours are non-blocking) before reading.
  if (Error err =
          cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize", "before a copy"))
    return err;
  return cu.check(cu.cuMemcpyDtoH(dst, static_cast<CUdeviceptr>(src), size),
                  "cuMemcpyDtoH", fmt::format("{} bytes", size));
}

Error CudaDevice::copyOnDevice(DevicePtr dst, DevicePtr src, uint64_t size) {
  if (Error err = enter())
    return err;
  // The other library may still be writing the source on its own stream,
  // and our streams are non-blocking: wait for the context on both sides.
  if (Error err =
          cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize", "before a copy"))
    return err;
  if (Error err = cu.check(cu.cuMemcpyDtoD(static_cast<CUdeviceptr>(dst),
                                           static_cast<CUdeviceptr>(src), size),
                           "cuMemcpyDtoD", fmt::format("{} bytes", size)))
    return err;
  return cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize", "after a copy");
}

Expected<ModuleHandle> CudaDevice::loadModule(const ModuleImage &image) {
  if (Error err = enter())
    return err;
  bool useCubin = image.cubin && image.cubinSize != 0 &&
                  image.cubinSm == deviceInfo.computeCapability;
  std::string ptx;
  const void *data = image.cubin;
  if (!useCubin) {
    ptx.assign(image.ptx.data(), image.ptx.size()); // needs a terminating NUL
    data = ptx.c_str();
  }
  char errorLog[16384] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog, reinterpret_cast<void *>(sizeof(errorLog) - 1)};
  CUmodule module = nullptr;
  CUresult result = cu.cuModuleLoadDataEx(&module, data, 2, options, values);
  if (result != CUDA_SUCCESS) {
    std::string subject =
        useCubin ? fmt::format("kernel '{}', cubin for sm_{}", image.kernelName,
                               image.cubinSm)
                 : fmt::format("kernel '{}', PTX JIT for sm_{}",
                               image.kernelName, deviceInfo.computeCapability);
    std::string log = oneLine(errorLog);
    Error err = cu.check(result, "cuModuleLoadDataEx", subject);
    return log.empty() ? err
                       : Error::failure(err.message() + "; JIT log: " + log);
  }
  return ModuleHandle{modules.add({module, std::string(image.kernelName)})};
}

Error CudaDevice::unloadModule(ModuleHandle handle) {
  ModuleSlot *slot = modules.get(handle.id);
  if (!slot)
    return makeError("cuModuleUnload: unknown module handle");
  if (Error err = enter())
    return err;
  CUresult result = cu.cuModuleUnload(slot->handle);
  slot->handle = nullptr;
  return cu.check(result, "cuModuleUnload",
                  fmt::format("kernel '{}'", slot->kernelName));
}

Expected<FunctionHandle> CudaDevice::getFunction(ModuleHandle handle,
                                                 std::string_view name) {
  ModuleSlot *slot = modules.get(handle.id);
  if (!slot)
    return makeError("cuModuleGetFunction (kernel '{}'): unknown module handle",
                     name);
  if (Error err = enter())
    return err;
  std::string entry(name);
  CUfunction function = nullptr;
  if (Error err = cu.check(
          cu.cuModuleGetFunction(&function, slot->handle, entry.c_str()),
          "cuModuleGetFunction", fmt::format("kernel '{}'", name)))
    return err;
  return FunctionHandle{functions.add({function, entry})};
}

Expected<CUstream> CudaDevice::streamOf(StreamHandle stream,
                                        std::string_view call) {
  StreamSlot *slot = streams.get(stream.id);
  if (!slot)
    return makeError("{}: unknown stream handle", call);
  return slot->handle;
}

Expected<StreamHandle> CudaDevice::createStream() {
  if (Error err = enter())
    return err;
  // Non-blocking: capture into a graph is not disturbed by the legacy
  // stream, and copies order themselves by synchronizing the context.
  CUstream stream = nullptr;
  if (Error err = cu.check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", ""))
    return err;
  return StreamHandle{streams.add({stream})};
}

Error CudaDevice::destroyStream(StreamHandle handle) {
  StreamSlot *slot = streams.get(handle.id);
  if (!slot)
    return makeError("cuStreamDestroy: unknown stream handle");
  if (Error err = enter())
    return err;
  CUresult result = cu.cuStreamDestroy(slot->handle);
  slot->handle = nullptr;
  return cu.check(result, "cuStreamDestroy", "");
}

Error CudaDevice::synchronize(StreamHandle handle) {
  Expected<CUstream> stream = streamOf(handle, "cuStreamSynchronize");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  // Kernel faults surface here, after the fact; the session adds which run.
  return cu.check(cu.cuStreamSynchronize(*stream), "cuStreamSynchronize", "");
}

Error CudaDevice::launch(FunctionHandle handle, const LaunchConfig &config,
                         const PackedParams &params,
                         StreamHandle streamHandle) {
  FunctionSlot *function = functions.get(handle.id);
  if (!function)
    return makeError("cuLaunchKernel: unknown function handle");
  Expected<CUstream> stream = streamOf(streamHandle, "cuLaunchKernel");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  std::string subject = fmt::format("kernel '{}'", function->kernelName);
  if (config.dynamicSharedBytes > function->maxDynamicShared) {
    // Above 48 KiB the kernel has to opt in to the larger carve-out.
    if (Error err =
            cu.check(cu.cuFuncSetAttribute(
                         function->handle,
                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                         static_cast<int>(config.dynamicSharedBytes)),
                     "cuFuncSetAttribute", subject))
      return err;
    function->maxDynamicShared = config.dynamicSharedBytes;
  }
  argumentPointers.resize(params.count());
  for (size_t i = 0; i < params.count(); ++i)
    argumentPointers[i] =
        const_cast<uint8_t *>(params.data() + params.offset(i));
  return cu.check(cu.cuLaunchKernel(function->handle, config.grid.x,
                                    config.grid.y, config.grid.z,
                                    config.block.x, config.block.y,
                                    config.block.z, config.dynamicSharedBytes,
                                    *stream, argumentPointers.data(), nullptr),
                  "cuLaunchKernel", subject);
}

Error CudaDevice::encodeTensorMap(const TensorMapRecord &map,
                                  DevicePtr address, std::string_view subject,
                                  uint8_t *out128) {
  if (!cu.hasTensorMaps)
    return makeError("{}: the CUDA driver has no cuTensorMapEncodeTiled "
                     "(TMA needs a CUDA 12 driver)",
                     subject);
  static_assert(sizeof(CUtensorMap) == 128, "a tensor map is 128 bytes");
  CUtensorMapDataType type = map.dtype == DType::BF16
                                 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                             : map.dtype == DType::F16
                                 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  cuuint64_t dims[kTensorMapMaxRank], strides[kTensorMapMaxRank - 1];
  cuuint32_t box[kTensorMapMaxRank], elementStrides[kTensorMapMaxRank];
  for (uint32_t d = 0; d < kTensorMapMaxRank; ++d) {
    dims[d] = map.globalDims[d];
    box[d] = map.boxDims[d];
    elementStrides[d] = map.elementStrides[d];
    if (d > 0)
      strides[d - 1] = map.globalStrides[d - 1];
  }
  CUtensorMap encoded;
  CUresult result = cu.cuTensorMapEncodeTiled(
      &encoded, type, map.rank, reinterpret_cast<void *>(address), dims,
      strides, box, elementStrides,
      static_cast<CUtensorMapInterleave>(map.interleave),
      static_cast<CUtensorMapSwizzle>(map.swizzle),
      static_cast<CUtensorMapL2promotion>(map.l2Promotion),
      static_cast<CUtensorMapFloatOOBfill>(map.oobFill));
  if (result != CUDA_SUCCESS)
    return makeError("{}: the driver refused the tensor map "
                     "(cuTensorMapEncodeTiled: {})",
                     subject, cu.describe(result));
  std::memcpy(out128, &encoded, sizeof(encoded));
  return Error::success();
}

Expected<EventHandle> CudaDevice::createEvent() {
  if (Error err = enter())
    return err;
  CUevent event = nullptr;
  if (Error err = cu.check(cu.cuEventCreate(&event, CU_EVENT_DEFAULT),
                           "cuEventCreate", ""))
    return err;
  return EventHandle{events.add({event})};
}

Error CudaDevice::destroyEvent(EventHandle handle) {
  EventSlot *slot = events.get(handle.id);
  if (!slot)
    return makeError("cuEventDestroy: unknown event handle");
  if (Error err = enter())
    return err;
  CUresult result = cu.cuEventDestroy(slot->handle);
  slot->handle = nullptr;
  return cu.check(result, "cuEventDestroy", "");
}

Error CudaDevice::recordEvent(EventHandle handle, StreamHandle streamHandle) {
  EventSlot *event = events.get(handle.id);
  if (!event)
    return makeError("cuEventRecord: unknown event handle");
  Expected<CUstream> stream = streamOf(streamHandle, "cuEventRecord");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  return cu.check(cu.cuEventRecord(event->handle, *stream), "cuEventRecord",
                  "");
}

Error CudaDevice::waitEvent(StreamHandle streamHandle, EventHandle handle) {
  EventSlot *event = events.get(handle.id);
  if (!event)
    return makeError("cuStreamWaitEvent: unknown event handle");
  Expected<CUstream> stream = streamOf(streamHandle, "cuStreamWaitEvent");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  return cu.check(cu.cuStreamWaitEvent(*stream, event->handle, 0),
                  "cuStreamWaitEvent", "");
}

Expected<bool> CudaDevice::eventDone(EventHandle handle) {
  EventSlot *event = events.get(handle.id);
  if (!event)
    return makeError("cuEventQuery: unknown event handle");
  if (Error err = enter())
    return err;
  CUresult result = cu.cuEventQuery(event->handle);
  if (result == CUDA_ERROR_NOT_READY)
    return false;
  if (Error err = cu.check(result, "cuEventQuery", ""))
    return err;
  return true;
}

Expected<void *> CudaDevice::nativeStream(StreamHandle handle) {
  Expected<CUstream> stream = streamOf(handle, "nativeStream");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  return static_cast<void *>(*stream);
}

Expected<float> CudaDevice::elapsedMilliseconds(EventHandle start,
                                                EventHandle end) {
  EventSlot *startSlot = events.get(start.id);
  EventSlot *endSlot = events.get(end.id);
  if (!startSlot || !endSlot)
    return makeError("cuEventElapsedTime: unknown event handle");
  if (Error err = enter())
    return err;
  if (Error err = cu.check(cu.cuEventSynchronize(endSlot->handle),
                           "cuEventSynchronize", ""))
    return err;
  float milliseconds = 0;
  if (Error err =
          cu.check(cu.cuEventElapsedTime(&milliseconds, startSlot->handle,
                                         endSlot->handle),
                   "cuEventElapsedTime", ""))
    return err;
  return milliseconds;
}

Error CudaDevice::beginCapture(StreamHandle handle) {
  if (!cu.hasGraphs)
    return Device::beginCapture(handle);
  Expected<CUstream> stream = streamOf(handle, "cuStreamBeginCapture");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  return cu.check(
      cu.cuStreamBeginCapture(*stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture", "");
}

Expected<GraphHandle> CudaDevice::endCapture(StreamHandle handle) {
  if (!cu.hasGraphs)
    return Device::endCapture(handle);
  Expected<CUstream> stream = streamOf(handle, "cuStreamEndCapture");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  CUgraph graph = nullptr;
  if (Error err = cu.check(cu.cuStreamEndCapture(*stream, &graph),
                           "cuStreamEndCapture", ""))
    return err;
  CUgraphExec exec = nullptr;
  CUresult result = cu.cuGraphInstantiate(&exec, graph, 0);
  // The executable graph does not need the template once instantiated.
  (void)cu.cuGraphDestroy(graph);
  if (Error err = cu.check(result, "cuGraphInstantiate", ""))
    return err;
  return GraphHandle{graphs.add({exec})};
}

Error CudaDevice::launchGraph(GraphHandle graph, StreamHandle handle) {
  GraphSlot *slot = graphs.get(graph.id);
  if (!slot)
    return makeError("cuGraphLaunch: unknown graph handle");
  Expected<CUstream> stream = streamOf(handle, "cuGraphLaunch");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  return cu.check(cu.cuGraphLaunch(slot->handle, *stream), "cuGraphLaunch", "");
}

Error CudaDevice::destroyGraph(GraphHandle graph) {
  GraphSlot *slot = graphs.get(graph.id);
  if (!slot)
    return makeError("cuGraphExecDestroy: unknown graph handle");
  if (Error err = enter())
    return err;
  CUresult result = cu.cuGraphExecDestroy(slot->handle);
  slot->handle = nullptr;
  return cu.check(result, "cuGraphExecDestroy", "");
}

//===----------------------------------------------------------------------===//
// Conditional WHILE nodes
//===----------------------------------------------------------------------===//

Error CudaDevice::checkConditionalGraphs() {
  if (!conditionalGraphs)
    conditionalGraphs = loadSetWhile();
  return *conditionalGraphs;
}

Error CudaDevice::loadSetWhile() {
  if (!cu.hasConditionalGraphs) {
    std::string version =
        fmt::format("{}.{}", cu.version / 1000, cu.version % 1000 / 10);
    if (cu.version < kConditionalGraphsVersion)
      return makeError("the CUDA driver is {}: conditional graph nodes need "
                       "12.4 or later",
                       version);
    return makeError("the CUDA driver ({}) lacks a graph or conditional-node "
                     "entry point",
                     version);
  }
  uint32_t sm = deviceInfo.computeCapability;
  const SetWhileCubin *cubin = findSetWhileCubin(sm);
  if (!cubin) {
    std::string built;
    for (const SetWhileCubin &known : setWhileCubins())
      built += fmt::format("{}sm_{}", built.empty() ? "" : ", ", known.sm);
    if (built.empty())
      return makeError("this runtime was built without the {} cubins (no "
                       "nvcc, or KILN_BUILD_SET_WHILE_CUBINS=OFF)",
                       kSetWhileKernelName);
    return makeError("this runtime has no {} cubin for sm_{} (it has {})",
                     kSetWhileKernelName, sm, built);
  }
  if (Error err = enter())
    return err;
  std::string subject = fmt::format("kernel '{}', cubin for sm_{}",
                                    kSetWhileKernelName, cubin->sm);
  CUmodule module = nullptr;
  if (Error err = cu.check(
          cu.cuModuleLoadDataEx(&module, cubin->data, 0, nullptr, nullptr),
          "cuModuleLoadDataEx", subject))
    return err;
  CUfunction function = nullptr;
  if (Error err = cu.check(
          cu.cuModuleGetFunction(&function, module, kSetWhileKernelName),
          "cuModuleGetFunction", subject)) {
    (void)cu.cuModuleUnload(module);
    return err;
  }
  setWhileModule = module;
  setWhileFunction = function;
  return Error::success();
}

Error CudaDevice::launchSetWhile(CUstream stream,
                                 CUgraphConditionalHandle condition,
                                 CUdeviceptr flag) {
  void *arguments[] = {&condition, &flag};
  return cu.check(cu.cuLaunchKernel(setWhileFunction, 1, 1, 1, 1, 1, 1, 0,
                                    stream, arguments, nullptr),
                  "cuLaunchKernel",
                  fmt::format("kernel '{}'", kSetWhileKernelName));
}

Expected<StreamHandle> CudaDevice::beginWhileCapture(StreamHandle handle,
                                                     DevicePtr flag) {
  if (Error err = checkConditionalGraphs())
    return err;
  Expected<CUstream> stream = streamOf(handle, "beginWhileCapture");
  if (!stream)
    return stream.takeError();
  if (Error err = enter())
    return err;
  // The graph the stream captures into: the run's, or an enclosing loop's
  // body.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  if (Error err =
          cu.check(cu.cuStreamGetCaptureInfo(*stream, &status, nullptr, &graph,
                                             nullptr, nullptr, nullptr),
                   "cuStreamGetCaptureInfo", ""))
    return err;
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph)
    return makeError("beginWhileCapture: the stream is not capturing");
  // No default value (flags 0): the setter queued next always runs before
  // the node reads the handle.
  CUgraphConditionalHandle condition = 0;
  if (Error err = cu.check(
          cu.cuGraphConditionalHandleCreate(&condition, graph, context, 0, 0),
          "cuGraphConditionalHandleCreate", ""))
    return err;
  // The first test: the flag as the launches before the loop left it.
  if (Error err =
          launchSetWhile(*stream, condition, static_cast<CUdeviceptr>(flag)))
    return err;
  // The node depends on what the stream's next launch would (the setter).
  const CUgraphNode *dependencies = nullptr;
  const CUgraphEdgeData *edges = nullptr;
  size_t dependencyCount = 0;
  if (Error err = cu.check(cu.cuStreamGetCaptureInfo(*stream, &status, nullptr,
                                                     &graph, &dependencies,
                                                     &edges, &dependencyCount),
                           "cuStreamGetCaptureInfo", ""))
    return err;
  CUgraphNodeParams params;
  std::memset(&params, 0, sizeof(params)); // reserved bytes must be zero
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = condition;
  params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  params.conditional.size = 1;
  params.conditional.ctx = context;
  CUgraphNode node = nullptr;
  if (Error err = cu.check(cu.cuGraphAddNode(&node, graph, dependencies, edges,
                                             dependencyCount, &params),
                           "cuGraphAddNode", "a conditional WHILE node"))
    return err;
  // What the stream queues next comes after the whole loop.
  if (Error err = cu.check(
          cu.cuStreamUpdateCaptureDependencies(
              *stream, &node, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
          "cuStreamUpdateCaptureDependencies", ""))
    return err;
  // The body: a stream of its own capturing into the node's graph.
  CUstream body = nullptr;
  if (Error err = cu.check(cu.cuStreamCreate(&body, CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", "a loop body"))
    return err;
  if (Error err = cu.check(cu.cuStreamBeginCaptureToGraph(
                               body, params.conditional.phGraph_out[0], nullptr,
                               nullptr, 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                           "cuStreamBeginCaptureToGraph", "a loop body")) {
    (void)cu.cuStreamDestroy(body);
    return err;
  }
  StreamSlot slot;
  slot.handle = body;
  slot.loopBody = true;
  slot.condition = condition;
  slot.flag = static_cast<CUdeviceptr>(flag);
  return StreamHandle{streams.add(slot)};
}

Error CudaDevice::endWhileCapture(StreamHandle handle) {
  StreamSlot *slot = streams.get(handle.id);
  if (!slot || !slot->loopBody)
    return makeError("endWhileCapture: not a loop body's stream");
  if (Error err = enter())
    return err;
  // The test after every iteration: the flag as the body left it.
  Error err = launchSetWhile(slot->handle, slot->condition, slot->flag);
  // The body graph belongs to its node: it is not destroyed here.
  CUgraph graph = nullptr;
  CUresult ended = cu.cuStreamEndCapture(slot->handle, &graph);
  (void)cu.cuStreamDestroy(slot->handle);
  slot->handle = nullptr;
  if (err)
    return err;
  return cu.check(ended, "cuStreamEndCapture", "a loop body");
}

Expected<uint64_t> CudaDevice::energyMillijoules() {
  Expected<const NvmlLibrary *> nvml = loadNvml();
  if (!nvml)
    return nvml.takeError();
  if (!nvmlDevice) {
    // By PCI bus id: NVML's indices need not follow CUDA's ordinals.
    char busId[64] = {};
    if (Error err = cu.check(
            cu.cuDeviceGetPCIBusId(busId, sizeof(busId) - 1, device),
            "cuDeviceGetPCIBusId", ""))
      nvmlDevice.emplace(std::move(err));
    else
      nvmlDevice.emplace(nvmlDeviceForPciBusId(**nvml, busId));
  }
  if (!*nvmlDevice)
    return nvmlDevice->error();
  return nvmlEnergyMillijoules(**nvml, **nvmlDevice);
}

} // namespace

Expected<std::unique_ptr<Device>> createCudaDevice(int ordinal) {
  Expected<const CudaDriver *> loaded = loadCudaDriver();
  if (!loaded)
    return loaded.takeError();
  const CudaDriver &cu = **loaded;
  int count = 0;
  if (Error err = cu.check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount", ""))
    return err;
  if (count == 0)
    return makeError("no CUDA device");
  if (ordinal < 0 || ordinal >= count)
    return makeError("no CUDA device {} (found {})", ordinal, count);
  CUdevice device = 0;
  if (Error err = cu.check(cu.cuDeviceGet(&device, ordinal), "cuDeviceGet", ""))
    return err;

  DeviceInfo info;
  info.kind = "cuda";
  char name[256] = {};
  if (Error err = cu.check(cu.cuDeviceGetName(name, sizeof(name) - 1, device),
                           "cuDeviceGetName", ""))
    return err;
  info.name = name;
  int major = 0, minor = 0;
  if (Error err = cu.check(
          cu.cuDeviceGetAttribute(
              &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
          "cuDeviceGetAttribute", "compute capability"))
    return err;
  if (Error err = cu.check(
          cu.cuDeviceGetAttribute(
              &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
          "cuDeviceGetAttribute", "compute capability"))
    return err;
  info.computeCapability = static_cast<uint32_t>(major * 10 + minor);
  size_t totalMemory = 0;
  if (Error err = cu.check(cu.cuDeviceTotalMem(&totalMemory, device),
                           "cuDeviceTotalMem", ""))
    return err;
  info.totalMemory = totalMemory;

  CUcontext context = nullptr;
  if (Error err = cu.check(cu.cuDevicePrimaryCtxRetain(&context, device),
                           "cuDevicePrimaryCtxRetain", ""))
    return err;
  return std::unique_ptr<Device>(
      new CudaDevice(cu, device, context, std::move(info)));
}

} // namespace kiln::runtime

#else // !KILN_HAVE_CUDA_H

namespace kiln::runtime {

Expected<std::unique_ptr<Device>> createCudaDevice(int) {
  return makeError("cuda device not built (cuda.h was not found when Kiln "
                   "was configured)");
}

} // namespace kiln::runtime

#endif // KILN_HAVE_CUDA_H
