//===- kiln-powersgd-check.cpp - Drive allReduceMeanPowerSgd for tests ----===//
//
// A test tool, not a user one: runs the runtime's PowerSGD all-reduce
// (kiln/runtime/Collective.h) on gradient buckets read from .npy files and
// writes what it returns, so that test/e2e/training/powersgd_unit.py can
// check the math element by element against numpy. Under mpirun every rank
// reads its own gradients and the ranks all-reduce through the MPI engine;
// alone it is a world of one (no MPI needed).
//
//   kiln-powersgd-check --dir D --steps T --rank R --seed S
//                       --matrix OFFSET:ROWSxCOLS [--matrix ...]
//
// reads D/grad.rank<r>.step<t>.npy (one f32 bucket, 1-D) for t < T and
// writes D/out.rank<r>.step<t>.npy (the averaged, reconstructed bucket)
// and D/error.rank<r>.step<t>.m<b>.npy (each matrix's error feedback after
// the step). The matrices are numbered 0, 1, ... in the order given (their
// ids: which initial Q each gets).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Collective.h"
#include "kiln/runtime/Npy.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace kiln::runtime;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "kiln-powersgd-check: error: %s\n", message.c_str());
  std::exit(1);
}

} // namespace

int main(int argc, char **argv) {
  std::string dir;
  int steps = 1;
  uint32_t rank = 1;
  uint64_t seed = 0;
  std::vector<PowerSgdBlock> blocks;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc)
      fail(fmt::format("'{}' needs a value", arg));
    std::string value = argv[++i];
    if (arg == "--dir") {
      dir = value;
    } else if (arg == "--steps") {
      steps = std::atoi(value.c_str());
    } else if (arg == "--rank") {
      rank = uint32_t(std::atoi(value.c_str()));
    } else if (arg == "--seed") {
      seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--matrix") {
      PowerSgdBlock block;
      unsigned long long offset = 0, rows = 0, cols = 0;
      if (std::sscanf(value.c_str(), "%llu:%llux%llu", &offset, &rows,
                      &cols) != 3)
        fail(fmt::format("--matrix '{}': expected OFFSET:ROWSxCOLS", value));
      block.offset = offset;
      block.rows = rows;
      block.cols = cols;
      block.id = blocks.size();
      blocks.push_back(block);
    } else {
      fail(fmt::format("unknown option '{}'", arg));
    }
  }
  if (dir.empty() || steps < 1)
    fail("--dir and --steps >= 1 are required");

  Expected<WorldInfo> world = detectWorld();
  if (!world)
    fail(world.error().message());
  std::shared_ptr<Communicator> communicator;
  if (world->size > 1) {
    Expected<std::shared_ptr<Communicator>> mpi =
        createMpiCommunicator({120.0});
    if (!mpi)
      fail(mpi.error().message());
    communicator = mpi.take();
  } else {
    communicator = createLocalCommunicator();
  }
  int me = communicator->rank();
  PowerSgdMemory memory;
  for (int t = 0; t < steps; ++t) {
    std::string in = fmt::format("{}/grad.rank{}.step{}.npy", dir, me, t);
    Expected<NpyArray> grad = readNpy(in);
    if (!grad)
      fail(grad.error().message());
    if (grad->dtype != DType::F32 || grad->shape.size() != 1)
      fail(in + ": expected a 1-D f32 array");
    uint64_t count = grad->shape[0];
    auto *data = reinterpret_cast<float *>(grad->data.data());
    if (Error err = allReduceMeanPowerSgd(*communicator, data, count, blocks,
                                          rank, seed, memory, "the bucket"))
      fail(err.message());
    std::string out = fmt::format("{}/out.rank{}.step{}.npy", dir, me, t);
    if (Error err = writeNpy(out, DType::F32, grad->shape, data, count * 4))
      fail(err.message());
    for (size_t b = 0; b < blocks.size(); ++b) {
      const std::vector<float> &error = memory.error[b];
      std::string path =
          fmt::format("{}/error.rank{}.step{}.m{}.npy", dir, me, t, b);
      if (Error err = writeNpy(path, DType::F32,
                               {int64_t(blocks[b].rows),
                                int64_t(blocks[b].cols)},
                               error.data(), error.size() * 4))
        fail(err.message());
    }
  }
  return 0;
}
