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
// Regions that stay generic, with the reason: NCHW or 1-D/3-D convolutions,
// depthwise ones (one input channel per group: 7/8 of the K chunk would be
// zeros; a CUDA-core kernel suits them), dynamic shapes, a filter computed
// at run time whose channels need padding, and everything a matmul region
// can fail on (MatchContractions.cpp).
//
//===----------------------------------------------------------------------===//

#include "RegionMatcher.h"

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"

#include <cctype>
#include <cstring>

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

namespace {

/// The row-major bytes of a weight global's value, if they are known.
std::optional<ArrayRef<char>> globalBytes(ml_program::GlobalOp global) {
  auto type = dyn_cast<RankedTensorType>(global.getType());
  if (!type || !type.hasStaticShape() || global.getIsMutable())
    return std::nullopt;
  size_t size = type.getNumElements() *
                (type.getElementType().getIntOrFloatBitWidth() / 8);
  if (auto resource =
          dyn_cast_or_null<DenseResourceElementsAttr>(global.getValueAttr())) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != size)
      return std::nullopt; // elided
    return blob->getData();
  }
  auto dense = dyn_cast_or_null<DenseElementsAttr>(global.getValueAttr());
  if (!dense || dense.isSplat() || dense.getRawData().size() != size)
    return std::nullopt;
  return dense.getRawData();
}

/// The weight global `filter` loads, if it is one.
ml_program::GlobalOp filterGlobal(Value filter, ModuleOp module) {
  auto load = filter.getDefiningOp<ml_program::GlobalLoadConstOp>();
  if (!load)
    return nullptr;
  return SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
      module, load.getGlobal());
}

} // namespace

Value Matcher::paddedFilter(Value filter, int64_t paddedChannels,
                            kiln::FusionOp fusion, bool dryRun) {
  ml_program::GlobalOp global = filterGlobal(filter, module);
  std::optional<ArrayRef<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  if (!bytes)
    return nullptr;
  auto type = cast<RankedTensorType>(filter.getType());
  if (dryRun)
    return filter;
  SmallVector<int64_t> shape(type.getShape());
  int64_t channels = shape.back();
  shape.back() = paddedChannels;
  auto paddedType = RankedTensorType::get(shape, type.getElementType());

  std::string key =
      (global.getSymName() + "/" + Twine(paddedChannels)).str();
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
    setWeightOrigin(padded, appendOriginStep(getWeightOrigin(global), "pad",
                                             low, high));
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
  if (fusion.getNumResults() != 1) {
    why = "the region has more than one result";
    return failure();
  }
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
  if (resultType.getRank() != 4) {
    why = "a 1-D or 3-D convolution";
    return failure();
  }
  if (conv.getDataFormat() != kiln::DataFormat::ChannelsLast) {
    why = "an nchw convolution (the kernels read nhwc)";
    return failure();
  }
  if (!inputType.hasStaticShape() || !filterType.hasStaticShape() ||
      !resultType.hasStaticShape()) {
    why = "dynamic shapes";
    return failure();
  }
  ArrayRef<int64_t> in = inputType.getShape(), out = resultType.getShape();
  ArrayRef<int64_t> window = filterType.getShape();
  int64_t groups = static_cast<int64_t>(conv.getGroups());
  if (groups > 1 && window[3] == 1) {
    why = "depthwise";
    return failure();
  }

  bool tf32 = conv->hasAttr("kiln.tf32");
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
  if (failed(collectEpilogue(fusion, conv, epilogue, why)))
    return failure();

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
  cp.groups = groups;
  cp.p = out[1], cp.q = out[2];
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
  FailureOr<EmittedEpilogue> emitted = emitRegionEpilogue(
      fusion, conv, epilogue.getArrayRef(), indexing, conv.getBias(), why);
  if (failed(emitted))
    return failure();
  cp.outputType = emitted->outputType;
  cx::GemmProblem problem = cx::convolutionAsGemm(cp);
  FailureOr<cx::GemmKernels> kernels =
      compile(problem, family, *emitted, "kiln_conv_", why);
  if (failed(kernels))
    return failure();

  if (padFilter)
    filterSource = paddedFilter(filter, paddedChannels, fusion,
                                /*dryRun=*/false);
  auto outType =
      cast<RankedTensorType>(fusion.getYield().getValues()[0].getType());
  Value replacement = buildCalls(fusion, *kernels, problem, inputSource,
                                 filterSource, emitted->operands, outType);
  fusion.getResult(0).replaceAllUsesWith(replacement);
  fusion.erase();
  return success();
}

} // namespace kiln::templates
