// The emulator's fp8 conversion fixture (EmuFp8ConvertTest.cpp): a
// per-tensor-scaled quantize of f32 pairs to e4m3 with saturation, and
// the dequantize back to f16, through CUDA's own cuda_fp8.h intrinsics,
// so the PTX has nvcc's spelling of the conversions
// (cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.f16x2.e4m3x2 in braces).
//
// Regenerate the .ptx beside it with:
//   nvcc -arch=sm_90a -ptx fp8_quantize.cu -o fp8_quantize.ptx
#include <cuda_fp16.h>
#include <cuda_fp8.h>

extern "C" __global__ void quantize(const float2 *in, unsigned short *q,
                                    __half2_raw *back, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float2 v = in[i];
  v.x *= scale;
  v.y *= scale;
  __nv_fp8x2_storage_t s =
      __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
  q[i] = s;
  back[i] = __nv_cvt_fp8x2_to_halfraw2(s, __NV_E4M3);
}
