//===- Sm90GemmKernels.cu - Device entries of the sm_90 CUTLASS GEMMs -----===//
//
// Compiled with `nvcc --ptx -arch=sm_90a`. Each entry is CUTLASS's own
// cutlass::device_kernel<Kernel> body (extern shared memory, the kernel's
// operator()), given an unmangled name so the harness can pick it.
//
//===----------------------------------------------------------------------===//

#include "Sm90Gemms.cuh"

#include "cutlass/device_kernel.h"

#define KILN_CUTLASS_ENTRY(NAME, GEMM)                                         \
  extern "C" __global__ void __launch_bounds__(                                \
      GEMM::Kernel::MaxThreadsPerBlock,                                        \
      GEMM::Kernel::MinBlocksPerMultiprocessor)                                \
      NAME(CUTLASS_GRID_CONSTANT typename GEMM::Kernel::Params const params) { \
    extern __shared__ char smem[];                                             \
    typename GEMM::Kernel op;                                                  \
    op(params, smem);                                                          \
  }

#define KILN_SM90_ENTRY(NAME, GEMM)                                            \
  KILN_CUTLASS_ENTRY(kiln_cutlass_##NAME, GEMM)
KILN_SM90_VARIANTS(KILN_SM90_ENTRY)
