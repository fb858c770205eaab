//===- MatchQuantized.cpp - Quantized matmul regions to the int8 kernel ---===//
//
// A `quantized_matmul` region (kiln-fuse-quantized) holds one chain the
// importer wrote for QLinearMatMul, MatMulInteger or a QDQ MatMul. The chain
// is analysed again here (QuantizedChains.h) and becomes the int8
// tensor-core kernel (Family::MmaS8, templates/GemmInt8.cuh):
//   - A, the 8-bit activation [..., M, K], is read in place (the batch
//     dimensions are more rows: the weight is shared);
//   - B, the constant 8-bit weight [K][N], is stored [N][K] at compile time
//     (a new global whose origin records the transpose), as the kernel
//     reads both operands K-contiguous;
//   - the integer epilogue's vectors are constants computed here from the
//     weight's bytes: `bias` = the int32 bias - za * colsum_B[n]
//     + K * za * zb[n] (A's zero point folded in, wrapping as onnxruntime's
//     int32 arithmetic does), `zeroPointB` (B's zero points, when one is not
//     0: the kernel subtracts zb[n] * rowsum_A[m]) and `scale` (one f32
//     multiplier per column when they differ).
// `bias` is derived from the weight's values and has no origin: binding
// new weights (kiln-run --weights) keeps its compiled bytes
// (docs/architecture.md, "Quantized models").
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

/// The weight's [K][N] bytes as integers.
std::optional<std::vector<int32_t>> weightValues(Value weight, int64_t k,
                                                 int64_t n, ModuleOp module) {
  mlir::ml_program::GlobalOp global = filterGlobal(weight, module);
  std::optional<std::vector<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  if (!bytes || bytes->size() != static_cast<size_t>(k * n))
    return std::nullopt;
  bool isUnsigned =
      getElementTypeOrSelf(weight.getType()).isUnsignedInteger(8);
  std::vector<int32_t> values(bytes->size());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = isUnsigned ? static_cast<uint8_t>((*bytes)[i])
                           : static_cast<int8_t>((*bytes)[i]);
  return values;
}

} // namespace

LogicalResult Matcher::rewriteQuantizedMatmul(kiln::FusionOp fusion,
                                              std::string &why) {
  kiln::MatmulOp matmul;
  for (Operation &op : fusion.getBody().front())
    if (auto m = dyn_cast<kiln::MatmulOp>(op))
      matmul = m;
  if (!matmul) {
    why = "a quantized_matmul region without a matmul";
    return failure();
  }
  std::optional<QuantizedChain> chain = matchQuantizedChain(matmul, why);
  if (!chain) {
    if (why.empty())
      why = "the region is no quantized matmul chain";
    return failure();
  }
  if (fusion.getNumResults() != 1 ||
      chain->result != fusion.getYield().getValues()[0]) {
    why = "the region's result is not its chain's";
    return failure();
  }
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

  // B, and the vectors derived from its values.
  std::optional<std::vector<int32_t>> w =
      weightValues(chain->b, k, n, module);
  if (!w) {
    why = "B is not a weight global whose bytes are known";
    return failure();
  }
  auto perColumn = [&](const auto &values, int64_t c) {
    return values.size() == 1 ? values[0] : values[c];
  };
  std::vector<int32_t> offset(n), zeroPointB(n);
  bool anyOffset = false, anyZeroPointB = false;
  for (int64_t c = 0; c < n; ++c) {
    int64_t colSum = 0;
    for (int64_t i = 0; i < k; ++i)
      colSum += (*w)[i * n + c];
    int64_t zb = perColumn(chain->bZeroPoints, c);
    int64_t za = chain->aZeroPoint;
    int64_t bias = chain->bias.empty() ? 0 : chain->bias[c];
    // int32 arithmetic wraps (two's complement), as onnxruntime's does.
    offset[c] = static_cast<int32_t>(
        static_cast<uint32_t>(bias - za * colSum + k * za * zb));
    zeroPointB[c] = static_cast<int32_t>(zb);
    anyOffset |= offset[c] != 0;
    anyZeroPointB |= zb != 0;
  }

  cx::GemmProblem problem;
  problem.m = static_cast<uint64_t>(m);
  problem.n = static_cast<uint64_t>(n);
  problem.k = static_cast<uint64_t>(k);
  problem.inputType = byteType(chain->aStorage);
  problem.inputTypeB = byteType(chain->bStorage);
  problem.accumulatorType = cx::DType::I32;
  problem.outputType =
      chain->requantized ? byteType(chain->outputStorage) : cx::DType::I32;
  problem.layoutA = cx::Layout::RowMajor;
  problem.layoutB = cx::Layout::ColMajor; // Stored [N][K] below.
  cx::Epilogue epilogue;
  cx::IntegerEpilogue &q = epilogue.integer;
  q.offset = anyOffset;
  q.rowSumZeroPointB = anyZeroPointB;
  if (chain->requantized) {
    q.outputZeroPoint = static_cast<int32_t>(chain->outputZeroPoint);
    const std::vector<float> &s = chain->multipliers;
    q.scaleVector = llvm::any_of(s, [&](float v) { return v != s[0]; });
    q.scale = q.scaleVector ? 1.0f : s[0];
  }

  // A is read in place: a region input (through reshapes), else copied.
  Value a = contiguousSource(chain->a, fusion);
  if (!a && !selecting())
    a = materialize(chain->a, fusion);
  Value b = kMajorWeight(chain->b, k, n, fusion, /*dryRun=*/selecting());
  if (!b) {
    why = "B is not a weight global whose bytes are known, so it cannot be "
          "stored K-major";
    return failure();
  }

  FailureOr<cx::GemmKernels> kernels =
      compile(fusion, problem, cx::Family::MmaS8, epilogue, "kiln_qgemm_", why);
  if (failed(kernels))
    return failure();
  if (selecting())
    return success();

  OpBuilder builder(fusion);
  Location loc = fusion.getLoc();
  auto vector = [&](Type element, auto values) -> Value {
    auto type = RankedTensorType::get({n}, element);
    return kiln::ConstantOp::create(
        builder, loc, DenseElementsAttr::get(type, llvm::ArrayRef(values)));
  };
  SmallVector<std::pair<std::string, Value>> named;
  if (q.offset)
    named.push_back({"bias", vector(builder.getI32Type(), offset)});
  if (q.rowSumZeroPointB)
    named.push_back({"zeroPointB", vector(builder.getI32Type(), zeroPointB)});
  if (q.scaleVector)
    named.push_back(
        {"scale", vector(builder.getF32Type(), chain->multipliers)});

  Value replacement =
      buildCalls(fusion, *kernels, problem, a, b, {}, resultType,
                 RankedTensorType(), nullptr, named);
  report.push_back(
      llvm::formatv("{0}: {1}, M={2} N={3} K={4} batch=1; int8 {5}; {6}",
                    kernels->kernels.front().name, kernels->config.describe(),
                    problem.m, problem.n, problem.k, describeChain(*chain),
                    lastConfigOrigin)
          .str());
  replaceResults(fusion, 0, replacement);
  return success();
}

} // namespace kiln::templates
