//===- Sm80Gemms.cuh - The sm_80 CUTLASS GEMMs on emu --------- -*- C++ -*-===//
//
// CUTLASS 2.x device-wide GEMMs (cutlass::gemm::device::Gemm) on sm_80
// tensor cores: mma.sync with multistage cp.async pipelines and ldmatrix
// fragment loads, f32 accumulation, f32 C/D (row-major).
//   - bf16: CUTLASS's default Sm80 tensor-op configuration
//     (DefaultGemmConfiguration: 128 x 256 x 64 tiles, 64 x 64 x 64 warps,
//     m16n8k16, 3 stages), A and B in both majors (the MN-major operands
//     load with ldmatrix .trans);
//   - s8 (Sm80S8Gemm): int8 operands, s32 accumulators, m16n8k32;
//   - tf32: the configuration of CUTLASS's example 14 (128 x 128 x 16, 64 x
//     64 x 16 warps, m16n8k8, 4 stages; the default's 16-deep instruction
//     has no tf32 form).
//
// Shared by the device translation unit (Sm80GemmKernels.cu) and the host
// one (Sm80GemmParams.cu).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_CUTLASS_SM80GEMMS_CUH
#define KILN_TEST_CUTLASS_SM80GEMMS_CUH

#include "cutlass/cutlass.h"

#include "cutlass/gemm/device/gemm.h"

namespace kiln_cutlass {

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;

template <class Element, class LayoutA, class LayoutB> struct Sm80DefaultGemm {
  using ElementA = Element;
  using ElementB = Element;
  using Device = cutlass::gemm::device::Gemm<
      Element, LayoutA, Element, LayoutB, float, RowMajor, float,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80>;
  using Kernel = typename Device::GemmKernel;
};

struct Sm80Tf32Gemm {
  using ElementA = float;
  using ElementB = float;
  using Device = cutlass::gemm::device::Gemm<
      float, RowMajor, float, ColumnMajor, float, RowMajor, float,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<128, 128, 16>,
      cutlass::gemm::GemmShape<64, 64, 16>, cutlass::gemm::GemmShape<16, 8, 8>,
      cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 4>;
  using Kernel = typename Device::GemmKernel;
};

/// s8 x s8 -> s32 on m16n8k32 (issue 26: checks the emulator's int8
/// fragments): CUTLASS's default Sm80 int8 tiles (128 x 256 x 64 would do;
/// 128 x 128 x 64 with 64 x 64 x 64 warps keeps the emu run short), 3
/// stages, the default int8 operator (saturating: `.satfinite`), and an f32
/// epilogue D = alpha * float(acc) + beta * C.
struct Sm80S8Gemm {
  using ElementA = int8_t;
  using ElementB = int8_t;
  using Device = cutlass::gemm::device::Gemm<
      int8_t, RowMajor, int8_t, ColumnMajor, float, RowMajor, int32_t,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<128, 128, 64>,
      cutlass::gemm::GemmShape<64, 64, 64>, cutlass::gemm::GemmShape<16, 8, 32>,
      cutlass::epilogue::thread::LinearCombination<float, 4, int32_t, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;
  using Kernel = typename Device::GemmKernel;
};

using Sm80Bf16Tn = Sm80DefaultGemm<cutlass::bfloat16_t, RowMajor, ColumnMajor>;
using Sm80Bf16Nt = Sm80DefaultGemm<cutlass::bfloat16_t, ColumnMajor, RowMajor>;

/// Every variant: its name (the entry is kiln_cutlass_<name>) and type.
#define KILN_SM80_VARIANTS(X)                                                  \
  X(sm80_bf16_tn, kiln_cutlass::Sm80Bf16Tn)                                    \
  X(sm80_bf16_nt, kiln_cutlass::Sm80Bf16Nt)                                    \
  X(sm80_tf32_tn, kiln_cutlass::Sm80Tf32Gemm)                                  \
  X(sm80_s8_tn, kiln_cutlass::Sm80S8Gemm)

} // namespace kiln_cutlass

#endif // KILN_TEST_CUTLASS_SM80GEMMS_CUH
