//===- Sm90Gemms.cuh - The sm_90 CUTLASS GEMMs on emu --------- -*- C++ -*-===//
//
// CUTLASS 3.x warp-specialized TMA + wgmma GEMMs (the kernel of CUTLASS's
// examples 48 and 49: CollectiveBuilder mainloop with
// KernelTmaWarpSpecialized, GemmUniversal), bf16 operands (or e4m3, as in
// example 54's fp8 GEMM: wgmma m64nNk32 e4m3, with CUTLASS's f32 promotion
// of the tensor-core accumulators), f32 accumulation and f32 C/D. Each variant
// differs in the operand majors and the tile, which decide the shared-memory
// swizzle the builder picks (ss_smem_selector: a K-major tile of 64/32/16 bf16
// along K gets 128B/64B/32B; an MN-major one the same by its M or N extent),
// and in its cluster shape (1 x 1 x 1, or 2 x 2 and 4 x 2 with TMA multicast).
//
// Shared by the device translation unit (Sm90GemmKernels.cu, the entries)
// and the host one (Sm90GemmParams.cu, the Params without a GPU).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_CUTLASS_SM90GEMMS_CUH
#define KILN_TEST_CUTLASS_SM90GEMMS_CUH

#include "cutlass/cutlass.h"

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace kiln_cutlass {

template <class LayoutA, class LayoutB, class TileShape,
          class ClusterShape_ = cute::Shape<cute::_1, cute::_1, cute::_1>,
          class ElementAB = cutlass::bfloat16_t>
struct Sm90Gemm {
  using ElementA = ElementAB;
  using ElementB = ElementAB;
  using ElementC = float;
  using LayoutC = cutlass::layout::RowMajor;
  using ElementAccumulator = float;
  using ClusterShape = ClusterShape_;
  static constexpr int AlignmentA = 16 / sizeof(ElementA);
  static constexpr int AlignmentB = 16 / sizeof(ElementB);
  static constexpr int AlignmentC = 16 / sizeof(ElementC);

  using CollectiveEpilogue =
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape,
          ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto,
          ElementAccumulator, ElementAccumulator, ElementC, LayoutC, AlignmentC,
          ElementC, LayoutC, AlignmentC,
          cutlass::epilogue::NoSmemWarpSpecialized>::CollectiveOp;

  using CollectiveMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA,
          LayoutA, AlignmentA, ElementB, LayoutB, AlignmentB,
          ElementAccumulator, TileShape, ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          cutlass::gemm::KernelTmaWarpSpecialized>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
};

using RowMajor = cutlass::layout::RowMajor;
using ColumnMajor = cutlass::layout::ColumnMajor;
using cute::_128;
using cute::_16;
using cute::_32;
using cute::_64;
using cute::Shape;

// A row-major is K-major, A column-major M-major; B column-major (K x N)
// is K-major, B row-major N-major. The swizzle each operand gets:
/// Both K-major, K tile 64 (128 bytes of bf16): 128B on A and B.
using Sm90TnSw128 = Sm90Gemm<RowMajor, ColumnMajor, Shape<_128, _128, _64>>;
/// Both MN-major, M and N tiles 128: 128B on A and B.
using Sm90NtSw128 = Sm90Gemm<ColumnMajor, RowMajor, Shape<_128, _128, _64>>;
/// A K-major with a K tile of 16 (32 bytes): 32B; B N-major with an N tile
/// of 32: 64B.
using Sm90TtSw32 = Sm90Gemm<RowMajor, RowMajor, Shape<_64, _32, _16>>;
/// A M-major, M tile 64: 128B; B K-major with a K tile of 32: 64B.
using Sm90NnSw64 = Sm90Gemm<ColumnMajor, ColumnMajor, Shape<_64, _128, _32>>;

/// Clusters: 2 x 2 (A multicast along the cluster's N, B along its M) and
/// example 48's 4 x 2, each block loading its share of the tiles with TMA
/// multicast and releasing the buffers to its peers with remote arrives.
using Sm90TnSw128C2x2 = Sm90Gemm<RowMajor, ColumnMajor, Shape<_128, _128, _64>,
                                 Shape<cute::_2, cute::_2, cute::_1>>;
using Sm90NtSw128C4x2 = Sm90Gemm<ColumnMajor, RowMajor, Shape<_128, _128, _64>,
                                 Shape<cute::_4, cute::_2, cute::_1>>;

/// e4m3 x e4m3, both K-major (fp8 wgmma reads only K-major operands): a
/// K tile of 128 (128 bytes): 128B on A and B.
using Sm90E4m3TnSw128 =
    Sm90Gemm<RowMajor, ColumnMajor, Shape<_128, _128, cute::_128>,
             Shape<cute::_1, cute::_1, cute::_1>, cutlass::float_e4m3_t>;

/// Every variant: its name (the entry is kiln_cutlass_<name>) and type.
#define KILN_SM90_VARIANTS(X)                                                  \
  X(sm90_tn_sw128, kiln_cutlass::Sm90TnSw128)                                  \
  X(sm90_nt_sw128, kiln_cutlass::Sm90NtSw128)                                  \
  X(sm90_tt_sw32, kiln_cutlass::Sm90TtSw32)                                    \
  X(sm90_nn_sw64, kiln_cutlass::Sm90NnSw64)                                    \
  X(sm90_tn_c2x2, kiln_cutlass::Sm90TnSw128C2x2)                               \
  X(sm90_nt_c4x2, kiln_cutlass::Sm90NtSw128C4x2)                               \
  X(sm90_e4m3_tn, kiln_cutlass::Sm90E4m3TnSw128)

} // namespace kiln_cutlass

#endif // KILN_TEST_CUTLASS_SM90GEMMS_CUH
