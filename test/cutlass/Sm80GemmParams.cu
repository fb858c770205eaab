//===- Sm80GemmParams.cu - Host side of the sm_80 CUTLASS GEMMs -----------===//
//
// Computes a kernel's Params the way cutlass::gemm::device::Gemm's
// initialize() and run() do (can_implement, the threadblock swizzle's
// tiled and grid shapes, kThreadCount, sizeof(SharedStorage)), with no
// GPU: operand pointers are the device addresses the emulator will place
// the buffers at. Prints the launch (LaunchFile.h).
//
//   kiln-cutlass-sm80-params VARIANT M N K ALPHA BETA ADDR_A ADDR_B ADDR_C
//   ADDR_D
//
// A (M x K), B (K x N) in the variant's majors, C and D row-major M x N f32.
//
//===----------------------------------------------------------------------===//

#include "LaunchFile.h"
#include "Sm80Gemms.cuh"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

template <class Gemm>
int printSm80Launch(const char *entry, int m, int n, int k, float alpha,
                    float beta, uint64_t addrA, uint64_t addrB, uint64_t addrC,
                    uint64_t addrD) {
  using Device = typename Gemm::Device;
  using Kernel = typename Gemm::Kernel;
  using ElementA = typename Gemm::ElementA;
  using ElementB = typename Gemm::ElementB;
  cutlass::gemm::GemmCoord size(m, n, k);
  auto *a = reinterpret_cast<ElementA *>(addrA);
  auto *b = reinterpret_cast<ElementB *>(addrB);
  auto *c = reinterpret_cast<float *>(addrC);
  auto *d = reinterpret_cast<float *>(addrD);
  typename Device::Arguments args(size, {a, Device::LayoutA::packed({m, k})},
                                  {b, Device::LayoutB::packed({k, n})},
                                  {c, Device::LayoutC::packed({m, n})},
                                  {d, Device::LayoutC::packed({m, n})},
                                  {alpha, beta});
  if (Device::can_implement(args) != cutlass::Status::kSuccess) {
    std::fprintf(stderr, "%s: CUTLASS cannot implement M=%d N=%d K=%d\n", entry,
                 m, n, k);
    return 1;
  }
  using Shape = typename Device::ThreadblockShape;
  typename Device::ThreadblockSwizzle swizzle;
  cutlass::gemm::GemmCoord tiled = swizzle.get_tiled_shape(
      size, {Shape::kM, Shape::kN, Shape::kK}, args.split_k_slices);
  // Params' padding stays zero, so the bytes are the same every run.
  alignas(typename Kernel::Params) unsigned char
      storage[sizeof(typename Kernel::Params)];
  std::memset(storage, 0, sizeof(storage));
  auto *params =
      new (storage) typename Kernel::Params{args.problem_size,
                                            tiled,
                                            args.ref_A.non_const_ref(),
                                            args.ref_B.non_const_ref(),
                                            args.ref_C.non_const_ref(),
                                            args.ref_D,
                                            args.epilogue,
                                            nullptr};
  dim3 grid = swizzle.get_grid_shape(params->grid_tiled_shape);
  kiln_cutlass::printLaunch(stdout, entry, {grid.x, grid.y, grid.z},
                            {unsigned(Kernel::kThreadCount), 1, 1}, {1, 1, 1},
                            sizeof(typename Kernel::SharedStorage), params,
                            sizeof(*params));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 11) {
    std::fprintf(stderr,
                 "usage: %s VARIANT M N K ALPHA BETA ADDR_A ADDR_B "
                 "ADDR_C ADDR_D\n",
                 argv[0]);
    return 2;
  }
  std::string variant = argv[1];
  int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
  float alpha = std::strtof(argv[5], nullptr);
  float beta = std::strtof(argv[6], nullptr);
  uint64_t addr[4];
  for (int i = 0; i < 4; ++i)
    addr[i] = std::strtoull(argv[7 + i], nullptr, 0);
#define KILN_VARIANT(NAME, GEMM)                                               \
  if (variant == #NAME)                                                        \
    return printSm80Launch<GEMM>("kiln_cutlass_" #NAME, m, n, k, alpha, beta,  \
                                 addr[0], addr[1], addr[2], addr[3]);
  KILN_SM80_VARIANTS(KILN_VARIANT)
#undef KILN_VARIANT
  std::fprintf(stderr, "%s: unknown variant '%s'\n", argv[0], variant.c_str());
  return 2;
}
