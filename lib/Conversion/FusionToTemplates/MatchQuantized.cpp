//===- MatchQuantized.cpp - Quantized regions to the int8 kernel ----------===//
//
// A `quantized_matmul` region (kiln-fuse-quantized) holds one chain the
// importer wrote for QLinearMatMul, MatMulInteger or a QDQ MatMul. The chain
// is analysed again here (QuantizedChains.h) and becomes the int8
// tensor-core kernel (Family::MmaS8, templates/GemmInt8.cuh):
//   - A, the 8-bit activation [..., M, K], is read in place (the batch
//     dimensions are more rows: the weight is shared);
//   - B, the constant 8-bit weight [K][N], is stored [N][K] at compile time
//     (a new global whose origin records the transpose), as the kernel
//     reads both operands K-contiguous; a weight Gemm reads transposed
//     (transB) is [N][K] already and read as it is;
//   - the integer epilogue's vectors are constants computed here from the
//     weight's bytes: `bias` = the int32 bias - za * colsum_B[n]
//     + K * za * zb[n] (A's zero point folded in, wrapping as onnxruntime's
//     int32 arithmetic does), `zeroPointB` (B's zero points, when one is not
//     0: the kernel subtracts zb[n] * rowsum_A[m]) and `scale` (one f32
//     multiplier per column when they differ).
// A `quantized_conv` region holds a QLinearConv, ConvInteger or QDQ Conv
// chain on an NHWC image and becomes the same kernel as an implicit GEMM
// (convolutionAsGemm): the image read in place, the filter
// [O][KH][KW][C/g] (kiln-assign-layout stored it so) with its channels
// padded to the kernel's 16-byte chunk in a new global (origin: pad), the
// zero-point terms taken over the KH x KW x C/g real taps, and A's zero
// point as the value of the padding pixels (so that x - za is 0 there, as
// in onnxruntime).
// `bias` is derived from the weight's values and has no origin: binding
// new weights (kiln-run --weights) keeps its compiled bytes
// (docs/architecture.md, "Quantized models").
//
// A float8 chain in either region (QuantizedChain::fp8) becomes an fp8
// kernel instead (Family::MmaF8; on sm_90 the heuristic puts WgmmaF8 first):
// the same operand handling (A in place, B stored [N][K], the filter's
// channels padded to 16), the float epilogue acc * a_scale * b_scale[n]
// (`alpha`, or the per-column `scale` vector) + the f32 `bias`, an f32
// result. fp8 tensor cores exist from sm_89: on sm_80 the region keeps
// its exact fallback.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Dialect/Kiln/Transforms/QuantizedChains.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

namespace {

cx::DType byteType(Type type) {
  return type.isUnsignedInteger(8) ? cx::DType::U8 : cx::DType::I8;
}

/// The weight global's `count` bytes as integers (row-major).
std::optional<std::vector<int32_t>> weightValues(Value weight, int64_t count,
                                                 ModuleOp module) {
  mlir::ml_program::GlobalOp global = filterGlobal(weight, module);
  std::optional<std::vector<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  if (!bytes || bytes->size() != static_cast<size_t>(count))
    return std::nullopt;
  bool isUnsigned =
      getElementTypeOrSelf(weight.getType()).isUnsignedInteger(8);
  std::vector<int32_t> values(bytes->size());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = isUnsigned ? static_cast<uint8_t>((*bytes)[i])
                           : static_cast<int8_t>((*bytes)[i]);
  return values;
}

/// The integer epilogue of `chain` and its per-column vectors, from the
/// sum of each column's `k` weight values (`columnSum`).
struct IntegerVectors {
  cx::IntegerEpilogue epilogue;
  std::vector<int32_t> offset, zeroPointB;
};

IntegerVectors integerVectors(const QuantizedChain &chain, int64_t k,
                              llvm::function_ref<int64_t(int64_t)> columnSum) {
  int64_t n = chain.channels;
  auto perColumn = [&](const auto &values, int64_t c) {
    return values.size() == 1 ? values[0] : values[c];
  };
  IntegerVectors v;
  v.offset.resize(n);
  v.zeroPointB.resize(n);
  cx::IntegerEpilogue &q = v.epilogue;
  for (int64_t c = 0; c < n; ++c) {
    int64_t zb = perColumn(chain.bZeroPoints, c);
    int64_t za = chain.aZeroPoint;
    int64_t bias = chain.bias.empty() ? 0 : chain.bias[c];
    // int32 arithmetic wraps (two's complement), as onnxruntime's does.
    v.offset[c] = static_cast<int32_t>(
        static_cast<uint32_t>(bias - za * columnSum(c) + k * za * zb));
    v.zeroPointB[c] = static_cast<int32_t>(zb);
    q.offset |= v.offset[c] != 0;
    q.rowSumZeroPointB |= zb != 0;
  }
  if (chain.requantized) {
    q.outputZeroPoint = static_cast<int32_t>(chain.outputZeroPoint);
    const std::vector<float> &s = chain.multipliers;
    q.scaleVector = llvm::any_of(s, [&](float x) { return x != s[0]; });
    q.scale = q.scaleVector ? 1.0f : s[0];
  }
  if (const std::optional<QuantizedChain::Residual> &r = chain.residual) {
    cx::IntegerEpilogue::Residual &e = q.residual;
    e.enabled = true;
    e.type = byteType(r->storage);
    e.zeroPoint = static_cast<int32_t>(r->zeroPoint);
    e.scale = r->scale;
    e.requantizedType = byteType(chain.outputStorage);
    e.requantizedScale = r->requantizedScale;
    e.relu = r->relu;
    e.sumScale = r->sumScale;
    e.sumZeroPoint = static_cast<int32_t>(r->sumZeroPoint);
  }
  return v;
}

/// The kernel's output type: the requantized value's, or a residual
/// block's sum's; i32 without a requantization.
cx::DType integerOutputType(const QuantizedChain &chain) {
  if (chain.residual)
    return byteType(chain.residual->sumStorage);
  return chain.requantized ? byteType(chain.outputStorage) : cx::DType::I32;
}

/// The epilogue's vectors the kernel reads, as constants before `fusion`,
/// and a residual block's R (`residual`, read in place or copied).
SmallVector<std::pair<std::string, Value>>
vectorOperands(const IntegerVectors &v, const QuantizedChain &chain,
               kiln::FusionOp fusion, Value residual) {
  OpBuilder builder(fusion);
  Location loc = fusion.getLoc();
  int64_t n = chain.channels;
  auto vector = [&](Type element, auto values) -> Value {
    auto type = RankedTensorType::get({n}, element);
    return kiln::ConstantOp::create(
        builder, loc, DenseElementsAttr::get(type, llvm::ArrayRef(values)));
  };
  SmallVector<std::pair<std::string, Value>> named;
  const cx::IntegerEpilogue &q = v.epilogue;
  if (q.offset)
    named.push_back({"bias", vector(builder.getI32Type(), v.offset)});
  if (q.rowSumZeroPointB)
    named.push_back({"zeroPointB", vector(builder.getI32Type(), v.zeroPointB)});
  if (q.scaleVector)
    named.push_back({"scale", vector(builder.getF32Type(), chain.multipliers)});
  if (q.residual.enabled)
    named.push_back({"residual", residual});
  return named;
}

/// The region's one `Op`, and its chain, which must be what the region
/// yields.
template <typename Op>
std::optional<QuantizedChain> regionChain(kiln::FusionOp fusion,
                                          std::string &why) {
  Op anchor;
  for (Operation &op : fusion.getBody().front())
    if (auto a = dyn_cast<Op>(op))
      anchor = a;
  if (!anchor) {
    why = ("a " + fusion.getKind() + " region without a " +
           Op::getOperationName())
              .str();
    return std::nullopt;
  }
  std::optional<QuantizedChain> chain = matchQuantizedChain(anchor, why);
  if (!chain) {
    if (why.empty())
      why = "the region is no quantized chain";
    return std::nullopt;
  }
  if (fusion.getNumResults() != 1 ||
      chain->result != fusion.getYield().getValues()[0]) {
    why = "the region's result is not its chain's";
    return std::nullopt;
  }
  return chain;
}

cx::DType fp8Type(Type type) {
  return isa<Float8E5M2Type>(type) ? cx::DType::F8E5M2 : cx::DType::F8E4M3FN;
}

/// The fp8 kernels' float epilogue: the dequantization scale (`alpha`, or
/// the "scale" vector when the columns' differ) and the f32 "bias".
cx::Epilogue fp8Epilogue(const QuantizedChain &chain) {
  cx::Epilogue e;
  const std::vector<float> &m = chain.multipliers;
  if (llvm::any_of(m, [&](float x) { return x != m[0]; }))
    e.scale = {cx::EpilogueVector::Kind::PerColumn, cx::DType::F32};
  else
    e.alpha = m[0];
  if (!chain.floatBias.empty())
    e.bias = {cx::EpilogueVector::Kind::PerColumn, cx::DType::F32};
  // A fused QuantizeLinear to float8 (after a Relu): its division, then
  // the conversion.
  if (chain.relu)
    e.activation = cx::Activation::Relu;
  e.outputScale = chain.outputScale;
  return e;
}

/// An fp8 chain's output type: f32, or its fused QuantizeLinear's float8.
cx::DType fp8OutputType(const QuantizedChain &chain) {
  return isFp8KernelType(chain.outputStorage) ? fp8Type(chain.outputStorage)
                                              : cx::DType::F32;
}

/// fp8Epilogue's vectors, as constants before `fusion`.
SmallVector<std::pair<std::string, Value>>
fp8Operands(const QuantizedChain &chain, const cx::Epilogue &e,
            kiln::FusionOp fusion) {
  OpBuilder builder(fusion);
  auto vector = [&](const std::vector<float> &values) -> Value {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      builder.getF32Type());
    return kiln::ConstantOp::create(
        builder, fusion.getLoc(),
        DenseElementsAttr::get(type, llvm::ArrayRef(values)));
  };
  SmallVector<std::pair<std::string, Value>> named;
  if (e.scale.present())
    named.push_back({"scale", vector(chain.multipliers)});
  if (e.bias.present())
    named.push_back({"bias", vector(chain.floatBias)});
  return named;
}

} // namespace

/// A residual block's R as the kernel reads it (C's layout): in place, or
/// copied; null without a block.
Value Matcher::residualSource(const QuantizedChain &chain,
                              kiln::FusionOp fusion) {
  if (!chain.residual)
    return Value();
  Value r = contiguousSource(chain.residual->bytes, fusion);
  if (!r && !selecting())
    r = materialize(chain.residual->bytes, fusion);
  return r;
}

namespace {

/// Why the target has no fp8 tensor cores, or empty.
std::string fp8TargetReason(uint32_t smVersion) {
  if (smVersion >= 89)
    return "";
  return "fp8 tensor cores need sm_89 or later, not sm_" +
         std::to_string(smVersion);
}

} // namespace

LogicalResult Matcher::rewriteQuantizedMatmul(kiln::FusionOp fusion,
                                              std::string &why) {
  std::optional<QuantizedChain> chain =
      regionChain<kiln::MatmulOp>(fusion, why);
  if (!chain)
    return failure();
  const bool fp8 = chain->fp8;
  if (fp8 && !(why = fp8TargetReason(smVersion)).empty())
    return failure();
  auto aType = cast<RankedTensorType>(chain->a.getType());
  auto resultType = cast<RankedTensorType>(chain->result.getType());
  if (!aType.hasStaticShape() || !resultType.hasStaticShape()) {
    why = "dynamic shapes";
    return failure();
  }
  int64_t k = aType.getShape().back();
  int64_t n = chain->channels;
  int64_t m = k ? aType.getNumElements() / k : 0;
  if (m == 0 || n == 0 || k == 0) {
    why = "an empty matmul";
    return failure();
  }

  cx::GemmProblem problem;
  problem.m = static_cast<uint64_t>(m);
  problem.n = static_cast<uint64_t>(n);
  problem.k = static_cast<uint64_t>(k);
  problem.layoutA = cx::Layout::RowMajor;
  problem.layoutB = cx::Layout::ColMajor; // Stored [N][K] below.
  cx::Epilogue epilogue;
  std::optional<IntegerVectors> vectors;
  if (fp8) {
    problem.inputType = fp8Type(chain->aStorage);
    problem.inputTypeB = fp8Type(chain->bStorage);
    problem.accumulatorType = cx::DType::F32;
    problem.outputType = fp8OutputType(*chain);
    epilogue = fp8Epilogue(*chain);
  } else {
    // B [K][N] (or [N][K] for a transposed weight), and the vectors
    // derived from its values.
    std::optional<std::vector<int32_t>> w =
        weightValues(chain->b, k * n, module);
    if (!w) {
      why = "B is not a weight global whose bytes are known";
      return failure();
    }
    vectors = integerVectors(*chain, k, [&](int64_t c) {
      int64_t sum = 0;
      for (int64_t i = 0; i < k; ++i)
        sum += (*w)[chain->bTransposed ? c * k + i : i * n + c];
      return sum;
    });
    problem.inputType = byteType(chain->aStorage);
    problem.inputTypeB = byteType(chain->bStorage);
    problem.accumulatorType = cx::DType::I32;
    problem.outputType = integerOutputType(*chain);
    epilogue.integer = vectors->epilogue;
  }

  // A is read in place: a region input (through reshapes), else copied.
  Value a = contiguousSource(chain->a, fusion);
  if (!a && !selecting())
    a = materialize(chain->a, fusion);
  Value residual = residualSource(*chain, fusion);
  // A [N][K] weight (Gemm's transB) is what the kernel reads already.
  Value b = chain->bTransposed
                ? chain->b
                : kMajorWeight(chain->b, k, n, fusion, /*dryRun=*/selecting());
  if (!b) {
    why = "B is not a weight global whose bytes are known, so it cannot be "
          "stored K-major";
    return failure();
  }

  FailureOr<cx::GemmKernels> kernels =
      compile(fusion, problem, fp8 ? cx::Family::MmaF8 : cx::Family::MmaS8,
              epilogue, fp8 ? "kiln_f8gemm_" : "kiln_qgemm_", why);
  if (failed(kernels))
    return failure();
  if (selecting())
    return success();

  Value replacement =
      buildCalls(fusion, *kernels, problem, a, b, {}, resultType,
                 RankedTensorType(), nullptr,
                 fp8 ? fp8Operands(*chain, epilogue, fusion)
                     : vectorOperands(*vectors, *chain, fusion, residual));
  report.push_back(
      llvm::formatv("{0}: {1}, M={2} N={3} K={4} batch=1; {5} {6}; {7}",
                    kernels->kernels.front().name, kernels->config.describe(),
                    problem.m, problem.n, problem.k, fp8 ? "fp8" : "int8",
                    describeChain(*chain), lastConfigOrigin)
          .str());
  replaceResults(fusion, 0, replacement);
  return success();
}

LogicalResult Matcher::rewriteQuantizedConv(kiln::FusionOp fusion,
                                            std::string &why) {
  std::optional<QuantizedChain> chain = regionChain<kiln::ConvOp>(fusion, why);
  if (!chain)
    return failure();
  const bool fp8 = chain->fp8;
  if (fp8 && !(why = fp8TargetReason(smVersion)).empty())
    return failure();
  auto conv = cast<kiln::ConvOp>(chain->contraction);
  auto aType = cast<RankedTensorType>(chain->a.getType());
  // The convolution's view of the weight's bytes (through reshapes of
  // unit dimensions, QuantizedChains.cpp's peelFilterReshapes).
  auto filterType = RankedTensorType::get(
      cast<RankedTensorType>(conv.getFilter().getType()).getShape(),
      getElementTypeOrSelf(chain->b.getType()));
  auto resultType = cast<RankedTensorType>(chain->result.getType());
  why = unsupportedConvolution(conv, aType, filterType, resultType);
  if (!why.empty())
    return failure();
  ArrayRef<int64_t> window = filterType.getShape();
  if (conv.getGroups() > 1 && window[3] == 1) {
    why = "a depthwise convolution";
    return failure();
  }
  // The filter [O][KH][KW][C/g]: each output channel's taps are one row.
  int64_t channels = window[0];
  int64_t taps = window[1] * window[2] * window[3];
  if (channels != chain->channels || channels == 0 || taps == 0) {
    why = "an empty convolution";
    return failure();
  }
  cx::ConvProblem cp = convProblemOf(conv);
  cx::Epilogue epilogue;
  std::optional<IntegerVectors> vectors;
  if (fp8) {
    cp.inputType = fp8Type(chain->aStorage);
    cp.outputType = fp8OutputType(*chain);
    epilogue = fp8Epilogue(*chain);
  } else {
    cp.inputType = byteType(chain->aStorage);
    cp.outputType = integerOutputType(*chain);
    std::optional<std::vector<int32_t>> w =
        weightValues(chain->b, channels * taps, module);
    if (!w) {
      why = "the filter is not a weight global whose bytes are known";
      return failure();
    }
    vectors = integerVectors(*chain, taps, [&](int64_t o) {
      int64_t sum = 0;
      for (int64_t t = 0; t < taps; ++t)
        sum += (*w)[o * taps + t];
      return sum;
    });
    epilogue.integer = vectors->epilogue;
    // A padding pixel reads A's zero point in its real channels: x - za
    // = 0.
    epilogue.integer.paddingValue = static_cast<int32_t>(chain->aZeroPoint);
  }
  cx::GemmProblem problem = cx::convolutionAsGemm(cp);
  problem.inputTypeB =
      fp8 ? fp8Type(chain->bStorage) : byteType(chain->bStorage);
  problem.accumulatorType = fp8 ? cx::DType::F32 : cx::DType::I32;

  Value a = contiguousSource(chain->a, fusion);
  if (!a && !selecting())
    a = materialize(chain->a, fusion);
  Value residual = residualSource(*chain, fusion);
  int64_t paddedChannels = static_cast<int64_t>(cx::paddedGroupChannels(cp));
  Value filter = chain->b;
  bool viewed = filterType != chain->b.getType();
  if (paddedChannels != window[3] || viewed) {
    filter = paddedFilter(chain->b, paddedChannels, fusion,
                          /*dryRun=*/selecting(),
                          viewed ? filterType : RankedTensorType());
    if (!filter) {
      why = "the filter is not a weight global whose bytes are known, so "
            "its channels cannot be padded";
      return failure();
    }
  }

  FailureOr<cx::GemmKernels> kernels =
      compile(fusion, problem, fp8 ? cx::Family::MmaF8 : cx::Family::MmaS8,
              epilogue, fp8 ? "kiln_f8conv_" : "kiln_qconv_", why);
  if (failed(kernels))
    return failure();
  if (selecting())
    return success();

  Value replacement =
      buildCalls(fusion, *kernels, problem, a, filter, {}, resultType,
                 RankedTensorType(), nullptr,
                 fp8 ? fp8Operands(*chain, epilogue, fusion)
                     : vectorOperands(*vectors, *chain, fusion, residual));
  ArrayRef<int64_t> in = aType.getShape();
  report.push_back(
      llvm::formatv("{0}: {1}, conv {2}x{3}x{4}x{5} * {6}x{7}x{8}x{9}, "
                    "groups={10}, M={11} N={12} K={13}; {14} {15}; {16}",
                    kernels->kernels.front().name, kernels->config.describe(),
                    in[0], in[1], in[2], in[3], window[0], window[1], window[2],
                    window[3], cp.groups, problem.m, problem.n, problem.k,
                    fp8 ? "fp8" : "int8", describeChain(*chain),
                    lastConfigOrigin)
          .str());
  replaceResults(fusion, 0, replacement);
  return success();
}

} // namespace kiln::templates
