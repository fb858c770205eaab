//===- Collective.h - Collectives across the ranks of a training job -*- C++ -*-===//
//
// Data-parallel training (kilnc --train --data-parallel, launched with
// mpirun) averages the gradients of every rank between train_step and
// train_update. One interface, one engine per device kind:
//
//   WorldInfo world = detectWorld();      // from mpirun's environment
//   Expected<std::shared_ptr<Communicator>> comm =
//       createMpiCommunicator({300.0});   // libmpi.so.40, loaded at run time
//   (*comm)->allReduceMean(gradients, count);
//
// The MPI engine (Open MPI, dlopened so that single-process users need no
// MPI at all) reduces host buffers: it serves the emu device, whose memory
// is host memory, and is the bootstrap of every other engine. A collective
// that does not finish within the timeout (a rank died or stopped
// responding) ends the process with a one-line error and exit status 1;
// mpirun then ends the job. docs/runtime.md "Data-parallel training".
//
// Stability: experimental, like Training.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COLLECTIVE_H
#define KILN_RUNTIME_COLLECTIVE_H

#include "kiln/runtime/DType.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Where this process stands in a job, as its launcher's environment says:
/// Open MPI's OMPI_COMM_WORLD_{SIZE,RANK,LOCAL_RANK}, else PMI_SIZE and
/// PMI_RANK (MPICH, Slurm; local rank from MPI_LOCALRANKID or
/// SLURM_LOCALID). Without them: rank 0 of 1, `launcher` empty.
struct WorldInfo {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  /// "open-mpi", "pmi", or empty when not started by a launcher.
  std::string launcher;
};

/// Reads the environment; an error names a variable that is set but not a
/// valid number (or a rank outside the size).
Expected<WorldInfo> detectWorld();

struct CollectiveOptions {
  /// Seconds a collective may take before this rank gives up on the others
  /// (kiln-train --collective-timeout). 0: wait forever.
  double timeoutSeconds = 300;
};

class DeviceCollectives;

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string_view engine() const = 0;
  /// `count` f32 values summed across the ranks and divided by the world
  /// size, in place, on every rank. `what` names the data in errors and
  /// timeouts ("gradient bucket 2").
  virtual Error allReduceMean(float *data, uint64_t count,
                              std::string_view what) = 0;
  /// Every rank's `count` x size() f32 `send` values summed across the ranks
  /// and divided by the world size; rank r receives elements
  /// [r*count, (r+1)*count) of the result in `receive` (`count` values).
  virtual Error reduceScatterMean(const float *send, float *receive,
                                  uint64_t count, std::string_view what) = 0;
  /// Every rank's `bytes` bytes of `send`, concatenated in rank order into
  /// `receive` (size() x bytes) on every rank.
  virtual Error allGather(const void *send, uint64_t bytes, void *receive,
                          std::string_view what) = 0;
  /// `bytes` bytes of rank `root`'s buffer copied to every rank's.
  virtual Error broadcast(void *data, uint64_t bytes, int root,
                          std::string_view what) = 0;
  virtual Error barrier(std::string_view what) = 0;
  /// The engine's device collectives (NCCL), or null when it reduces host
  /// buffers only (MPI).
  virtual DeviceCollectives *deviceCollectives() { return nullptr; }
  /// Ends every rank of the job with `code` (after an error on this one, so
  /// that the others do not wait for it until their timeout).
  [[noreturn]] virtual void abort(int code) = 0;
};

/// What an engine that reduces device memory (NCCL) offers besides the
/// host-buffer collectives: all-reduces queued on a stream of its own,
/// each ordered after the work queued so far on a compute stream by an
/// event, so that communication overlaps the launches queued after it.
class DeviceCollectives {
public:
  virtual ~DeviceCollectives();
  /// Queues the mean across the ranks of `count` f32 values at `data` (in
  /// place) on the engine's stream, to start once the work queued so far
  /// on `after` has finished.
  virtual Error enqueueAllReduceMean(DevicePtr data, uint64_t count,
                                     StreamHandle after,
                                     std::string_view what) = 0;
  /// Makes later work on `stream` wait for everything queued on the engine,
  /// and waits on the host until that has finished, within the collective
  /// timeout (checking the engine's asynchronous errors meanwhile).
  virtual Error finish(StreamHandle stream) = 0;
  /// Timing (kiln-train --trace on cuda): while on, every all-reduce queued
  /// is bracketed by events on the engine's stream; takeTimes returns, for
  /// each one queued since the last take (in queue order), its start and
  /// end in milliseconds after `origin` (an event recorded earlier on the
  /// same device), once finish() has returned.
  virtual void setTiming(bool on) = 0;
  virtual Expected<std::vector<std::pair<double, double>>>
  takeTimes(EventHandle origin) = 0;
};

/// kilnc --allreduce-dtype=bf16|fp16: allReduceMean with 16-bit values on
/// the wire and error feedback. Each rank adds `residual` (its rounding
/// error so far; resized to `count` zeros on first use) to `data`, rounds
/// to `wire` (BF16 or F16, nearest even), keeps what the rounding lost as
/// the new residual, and the ranks exchange the 16-bit values (allGather);
/// every rank then sums them in f32 in rank order and divides by the world
/// size, so every rank gets the same f32 result. The residual carries each
/// step's rounding into the next one, so over many steps the sum of what
/// a rank sent stays within one rounding of the sum of its gradients.
Error allReduceMeanCompressed(Communicator &communicator, float *data,
                              uint64_t count, DType wire,
                              std::vector<float> &residual,
                              std::string_view what);

/// One matrix of a PowerSGD bucket: `rows` x `cols` f32 elements, row-major,
/// from element `offset` of the bucket; `id` (its index in the artifact's
/// `powersgd` section) picks its initial Q.
struct PowerSgdBlock {
  uint64_t offset = 0;
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t id = 0;
};

/// What PowerSGD keeps per rank between the steps of one bucket: each
/// matrix's error-feedback residual (rows x cols) and its Q (cols x r, the
/// warm start of the next power iteration). Empty before the first step.
struct PowerSgdMemory {
  std::vector<std::vector<float>> error;
  std::vector<std::vector<float>> q;
};

/// The initial Q of matrix `id`: cols x rank standard normals, row-major,
/// the same on every rank: SplitMix64 seeded with
/// seed ^ (id * 0xD1B54A32D192ED03), uniforms (x >> 11 + 1) / 2^53, and
/// Box-Muller pairs (sqrt(-2 ln u1) cos 2 pi u2, ... sin ...), rounded to
/// f32. docs/runtime.md "Compression: PowerSGD" spells it out for other
/// implementations (the tests' numpy reference).
std::vector<float> powerSgdInitialQ(uint64_t seed, uint64_t id, uint64_t cols,
                                    uint32_t rank);

/// kilnc --allreduce-dtype=powersgd:R: allReduceMean of a bucket of
/// `count` elements in which `blocks` (ordered, not overlapping) are
/// compressed to rank r = min(R, rows, cols) with error feedback (PowerSGD,
/// Vogels et al. 2019): M = data + error; P = M Q; P averaged over the
/// ranks and orthonormalised (f64 Gram-Schmidt); Q = M^T P averaged;
/// data = P Q^T; error = M - P Q^T; Q kept for the next step. Elements
/// outside the blocks are averaged exactly, in f32, with the P factors
/// (one all-reduce for P, one for Q). Every rank gets the same result.
Error allReduceMeanPowerSgd(Communicator &communicator, float *data,
                            uint64_t count,
                            const std::vector<PowerSgdBlock> &blocks,
                            uint32_t rank, uint64_t seed,
                            PowerSgdMemory &memory, std::string_view what);

/// The MPI engine: loads libmpi.so.40 (Open MPI) with dlopen, initialises
/// MPI once per process (MPI_THREAD_SERIALIZED; errors returned, not
/// fatal) and finalises it when the last communicator goes. Fails cleanly
/// when Open MPI is not installed.
Expected<std::shared_ptr<Communicator>>
createMpiCommunicator(const CollectiveOptions &options);

/// A world of one: every collective is the identity (a copy). kiln-train
/// bootstraps the NCCL engine with it in a single process, so that the
/// engine runs at world size 1 without MPI.
std::shared_ptr<Communicator> createLocalCommunicator();

/// Where the NCCL engine loads libnccl.so.2 from: KILN_NCCL_LIBRARY when
/// set, else the loader's search path.
std::string ncclLibraryPath();

/// What loading libnccl.so.2 found: its version (NCCL_VERSION_CODE, e.g.
/// 22809 for 2.28.9) once every function the engine calls resolved, or an
/// error naming the library and the first missing symbol.
Expected<int> loadNcclLibrary();

/// 128 bytes of ncclGetUniqueId (rank 0's; the others receive it).
Expected<std::vector<uint8_t>> ncclUniqueIdBytes();

/// The NCCL engine (kiln-train --collective-engine nccl, the default on
/// cuda): loads libnccl.so.2, has rank 0 of `bootstrap` (the MPI
/// communicator, which also serves barrier and abort) create the unique
/// id and broadcast it, and joins every rank's communicator on `device`,
/// which must be a cuda device (one GPU per rank). Device buffers are
/// reduced in place on the engine's own stream (deviceCollectives());
/// host buffers are staged through device memory. Collectives that do
/// not finish within the timeout end the process with the MPI engine's
/// one-line error after ncclCommAbort.
Expected<std::shared_ptr<Communicator>>
createNcclCommunicator(const CollectiveOptions &options,
                       std::shared_ptr<Communicator> bootstrap,
                       std::shared_ptr<Device> device);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_COLLECTIVE_H
