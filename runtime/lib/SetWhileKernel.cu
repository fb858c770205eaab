//===- SetWhileKernel.cu - Sets a conditional WHILE node from a flag byte -===//
//
// A device-side loop (a `while` control region, docs/runtime.md
// "Device-side loops") captured into a CUDA graph becomes a conditional
// WHILE node. The node repeats its body while its handle is nonzero; this
// kernel copies the region's flag byte into the handle, once before the
// node and once as the body's last node (CudaDevice::beginWhileCapture and
// endWhileCapture).
//
// cudaGraphSetConditional lives in the device runtime (libcudadevrt), which
// the driver's PTX JIT cannot link, so this file is compiled here with nvcc
// -rdc and linked with nvlink into one cubin per architecture major
// (runtime/cmake/SetWhileCubins.cmake), embedded in the runtime.
//
//===----------------------------------------------------------------------===//

#include <cuda_device_runtime_api.h>

extern "C" __global__ void kiln_set_while(cudaGraphConditionalHandle handle,
                                          const unsigned char *flag) {
  cudaGraphSetConditional(handle, *flag != 0 ? 1u : 0u);
}
