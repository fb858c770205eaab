//===- CollectiveNccl.cpp - The NCCL engine: GPU collectives, own stream
//---===//
//
// kiln-train on cuda reduces gradients with NCCL, the library every GPU
// training framework uses. Like the driver and MPI, libnccl.so.2 is opened
// with dlopen (KILN_NCCL_LIBRARY overrides the path: PyTorch's wheel ships
// one in site-packages/nvidia/nccl/lib), so nothing links it and a machine
// without it runs everything else.
//
// Bootstrap: rank 0 calls ncclGetUniqueId, the MPI communicator broadcasts
// the 128 bytes, and every rank calls ncclCommInitRank on its own GPU (the
// cuda device's context, made current). MPI stays the job's bootstrap:
// barrier and abort go through it.
//
// Overlap: the engine owns a stream. A bucket's all-reduce is queued there
// behind an event recorded on the compute stream right after the launch
// that completes the bucket, so NCCL reduces it while the compute stream
// runs the rest of the backward pass; finish() makes the compute stream
// wait on the engine's last event before train_update.
//
// Errors and timeouts follow NCCL's documented asynchronous error handling:
// the host never blocks inside CUDA on NCCL work; it polls the engine's
// event and ncclCommGetAsyncError (sleeping between polls, 50 us growing
// to 1 ms), calls ncclCommAbort on an error or when the collective timeout
// passes, and then prints the MPI engine's one-line message and exits 1.
//
// This engine has never run on a GPU (docs/runtime.md "Engines").
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Collective.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <unistd.h>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define KILN_HAVE_NCCL_HEADER 1
#endif

namespace kiln::runtime {

namespace {

// The few pieces of NCCL's C ABI the engine uses, declared here (as the
// driver's are) so that building Kiln needs no NCCL headers. Enums are ints.
using NcclResult = int;
using NcclComm = struct NcclCommOpaque *;
struct NcclUniqueId {
  char internal[128];
};
constexpr NcclResult kNcclSuccess = 0;
constexpr NcclResult kNcclInProgress = 7;
constexpr int kNcclInt8 = 0;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclAvg = 4;
/// ncclAvg appeared in NCCL 2.10.
constexpr int kNcclMinimumVersion = 21000;

#ifdef KILN_HAVE_NCCL_HEADER
// Where the header is present at build time, check the declarations above
// against it.
static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId));
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress);
static_assert(kNcclInt8 == ncclInt8 && kNcclFloat32 == ncclFloat32);
static_assert(kNcclAvg == ncclAvg);
static_assert(sizeof(ncclResult_t) == sizeof(int) &&
              sizeof(ncclDataType_t) == sizeof(int) &&
              sizeof(ncclRedOp_t) == sizeof(int));
#endif

struct NcclLibrary {
  NcclResult (*GetVersion)(int *);
  NcclResult (*GetUniqueId)(NcclUniqueId *);
  NcclResult (*CommInitRank)(NcclComm *, int, NcclUniqueId, int);
  NcclResult (*CommDestroy)(NcclComm);
  NcclResult (*CommAbort)(NcclComm);
  NcclResult (*CommGetAsyncError)(NcclComm, NcclResult *);
  const char *(*GetErrorString)(NcclResult);
  const char *(*GetLastError)(NcclComm);
  NcclResult (*AllReduce)(const void *, void *, size_t, int, int, NcclComm,
                          void *);
  NcclResult (*ReduceScatter)(const void *, void *, size_t, int, int, NcclComm,
                              void *);
  NcclResult (*AllGather)(const void *, void *, size_t, int, NcclComm, void *);
  NcclResult (*Broadcast)(const void *, void *, size_t, int, int, NcclComm,
                          void *);
  int version = 0;
};

Expected<const NcclLibrary *> loadNccl() {
  static NcclLibrary library;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string path = ncclLibraryPath();
    // RTLD_LOCAL: NCCL's symbols are ours to look up, nobody else's.
    void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      failure = fmt::format("no NCCL library ({} could not be loaded: {}; "
                            "set KILN_NCCL_LIBRARY to libnccl.so.2, or use "
                            "--collective-engine mpi)",
                            path, why ? why : "not found");
      return;
    }
    auto resolve = [&](auto &member, const char *symbol) {
      void *address = ::dlsym(handle, symbol);
      if (!address && failure.empty())
        failure = fmt::format("{} has no symbol {} (not an NCCL 2 library)",
                              path, symbol);
      member =
          reinterpret_cast<std::remove_reference_t<decltype(member)>>(address);
    };
    resolve(library.GetVersion, "ncclGetVersion");
    resolve(library.GetUniqueId, "ncclGetUniqueId");
    resolve(library.CommInitRank, "ncclCommInitRank");
    resolve(library.CommDestroy, "ncclCommDestroy");
    resolve(library.CommAbort, "ncclCommAbort");
    resolve(library.CommGetAsyncError, "ncclCommGetAsyncError");
    resolve(library.GetErrorString, "ncclGetErrorString");
    resolve(library.GetLastError, "ncclGetLastError");
    resolve(library.AllReduce, "ncclAllReduce");
    resolve(library.ReduceScatter, "ncclReduceScatter");
    resolve(library.AllGather, "ncclAllGather");
    resolve(library.Broadcast, "ncclBroadcast");
    if (!failure.empty())
      return;
    if (library.GetVersion(&library.version) != kNcclSuccess)
      failure = fmt::format("{}: ncclGetVersion failed", path);
    else if (library.version < kNcclMinimumVersion)
      failure = fmt::format("{} is NCCL version code {}; Kiln needs 2.10 or "
                            "later (ncclAvg)",
                            path, library.version);
  });
  if (!failure.empty())
    return Error::failure(failure);
  return &library;
}

class NcclCommunicator final : public Communicator, public DeviceCollectives {
public:
  NcclCommunicator(const NcclLibrary &nccl,
                   std::shared_ptr<Communicator> bootstrap,
                   std::shared_ptr<Device> device, double timeout)
      : nccl(nccl), bootstrap(std::move(bootstrap)), device(std::move(device)),
        timeoutSeconds(timeout) {}
  ~NcclCommunicator() override {
    // Teardown errors cannot be reported to anyone; release what we can.
    if (comm) {
      if (stream.valid())
        (void)device->nativeStream(stream); // the context, current
      nccl.CommDestroy(comm);
    }
    for (EventHandle event : events)
      (void)device->destroyEvent(event);
    if (done.valid())
      (void)device->destroyEvent(done);
    if (stream.valid())
      (void)device->destroyStream(stream);
    if (scratch)
      (void)device->deallocate(scratch);
  }

  Error initialize() {
    Expected<StreamHandle> created = device->createStream();
    if (!created)
      return created.takeError().withContext("the NCCL engine's stream");
    stream = *created;
    Expected<EventHandle> event = device->createEvent();
    if (!event)
      return event.takeError();
    done = *event;
    NcclUniqueId id = {};
    if (bootstrap->rank() == 0)
      if (NcclResult rc = nccl.GetUniqueId(&id); rc != kNcclSuccess)
        return makeError("rank 0: ncclGetUniqueId failed: {}",
                         nccl.GetErrorString(rc));
    if (Error err =
            bootstrap->broadcast(&id, sizeof(id), 0, "the NCCL unique id"))
      return err;
    // ncclCommInitRank takes the GPU of the current context.
    if (Expected<void *> native = device->nativeStream(stream); !native)
      return native.takeError();
    if (NcclResult rc =
            nccl.CommInitRank(&comm, bootstrap->size(), id, bootstrap->rank());
        rc != kNcclSuccess) {
      comm = nullptr;
      return makeError("rank {}: ncclCommInitRank failed: {} ({})",
                       bootstrap->rank(), nccl.GetErrorString(rc),
                       nccl.GetLastError(nullptr));
    }
    return Error::success();
  }

  int rank() const override { return bootstrap->rank(); }
  int size() const override { return bootstrap->size(); }
  std::string_view engine() const override { return "nccl"; }
  DeviceCollectives *deviceCollectives() override { return this; }

  //===--------------------------------------------------------------------===//
  // Device buffers, overlapped with the compute stream
  //===--------------------------------------------------------------------===//

  Error enqueueAllReduceMean(DevicePtr data, uint64_t count, StreamHandle after,
                             std::string_view what) override {
    // One event per bucket queued since the last finish(): an event may be
    // recorded again only once the wait on it has been queued, and reusing
    // them across steps is safe because finish() waits for all of them.
    if (queued == events.size()) {
      Expected<EventHandle> event = device->createEvent();
      if (!event)
        return event.takeError();
      events.push_back(*event);
    }
    EventHandle ready = events[queued++];
    if (Error err = device->recordEvent(ready, after))
      return err;
    if (Error err = device->waitEvent(stream, ready))
      return err;
    pending = fmt::format("all-reduce of {}", what);
    Expected<void *> native = device->nativeStream(stream);
    if (!native)
      return native.takeError();
    std::pair<EventHandle, EventHandle> bracket;
    if (timing) {
      for (EventHandle *event : {&bracket.first, &bracket.second}) {
        Expected<EventHandle> created = device->createEvent();
        if (!created)
          return created.takeError();
        *event = *created;
      }
      timed.push_back(bracket);
      if (Error err = device->recordEvent(bracket.first, stream))
        return err;
    }
    void *buffer = reinterpret_cast<void *>(static_cast<uintptr_t>(data));
    if (Error err = check(nccl.AllReduce(buffer, buffer, count, kNcclFloat32,
                                         kNcclAvg, comm, *native),
                          "ncclAllReduce", what))
      return err;
    if (timing)
      return device->recordEvent(bracket.second, stream);
    return Error::success();
  }

  void setTiming(bool on) override { timing = on; }

  Expected<std::vector<std::pair<double, double>>>
  takeTimes(EventHandle origin) override {
    std::vector<std::pair<double, double>> times;
    Error failed = Error::success();
    for (auto [start, end] : timed) {
      Expected<float> from = device->elapsedMilliseconds(origin, start);
      Expected<float> to = device->elapsedMilliseconds(origin, end);
      if (!from && !failed)
        failed = from.takeError();
      else if (!to && !failed)
        failed = to.takeError();
      else if (from && to)
        times.push_back({*from, *to});
      (void)device->destroyEvent(start);
      (void)device->destroyEvent(end);
    }
    timed.clear();
    if (failed)
      return failed;
    return times;
  }

  Error finish(StreamHandle computeStream) override {
    queued = 0;
    if (Error err = device->recordEvent(done, stream))
      return err;
    if (Error err = device->waitEvent(computeStream, done))
      return err;
    return waitFor(pending.empty() ? std::string("the NCCL stream") : pending);
  }

  //===--------------------------------------------------------------------===//
  // Host buffers, staged through device memory
  //===--------------------------------------------------------------------===//

  Error allReduceMean(float *data, uint64_t count,
                      std::string_view what) override {
    uint64_t bytes = count * sizeof(float);
    if (Error err = stageIn(data, bytes, 0))
      return err;
    return run(
        [&](void *base, void *native) {
          return nccl.AllReduce(base, base, count, kNcclFloat32, kNcclAvg, comm,
                                native);
        },
        "ncclAllReduce", "all-reduce", what, data, 0, bytes);
  }

  Error allGather(const void *send, uint64_t bytes, void *receive,
                  std::string_view what) override {
    // Scratch: this rank's bytes, then everyone's.
    uint64_t all = bytes * uint64_t(size());
    if (Error err = stageIn(send, bytes, all))
      return err;
    return run(
        [&](void *base, void *native) {
          return nccl.AllGather(base, static_cast<uint8_t *>(base) + bytes,
                                bytes, kNcclInt8, comm, native);
        },
        "ncclAllGather", "all-gather", what, receive, bytes, all);
  }

  Error broadcast(void *data, uint64_t bytes, int root,
                  std::string_view what) override {
    if (Error err = stageIn(data, bytes, 0))
      return err;
    return run(
        [&](void *base, void *native) {
          return nccl.Broadcast(base, base, bytes, kNcclInt8, root, comm,
                                native);
        },
        "ncclBroadcast", "broadcast", what, data, 0, bytes);
  }

  Error reduceScatterMean(const float *send, float *receive, uint64_t count,
                          std::string_view what) override {
    // Scratch: every rank's share of this rank's values, then its result.
    uint64_t sendBytes = count * uint64_t(size()) * sizeof(float);
    if (Error err = stageIn(send, sendBytes, count * sizeof(float)))
      return err;
    return run(
        [&](void *base, void *native) {
          return nccl.ReduceScatter(
              base, static_cast<uint8_t *>(base) + sendBytes, count,
              kNcclFloat32, kNcclAvg, comm, native);
        },
        "ncclReduceScatter", "reduce-scatter", what, receive, sendBytes,
        count * sizeof(float));
  }

  Error barrier(std::string_view what) override {
    return bootstrap->barrier(what);
  }

  [[noreturn]] void abort(int code) override {
    if (comm)
      nccl.CommAbort(comm);
    comm = nullptr;
    bootstrap->abort(code);
    ::_exit(code); // not reached: the bootstrap's abort does not return
  }

private:
  /// "rank R: CALL of WHAT failed: <NCCL's string> (<its last error>)".
  Error check(NcclResult rc, std::string_view call, std::string_view what) {
    if (rc == kNcclSuccess || rc == kNcclInProgress)
      return Error::success();
    return makeError("rank {}: {} of {} failed: {} ({})", rank(), call, what,
                     nccl.GetErrorString(rc), nccl.GetLastError(comm));
  }

  /// Copies `bytes` of `source` to the start of the scratch buffer, which
  /// is grown to hold `bytes + extra`.
  Error stageIn(const void *source, uint64_t bytes, uint64_t extra) {
    uint64_t need = std::max<uint64_t>(bytes + extra, 1);
    if (need > scratchBytes) {
      if (scratch)
        if (Error err = device->deallocate(scratch))
          return err;
      scratch = 0;
      Expected<DevicePtr> allocated = device->allocate(need);
      if (!allocated)
        return allocated.takeError().withContext("the NCCL staging buffer");
      scratch = *allocated;
      scratchBytes = need;
    }
    if (bytes == 0)
      return Error::success();
    return device->copyToDevice(scratch, source, bytes);
  }

  /// Queues `call` on the engine's stream over the scratch buffer, waits
  /// for it within the timeout, and copies `bytes` from scratch offset
  /// `offset` to `destination`.
  template <typename Call>
  Error run(Call &&call, std::string_view name, std::string_view verb,
            std::string_view what, void *destination, uint64_t offset,
            uint64_t bytes) {
    Expected<void *> native = device->nativeStream(stream);
    if (!native)
      return native.takeError();
    void *base = reinterpret_cast<void *>(static_cast<uintptr_t>(scratch));
    if (Error err = check(call(base, *native), name, what))
      return err;
    if (Error err = device->recordEvent(done, stream))
      return err;
    if (Error err = waitFor(fmt::format("{} of {}", verb, what)))
      return err;
    if (bytes == 0)
      return Error::success();
    return device->copyToHost(destination, scratch + offset, bytes);
  }

  /// Waits until `done` has happened: NCCL's documented pattern (poll the
  /// work and ncclCommGetAsyncError; ncclCommAbort on error or timeout).
  Error waitFor(const std::string &what) {
    using Clock = std::chrono::steady_clock;
    auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(timeoutSeconds));
    auto pause = std::chrono::microseconds(50);
    for (;;) {
      Expected<bool> finished = device->eventDone(done);
      if (!finished)
        return finished.takeError().withContext(
            fmt::format("rank {}: waiting for {}", rank(), what));
      if (*finished)
        return Error::success();
      NcclResult async = kNcclSuccess;
      NcclResult rc = nccl.CommGetAsyncError(comm, &async);
      if (rc != kNcclSuccess ||
          (async != kNcclSuccess && async != kNcclInProgress)) {
        std::string reason =
            nccl.GetErrorString(rc != kNcclSuccess ? rc : async);
        std::string detail = nccl.GetLastError(comm);
        nccl.CommAbort(comm);
        comm = nullptr;
        return makeError("rank {}: {} failed: {}{}{}", rank(), what, reason,
                         detail.empty() ? "" : ": ", detail);
      }
      if (timeoutSeconds > 0 && Clock::now() >= deadline) {
        std::fprintf(stderr,
                     "kiln: error: rank %d: %s did not complete within the "
                     "collective timeout (%g s): another rank died or stopped "
                     "responding\n",
                     rank(), what.c_str(), timeoutSeconds);
        std::fflush(stderr);
        nccl.CommAbort(comm);
        ::_exit(1);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(
          pause * 2, std::chrono::microseconds(1000));
    }
  }

  const NcclLibrary &nccl;
  std::shared_ptr<Communicator> bootstrap;
  std::shared_ptr<Device> device;
  double timeoutSeconds;
  NcclComm comm = nullptr;
  StreamHandle stream;
  /// Recorded on the engine's stream after its last queued work.
  EventHandle done;
  /// Recorded on the compute stream, one per bucket queued since the last
  /// finish(); `queued` of them are in use.
  std::vector<EventHandle> events;
  size_t queued = 0;
  /// Timing: each all-reduce's start and end events since the last take.
  bool timing = false;
  std::vector<std::pair<EventHandle, EventHandle>> timed;
  /// The last device all-reduce queued (for the timeout's message).
  std::string pending;
  DevicePtr scratch = 0;
  uint64_t scratchBytes = 0;
};

} // namespace

std::string ncclLibraryPath() {
  const char *path = std::getenv("KILN_NCCL_LIBRARY");
  return path && *path ? std::string(path) : std::string("libnccl.so.2");
}

Expected<int> loadNcclLibrary() {
  Expected<const NcclLibrary *> loaded = loadNccl();
  if (!loaded)
    return loaded.takeError();
  return (*loaded)->version;
}

Expected<std::vector<uint8_t>> ncclUniqueIdBytes() {
  Expected<const NcclLibrary *> loaded = loadNccl();
  if (!loaded)
    return loaded.takeError();
  NcclUniqueId id = {};
  if (NcclResult rc = (*loaded)->GetUniqueId(&id); rc != kNcclSuccess)
    return makeError("ncclGetUniqueId failed: {}",
                     (*loaded)->GetErrorString(rc));
  return std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal));
}

Expected<std::shared_ptr<Communicator>>
createNcclCommunicator(const CollectiveOptions &options,
                       std::shared_ptr<Communicator> bootstrap,
                       std::shared_ptr<Device> device) {
  if (!(options.timeoutSeconds >= 0))
    return makeError("the collective timeout must not be negative");
  if (!bootstrap)
    return makeError("the NCCL engine needs the MPI communicator to share "
                     "its unique id");
  if (!device || device->info().kind != "cuda")
    return makeError("the NCCL engine reduces GPU memory: it needs a cuda "
                     "device, not {} (use --collective-engine mpi)",
                     device ? device->info().kind : std::string("none"));
  Expected<const NcclLibrary *> loaded = loadNccl();
  if (!loaded)
    return loaded.takeError();
  auto communicator = std::make_shared<NcclCommunicator>(
      **loaded, std::move(bootstrap), std::move(device),
      options.timeoutSeconds);
  if (Error err = communicator->initialize())
    return err;
  return std::shared_ptr<Communicator>(std::move(communicator));
}

} // namespace kiln::runtime
