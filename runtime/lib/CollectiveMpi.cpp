//===- CollectiveMpi.cpp - The MPI engine: Open MPI loaded at run time ----===//
//
// The runtime library never links MPI: a single-process user needs none, and
// an MPI-less machine must still run everything else. libmpi.so.40 (Open
// MPI 3 and later, the Debian package's soname) is opened with dlopen when
// a job asks for it. RTLD_GLOBAL because Open MPI's own plugins (its MCA
// components) resolve libmpi's symbols from the global namespace.
//
// Open MPI's handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the
// addresses of exported objects (mpi.h's OMPI_PREDEFINED_GLOBAL), so dlsym
// finds them by name; MPICH's integer handles would need a second table,
// which no test machine has, so only Open MPI is supported.
//
// Timeouts: MPI has no deadline on a blocking collective, and a rank that
// stops responding leaves the others waiting forever. A watchdog thread,
// asleep on a condition variable (no polling), is armed before every
// collective and disarmed after; when the deadline passes first it prints
// one line and ends the process with status 1, and mpirun then ends the
// job. Errors MPI reports are returned as values (MPI_ERRORS_RETURN).
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Collective.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace kiln::runtime {

namespace {

// The MPI C ABI of Open MPI, declared here instead of including mpi.h so
// that building Kiln needs no MPI headers either.
using MpiHandle = void *;
constexpr int kMpiSuccess = 0;
constexpr int kMpiThreadSerialized = 2;
constexpr int kMpiMaxErrorString = 256;

struct MpiLibrary {
  int (*Initialized)(int *);
  int (*Finalized)(int *);
  int (*Init_thread)(int *, char ***, int, int *);
  int (*Finalize)();
  int (*Comm_rank)(MpiHandle, int *);
  int (*Comm_size)(MpiHandle, int *);
  int (*Comm_set_errhandler)(MpiHandle, MpiHandle);
  int (*Allreduce)(const void *, void *, int, MpiHandle, MpiHandle, MpiHandle);
  int (*Allgather)(const void *, int, MpiHandle, void *, int, MpiHandle,
                   MpiHandle);
  int (*Reduce_scatter_block)(const void *, void *, int, MpiHandle, MpiHandle,
                              MpiHandle);
  int (*Bcast)(void *, int, MpiHandle, int, MpiHandle);
  int (*Barrier)(MpiHandle);
  int (*Abort)(MpiHandle, int);
  int (*Error_string)(int, char *, int *);
  MpiHandle commWorld, floatType, byteType, sumOp, errorsReturn;
};

Expected<const MpiLibrary *> loadMpi() {
  static MpiLibrary library;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void *handle = ::dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      failure = "no MPI library (libmpi.so.40 not found: install Open MPI, "
                "Debian's openmpi-bin and libopenmpi3)";
      return;
    }
    auto resolve = [&](auto &member, const char *symbol) {
      void *address = ::dlsym(handle, symbol);
      if (!address && failure.empty())
        failure = fmt::format("libmpi.so.40 has no symbol {} (Kiln supports "
                              "Open MPI)",
                              symbol);
      member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(
          address);
    };
    resolve(library.Initialized, "MPI_Initialized");
    resolve(library.Finalized, "MPI_Finalized");
    resolve(library.Init_thread, "MPI_Init_thread");
    resolve(library.Finalize, "MPI_Finalize");
    resolve(library.Comm_rank, "MPI_Comm_rank");
    resolve(library.Comm_size, "MPI_Comm_size");
    resolve(library.Comm_set_errhandler, "MPI_Comm_set_errhandler");
    resolve(library.Allreduce, "MPI_Allreduce");
    resolve(library.Allgather, "MPI_Allgather");
    resolve(library.Reduce_scatter_block, "MPI_Reduce_scatter_block");
    resolve(library.Bcast, "MPI_Bcast");
    resolve(library.Barrier, "MPI_Barrier");
    resolve(library.Abort, "MPI_Abort");
    resolve(library.Error_string, "MPI_Error_string");
    library.commWorld = ::dlsym(handle, "ompi_mpi_comm_world");
    library.floatType = ::dlsym(handle, "ompi_mpi_float");
    library.byteType = ::dlsym(handle, "ompi_mpi_byte");
    library.sumOp = ::dlsym(handle, "ompi_mpi_op_sum");
    library.errorsReturn = ::dlsym(handle, "ompi_mpi_errors_return");
    if (failure.empty() &&
        (!library.commWorld || !library.floatType || !library.byteType ||
         !library.sumOp || !library.errorsReturn))
      failure = "libmpi.so.40 lacks Open MPI's predefined handles "
                "(ompi_mpi_comm_world, ...): Kiln supports Open MPI";
  });
  if (!failure.empty())
    return Error::failure(failure);
  return &library;
}

/// Ends the process when an armed deadline passes.
class Watchdog {
public:
  explicit Watchdog(double seconds, int rank) : seconds(seconds), rank(rank) {
    if (seconds > 0)
      thread = std::thread([this] { run(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    if (thread.joinable())
      thread.join();
  }
  void arm(std::string_view what) {
    if (seconds <= 0)
      return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      armed = true;
      this->what = std::string(what);
      deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(seconds));
    }
    wake.notify_all();
  }
  void disarm() {
    if (seconds <= 0)
      return;
    std::lock_guard<std::mutex> lock(mutex);
    armed = false;
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      if (!armed) {
        wake.wait(lock);
        continue;
      }
      if (wake.wait_until(lock, deadline) == std::cv_status::timeout &&
          armed && std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr,
                     "kiln: error: rank %d: %s did not complete within the "
                     "collective timeout (%g s): another rank died or stopped "
                     "responding\n",
                     rank, what.c_str(), seconds);
        std::fflush(stderr);
        ::_exit(1);
      }
    }
  }

  double seconds;
  int rank;
  std::mutex mutex;
  std::condition_variable wake;
  bool armed = false, stopping = false;
  std::string what;
  std::chrono::steady_clock::time_point deadline;
  std::thread thread;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(const MpiLibrary &mpi, int rank, int size,
                  bool ownsInit, double timeout)
      : mpi(mpi), rankValue(rank), sizeValue(size), ownsInit(ownsInit),
        watchdog(timeout, rank) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    if (ownsInit && mpi.Finalized(&finalized) == kMpiSuccess && !finalized)
      mpi.Finalize();
  }
  int rank() const override { return rankValue; }
  int size() const override { return sizeValue; }
  std::string_view engine() const override { return "mpi"; }

  Error allReduceMean(float *data, uint64_t count,
                      std::string_view what) override {
    // MPI counts are ints: large buffers go in pieces.
    constexpr uint64_t kPiece = uint64_t(1) << 30;
    for (uint64_t start = 0; start < count; start += kPiece) {
      int n = static_cast<int>(std::min(kPiece, count - start));
      watchdog.arm(fmt::format("all-reduce of {}", what));
      int rc = mpi.Allreduce(inPlace(), data + start, n, mpi.floatType,
                             mpi.sumOp, mpi.commWorld);
      watchdog.disarm();
      if (rc != kMpiSuccess)
        return failure("MPI_Allreduce", what, rc);
    }
    float scale = 1.0f / static_cast<float>(sizeValue);
    // Exact for power-of-two world sizes; otherwise one rounding, the same
    // on every rank.
    for (uint64_t i = 0; i < count; ++i)
      data[i] *= scale;
    return Error::success();
  }

  Error reduceScatterMean(const float *send, float *receive, uint64_t count,
                          std::string_view what) override {
    // One call: the send buffer is size() x count values, in pieces it
    // would need a strided layout MPI_Reduce_scatter_block does not take.
    if (count > uint64_t(1) << 30)
      return makeError("rank {}: reduce-scatter of {}: {} values per rank is "
                       "more than this engine sends at once (2^30)",
                       rankValue, what, count);
    watchdog.arm(fmt::format("reduce-scatter of {}", what));
    int rc = mpi.Reduce_scatter_block(send, receive, static_cast<int>(count),
                                      mpi.floatType, mpi.sumOp, mpi.commWorld);
    watchdog.disarm();
    if (rc != kMpiSuccess)
      return failure("MPI_Reduce_scatter_block", what, rc);
    // The same scaling as allReduceMean, so that both give the same mean.
    float scale = 1.0f / static_cast<float>(sizeValue);
    for (uint64_t i = 0; i < count; ++i)
      receive[i] *= scale;
    return Error::success();
  }

  Error allGather(const void *send, uint64_t bytes, void *receive,
                  std::string_view what) override {
    if (bytes > uint64_t(1) << 30)
      return makeError("rank {}: all-gather of {}: {} bytes per rank is more "
                       "than this engine sends at once (1 GiB)",
                       rankValue, what, bytes);
    watchdog.arm(fmt::format("all-gather of {}", what));
    int n = static_cast<int>(bytes);
    int rc = mpi.Allgather(send, n, mpi.byteType, receive, n, mpi.byteType,
                           mpi.commWorld);
    watchdog.disarm();
    if (rc != kMpiSuccess)
      return failure("MPI_Allgather", what, rc);
    return Error::success();
  }

  Error broadcast(void *data, uint64_t bytes, int root,
                  std::string_view what) override {
    constexpr uint64_t kPiece = uint64_t(1) << 30;
    for (uint64_t start = 0; start < bytes; start += kPiece) {
      int n = static_cast<int>(std::min(kPiece, bytes - start));
      watchdog.arm(fmt::format("broadcast of {}", what));
      int rc = mpi.Bcast(static_cast<uint8_t *>(data) + start, n,
                         mpi.byteType, root, mpi.commWorld);
      watchdog.disarm();
      if (rc != kMpiSuccess)
        return failure("MPI_Bcast", what, rc);
    }
    return Error::success();
  }

  Error barrier(std::string_view what) override {
    watchdog.arm(fmt::format("barrier ({})", what));
    int rc = mpi.Barrier(mpi.commWorld);
    watchdog.disarm();
    if (rc != kMpiSuccess)
      return failure("MPI_Barrier", what, rc);
    return Error::success();
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    mpi.Abort(mpi.commWorld, code);
    ::_exit(code);
  }

private:
  /// MPI_IN_PLACE is ((void *) 1) in Open MPI.
  static const void *inPlace() { return reinterpret_cast<const void *>(1); }

  Error failure(const char *call, std::string_view what, int rc) const {
    char text[kMpiMaxErrorString] = {};
    int length = 0;
    mpi.Error_string(rc, text, &length);
    return makeError("rank {}: {} of {} failed: {}", rankValue, call, what,
                     std::string(text, std::max(length, 0)));
  }

  const MpiLibrary &mpi;
  int rankValue, sizeValue;
  bool ownsInit;
  Watchdog watchdog;
};

} // namespace

Expected<std::shared_ptr<Communicator>>
createMpiCommunicator(const CollectiveOptions &options) {
  if (!(options.timeoutSeconds >= 0))
    return makeError("the collective timeout must not be negative");
  Expected<const MpiLibrary *> loaded = loadMpi();
  if (!loaded)
    return loaded.takeError();
  const MpiLibrary &mpi = **loaded;
  int initialized = 0;
  mpi.Initialized(&initialized);
  bool ownsInit = false;
  if (!initialized) {
    int provided = 0;
    if (int rc = mpi.Init_thread(nullptr, nullptr, kMpiThreadSerialized,
                                 &provided);
        rc != kMpiSuccess)
      return makeError("MPI_Init_thread failed (error {})", rc);
    ownsInit = true;
  }
  mpi.Comm_set_errhandler(mpi.commWorld, mpi.errorsReturn);
  int rank = 0, size = 1;
  if (mpi.Comm_rank(mpi.commWorld, &rank) != kMpiSuccess ||
      mpi.Comm_size(mpi.commWorld, &size) != kMpiSuccess)
    return makeError("MPI_Comm_rank/MPI_Comm_size failed");
  return std::shared_ptr<Communicator>(std::make_shared<MpiCommunicator>(
      mpi, rank, size, ownsInit, options.timeoutSeconds));
}

} // namespace kiln::runtime
