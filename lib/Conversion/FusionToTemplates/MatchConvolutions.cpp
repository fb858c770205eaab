//===- MatchConvolutions.cpp - Convolution regions to implicit GEMMs ------===//
//
// A kiln.fusion region anchored on a 2-D NHWC kiln.conv, whose other ops are
// its elementwise epilogue (batch norm, residual add, activation, casts),
// becomes one implicit-GEMM template kernel (convolutionAsGemm in
// include/kiln/Target/CUDA/ContractionKernels.h): the image is read in place,
// the conv's bias and the epilogue run on the accumulators.
//
// The kernel reads the filter as [O][KH][KW][Cp], Cp = C/groups padded to
// the 16-byte chunk (8 channels for 16-bit inputs, 4 for f32). NHWC filters
// are [O][KH][KW][C/groups] already (kiln-assign-layout folded the
// transpose, and padded the channels of groups = 1 convolutions to 8), so at
// most a pad of the last dimension is left: it is done here, at compile
// time, into a new weight global whose origin records the pad, so that
// `kiln-run --weights` rebinds it. The image needs no padding: the loader
// zero-fills the channels past C/groups.
//
// Depthwise convolutions (one input channel per group: 7/8 of the K chunk
// would be zeros) get a CUDA-core kernel of their own (MatchDepthwise.cpp).
// Regions that stay generic, with the reason: NCHW or 1-D/3-D convolutions,
// dynamic shapes, a filter computed
// at run time whose channels need padding, and everything a matmul region
// can fail on (MatchContractions.cpp).
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

#include <cctype>
#include <cstring>

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

std::optional<std::vector<char>> globalBytes(ml_program::GlobalOp global) {
  auto type = dyn_cast<RankedTensorType>(global.getType());
  if (!type || !type.hasStaticShape() || global.getIsMutable() ||
      type.getElementType().getIntOrFloatBitWidth() % 8)
    return std::nullopt;
  size_t width = type.getElementType().getIntOrFloatBitWidth() / 8;
  size_t size = type.getNumElements() * width;
  ArrayRef<char> raw;
  if (auto resource =
          dyn_cast_or_null<DenseResourceElementsAttr>(global.getValueAttr())) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt; // elided
    raw = blob->getData();
  } else if (auto dense =
                 dyn_cast_or_null<DenseElementsAttr>(global.getValueAttr())) {
    raw = dense.getRawData();
    if (dense.isSplat() && raw.size() == width) {
      std::vector<char> bytes(size);
      for (size_t i = 0; i < size; i += width)
        std::memcpy(bytes.data() + i, raw.data(), width);
      return bytes;
    }
  }
  if (raw.size() != size)
    return std::nullopt;
  return std::vector<char>(raw.begin(), raw.end());
}

ml_program::GlobalOp filterGlobal(Value filter, ModuleOp module) {
  auto load = filter.getDefiningOp<ml_program::GlobalLoadConstOp>();
  if (!load)
    return nullptr;
  return SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
      module, load.getGlobal());
}

namespace {

/// Whether `v` is computed from `from` by the region's ops without reading
/// `anchor` but through `from` (a bf16 copy of an f32 result).
bool computedFrom(Value v, Value from, Operation *anchor,
                  kiln::FusionOp fusion) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  bool reached = false;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (x == from) {
      reached = true;
      continue;
    }
    if (!seen.insert(x).second || !inRegion(x, fusion))
      continue;
    if (x.getDefiningOp() == anchor)
      return false;
    llvm::append_range(work, x.getDefiningOp()->getOperands());
  }
  return reached;
}

} // namespace

std::string unsupportedConvolution(kiln::ConvOp conv,
                                   RankedTensorType input,
                                   RankedTensorType filter,
                                   RankedTensorType result) {
  if (result.getRank() != 4)
    return "a 1-D or 3-D convolution";
  if (conv.getDataFormat() != kiln::DataFormat::ChannelsLast)
    return "an nchw convolution (the kernels read nhwc)";
  if (!input.hasStaticShape() || !filter.hasStaticShape() ||
      !result.hasStaticShape())
    return "dynamic shapes";
  return "";
}

cx::ConvProblem convProblemOf(kiln::ConvOp conv) {
  ArrayRef<int64_t> in = cast<RankedTensorType>(conv.getInput().getType())
                             .getShape();
  ArrayRef<int64_t> window =
      cast<RankedTensorType>(conv.getFilter().getType()).getShape();
  ArrayRef<int64_t> out = cast<RankedTensorType>(conv.getType()).getShape();
  cx::ConvProblem cp;
  cp.n = in[0], cp.h = in[1], cp.w = in[2], cp.c = in[3];
  cp.o = window[0];
  cp.kh = window[1], cp.kw = window[2];
  ArrayRef<int64_t> strides = conv.getStrides(), dilations = conv.getDilations();
  ArrayRef<int64_t> padding = conv.getPadding();
  cp.strideH = strides[0], cp.strideW = strides[1];
  cp.dilationH = dilations[0], cp.dilationW = dilations[1];
  cp.padH = padding[0], cp.padW = padding[1];
  cp.padBottom = padding[2], cp.padRight = padding[3];
  cp.groups = static_cast<uint32_t>(conv.getGroups());
  cp.p = out[1], cp.q = out[2];
  return cp;
}

std::optional<unsigned> storedResult(kiln::FusionOp fusion,
                                     Operation *anchor) {
  ValueRange results = fusion.getYield().getValues();
  for (auto [i, candidate] : llvm::enumerate(results))
    if (llvm::all_of(results, [&](Value other) {
          return other == candidate ||
                 computedFrom(other, candidate, anchor, fusion);
        }))
      return i;
  return std::nullopt;
}

void Matcher::replaceResults(kiln::FusionOp fusion, unsigned storedIndex,
                             Value stored, std::optional<unsigned> auxIndex,
                             Value aux) {
  ValueRange results = fusion.getYield().getValues();
  Value kept = results[storedIndex];
  Value auxKept = auxIndex ? results[*auxIndex] : Value();
  SmallVector<unsigned> others;
  for (auto [i, v] : llvm::enumerate(results))
    if (v != kept && v != auxKept)
      others.push_back(i);
  if (!others.empty()) {
    // The ops between the stored value and the other results, in order.
    llvm::SetVector<Operation *> cone;
    SmallVector<Value> work;
    for (unsigned i : others)
      work.push_back(results[i]);
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (v == kept || !inRegion(v, fusion))
        continue;
      if (cone.insert(v.getDefiningOp()))
        llvm::append_range(work, v.getDefiningOp()->getOperands());
    }
    SmallVector<Operation *> ordered(cone.begin(), cone.end());
    llvm::sort(ordered, [](Operation *x, Operation *y) {
      return x->isBeforeInBlock(y);
    });
    SmallVector<Type> types;
    for (unsigned i : others)
      types.push_back(results[i].getType());
    OpBuilder b(fusion);
    auto rest = kiln::FusionOp::create(b, fusion.getLoc(), types,
                                       b.getStringAttr("elementwise"));
    b.createBlock(&rest.getBody());
    IRMapping mapping;
    mapping.map(kept, stored);
    for (Operation *op : ordered)
      b.clone(*op, mapping);
    SmallVector<Value> yielded;
    for (unsigned i : others)
      yielded.push_back(mapping.lookup(results[i]));
    kiln::YieldOp::create(b, fusion.getLoc(), yielded);
    for (auto [i, index] : llvm::enumerate(others))
      fusion.getResult(index).replaceAllUsesWith(rest.getResult(i));
  }
  for (auto [i, v] : llvm::enumerate(results)) {
    if (v == kept)
      fusion.getResult(i).replaceAllUsesWith(stored);
    else if (auxKept && v == auxKept)
      fusion.getResult(i).replaceAllUsesWith(aux);
  }
  fusion.erase();
}

Value Matcher::paddedFilter(Value filter, int64_t paddedChannels,
                            kiln::FusionOp fusion, bool dryRun,
                            RankedTensorType view) {
  ml_program::GlobalOp global = filterGlobal(filter, module);
  std::optional<std::vector<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  if (!bytes)
    return nullptr;
  auto stored = cast<RankedTensorType>(filter.getType());
  auto type = view ? view : stored;
  if (type.getNumElements() != stored.getNumElements())
    return nullptr;
  if (dryRun)
    return filter;
  SmallVector<int64_t> shape(type.getShape());
  int64_t channels = shape.back();
  shape.back() = paddedChannels;
  auto paddedType = RankedTensorType::get(shape, type.getElementType());

  std::string key = (global.getSymName() + "/" + Twine(paddedChannels) +
                     (view ? "/view" : ""))
                        .str();
  ml_program::GlobalOp &padded = paddedFilters[key];
  if (!padded) {
    size_t width = type.getElementType().getIntOrFloatBitWidth() / 8;
    int64_t rows = type.getNumElements() / channels;
    std::vector<char> data(rows * paddedChannels * width, 0);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&data[r * paddedChannels * width],
                  bytes->data() + r * channels * width, channels * width);
    std::string name = (global.getSymName() + "_cpad").str();
    // A resource key, like the importer's: letters, digits and '_'.
    std::string blobKey = name;
    for (char &c : blobKey)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(data), alignof(uint64_t));
    auto value =
        DenseResourceElementsAttr::get(paddedType, blobKey, std::move(blob));
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(global);
    padded = ml_program::GlobalOp::create(b, global.getLoc(), name, paddedType,
                                          /*is_mutable=*/false, value,
                                          b.getStringAttr("private"));
    // The same attributes (a tf32 rounding mark, say), and one more step.
    for (NamedAttribute attr : global->getDiscardableAttrs())
      padded->setAttr(attr.getName(), attr.getValue());
    SmallVector<int64_t> low(shape.size(), 0), high(shape.size(), 0);
    high.back() = paddedChannels - channels;
    std::string origin = getWeightOrigin(global);
    if (view)
      origin = appendOriginStep(origin, "reshape", type.getShape());
    setWeightOrigin(padded, appendOriginStep(origin, "pad", low, high));
    SymbolTable(module).insert(padded); // renames on a clash
    replacedWeights.insert(global);
  }
  OpBuilder b(fusion);
  return ml_program::GlobalLoadConstOp::create(
      b, fusion.getLoc(), paddedType,
      FlatSymbolRefAttr::get(padded.getSymNameAttr()));
}

void Matcher::eraseUnreadWeights() {
  for (Operation *global : replacedWeights) {
    SmallVector<Operation *> deadLoads;
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(global, module))
      for (const SymbolTable::SymbolUse &use : *uses)
        if (isa<ml_program::GlobalLoadConstOp>(use.getUser()) &&
            use.getUser()->use_empty())
          deadLoads.push_back(use.getUser());
    for (Operation *load : deadLoads)
      load->erase();
    if (SymbolTable::symbolKnownUseEmpty(global, module))
      global->erase();
  }
  replacedWeights.clear();
}

LogicalResult Matcher::rewriteConvolution(kiln::FusionOp fusion,
                                          std::string &why) {
  kiln::ConvOp conv;
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    if (auto c = dyn_cast<kiln::ConvOp>(op)) {
      if (conv) {
        why = "the region has two convolutions";
        return failure();
      }
      conv = c;
    } else if (isa<kiln::MatmulOp, kiln::ConvTransposeOp, kiln::ReduceOp,
                   kiln::SoftmaxOp, kiln::LogSoftmaxOp, kiln::LayerNormOp,
                   kiln::PoolOp, kiln::GlobalPoolOp>(op)) {
      why = "the region has a " + op.getName().getStringRef().str();
      return failure();
    }
  }
  auto inputType = cast<RankedTensorType>(conv.getInput().getType());
  auto filterType = cast<RankedTensorType>(conv.getFilter().getType());
  auto resultType = cast<RankedTensorType>(conv.getType());
  why = unsupportedConvolution(conv, inputType, filterType, resultType);
  if (!why.empty())
    return failure();
  ArrayRef<int64_t> in = inputType.getShape(), out = resultType.getShape();
  ArrayRef<int64_t> window = filterType.getShape();
  int64_t groups = static_cast<int64_t>(conv.getGroups());
  if (groups > 1 && window[3] == 1)
    return rewriteDepthwise(fusion, conv, why);

  bool tf32 = conv->hasAttr(KilnDialect::Tf32AttrHelper::getNameStr());
  std::optional<cx::DType> operandType = kernelDType(inputType);
  if (!operandType ||
      inputType.getElementType() != filterType.getElementType() ||
      kernelDType(resultType) != cx::DType::F32) {
    why = "operand or accumulator types the kernels do not take";
    return failure();
  }
  cx::Family family = *operandType != cx::DType::F32 ? cx::Family::MmaF16
                      : tf32                         ? cx::Family::MmaTf32
                                                     : cx::Family::SimtF32;

  llvm::SetVector<Operation *> epilogue;
  std::optional<unsigned> auxIndex;
  std::optional<unsigned> storedIndex =
      storedEpilogue(fusion, conv, epilogue, why, &auxIndex);
  if (!storedIndex)
    return failure();
  Value result = fusion.getYield().getValues()[*storedIndex];
  Value auxResult =
      auxIndex ? fusion.getYield().getValues()[*auxIndex] : Value();

  cx::ConvProblem cp = convProblemOf(conv);
  cp.inputType = *operandType;

  // The filter, channel-padded at compile time when the kernel needs it.
  Value filter =
      tf32 ? peelTf32Rounding(conv.getFilter()) : conv.getFilter();
  Value filterSource = contiguousSource(filter, fusion);
  int64_t paddedChannels =
      static_cast<int64_t>(cx::paddedGroupChannels(cp));
  bool padFilter = paddedChannels != window[3];
  if (padFilter && (!filterSource || filterSource != filter ||
                    !paddedFilter(filter, paddedChannels, fusion,
                                  /*dryRun=*/true))) {
    why = "a filter computed at run time whose channels need padding to " +
          std::to_string(paddedChannels);
    return failure();
  }
  Value input = tf32 ? peelTf32Rounding(conv.getInput()) : conv.getInput();
  Value inputSource = contiguousSource(input, fusion);
  if (!inputSource)
    inputSource = materialize(input, fusion);
  if (!filterSource)
    filterSource = materialize(filter, fusion);

  // Rows are the output pixels (n, p, q), the column is the channel across
  // groups: the batch dimensions of the result are folded into the rows.
  OutputIndexing indexing;
  indexing.shape.assign(out.begin(), out.end());
  indexing.batchFoldedIntoRows = true;
  FailureOr<EmittedEpilogue> emitted =
      emitRegionEpilogue(fusion, conv, epilogue.getArrayRef(), result,
                         indexing, conv.getBias(), why, auxResult);
  if (failed(emitted))
    return failure();
  cp.outputType = emitted->outputType;
  cx::GemmProblem problem = cx::convolutionAsGemm(cp);
  FailureOr<cx::GemmKernels> kernels =
      compile(fusion, problem, family, *emitted, "kiln_conv_", why);
  if (failed(kernels))
    return failure();
  if (selecting())
    return success();

  if (padFilter)
    filterSource = paddedFilter(filter, paddedChannels, fusion,
                                /*dryRun=*/false);
  Value aux;
  Value stored = buildCalls(
      fusion, *kernels, problem, inputSource, filterSource, emitted->operands,
      cast<RankedTensorType>(result.getType()),
      auxResult ? cast<RankedTensorType>(auxResult.getType())
                : RankedTensorType(),
      &aux);
  report.push_back(
      llvm::formatv("{0}: {1}, conv {2}x{3}x{4}x{5} * {6}x{7}x{8}x{9}, "
                    "groups={10}, M={11} N={12} K={13}{14}; {15}",
                    kernels->kernels.front().name, kernels->config.describe(),
                    in[0], in[1], in[2], in[3], window[0], window[1],
                    window[2], window[3], groups, problem.m, problem.n,
                    problem.k,
                    std::string(kernels->semaphoreCount
                                    ? ", split-K finished in-kernel"
                                    : "") +
                        (aux ? ", + a second output" : "") +
                        // The implicit GEMM's im2col gather is cp.async's.
                        (kernels->config.family == cx::Family::WgmmaF16
                             ? ", producer cp.async"
                             : ""),
                    lastConfigOrigin)
          .str());
  replaceResults(fusion, *storedIndex, stored, auxIndex, aux);
  return success();
}

} // namespace kiln::templates
