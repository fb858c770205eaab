//===- MatchContractions.cpp - Fusion regions to template GEMM kernels ----===//
//
// A kiln.fusion region anchored on a matmul, whose other ops are the
// matmul's elementwise epilogue, becomes one tiled tensor-core (or FFMA)
// kernel from the CUDA C++ templates (include/kiln/Target/CUDA/
// ContractionKernels.h): the epilogue is generated from the region's ops and
// runs on the accumulators in registers. kiln-select-contraction-kernels
// (SelectContractionKernels.cpp) decides each region's config and attaches
// it as `kiln.kernel`; kiln-match-contractions (this file's pass) follows
// it: the kernel is compiled (NVRTC) into a gpu.binary and called through
// kiln.call_kernel, which bufferizes like a linalg op and becomes a
// gpu.launch_func after bufferization. Both run the Matcher below, which
// finds the region's problem the same way in both modes (RegionMatcher.h).
//
// What a region may hold around its matmul:
//   - operands: region inputs, seen through reshapes (free: same bytes) and
//     a transpose of the last two dimensions (a column-major operand);
//     anything else computing an operand (a cast to bf16, a transpose of
//     more dimensions) is split off into a region of its own before it;
//     for tf32 on the wgmma kernels (which read B K-major) a row-major
//     weight is transposed at compile time into a new global whose origin
//     records it (`kiln-run --weights` replays it);
//   - the epilogue: elementwise ops on the matmul's shape (see
//     EpilogueEmitter.h) reading region inputs with any numpy broadcast,
//     splat constants, and values computed in the region without the
//     matmul (split off like operand producers).
// Regions this does not fit (no matmul, another contraction or a row op,
// more than one result, an op without an epilogue form, a shape no config
// supports, NVRTC missing) stay as they are for kiln-collapse-fusions: the
// selection gives them a `kiln.generic_reason` attribute instead of a
// config (kilnc --stats prints it).
// Regions anchored on a convolution: MatchConvolutions.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Dialect/Kiln/Transforms/QuantizedChains.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cctype>
#include <cstring>

#include <cstdlib>

namespace kiln {
#define GEN_PASS_DEF_MATCHCONTRACTIONSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

/// On the module: one line per matmul region, its kernel or why it has none
/// (kilnc --stats prints them).
constexpr llvm::StringLiteral kReportAttr =
    KilnDialect::ContractionReportAttrHelper::getNameStr();

namespace {

bool swapsLastTwo(ArrayRef<int64_t> permutation) {
  size_t rank = permutation.size();
  if (rank < 2)
    return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if (permutation[i] != static_cast<int64_t>(i))
      return false;
  return permutation[rank - 2] == static_cast<int64_t>(rank - 1) &&
         permutation[rank - 1] == static_cast<int64_t>(rank - 2);
}

/// Whether `v`, defined outside any region, is a view of another buffer
/// once bufferized (a split or slice: strided, not a whole buffer a kernel
/// can take), possibly through reshapes.
bool isView(Value v) {
  while (auto reshape = v.getDefiningOp<kiln::ReshapeOp>())
    v = reshape.getInput();
  return v.getDefiningOp<kiln::SplitOp>() || v.getDefiningOp<kiln::SliceOp>();
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

SmallVector<Operation *> coneOf(Value v, kiln::FusionOp fusion,
                                bool throughViews = false);

} // namespace

bool inRegion(Value v, kiln::FusionOp fusion) {
  Operation *def = v.getDefiningOp();
  return def && fusion->isProperAncestor(def);
}

Value peelTf32Rounding(Value v) {
  auto widen = v.getDefiningOp<kiln::CastOp>();
  if (!widen)
    return v;
  auto narrow = widen.getInput().getDefiningOp<kiln::CastOp>();
  if (!narrow || !isa<FloatTF32Type>(
                     getElementTypeOrSelf(narrow.getResult().getType())))
    return v;
  return narrow.getInput();
}

/// Reshapes in the region or before it keep the bytes.
Value contiguousSource(Value v, kiln::FusionOp fusion) {
  while (auto reshape = v.getDefiningOp<kiln::ReshapeOp>())
    v = reshape.getInput();
  if (inRegion(v, fusion) || isView(v))
    return nullptr;
  return v;
}

Value Matcher::materialize(Value v, kiln::FusionOp fusion) {
  // External views (a split's part) are copied into a buffer of their own.
  SmallVector<Operation *> ordered = coneOf(v, fusion, /*throughViews=*/true);
  OpBuilder b(fusion);
  auto split = kiln::FusionOp::create(b, fusion.getLoc(), TypeRange{v.getType()},
                                      b.getStringAttr("elementwise"));
  Block *body = b.createBlock(&split.getBody());
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  for (Operation *op : ordered)
    b.clone(*op, mapping);
  kiln::YieldOp::create(b, fusion.getLoc(), ValueRange{mapping.lookup(v)});
  splitOff.push_back(split);
  return split.getResult(0);
}

FailureOr<OperandView> Matcher::operandView(Value v, kiln::FusionOp fusion) {
  if (auto transpose = v.getDefiningOp<kiln::TransposeOp>();
      transpose && inRegion(v, fusion) &&
      swapsLastTwo(transpose.getPermutation()))
    if (Value source = contiguousSource(transpose.getInput(), fusion))
      return OperandView{source, cx::Layout::ColMajor};
  if (Value source = contiguousSource(v, fusion))
    return OperandView{source, cx::Layout::RowMajor};
  return OperandView{materialize(v, fusion), cx::Layout::RowMajor};
}

std::optional<cx::DType> kernelDType(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (element.isF32())
    return cx::DType::F32;
  if (element.isBF16())
    return cx::DType::BF16;
  if (element.isF16())
    return cx::DType::F16;
  return std::nullopt;
}

Value Matcher::kMajorWeight(Value weight, int64_t k, int64_t n,
                            kiln::FusionOp fusion, bool dryRun) {
  ml_program::GlobalOp global = filterGlobal(weight, module);
  std::optional<std::vector<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  auto type = cast<RankedTensorType>(weight.getType());
  Type element = type.getElementType();
  // f32 (tf32 wgmma) or any 8-bit type (int8, fp8): neither transposes.
  size_t size = element.isF32() ? 4
                : element.isIntOrFloat() && element.getIntOrFloatBitWidth() == 8
                    ? 1
                    : 0;
  if (!bytes || !size || type.getNumElements() != k * n ||
      bytes->size() != static_cast<size_t>(k * n) * size)
    return nullptr;
  if (dryRun)
    return weight;
  auto transposedType = RankedTensorType::get({n, k}, type.getElementType());
  // The key names the global; its bytes are [K][N] whatever its shape.
  ml_program::GlobalOp &transposed =
      paddedFilters[(global.getSymName() + "/kmajor").str()];
  if (!transposed) {
    std::vector<char> data(bytes->size());
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(&data[(j * k + i) * size], &(*bytes)[(i * n + j) * size],
                    size);
    std::string name = (global.getSymName() + "_kmajor").str();
    std::string blobKey = name;
    for (char &c : blobKey)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(data.data(), data.size()), alignof(uint64_t));
    auto value = DenseResourceElementsAttr::get(transposedType, blobKey,
                                                std::move(blob));
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(global);
    transposed = ml_program::GlobalOp::create(
        b, global.getLoc(), name, transposedType, /*is_mutable=*/false, value,
        b.getStringAttr("private"));
    for (NamedAttribute attr : global->getDiscardableAttrs())
      transposed->setAttr(attr.getName(), attr.getValue());
    std::string origin = getWeightOrigin(global);
    if (cast<RankedTensorType>(global.getType()).getShape() !=
        ArrayRef<int64_t>{k, n})
      origin = appendOriginStep(origin, "reshape", {k, n});
    setWeightOrigin(transposed, appendOriginStep(origin, "transpose", {1, 0}));
    SymbolTable(module).insert(transposed); // renames on a clash
    replacedWeights.insert(global);
  }
  OpBuilder b(fusion);
  return ml_program::GlobalLoadConstOp::create(
      b, fusion.getLoc(), transposedType,
      FlatSymbolRefAttr::get(transposed.getSymNameAttr()));
}

LogicalResult Matcher::rewriteMatmul(kiln::FusionOp fusion, std::string &why) {
  Block &body = fusion.getBody().front();
  kiln::MatmulOp matmul;
  for (Operation &op : body.without_terminator()) {
    if (auto m = dyn_cast<kiln::MatmulOp>(op)) {
      if (matmul) {
        why = "the region has two matmuls";
        return failure();
      }
      matmul = m;
    } else if (isa<kiln::ConvOp, kiln::ConvTransposeOp, kiln::ReduceOp,
                   kiln::SoftmaxOp, kiln::LogSoftmaxOp, kiln::LayerNormOp,
                   kiln::PoolOp, kiln::GlobalPoolOp>(op)) {
      why = "the region has a " + op.getName().getStringRef().str();
      return failure();
    }
  }
  if (!matmul) {
    why = "no matmul";
    return failure();
  }
  auto resultType = cast<RankedTensorType>(matmul.getType());
  auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhsType = cast<RankedTensorType>(matmul.getRhs().getType());
  if (lhsType.getRank() < 2 || rhsType.getRank() < 2) {
    why = "a matrix-vector product (1-D operand)";
    return failure();
  }
  if (!resultType.hasStaticShape() || !lhsType.hasStaticShape() ||
      !rhsType.hasStaticShape()) {
    why = "dynamic shapes";
    return failure();
  }

  llvm::SetVector<Operation *> epilogue;
  std::optional<unsigned> auxIndex;
  std::optional<unsigned> storedIndex =
      storedEpilogue(fusion, matmul, epilogue, why, &auxIndex);
  if (!storedIndex)
    return failure();
  Value result = fusion.getYield().getValues()[*storedIndex];
  Value auxResult =
      auxIndex ? fusion.getYield().getValues()[*auxIndex] : Value();

  // The family and operand types.
  bool tf32 = matmul->hasAttr(KilnDialect::Tf32AttrHelper::getNameStr());
  Value lhs = tf32 ? peelTf32Rounding(matmul.getLhs()) : matmul.getLhs();
  Value rhs = tf32 ? peelTf32Rounding(matmul.getRhs()) : matmul.getRhs();
  std::optional<cx::DType> inputType = kernelDType(lhsType);
  std::optional<cx::DType> accType = kernelDType(resultType);
  if (!inputType || lhsType.getElementType() != rhsType.getElementType() ||
      accType != cx::DType::F32) {
    why = "operand or accumulator types the kernels do not take";
    return failure();
  }
  cx::Family family = *inputType != cx::DType::F32 ? cx::Family::MmaF16
                      : tf32                       ? cx::Family::MmaTf32
                                                   : cx::Family::SimtF32;

  // Shapes: [batch..., M, K] x [batch..., K, N] -> [batch..., M, N], each
  // operand with all of the batch dimensions or none of them.
  ArrayRef<int64_t> shape = resultType.getShape();
  size_t rank = shape.size();
  ArrayRef<int64_t> batchDims = shape.drop_back(2);
  int64_t m = shape[rank - 2], n = shape[rank - 1];
  int64_t k = lhsType.getShape().back();
  auto batchOf = [&](RankedTensorType t, bool &broadcast) {
    ArrayRef<int64_t> dims = t.getShape().drop_back(2);
    broadcast = dims.empty() || product(dims) == 1;
    return broadcast || dims == batchDims;
  };
  bool broadcastA = false, broadcastB = false;
  if (!batchOf(lhsType, broadcastA) || !batchOf(rhsType, broadcastB)) {
    why = "operands with partially broadcast batch dimensions";
    return failure();
  }
  if (m == 0 || n == 0 || k == 0) {
    why = "an empty matmul";
    return failure();
  }

  FailureOr<OperandView> a = operandView(lhs, fusion);
  FailureOr<OperandView> b = operandView(rhs, fusion);
  if (failed(a) || failed(b))
    return failure();
  // tf32 wgmma reads both operands K-major: a row-major weight is stored
  // transposed at compile time so the producer copies it with cp.async
  // (other MN-major operands are transposed as they are staged). The
  // selection decides (the problem it tunes has B column-major); the
  // lowering follows.
  bool kMajor = selecting() ? tuner->wgmma()
                            : fusion->hasAttr(kWeightKMajorAttr);
  if (kMajor && family == cx::Family::MmaTf32 && broadcastB &&
      b->layout == cx::Layout::RowMajor) {
    if (Value transposed =
            kMajorWeight(b->buffer, k, n, fusion, /*dryRun=*/selecting())) {
      *b = OperandView{transposed, cx::Layout::ColMajor};
      selectedWeightKMajor = true;
    } else if (!selecting()) {
      why = "B is not a weight whose bytes are known, so it cannot be "
            "stored K-major";
      return failure();
    }
  }

  cx::GemmProblem problem;
  problem.inputType = *inputType;
  problem.layoutA = a->layout;
  problem.layoutB = b->layout;
  problem.k = static_cast<uint64_t>(k);
  problem.n = static_cast<uint64_t>(n);
  OutputIndexing indexing;
  indexing.shape.assign(shape.begin(), shape.end());
  int64_t batch = product(batchDims);
  if (broadcastB && !broadcastA && a->layout == cx::Layout::RowMajor) {
    // Weights shared by every batch: the batch is more rows of one GEMM.
    problem.m = static_cast<uint64_t>(batch * m);
    problem.batch = 1;
    indexing.batchFoldedIntoRows = true;
  } else {
    problem.m = static_cast<uint64_t>(m);
    problem.batch = static_cast<uint64_t>(batch);
    problem.batchStrideA = broadcastA ? 0 : static_cast<uint64_t>(m * k);
    problem.batchStrideB = broadcastB ? 0 : static_cast<uint64_t>(k * n);
    problem.batchStrideC = static_cast<uint64_t>(m * n);
  }

  FailureOr<EmittedEpilogue> emitted =
      emitRegionEpilogue(fusion, matmul, epilogue.getArrayRef(), result,
                         indexing, Value(), why, auxResult);
  if (failed(emitted))
    return failure();
  problem.outputType = emitted->outputType;
  FailureOr<cx::GemmKernels> kernels =
      compile(fusion, problem, family, *emitted, "kiln_gemm_", why);
  if (failed(kernels))
    return failure();
  if (selecting())
    return success();
  auto outType = cast<RankedTensorType>(result.getType());
  Value aux;
  Value replacement = buildCalls(
      fusion, *kernels, problem, a->buffer, b->buffer, emitted->operands,
      outType,
      auxResult ? cast<RankedTensorType>(auxResult.getType())
                : RankedTensorType(),
      &aux);
  // The wgmma kernels say which producer fills their ring (kilnc --tma).
  const cx::GemmConfig &config = kernels->config;
  std::string producer =
      config.family != cx::Family::WgmmaF16 ? ""
      : config.tma                          ? ", producer TMA"
                                            : ", producer cp.async";
  report.push_back(
      llvm::formatv("{0}: {1}, M={2} N={3} K={4} batch={5}{6}{7}; {8}",
                    kernels->kernels.front().name, config.describe(),
                    problem.m, problem.n, problem.k, problem.batch,
                    std::string(kernels->semaphoreCount
                                    ? ", split-K finished in-kernel"
                                    : "") +
                        (aux ? ", + a second output" : ""),
                    producer, lastConfigOrigin)
          .str());
  replaceResults(fusion, *storedIndex, replacement, auxIndex, aux);
  return success();
}

std::optional<unsigned>
Matcher::storedEpilogue(kiln::FusionOp fusion, Operation *anchor,
                        llvm::SetVector<Operation *> &epilogue,
                        std::string &why, std::optional<unsigned> *auxIndex) {
  llvm::SetVector<Operation *> dependents;
  if (failed(collectEpilogue(fusion, anchor, dependents, why)))
    return std::nullopt;
  std::optional<unsigned> storedIndex = storedResult(fusion, anchor);
  if (!storedIndex) {
    why = "the region has results not computed from one another";
    return std::nullopt;
  }
  ValueRange results = fusion.getYield().getValues();
  Value stored = results[*storedIndex];
  // A second output: the one other result (an f32 value's bf16 copy, a
  // matmul's value and its relu), no wider than the stored one (the
  // kernels stage it in C's shared memory).
  if (auxIndex) {
    llvm::SmallSetVector<Value, 2> distinct(results.begin(), results.end());
    auto bytes = [](Value v) {
      std::optional<cx::DType> t = kernelDType(v.getType());
      return t ? kiln::runtime::dtypeSize(*t) : 0;
    };
    if (distinct.size() == 2) {
      Value other = distinct[0] == stored ? distinct[1] : distinct[0];
      if (bytes(other) && bytes(other) <= bytes(stored))
        *auxIndex = static_cast<unsigned>(
            llvm::find(results, other) - results.begin());
    }
  }
  // The epilogue is what the stored result (and the second output) needs,
  // in block order.
  llvm::SmallPtrSet<Operation *, 8> needed;
  SmallVector<Value> work{stored};
  if (auxIndex && *auxIndex)
    work.push_back(results[**auxIndex]);
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (inRegion(v, fusion) && needed.insert(v.getDefiningOp()).second)
      llvm::append_range(work, v.getDefiningOp()->getOperands());
  }
  for (Operation *op : dependents)
    if (needed.contains(op))
      epilogue.insert(op);
  return storedIndex;
}

LogicalResult Matcher::collectEpilogue(kiln::FusionOp fusion,
                                       Operation *anchor,
                                       llvm::SetVector<Operation *> &epilogue,
                                       std::string &why) {
  ArrayRef<int64_t> shape =
      cast<ShapedType>(anchor->getResult(0).getType()).getShape();
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    if (&op == anchor)
      continue;
    bool dependent = llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && (def == anchor || epilogue.contains(def));
    });
    if (!dependent)
      continue;
    if (!hasEpilogueForm(&op)) {
      why = op.getName().getStringRef().str() + " has no epilogue form";
      return failure();
    }
    if (cast<ShapedType>(op.getResult(0).getType()).getShape() != shape) {
      why = "an epilogue op changes the shape";
      return failure();
    }
    epilogue.insert(&op);
  }
  for (Value result : fusion.getYield().getValues())
    if (result != anchor->getResult(0) &&
        !epilogue.contains(result.getDefiningOp())) {
      why = "the region's result does not depend on its " +
            anchor->getName().getStringRef().str();
      return failure();
    }
  return success();
}

/// A lossless widening cast (bf16 -> f32) of a region input: the epilogue
/// reads the input itself (its loads convert to float exactly), so no
/// kernel before this one writes the wide copy. Anything else computed in
/// the region without the anchor is split off (materialize).
Value Matcher::widenedInput(Value v, kiln::FusionOp fusion) {
  if (auto cast = v.getDefiningOp<kiln::CastOp>();
      cast && inRegion(v, fusion) && cast.isStorageWidening())
    if (Value source = contiguousSource(cast.getInput(), fusion))
      return source;
  return materialize(v, fusion);
}

FailureOr<EmittedEpilogue>
Matcher::emitRegionEpilogue(kiln::FusionOp fusion, Operation *anchor,
                            ArrayRef<Operation *> epilogue, Value result,
                            const OutputIndexing &indexing, Value accBias,
                            std::string &why, Value auxResult) {
  // Values the epilogue reads that the region computes without the anchor
  // are split off (splat constants become literals); the rest are region
  // inputs.
  llvm::DenseMap<Value, Value> substitutions;
  auto substitute = [&](Value v) {
    if ((inRegion(v, fusion) || isView(v)) && !substitutions.count(v) &&
        !isSplatConstant(v))
      substitutions[v] = widenedInput(v, fusion);
  };
  if (accBias)
    substitute(accBias);
  for (Operation *op : epilogue)
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def != anchor && !llvm::is_contained(epilogue, def))
        substitute(v);
    }
  return emitEpilogue(anchor->getResult(0), epilogue, result, indexing,
                      substitutions, accBias, why, auxResult);
}

/// A TMA tensor-map parameter as the attribute ArtifactBuilder reads
/// (`kiln.tensor_maps` on kiln.call_kernel and gpu.launch_func): `param`
/// is the launch operand the map's address comes from (pointers come first,
/// in the kernel's parameter order, so it is the kernel parameter index).
static DictionaryAttr tensorMapAttr(OpBuilder &builder,
                                    const cx::KernelParameter &p) {
  const kiln::runtime::TensorMapRecord &m = p.tensorMap;
  auto i64s = [&](auto *values, uint32_t n) {
    SmallVector<int64_t> list(values, values + n);
    return builder.getDenseI64ArrayAttr(list);
  };
  auto u32 = [&](uint32_t v) { return builder.getI32IntegerAttr(v); };
  NamedAttribute fields[] = {
      builder.getNamedAttr("param", u32(m.addressParam)),
      builder.getNamedAttr(
          "dtype", builder.getStringAttr(kiln::runtime::dtypeName(m.dtype))),
      builder.getNamedAttr("dims", i64s(m.globalDims, m.rank)),
      builder.getNamedAttr("strides", i64s(m.globalStrides, m.rank - 1)),
      builder.getNamedAttr("box", i64s(m.boxDims, m.rank)),
      builder.getNamedAttr("swizzle", u32(m.swizzle)),
      builder.getNamedAttr("l2_promotion", u32(m.l2Promotion)),
      builder.getNamedAttr("oob_fill", u32(m.oobFill)),
      builder.getNamedAttr("name", builder.getStringAttr(p.name)),
  };
  return builder.getDictionaryAttr(fields);
}

namespace {
/// Whether `chosen` computes what the region's precision asks for with
/// `requested` (candidateConfigs' families: wgmma for the tensor-core ones).
bool sameArithmetic(cx::Family requested, cx::Family chosen) {
  switch (requested) {
  case cx::Family::MmaF16:
  case cx::Family::WgmmaF16:
    return chosen == cx::Family::MmaF16 || chosen == cx::Family::WgmmaF16;
  case cx::Family::MmaTf32:
  case cx::Family::WgmmaTf32:
    return chosen == cx::Family::MmaTf32 || chosen == cx::Family::WgmmaTf32;
  case cx::Family::SimtF32:
    return chosen == cx::Family::SimtF32;
  case cx::Family::MmaS8:
  case cx::Family::WgmmaS8:
    return chosen == cx::Family::MmaS8 || chosen == cx::Family::WgmmaS8;
  case cx::Family::MmaF8:
  case cx::Family::WgmmaF8:
    return chosen == cx::Family::MmaF8 || chosen == cx::Family::WgmmaF8;
  }
  return false;
}
} // namespace

FailureOr<cx::GemmKernels>
Matcher::compile(kiln::FusionOp fusion, const cx::GemmProblem &problem,
                 cx::Family family, const EmittedEpilogue &epilogue,
                 StringRef prefix, std::string &why) {
  cx::Epilogue ep;
  ep.customBody = epilogue.body;
  if (epilogue.auxType) {
    ep.aux = true;
    ep.auxType = *epilogue.auxType;
  }
  for (size_t i = 0; i < epilogue.operands.size(); ++i)
    ep.customOperands.push_back("epilogue" + std::to_string(i));
  return compile(fusion, problem, family, ep, prefix, why);
}

FailureOr<cx::GemmKernels>
Matcher::compile(kiln::FusionOp fusion, const cx::GemmProblem &problem,
                 cx::Family family, const cx::Epilogue &ep, StringRef prefix,
                 std::string &why) {
  cx::GemmConfig config;
  if (selecting()) {
    llvm::Expected<kiln::tuning::ConfigChoice> choice =
        tuner->choose(problemAtOpt(problem), family);
    if (!choice) {
      why = llvm::toString(choice.takeError());
      if (fatalError.empty())
        fatalError = why;
      return failure();
    }
    config = choice->config;
    lastConfigOrigin = choice->origin;
    if (std::string reason = cx::unsupportedReason(problem, config);
        !reason.empty()) {
      why = "no kernel config: " + reason;
      return failure();
    }
    selected = toAttr(module.getContext(), config);
    selectedVariants = chooseVariants(problem, family, config);
    if (fatalError.size())
      return failure();
    cx::GemmKernels chosen;
    chosen.config = config;
    return chosen;
  }
  auto attr = configOf<GemmConfigAttr>(fusion, why);
  if (!attr)
    return failure();
  config = fromAttr(attr);
  auto origin = fusion->getAttrOfType<StringAttr>(kKernelOriginAttr);
  lastConfigOrigin = origin ? origin.getValue().str() : "given";
  if (!sameArithmetic(family, config.family)) {
    why = std::string(cx::familyName(config.family)) +
          " does not compute this region's precision (" +
          std::string(cx::familyName(family)) + ")";
    return failure();
  }
  if (cx::isWgmmaFamily(config.family) && smVersion != 90) {
    why = std::string(cx::familyName(config.family)) + " needs sm_90, not sm_" +
          std::to_string(smVersion);
    return failure();
  }
  if (std::string reason = cx::unsupportedReason(problem, config);
      !reason.empty()) {
    why = reason;
    return failure();
  }
  cx::GenerateOptions options;
  options.smVersion = smVersion;
  options.name = kiln::kEntryPlaceholder.str();
  kiln::runtime::Expected<cx::GemmKernels> kernels =
      cx::specializeGemm(problem, config, ep, options);
  if (!kernels) {
    why = kernels.error().message();
    return failure();
  }
  nameKernels(*kernels, prefix);
  lastCompiled = fusion;
  lastEpilogue = ep;
  lastPrefix = prefix.str();
  return std::move(*kernels);
}

void Matcher::nameKernels(cx::GemmKernels &kernels, StringRef prefix) {
  auto [it, isNew] =
      kernelNames.try_emplace(kiln::templateKernelKey(kernels), "");
  if (isNew)
    it->second = prefix.str() + std::to_string(nextKernel++);
  lastKernelShared = !isNew;
  kiln::nameTemplateKernels(kernels, it->second);
}

void Matcher::declareBinary(const cx::GemmKernels &kernels,
                            const cx::GemmKernel &kernel, Location loc) {
  MLIRContext *ctx = module.getContext();
  OpBuilder moduleBuilder(ctx);
  moduleBuilder.setInsertionPointToStart(module.getBody());
  gpu::BinaryOp::create(
      moduleBuilder, loc, kernel.name, nullptr,
      ArrayAttr::get(ctx, {kiln::templateSourceObject(
                              ctx, chip, kernels.source,
                              kernels.nvrtcOptions)}));
}

cx::GemmProblem Matcher::problemAtOpt(const cx::GemmProblem &problem) const {
  // `kilnc --dim N=1..64:32` (an opt below the maximum, one symbol): the
  // tiles are chosen for the size runs are expected at, as TensorRT's
  // profiles do. A GEMM whose M is a multiple of the maximum is taken to
  // follow N (a batch-major M: N x rows per sample). The kernel is still
  // built, checked and launched for the maximum's M (launch scaling runs
  // fewer tiles at smaller sizes), so a wrong guess costs speed only.
  auto ranges = module->getAttrOfType<DictionaryAttr>(
      KilnDialect::DimRangesAttrHelper::getNameStr());
  if (!ranges || ranges.size() != 1 || problem.batch != 1)
    return problem;
  auto range = dyn_cast<DenseI64ArrayAttr>(ranges.begin()->getValue());
  if (!range || range.size() != 3 || range[2] < 1 || range[2] >= range[1] ||
      problem.m % static_cast<uint64_t>(range[1]) != 0)
    return problem;
  cx::GemmProblem sized = problem;
  sized.m = problem.m / static_cast<uint64_t>(range[1]) *
            static_cast<uint64_t>(range[2]);
  return sized;
}

std::optional<Matcher::SymbolRange> Matcher::singleRange() const {
  auto ranges = module->getAttrOfType<DictionaryAttr>(
      KilnDialect::DimRangesAttrHelper::getNameStr());
  if (!ranges || ranges.size() != 1)
    return std::nullopt;
  auto range = dyn_cast<DenseI64ArrayAttr>(ranges.begin()->getValue());
  if (!range || range.size() != 3 || range[0] < 0 || range[1] < range[0])
    return std::nullopt;
  return SymbolRange{ranges.begin()->getName().str(), range[0], range[1],
                     range[2]};
}

ArrayAttr Matcher::chooseVariants(const cx::GemmProblem &problem,
                                  cx::Family family,
                                  const cx::GemmConfig &main) {
  // Only a GEMM whose launch scales with the symbol gains from tiles of
  // its own at small sizes: its rows are A's leading slices, N x rows per
  // sample (the condition buildCalls records #kiln.grid_rows under).
  std::optional<SymbolRange> range = singleRange();
  bool rowsOuter =
      problem.conv.enabled || (problem.layoutA == cx::Layout::RowMajor &&
                               (problem.lda == 0 || problem.lda == problem.k));
  if (sizeSplits.empty() || !range || range->max < 1 || problem.batch != 1 ||
      !rowsOuter || problem.m % static_cast<uint64_t>(range->max) != 0)
    return {};
  MLIRContext *ctx = module.getContext();
  uint64_t perSample = problem.m / static_cast<uint64_t>(range->max);
  Attribute mainAttr = toAttr(ctx, main);
  SmallVector<Attribute> variants;
  int64_t lo = range->min;
  for (int64_t split : sizeSplits) {
    if (split < lo || split >= range->max)
      continue;
    // Tuned at the bucket's opt when it holds it, else at its largest size.
    int64_t at = range->opt >= lo && range->opt <= split ? range->opt : split;
    cx::GemmProblem sized = problem;
    sized.m = perSample * static_cast<uint64_t>(std::max<int64_t>(at, 1));
    llvm::Expected<kiln::tuning::ConfigChoice> choice =
        tuner->choose(sized, family);
    if (!choice) {
      fatalError = llvm::toString(choice.takeError());
      return {};
    }
    // The kernel is built for the maximum's M (the padding is computed,
    // the launch scales), so the config must take the whole problem.
    Attribute attr = toAttr(ctx, choice->config);
    if (attr != mainAttr &&
        cx::unsupportedReason(problem, choice->config).empty()) {
      Builder b(ctx);
      variants.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("kernel", attr),
           b.getNamedAttr("max", b.getI64IntegerAttr(split)),
           b.getNamedAttr("min", b.getI64IntegerAttr(lo))}));
    }
    lo = split + 1;
  }
  return variants.empty() ? ArrayAttr() : ArrayAttr::get(ctx, variants);
}

Value Matcher::buildCalls(
    kiln::FusionOp fusion, const cx::GemmKernels &kernels,
    const cx::GemmProblem &problem, Value a, Value b, ArrayRef<Value> extras,
    RankedTensorType resultType, RankedTensorType auxType, Value *aux,
    ArrayRef<std::pair<std::string, Value>> named) {
  auto variants = fusion->getAttrOfType<ArrayAttr>(
      KilnDialect::KernelVariantsAttrHelper::getNameStr());
  std::optional<SymbolRange> range = singleRange();
  if (!variants || !range || lastCompiled != fusion.getOperation())
    return buildCallChain(fusion, kernels, problem, a, b, extras, resultType,
                          auxType, aux, named, Value(), Value(), Attribute());
  // Size buckets: one chain of calls per bucket, the smaller buckets'
  // first, each writing the whole result into the same tensors and guarded
  // by its sizes; the region's own config takes the last bucket.
  MLIRContext *ctx = module.getContext();
  StringAttr symbol = StringAttr::get(ctx, range->name);
  bool mainShared = lastKernelShared;
  Value c, auxValue;
  int64_t next = range->min;
  for (Attribute entry : variants) {
    auto dict = cast<DictionaryAttr>(entry);
    cx::GemmConfig config = fromAttr(cast<GemmConfigAttr>(dict.get("kernel")));
    int64_t lo = dict.getAs<IntegerAttr>("min").getInt();
    int64_t hi = dict.getAs<IntegerAttr>("max").getInt();
    cx::GenerateOptions options;
    options.smVersion = smVersion;
    options.name = kiln::kEntryPlaceholder.str();
    kiln::runtime::Expected<cx::GemmKernels> bucket =
        cx::specializeGemm(problem, config, lastEpilogue, options);
    if (!bucket) {
      // The selection checked the config against the problem; a failure
      // here leaves the bucket to the region's own config.
      fusion.emitWarning() << "size bucket " << range->name << "=" << lo << ".."
                           << hi << ": " << bucket.error().message();
      continue;
    }
    nameKernels(*bucket, lastPrefix);
    Value bucketAux;
    c = buildCallChain(fusion, *bucket, problem, a, b, extras, resultType,
                       auxType, &bucketAux, named, c, auxValue,
                       SizeGuardAttr::get(ctx, symbol, lo, hi));
    auxValue = bucketAux;
    report.push_back(llvm::formatv("{0}: {1} for {2}={3}..{4} (size bucket)",
                                   bucket->kernels.front().name,
                                   config.describe(), range->name, lo, hi)
                         .str());
    next = hi + 1;
  }
  lastKernelShared = mainShared;
  return buildCallChain(fusion, kernels, problem, a, b, extras, resultType,
                        auxType, aux, named, c, auxValue,
                        next > range->min
                            ? SizeGuardAttr::get(ctx, symbol, next, range->max)
                            : Attribute());
}

Value Matcher::buildCallChain(kiln::FusionOp fusion,
                              const cx::GemmKernels &kernels,
                              const cx::GemmProblem &problem, Value a, Value b,
                              ArrayRef<Value> extras,
                              RankedTensorType resultType,
                              RankedTensorType auxType, Value *aux,
                              ArrayRef<std::pair<std::string, Value>> named,
                              Value destC, Value destAux, Attribute guard) {
  MLIRContext *ctx = module.getContext();
  Location loc = fusion.getLoc();
  OpBuilder builder(fusion);

  Value output =
      destC ? destC
            : tensor::EmptyOp::create(builder, loc, resultType.getShape(),
                                      resultType.getElementType())
                  .getResult();
  Value auxOutput =
      destAux   ? destAux
      : auxType ? tensor::EmptyOp::create(builder, loc, auxType.getShape(),
                                          auxType.getElementType())
                      .getResult()
                : Value();
  Value workspace;
  if (kernels.workspaceBytes)
    workspace = tensor::EmptyOp::create(
        builder, loc,
        ArrayRef<int64_t>{static_cast<int64_t>(kernels.workspaceBytes / 4)},
        builder.getF32Type());
  Value result;
  for (const cx::GemmKernel &kernel : kernels.kernels) {
    if (!lastKernelShared)
      declareBinary(kernels, kernel, loc);
    bool writesAux = llvm::any_of(kernel.params, [](const auto &p) {
      return p.name == "aux";
    });
    assert(!writesAux || auxOutput);
    // The kernel's outputs: C, aux, and split-K's scratch workspace (its
    // result is unused; the buffer is the kernel's alone).
    SmallVector<Value> outs{output};
    if (writesAux)
      outs.push_back(auxOutput);
    if (workspace)
      outs.push_back(workspace);
    SmallVector<Value> inputs;
    SmallVector<int32_t> order;
    SmallVector<Attribute> scalars;
    SmallVector<std::pair<std::string, Value>> pointers;
    SmallVector<Attribute> tensorMaps;
    for (const cx::KernelParameter &p : kernel.params) {
      if (p.kind == cx::KernelParameter::Kind::TensorMap) {
        // The last parameters; ArtifactBuilder turns each into a tensor-map
        // record the runtime encodes at load (kiln.tensor_maps).
        tensorMaps.push_back(tensorMapAttr(builder, p));
        continue;
      }
      if (p.kind != cx::KernelParameter::Kind::Pointer) {
        uint64_t value = p.name == "M"              ? problem.m
                         : p.name == "batchStrideA" ? problem.batchStrideA
                                                    : problem.batchStrideC;
        scalars.push_back(builder.getIntegerAttr(
            p.kind == cx::KernelParameter::Kind::U32 ? builder.getI32Type()
                                                     : builder.getI64Type(),
            value));
        continue;
      }
      // Split-K's semaphores are not an operand of the call:
      // kiln-lower-kernel-calls passes them after the call's pointers.
      if (p.name == "semaphores")
        continue;
      Value v;
      if (p.name == "A")
        v = a;
      else if (p.name == "B")
        v = b;
      else if (p.name == "workspace")
        v = workspace;
      else if (auto it = llvm::find_if(
                   named, [&](const auto &e) { return e.first == p.name; });
               it != named.end())
        v = it->second;
      else if (unsigned i; p.name != "C" && p.name != "aux" &&
                           !StringRef(p.name).drop_front(8).getAsInteger(10, i))
        v = extras[i];
      pointers.push_back({p.name, v});
    }
    auto isOut = [&](const std::string &name) {
      return name == "C" || name == "aux" || name == "workspace";
    };
    for (auto &[name, v] : pointers)
      if (!isOut(name))
        inputs.push_back(v);
    // Operand indices: inputs in order, then the outputs (C, aux, the
    // workspace).
    unsigned nextInput = 0;
    int32_t firstOut = static_cast<int32_t>(inputs.size());
    for (auto &[name, v] : pointers)
      order.push_back(!isOut(name)     ? static_cast<int32_t>(nextInput++)
                      : name == "C"   ? firstOut
                      : name == "aux" ? firstOut + 1
                                      : firstOut + (writesAux ? 2 : 1));
    kiln::runtime::Dim3 grid = kernel.grid;
    auto call = kiln::CallKernelOp::create(
        builder, loc, ValueRange(outs).getTypes(),
        SymbolRefAttr::get(ctx, kernel.name,
                           {FlatSymbolRefAttr::get(ctx, kernel.name)}),
        inputs, outs,
        builder.getDenseI32ArrayAttr({static_cast<int32_t>(grid.x),
                                      static_cast<int32_t>(grid.y),
                                      static_cast<int32_t>(grid.z)}),
        builder.getDenseI32ArrayAttr({static_cast<int32_t>(kernel.block.x),
                                      static_cast<int32_t>(kernel.block.y),
                                      static_cast<int32_t>(kernel.block.z)}),
        builder.getI32IntegerAttr(kernel.dynamicSharedBytes),
        builder.getArrayAttr(scalars), builder.getDenseI32ArrayAttr(order));
    call->setAttr(kKernelAttr, toAttr(ctx, kernels.config));
    if (guard)
      call->setAttr(KilnDialect::SizeGuardAttrHelper::getNameStr(), guard);
    // Sizes at run time (issue 24): the GEMM templates tile M along
    // blockIdx.x (m0 = blockIdx.x * BM, no swizzle), so a run that needs
    // only M's first rows needs only grid.x's first blocks. Recorded when
    // M's rows are A's leading slices (an implicit convolution's pixels,
    // image-major; a packed row-major A) and nothing else is batched;
    // kiln-map-to-gpu decides whether a symbol follows A's dim 0.
    bool rowsOuter = problem.conv.enabled ||
                     (problem.layoutA == cx::Layout::RowMajor &&
                      (problem.lda == 0 || problem.lda == problem.k));
    if (kernel.gridXPerM == 1 && kernel.gridXDivisor == kernels.config.blockM &&
        problem.batch == 1 && rowsOuter &&
        kernel.gridFor(problem.m).x == grid.x) {
      auto aIndex = llvm::find(inputs, a) - inputs.begin();
      if (aIndex < static_cast<std::ptrdiff_t>(inputs.size()))
        call->setAttr(KilnDialect::GridRowsAttrHelper::getNameStr(),
                      GridRowsAttr::get(builder.getContext(), problem.m,
                                        kernel.gridXDivisor, aIndex));
    }
    if (!tensorMaps.empty())
      call->setAttr(KilnDialect::TensorMapsAttrHelper::getNameStr(),
                    builder.getArrayAttr(tensorMaps));
    if (&kernel == &kernels.kernels.front()) // The one with the MMAs.
      call->setAttr(
          KilnDialect::FlopsAttrHelper::getNameStr(),
          builder.getI64IntegerAttr(static_cast<int64_t>(
              2 * problem.m * problem.n * problem.k * problem.batch)));
    result = call.getResult(0);
    if (writesAux && aux)
      *aux = call.getResult(1);
  }
  return result;
}

bool Matcher::run(kiln::FusionOp fusion) {
  std::string why;
  size_t splitBefore = splitOff.size();
  selected = {};
  selectedVariants = {};
  lastCompiled = nullptr;
  selectedWeightKMajor = false;
  lastConfigOrigin.clear();
  Attribute given = fusion->getAttr(kKernelAttr);
  bool convolution = llvm::any_of(fusion.getBody().front(), [](Operation &op) {
    return isa<kiln::ConvOp>(op);
  });
  LogicalResult matched =
      !selecting() && isa_and_nonnull<AttentionConfigAttr>(given)
          ? rewriteAttention(fusion, why)
      : fusion.getKind() == kQuantizedMatmulKind
          ? rewriteQuantizedMatmul(fusion, why)
      : fusion.getKind() == kQuantizedConvKind
          ? rewriteQuantizedConv(fusion, why)
      : convolution ? rewriteConvolution(fusion, why)
                    : rewriteMatmul(fusion, why);
  if (succeeded(matched) && !selecting())
    return true;
  // Undo the split-off producers: the selection leaves the IR as it was,
  // and a region that fails keeps computing them.
  while (splitOff.size() > splitBefore) {
    kiln::FusionOp split = splitOff.pop_back_val();
    split.erase();
  }
  MLIRContext *ctx = fusion.getContext();
  if (!selecting()) {
    fusion.emitError() << "kiln-match-contractions cannot follow kiln.kernel = "
                       << given << ": " << why;
    return false;
  }
  if (succeeded(matched)) {
    fusion->setAttr(kKernelAttr, selected);
    if (selectedVariants)
      fusion->setAttr(KilnDialect::KernelVariantsAttrHelper::getNameStr(),
                      selectedVariants);
    if (!lastConfigOrigin.empty())
      fusion->setAttr(kKernelOriginAttr, StringAttr::get(ctx, lastConfigOrigin));
    if (selectedWeightKMajor)
      fusion->setAttr(kWeightKMajorAttr, UnitAttr::get(ctx));
    return true;
  }
  fusion->setAttr(kGenericReasonAttr, StringAttr::get(ctx, why));
  return true;
}

void Matcher::reportGeneric(kiln::FusionOp fusion) {
  auto why = fusion->getAttrOfType<StringAttr>(kGenericReasonAttr);
  if (!why)
    return;
  std::string where;
  llvm::raw_string_ostream os(where);
  fusion.getLoc().print(os);
  report.push_back("generic fallback: " + why.getValue().str() + " at " +
                   where);
}

namespace {

/// The ops of `fusion` that `v` depends on, in block order; with
/// `throughViews`, also the reshapes, splits and slices outside it that
/// make a view it reads.
SmallVector<Operation *> coneOf(Value v, kiln::FusionOp fusion,
                                bool throughViews) {
  llvm::SetVector<Operation *> cone;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value next = work.pop_back_val();
    if (!inRegion(next, fusion) && !(throughViews && isView(next)))
      continue;
    Operation *def = next.getDefiningOp();
    if (cone.insert(def))
      llvm::append_range(work, def->getOperands());
  }
  // Ops before the region (views) come first; each block in its order.
  SmallVector<Operation *> ordered(cone.begin(), cone.end());
  llvm::sort(ordered, [&](Operation *x, Operation *y) {
    bool xInside = fusion->isProperAncestor(x);
    if (xInside != fusion->isProperAncestor(y))
      return !xInside;
    return x->isBeforeInBlock(y);
  });
  return ordered;
}

} // namespace

SmallVector<kiln::FusionOp> splitSideBySide(kiln::FusionOp fusion) {
  if (fusion.getNumResults() < 2)
    return {fusion};
  SmallVector<SmallVector<Operation *>> cones;
  llvm::DenseSet<Operation *> matmuls;
  for (Value v : fusion.getYield().getValues()) {
    cones.push_back(coneOf(v, fusion));
    unsigned count = 0;
    for (Operation *op : cones.back())
      if (isa<kiln::MatmulOp>(op)) {
        ++count;
        if (!matmuls.insert(op).second)
          return {fusion}; // Two results share a matmul.
      }
    if (count != 1)
      return {fusion};
  }
  SmallVector<kiln::FusionOp> parts;
  OpBuilder b(fusion);
  for (auto [i, v] : llvm::enumerate(fusion.getYield().getValues())) {
    auto part = kiln::FusionOp::create(b, fusion.getLoc(),
                                       TypeRange{v.getType()},
                                       fusion.getKindAttr());
    OpBuilder inner(part.getContext());
    inner.setInsertionPointToStart(inner.createBlock(&part.getBody()));
    IRMapping mapping;
    for (Operation *op : cones[i])
      inner.clone(*op, mapping);
    kiln::YieldOp::create(inner, fusion.getLoc(),
                          ValueRange{mapping.lookup(v)});
    fusion.getResult(i).replaceAllUsesWith(part.getResult(0));
    parts.push_back(part);
  }
  fusion.erase();
  return parts;
}

} // namespace kiln::templates

namespace {

/// Follows the configs kiln-select-contraction-kernels attached: each region
/// with a `kiln.kernel` becomes its template kernel(s); the others keep
/// their generic kernels, their `kiln.generic_reason` in the report.
struct MatchContractionsPass
    : kiln::impl::MatchContractionsPassBase<MatchContractionsPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    unsigned sm = 0;
    if (StringRef digits = chip; digits.consume_front("sm_"))
      (void)digits.getAsInteger(10, sm);
    if (sm != 80 && sm != 90) {
      module.emitError() << "kiln-match-contractions: chip '" << chip
                         << "' is not sm_80 or sm_90";
      return signalPassFailure();
    }
    using kiln::templates::Matcher;
    Matcher matcher(module, sm, chip, Matcher::Mode::Lower);
    SmallVector<kiln::FusionOp> fusions;
    module.walk([&](kiln::FusionOp f) { fusions.push_back(f); });
    bool failed = false;
    for (kiln::FusionOp f : fusions) {
      if (auto notes = f->getAttrOfType<ArrayAttr>(
              kiln::templates::kSelectionNoteAttr)) {
        for (Attribute note : notes)
          matcher.report.push_back(cast<StringAttr>(note).getValue().str());
        f->removeAttr(kiln::templates::kSelectionNoteAttr);
      }
      Attribute config = f->getAttr(kiln::templates::kKernelAttr);
      if (isa_and_nonnull<kiln::GemmConfigAttr, kiln::DepthwiseConfigAttr,
                          kiln::AttentionConfigAttr>(config))
        failed |= !matcher.run(f);
      else
        matcher.reportGeneric(f);
    }
    if (failed)
      return signalPassFailure();
    matcher.eraseUnreadWeights();
    if (!matcher.report.empty()) {
      SmallVector<Attribute> lines;
      for (const std::string &line : matcher.report)
        lines.push_back(StringAttr::get(module.getContext(), line));
      module->setAttr(kiln::templates::kReportAttr,
                      ArrayAttr::get(module.getContext(), lines));
    }
  }
};

} // namespace
