//===- ContractionKernels.h - GEMM/conv kernels from templates --*- C++ -*-===//
//
// A contraction is described without MLIR: a GemmProblem (shapes, dtypes,
// layouts, batch strides, alignment), a GemmConfig (tiles, stages, split-K,
// instruction family) and an Epilogue (what happens to each accumulator in
// registers). generateGemm specialises the CUDA C++ templates in
// lib/Target/CUDA/ContractionKernels/templates for them, compiles the source
// with NVRTC and returns the PTX of one or two kernels (split-K adds a
// reduction kernel), each with its launch geometry and parameter list.
//
// The problem, for b < batch, m < M, n < N:
//   C[b][m][n] = epilogue(b, m, n, sum_k A[b](m, k) * B[b](k, n))
// A(m, k) is at A + b*batchStrideA + m*lda + k (row-major, K contiguous) or
// + k*lda + m (column-major); B(k, n) at B + b*batchStrideB + k*ldb + n
// (row-major) or + n*ldb + k (column-major: B stored [N][K], so A * W^T with
// W = [N][K] weights needs no copy). C is row-major with ldc. Strides count
// elements; a batch stride of 0 broadcasts the operand over the batch.
//
// M is a kernel parameter (with the batch strides of A and C): the grid is
// computed from it at launch (GemmKernel::gridFor), so a batch dimension known
// only at run time needs no new kernel. N, K and B's strides are compiled in.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_CONTRACTIONKERNELS_H
#define KILN_TARGET_CUDA_CONTRACTIONKERNELS_H

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/DType.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::contraction {

using runtime::DType;

enum class Layout : uint8_t {
  /// The operand's second index is contiguous: A(m, k) at m*ld + k,
  /// B(k, n) at k*ld + n.
  RowMajor,
  /// The operand's first index is contiguous: A(m, k) at k*ld + m,
  /// B(k, n) at n*ld + k.
  ColMajor,
};

/// Set in a GemmProblem that is an NHWC convolution (convolutionAsGemm):
/// A is then the implicit im2col matrix of the image, never materialised.
struct ImplicitConv {
  bool enabled = false;
  uint64_t h = 0, w = 0, c = 0;                          // input image
  uint64_t p = 0, q = 0;                                 // output image
  uint32_t kh = 1, kw = 1;                               // window
  uint32_t strideH = 1, strideW = 1, padH = 0, padW = 0; // pads: top, left
  uint32_t dilationH = 1, dilationW = 1;
  /// Input channels per group, and that padded to the K chunk (8 for
  /// 16-bit inputs, 4 for f32): the filter's innermost extent.
  uint64_t groupChannels = 0, paddedGroupChannels = 0;
};

struct GemmProblem {
  uint64_t m = 0, n = 0, k = 0;
  uint64_t batch = 1;
  /// A and B share one dtype: F16, BF16 (tensor cores) or F32 (TF32 tensor
  /// cores or FFMA, by GemmConfig::family). The 8-bit families read A's
  /// type here and B's in `inputTypeB`: I8 or U8 (MmaS8), F8E4M3FN or
  /// F8E5M2 (MmaF8, WgmmaF8).
  DType inputType = DType::BF16;
  /// The 8-bit families only: B's element type (ignored by the others).
  DType inputTypeB = DType::I8;
  /// F32 for the float families, I32 for MmaS8.
  DType accumulatorType = DType::F32;
  /// F32, F16 or BF16; the epilogue rounds to it once. MmaS8: I8 or U8
  /// (requantized, see IntegerEpilogue) or I32 (the exact accumulator).
  /// The fp8 families may also store F8E4M3FN or F8E5M2 (round to nearest
  /// even, saturated to the type's largest finite value: a QuantizeLinear
  /// to float8 fused, with Epilogue::outputScale its y_scale).
  DType outputType = DType::F32;
  Layout layoutA = Layout::RowMajor;
  Layout layoutB = Layout::RowMajor;
  /// Leading dimensions in elements; 0 means packed (K or M for A, N or K
  /// for B, N for C).
  uint64_t lda = 0, ldb = 0, ldc = 0;
  /// Elements between batches; 0 broadcasts. batchStrideC must not be 0
  /// when batch > 1.
  uint64_t batchStrideA = 0, batchStrideB = 0, batchStrideC = 0;
  /// The guaranteed byte alignment of each base pointer (a power of two;
  /// Kiln's arena and weights are 256-byte aligned, so 16 is safe for them).
  uint32_t alignA = 16, alignB = 16, alignC = 16;

  /// Convolution only: A is the image, see ImplicitConv.
  ImplicitConv conv;

  uint64_t ldaOrPacked() const;
  uint64_t ldbOrPacked() const;
  uint64_t ldcOrPacked() const;
};

/// A 2-D convolution over NHWC images: X [N][H][W][C] (*) F -> Y
/// [N][P][Q][O], groups splitting C and O evenly. The filter is expected as
/// reorderConvFilter makes it: [O][KH][KW][Cp], Cp = C/groups padded with
/// zeros to the K chunk. Pads are top/left; the bottom/right ones follow
/// from P and Q (computed when 0).
struct ConvProblem {
  uint64_t n = 1, h = 0, w = 0, c = 0, o = 0;
  uint32_t kh = 1, kw = 1;
  uint32_t strideH = 1, strideW = 1, padH = 0, padW = 0;
  uint32_t padBottom = 0, padRight = 0;
  uint32_t dilationH = 1, dilationW = 1;
  uint32_t groups = 1;
  /// Output size; 0 = from the pads.
  uint64_t p = 0, q = 0;
  DType inputType = DType::BF16;
  DType outputType = DType::BF16;
  uint32_t alignX = 16, alignFilter = 16, alignY = 16;
};

/// Input channels per group padded to the K chunk (what the filter holds).
uint64_t paddedGroupChannels(const ConvProblem &problem);

/// The GEMM a convolution is: M = N*P*Q (a kernel parameter, so the image
/// count can change at run time), N = O/groups, K = KH*KW*Cp, batch =
/// groups; C is Y with ldc = O. The epilogue sees the output channel as
/// `col` (bias per column = per channel) and the pixel index as `row`.
GemmProblem convolutionAsGemm(const ConvProblem &problem);

/// A filter in ONNX order [O][C/groups][KH][KW] as the kernel reads it:
/// [O][KH][KW][Cp], the padding channels zero. `elementBytes` 2 or 4.
std::vector<uint8_t> reorderConvFilter(const ConvProblem &problem,
                                       const void *oihw, size_t elementBytes);

enum class Family : uint8_t {
  /// mma.sync.m16n8k16 with f16 or bf16 inputs, fp32 accumulators.
  MmaF16,
  /// mma.sync.m16n8k8 with tf32 inputs (fp32 operands rounded with
  /// cvt.rna.tf32.f32), fp32 accumulators.
  MmaTf32,
  /// fp32 FFMA on CUDA cores: shared-memory and register blocking.
  SimtF32,
  /// sm_90a warpgroup MMA (wgmma.mma_async m64nNk16) with f16 or bf16
  /// inputs and fp32 accumulators, warp-specialised: a producer warpgroup
  /// stages K tiles of 64 with cp.async into an mbarrier-guarded ring, one
  /// (blockM 64) or two (blockM 128) consumer warpgroups compute; blockN is
  /// wgmma's N (64, 128 or 256). warpM/warpN are 64 and blockN.
  WgmmaF16,
  /// sm_90a wgmma.mma_async m64nNk8 with tf32 inputs (fp32 operands whose
  /// low 13 mantissa bits the tensor core ignores), fp32 accumulators: the
  /// WgmmaF16 kernel with K tiles of 32 (one 128-byte swizzle row). tf32
  /// wgmma reads both operands K-major, so an MN-major operand (B as
  /// [K][N], A as [K][M]) is transposed by the producer as it stages it
  /// (kiln-match-contractions stores row-major weights transposed).
  WgmmaTf32,
  /// mma.sync.m16n8k32 with s8/u8 inputs (GemmProblem::inputType for A,
  /// inputTypeB for B) and s32 accumulators, sm_80 and later (on sm_90
  /// after WgmmaS8, or alone with --wgmma=false): the MmaF16 kernel's
  /// loaders and swizzled tiles with
  /// 1-byte elements, both operands K-contiguous (A row-major, B stored
  /// [N][K]), no split-K, and the integer epilogue (IntegerEpilogue);
  /// implicit NHWC convolutions too (16-channel chunks).
  MmaS8,
  /// mma.sync.m16n8k32 with fp8 inputs (e4m3 or e5m2: GemmProblem::inputType
  /// for A, inputTypeB for B) and fp32 accumulators, sm_89 and later: the
  /// MmaS8 tiles and loaders (1-byte elements, both operands K-contiguous:
  /// A row-major, B stored [N][K]) with the float epilogue and split-K of
  /// MmaF16; implicit NHWC convolutions too.
  MmaF8,
  /// sm_90a wgmma.mma_async m64nNk32 with fp8 inputs (e4m3 or e5m2) and
  /// fp32 accumulators: the WgmmaF16 kernel with K tiles of 128 (one
  /// 128-byte swizzle row). 8-bit wgmma has no transpose bits, so both
  /// operands must be K-major (A row-major, B stored [N][K]).
  WgmmaF8,
  /// sm_90a wgmma.mma_async m64nNk32 with s8/u8 inputs and s32
  /// accumulators: the WgmmaF8 kernel (K tiles of 128, both operands
  /// K-major) with MmaS8's integer epilogue, applied in registers (A's row
  /// sums, when B has zero points, from one more m64n8k32 a K step against
  /// a shared-memory tile of ones). No split-K. Implicit NHWC convolutions
  /// too.
  WgmmaS8,
};

std::string_view familyName(Family family);

/// The sm_90a warpgroup-MMA families (GemmWgmma.cuh's kernel).
inline bool isWgmmaFamily(Family family) {
  return family == Family::WgmmaF16 || family == Family::WgmmaTf32 ||
         family == Family::WgmmaF8 || family == Family::WgmmaS8;
}

struct GemmConfig {
  Family family = Family::MmaF16;
  /// The block tile.
  uint32_t blockM = 128, blockN = 128, blockK = 32;
  /// Tensor-core families: the warp tile (blockM/warpM * blockN/warpN warps).
  uint32_t warpM = 64, warpN = 64;
  /// SimtF32: the outputs each thread computes (multiples of 4).
  uint32_t threadM = 8, threadN = 8;
  /// Shared-memory pipeline depth (2 or more).
  uint32_t stages = 3;
  /// Splits of K; above 1 the main kernel writes fp32 partial sums to a
  /// workspace and a second kernel adds them in split order and applies the
  /// epilogue (deterministic, and the epilogue runs once per output).
  uint32_t splitK = 1;
  /// WgmmaF16 only: the producer loads plain-GEMM operand tiles with TMA
  /// (cp.async.bulk.tensor from tensor maps the runtime encodes at load)
  /// instead of cp.async. tmaUnsupportedReason says which problems can.
  bool tma = false;

  uint32_t threads() const;
  /// "mma_f16 128x128x32 w64x64 s3 k1" (" tma" after it with TMA).
  std::string describe() const;
};

enum class Activation : uint8_t {
  None,
  Relu,
  Gelu,
  GeluTanh,
  Sigmoid,
  Tanh,
  Clip
};

/// The epilogue of the int8 families (MmaS8, WgmmaS8), in integer arithmetic
/// until the one f32 multiply, onnxruntime's requantization (MLAS
/// MlasRequantizeOutput) step for step. With acc the exact s32 sum of the
/// stored values A[m][k] * B[k][n]:
///   v = acc + offset[n] - zeroPointB[n] * sum_k A[m][k]    (s32, wrapping)
///   output I32: C = v
///   output I8/U8: f = f32(v) * scale (f32 round to nearest; `scale` or
///     scaleVector[n]); f = clamp(f, lo - zy, hi - zy); C = rni(f) + zy
/// (rni: round half to even; lo, hi: the output type's range; zy:
/// outputZeroPoint). A's zero point za folds into `offset` on the host:
/// offset[n] = bias[n] - za * sum_k B[k][n] + K * za * zb[n], since
/// sum (a - za)(b - zb) = sum ab - za sum_k b - zb sum_k a + K za zb.
/// onnxruntime computes the scale as (a_scale * b_scale) / y_scale in f32,
/// left to right; the caller passes that value.
struct IntegerEpilogue {
  /// Kernel parameter "bias": s32 [N], added to the accumulator.
  bool offset = false;
  /// Kernel parameter "zeroPointB": s32 [N]; the kernel sums A's rows
  /// (one extra mma a row tile per K step against ones) and subtracts
  /// zeroPointB[n] * rowsum.
  bool rowSumZeroPointB = false;
  /// Kernel parameter "scale": f32 [N] instead of the constant `scale`.
  bool scaleVector = false;
  float scale = 1.0f;
  int32_t outputZeroPoint = 0;
  /// Implicit convolutions: the stored byte a pixel outside the image
  /// reads in its real channels, A's zero point (so its x - za is 0, as
  /// onnxruntime pads). The offset's K is then KH * KW * C/groups.
  int32_t paddingValue = 0;
  /// A QDQ residual block after the requantization (`Q(relu?(DQ(q) +
  /// DQ(R)))`, what onnxruntime's quantizer writes around a ResNet add):
  /// kernel parameter "residual", 8-bit R with C's layout. With q the
  /// requantized value above (in `requantizedType`'s range, zero point
  /// outputZeroPoint), each step one f32 operation rounded to nearest, as
  /// onnxruntime's unfused DequantizeLinear, Add, Relu, QuantizeLinear:
  ///   d = (f32(q) - zy) * requantizedScale;  r = (f32(R) - zr) * scale
  ///   s = d + r;  s = max(s, 0) with relu
  ///   C = sat(rni(s / sumScale) + zs)   (C's type: the problem's output)
  struct Residual {
    bool enabled = false;
    /// R's storage, I8 or U8, and its dequantization.
    DType type = DType::U8;
    int32_t zeroPoint = 0;
    float scale = 1.0f;
    /// The requantized value's storage (I8 or U8) and its dequantization
    /// scale (its zero point is outputZeroPoint).
    DType requantizedType = DType::U8;
    float requantizedScale = 1.0f;
    bool relu = false;
    /// The sum's quantization (its type is the problem's output type).
    float sumScale = 1.0f;
    int32_t sumZeroPoint = 0;
  } residual;
};

/// A vector the epilogue reads once per row or once per column (broadcast
/// over the batch and the other index).
struct EpilogueVector {
  enum class Kind : uint8_t { None, PerRow, PerColumn };
  Kind kind = Kind::None;
  DType type = DType::F32;
  bool present() const { return kind != Kind::None; }
};

/// What happens to each accumulator in registers, in this order:
///   v = acc * alpha;  v *= scale[row|col];  v += bias[row|col];
///   v += beta * residual[b][row][col];  v = activation(v);  C = (out) v
/// The residual has C's layout (ldc, batchStrideC) and `residualType`.
/// `customBody`, when set, replaces all of the above: CUDA C++ statements
/// over `unsigned batch, int row, int col, float acc` and the pointers
/// `const void *extra0..` (one per `customOperands` entry, kernel
/// parameters after C), ending in `return <float>;`. It is how a fusion
/// region's epilogue is generated.
/// `aux` (custom bodies only) adds a second output, the kernel parameter
/// "aux" right after C: the body also sees `int which` and returns the
/// second output's value when it is 1 (the kernels call it once for C and
/// once for aux, from the same accumulator). It is stored in `auxType`
/// with C's layout (ldc, batchStrideC); its elements may not be wider
/// than C's (it is staged in C's shared memory). A fusion region whose
/// kernel stores an f32 value and its bf16 copy (a residual block's sum,
/// which the next block adds in f32 and the next convolution reads in
/// bf16) writes both in one pass instead of a cast kernel re-reading it.
struct Epilogue {
  float alpha = 1.0f;
  EpilogueVector scale;
  EpilogueVector bias;
  bool residual = false;
  DType residualType = DType::F32;
  float beta = 1.0f;
  Activation activation = Activation::None;
  float clipMin = 0.0f, clipMax = 6.0f;
  std::string customBody;
  std::vector<std::string> customOperands;
  bool aux = false;
  DType auxType = DType::BF16;
  /// Built-in epilogues: the value is divided by it last (one f32 division
  /// rounded to nearest, QuantizeLinear's x / y_scale), before C's type;
  /// 1 leaves it. An fp8 output's scale.
  float outputScale = 1.0f;
  /// MmaS8 and WgmmaS8 only, and then the only epilogue (every field
  /// above default).
  IntegerEpilogue integer;
};

/// A kernel parameter, in order.
struct KernelParameter {
  enum class Kind : uint8_t { Pointer, U32, U64, TensorMap };
  Kind kind = Kind::Pointer;
  /// "A", "B", "C", "aux", "scale", "bias", "residual", "zeroPointB",
  /// "workspace", "semaphores", "M",
  /// "batchStrideA", "batchStrideC", "tensorMapA", "tensorMapB", or a custom
  /// operand's name.
  std::string name;
  /// Kind::TensorMap: the map the runtime encodes for it; `addressParam`
  /// is the index (in this list) of the pointer parameter it describes.
  runtime::TensorMapRecord tensorMap;
};

struct GemmKernel {
  std::string name;
  std::string ptx;
  runtime::Dim3 block;
  uint32_t dynamicSharedBytes = 0;
  std::vector<KernelParameter> params;
  /// The grid for the problem's M. Only grid.x depends on M:
  /// grid.x = ceil(M * gridXPerM / gridXDivisor) (a GEMM: 1 and blockM).
  runtime::Dim3 grid;
  uint64_t gridXPerM = 1, gridXDivisor = 1;
  /// The grid for another M (a batch size chosen at run time).
  runtime::Dim3 gridFor(uint64_t m) const;
};

/// The kernels of a GEMM, launched in order (one since split-K finishes
/// in its own launch). With split-K: workspaceBytes of fp32 scratch (the
/// "workspace" parameter, any contents) and semaphoreCount u32 per-tile
/// counters (the "semaphores" parameter), which must be zero before the
/// launch and are zero again after it (SplitKReduce.cuh).
struct GemmKernels {
  std::vector<GemmKernel> kernels;
  uint64_t workspaceBytes = 0;
  uint64_t semaphoreCount = 0;
  GemmConfig config;
  /// The specialised CUDA C++ source (one module for every kernel).
  std::string source;
  /// The NVRTC options that compile `source` (compileKernels).
  std::vector<std::string> nvrtcOptions;
  double compileSeconds = 0;
};

/// Why `config` cannot compute `problem` (empty when it can).
std::string unsupportedReason(const GemmProblem &problem,
                              const GemmConfig &config);

/// Why the TMA producer cannot load the problem's operands (empty when it
/// can): TMA needs a plain GEMM (an implicit convolution gathers im2col
/// rows with cp.async), 16-byte aligned bases and leading dimensions and
/// batch strides that are multiples of 16 bytes.
std::string tmaUnsupportedReason(const GemmProblem &problem);

/// The configurations worth trying for the problem, best guess first
/// (see docs/architecture.md, "Contraction kernels"). `family` is the
/// instruction family the precision asks for. With MmaF16 on sm_90 and
/// `wgmma`, the WgmmaF16 candidates come first, then the mma.sync ones;
/// with MmaTf32 likewise the WgmmaTf32 ones. With `tma`, each WgmmaF16
/// candidate the TMA producer can run comes twice: with TMA, then with
/// cp.async.
std::vector<GemmConfig> candidateConfigs(const GemmProblem &problem,
                                         Family family, uint32_t smVersion,
                                         bool wgmma = true, bool tma = true);

/// The heuristic's choice among candidateConfigs, with no GPU.
GemmConfig pickConfig(const GemmProblem &problem, Family family,
                      uint32_t smVersion, bool wgmma = true, bool tma = true);

struct GenerateOptions {
  /// 80 or 90: NVRTC's --gpu-architecture=compute_<sm>.
  uint32_t smVersion = 90;
  /// The kernels' name prefix (an identifier).
  std::string name = "kiln_gemm";
};

/// The CUDA C++ source for the problem (no NVRTC needed).
runtime::Expected<std::string>
generateGemmSource(const GemmProblem &problem, const GemmConfig &config,
                   const Epilogue &epilogue, const GenerateOptions &options);

/// Specialises the templates: the kernels' names, launch geometry and
/// parameters, and the source with the options that compile it; no NVRTC
/// (the kernels' `ptx` is empty). An error value when the config does not
/// fit the problem.
runtime::Expected<GemmKernels> specializeGemm(const GemmProblem &problem,
                                              const GemmConfig &config,
                                              const Epilogue &epilogue,
                                              const GenerateOptions &options);

/// Compiles `kernels.source` with NVRTC (named `name` in messages) and
/// gives every kernel its PTX; an error value when NVRTC is missing or
/// refuses the source.
runtime::Error compileKernels(GemmKernels &kernels, const std::string &name);

/// specializeGemm, then compileKernels.
runtime::Expected<GemmKernels> generateGemm(const GemmProblem &problem,
                                            const GemmConfig &config,
                                            const Epilogue &epilogue,
                                            const GenerateOptions &options);

} // namespace kiln::contraction

#endif // KILN_TARGET_CUDA_CONTRACTIONKERNELS_H
