//===- Collective.cpp - The job's shape from the launcher's environment ---===//
//
// detectWorld (kiln/runtime/Collective.h): mpirun, mpiexec and srun tell
// each process its rank through the environment before MPI is loaded, so
// a process can tell whether it is one of several without touching MPI.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "FloatConversion.h"

#include "kiln/runtime/Collective.h"

#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace kiln::runtime {

Communicator::~Communicator() = default;
DeviceCollectives::~DeviceCollectives() = default;

namespace {
/// The integer value of environment variable `name`, nullopt when unset.
Expected<std::optional<int>> intVariable(const char *name) {
  const char *text = std::getenv(name);
  if (!text)
    return std::optional<int>();
  char *end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (!*text || *end || errno || value < 0 || value > (1 << 30))
    return makeError("environment variable {}='{}' is not a rank or a size",
                     name, text);
  return std::optional<int>(static_cast<int>(value));
}
} // namespace

namespace {
float bf16BitsToFloat(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

float f16BitsToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(float(mantissa), -24); // subnormal (or zero)
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(float(mantissa | 0x400u), int(exponent) - 25);
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float value;
  std::memcpy(&value, &out, 4);
  return value;
}
} // namespace

Error allReduceMeanCompressed(Communicator &communicator, float *data,
                              uint64_t count, DType wire,
                              std::vector<float> &residual,
                              std::string_view what) {
  if (wire != DType::BF16 && wire != DType::F16)
    return makeError("compressed all-reduce of {}: {} is not a wire type "
                     "(bf16, f16)",
                     what, dtypeName(wire));
  if (residual.size() != count)
    residual.assign(count, 0.0f);
  auto encode = wire == DType::BF16 ? f32BitsToBf16 : f32BitsToF16;
  auto decode = wire == DType::BF16 ? bf16BitsToFloat : f16BitsToFloat;
  std::vector<uint16_t> mine(count);
  for (uint64_t i = 0; i < count; ++i) {
    float value = data[i] + residual[i];
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    mine[i] = encode(bits);
    float sent = decode(mine[i]);
    // A value beyond the wire type's range goes as inf (the step is then
    // non-finite everywhere, as an overflow in one rank's gradient is);
    // no residual can carry that.
    residual[i] = std::isfinite(sent) ? value - sent : 0.0f;
  }
  int ranks = communicator.size();
  std::vector<uint16_t> all(count * uint64_t(ranks));
  if (Error err = communicator.allGather(mine.data(), count * 2, all.data(),
                                         what))
    return err;
  float scale = 1.0f / static_cast<float>(ranks);
  for (uint64_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < ranks; ++r)
      sum += decode(all[uint64_t(r) * count + i]);
    data[i] = sum * scale;
  }
  return Error::success();
}

namespace {
class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view engine() const override { return "local"; }
  Error allReduceMean(float *, uint64_t, std::string_view) override {
    return Error::success();
  }
  Error allGather(const void *send, uint64_t bytes, void *receive,
                  std::string_view) override {
    if (bytes)
      std::memmove(receive, send, bytes);
    return Error::success();
  }
  Error broadcast(void *, uint64_t, int, std::string_view) override {
    return Error::success();
  }
  Error reduceScatterMean(const float *send, float *receive, uint64_t count,
                          std::string_view) override {
    if (count)
      std::memmove(receive, send, count * sizeof(float));
    return Error::success();
  }
  Error barrier(std::string_view) override { return Error::success(); }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
};
} // namespace

std::shared_ptr<Communicator> createLocalCommunicator() {
  return std::make_shared<LocalCommunicator>();
}

Expected<WorldInfo> detectWorld() {
  struct Launcher {
    const char *name, *size, *rank, *localRank, *otherLocalRank;
  };
  const Launcher launchers[] = {
      {"open-mpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
      {"pmi", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"},
  };
  for (const Launcher &launcher : launchers) {
    Expected<std::optional<int>> size = intVariable(launcher.size);
    if (!size)
      return size.takeError();
    if (!*size)
      continue;
    Expected<std::optional<int>> rank = intVariable(launcher.rank);
    if (!rank)
      return rank.takeError();
    if (!*rank)
      return makeError("{} is set but {} is not", launcher.size,
                       launcher.rank);
    if (**size < 1 || **rank >= **size)
      return makeError("{}={} and {}={}: the rank lies outside the job",
                       launcher.rank, **rank, launcher.size, **size);
    WorldInfo world;
    world.launcher = launcher.name;
    world.size = **size;
    world.rank = **rank;
    for (const char *local : {launcher.localRank, launcher.otherLocalRank}) {
      if (!local)
        continue;
      Expected<std::optional<int>> value = intVariable(local);
      if (!value)
        return value.takeError();
      if (*value) {
        world.localRank = **value;
        break;
      }
    }
    return world;
  }
  return WorldInfo();
}

} // namespace kiln::runtime
