//===- Sm90GemmParams.cu - Host side of the sm_90 CUTLASS GEMMs -----------===//
//
// Computes a kernel's Params the way CUTLASS's GemmUniversalAdapter does
// (GemmUniversal::can_implement, to_underlying_arguments, get_grid_shape,
// get_block_shape, SharedStorageSize), with no GPU: operand pointers are
// the device addresses the emulator will place the buffers at, and the TMA
// descriptors come from TmaEncodeShim.cpp. Prints the launch (LaunchFile.h).
//
//   kiln-cutlass-sm90-params VARIANT M N K ALPHA BETA ADDR_A ADDR_B ADDR_C
//   ADDR_D
//
// A (M x K), B (K x N) in the variant's majors, C and D row-major M x N f32.
//
//===----------------------------------------------------------------------===//

#include "LaunchFile.h"
#include "Sm90Gemms.cuh"

#include "cutlass/util/packed_stride.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

template <class Gemm>
int printSm90Launch(const char *entry, int m, int n, int k, float alpha,
                    float beta, uint64_t addrA, uint64_t addrB, uint64_t addrC,
                    uint64_t addrD) {
  using Kernel = typename Gemm::Kernel;
  auto strideA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{},
                                                  cute::make_shape(m, k, 1));
  auto strideB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{},
                                                  cute::make_shape(n, k, 1));
  auto strideC = cutlass::make_cute_packed_stride(typename Kernel::StrideC{},
                                                  cute::make_shape(m, n, 1));
  auto strideD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{},
                                                  cute::make_shape(m, n, 1));
  cutlass::KernelHardwareInfo hwInfo;
  hwInfo.device_id = 0;
  hwInfo.sm_count = 132; // H200; the non-persistent kernel does not read it
  typename Kernel::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {reinterpret_cast<typename Gemm::ElementA const *>(addrA), strideA,
       reinterpret_cast<typename Gemm::ElementB const *>(addrB), strideB},
      {{alpha, beta},
       reinterpret_cast<float const *>(addrC),
       strideC,
       reinterpret_cast<float *>(addrD),
       strideD},
      hwInfo};
  if (!Kernel::can_implement(args)) {
    std::fprintf(stderr, "%s: CUTLASS cannot implement M=%d N=%d K=%d\n", entry,
                 m, n, k);
    return 1;
  }
  if (Kernel::get_workspace_size(args) != 0) {
    std::fprintf(stderr, "%s: needs a workspace (not supported)\n", entry);
    return 1;
  }
  typename Kernel::Params params =
      Kernel::to_underlying_arguments(args, nullptr);
  dim3 grid = Kernel::get_grid_shape(params);
  dim3 block = Kernel::get_block_shape();
  using Cluster = typename Gemm::ClusterShape;
  kiln_cutlass::printLaunch(
      stdout, entry, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z},
      {unsigned(cute::size<0>(Cluster{})), unsigned(cute::size<1>(Cluster{})),
       unsigned(cute::size<2>(Cluster{}))},
      Kernel::SharedStorageSize, &params, sizeof(params));
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
    return printSm90Launch<GEMM>("kiln_cutlass_" #NAME, m, n, k, alpha, beta,  \
                                 addr[0], addr[1], addr[2], addr[3]);
  KILN_SM90_VARIANTS(KILN_VARIANT)
#undef KILN_VARIANT
  std::fprintf(stderr, "%s: unknown variant '%s'\n", argv[0], variant.c_str());
  return 2;
}
