//===- LaunchFile.h - What a CUTLASS kernel's host code asks to launch ----===//
//
// The host programs of the harness (Sm80GemmParams.cu, Sm90GemmParams.cu)
// compute a kernel's Params with CUTLASS's own host code and print what a
// launch needs, one item a line, for cutlass-emu-run and the driver script:
//
//   kernel <entry name in the PTX>
//   grid X Y Z
//   block X Y Z
//   cluster X Y Z
//   shared <dynamic shared memory bytes>
//   params <the Params bytes in hex>
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_CUTLASS_LAUNCHFILE_H
#define KILN_TEST_CUTLASS_LAUNCHFILE_H

#include <cstdint>
#include <cstdio>

namespace kiln_cutlass {

struct LaunchDims {
  unsigned x = 1, y = 1, z = 1;
};

inline void printLaunch(std::FILE *out, const char *kernel, LaunchDims grid,
                        LaunchDims block, LaunchDims cluster,
                        unsigned sharedBytes, const void *params,
                        size_t paramBytes) {
  std::fprintf(out, "kernel %s\n", kernel);
  std::fprintf(out, "grid %u %u %u\n", grid.x, grid.y, grid.z);
  std::fprintf(out, "block %u %u %u\n", block.x, block.y, block.z);
  std::fprintf(out, "cluster %u %u %u\n", cluster.x, cluster.y, cluster.z);
  std::fprintf(out, "shared %u\n", sharedBytes);
  std::fprintf(out, "params ");
  const auto *bytes = static_cast<const uint8_t *>(params);
  for (size_t i = 0; i < paramBytes; ++i)
    std::fprintf(out, "%02x", bytes[i]);
  std::fprintf(out, "\n");
}

} // namespace kiln_cutlass

#endif // KILN_TEST_CUTLASS_LAUNCHFILE_H
