//===- Sm80GemmKernels.cu - Device entries of the sm_80 CUTLASS GEMMs -----===//
//
// Compiled with `nvcc --ptx -arch=sm_80`. Each entry is CUTLASS's own
// cutlass::Kernel<GemmKernel> body (cutlass/device_kernel.h: the Params by
// value, SharedStorage in dynamic shared memory), given an unmangled name
// so the harness can pick it.
//
//===----------------------------------------------------------------------===//

#include "Sm80Gemms.cuh"

#define KILN_SM80_ENTRY(NAME, GEMM)                                            \
  extern "C" __global__ void kiln_cutlass_##NAME(                              \
      typename GEMM::Kernel::Params params) {                                  \
    extern __shared__ int SharedStorageBase[];                                 \
    typename GEMM::Kernel::SharedStorage *shared_storage =                     \
        reinterpret_cast<typename GEMM::Kernel::SharedStorage *>(              \
            SharedStorageBase);                                                \
    typename GEMM::Kernel op;                                                  \
    op(params, *shared_storage);                                               \
  }

KILN_SM80_VARIANTS(KILN_SM80_ENTRY)
