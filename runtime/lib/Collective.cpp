//===- Collective.cpp - The job's shape from the launcher's environment ---===//
//
// detectWorld (kiln/runtime/Collective.h): mpirun, mpiexec and srun tell
// each process its rank through the environment before MPI is loaded, so
// a process can tell whether it is one of several without touching MPI.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Collective.h"

#include <cerrno>
#include <cstdlib>

namespace kiln::runtime {

Communicator::~Communicator() = default;

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
