//===- MatchDepthwise.cpp - Depthwise convolution regions to a kernel -----===//
//
// A region anchored on a 2-D NHWC depthwise kiln.conv (groups = C, O a
// multiple of C)
// becomes one call of the CUDA-core depthwise kernel
// (include/kiln/Target/CUDA/DepthwiseKernels.h): the image is read in place,
// the conv's bias and the region's elementwise ops (batch norm, residual,
// activation, casts) run on each accumulator. The filter, [O][KH][KW][1]
// after kiln-assign-layout, is reordered at compile time to [KH][KW][O][1]
// (one vector load per tap) into a new weight global whose origin records
// the transpose, so `kiln-run --weights` rebinds it.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Target/CUDA/DepthwiseKernels.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

#include <cctype>

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

Value Matcher::depthwiseFilter(Value filter, kiln::FusionOp fusion,
                               bool dryRun) {
  // The weight, through the reshapes that make it [O][KH][KW][1] (the
  // importer's [O][1][KH][KW] has the same bytes).
  Value source = contiguousSource(filter, fusion);
  ml_program::GlobalOp global =
      source ? filterGlobal(source, module) : nullptr;
  std::optional<std::vector<char>> bytes =
      global ? globalBytes(global) : std::nullopt;
  auto type = cast<RankedTensorType>(filter.getType());
  if (!bytes || type.getRank() != 4 || type.getShape()[3] != 1)
    return nullptr;
  if (dryRun)
    return filter;
  ArrayRef<int64_t> shape = type.getShape(); // [C][KH][KW][1]
  auto reorderedType = RankedTensorType::get(
      {shape[1], shape[2], shape[0], 1}, type.getElementType());
  std::string key = (global.getSymName() + "/depthwise").str();
  // The key names the global; its bytes are [O][KH][KW] whatever its shape.
  ml_program::GlobalOp &reordered = paddedFilters[key];
  if (!reordered) {
    cx::ConvProblem shapeOnly;
    shapeOnly.o = static_cast<uint64_t>(shape[0]);
    shapeOnly.kh = static_cast<uint32_t>(shape[1]);
    shapeOnly.kw = static_cast<uint32_t>(shape[2]);
    size_t width = type.getElementType().getIntOrFloatBitWidth() / 8;
    std::vector<uint8_t> data =
        cx::reorderDepthwiseFilter(shapeOnly, bytes->data(), width);
    std::string name = (global.getSymName() + "_dw").str();
    std::string blobKey = name;
    for (char &c : blobKey)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(reinterpret_cast<const char *>(data.data()),
                       data.size()),
        alignof(uint64_t));
    auto value = DenseResourceElementsAttr::get(reorderedType, blobKey,
                                                std::move(blob));
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointAfter(global);
    reordered = ml_program::GlobalOp::create(
        b, global.getLoc(), name, reorderedType, /*is_mutable=*/false, value,
        b.getStringAttr("private"));
    for (NamedAttribute attr : global->getDiscardableAttrs())
      reordered->setAttr(attr.getName(), attr.getValue());
    std::string origin = getWeightOrigin(global);
    if (cast<RankedTensorType>(global.getType()).getShape() != shape)
      origin = appendOriginStep(origin, "reshape", shape);
    setWeightOrigin(reordered,
                    appendOriginStep(origin, "transpose", {1, 2, 0, 3}));
    SymbolTable(module).insert(reordered); // renames on a clash
    replacedWeights.insert(global);
  }
  OpBuilder b(fusion);
  return ml_program::GlobalLoadConstOp::create(
      b, fusion.getLoc(), reorderedType,
      FlatSymbolRefAttr::get(reordered.getSymNameAttr()));
}

LogicalResult Matcher::rewriteDepthwise(kiln::FusionOp fusion,
                                        kiln::ConvOp conv, std::string &why) {
  auto inputType = cast<RankedTensorType>(conv.getInput().getType());
  auto filterType = cast<RankedTensorType>(conv.getFilter().getType());
  auto resultType = cast<RankedTensorType>(conv.getType());
  ArrayRef<int64_t> in = inputType.getShape(), out = resultType.getShape();
  ArrayRef<int64_t> window = filterType.getShape();

  std::optional<cx::DType> operandType = kernelDType(inputType);
  if (!operandType ||
      inputType.getElementType() != filterType.getElementType() ||
      kernelDType(resultType) != cx::DType::F32) {
    why = "depthwise: operand or accumulator types the kernel does not take";
    return failure();
  }
  cx::ConvProblem cp = convProblemOf(conv);
  cp.inputType = *operandType;
  cp.outputType = cx::DType::F32; // checked again once the epilogue is known
  if (std::string reason = cx::depthwiseUnsupportedReason(cp);
      !reason.empty()) {
    why = "depthwise: " + reason;
    return failure();
  }

  llvm::SetVector<Operation *> epilogue;
  std::optional<unsigned> storedIndex =
      storedEpilogue(fusion, conv, epilogue, why);
  if (!storedIndex)
    return failure();
  Value result = fusion.getYield().getValues()[*storedIndex];

  bool tf32 = conv->hasAttr(KilnDialect::Tf32AttrHelper::getNameStr());
  Value filter = tf32 ? peelTf32Rounding(conv.getFilter()) : conv.getFilter();
  if (!depthwiseFilter(filter, fusion, /*dryRun=*/true)) {
    why = "depthwise: the filter is computed at run time";
    return failure();
  }
  Value input = tf32 ? peelTf32Rounding(conv.getInput()) : conv.getInput();
  Value inputSource = contiguousSource(input, fusion);
  if (!inputSource)
    inputSource = materialize(input, fusion);

  OutputIndexing indexing;
  indexing.shape.assign(out.begin(), out.end());
  indexing.batchFoldedIntoRows = true;
  FailureOr<EmittedEpilogue> emitted =
      emitRegionEpilogue(fusion, conv, epilogue.getArrayRef(), result,
                         indexing, conv.getBias(), why);
  if (failed(emitted))
    return failure();
  cp.outputType = emitted->outputType;

  cx::DepthwiseConfig config;
  if (selecting()) {
    selected = toAttr(module.getContext(), cx::pickDepthwiseConfig(cp));
    return success();
  }
  auto attr = configOf<DepthwiseConfigAttr>(fusion, why);
  if (!attr)
    return failure();
  config = fromAttr(attr);
  if (std::string reason = cx::depthwiseUnsupportedReason(cp, config);
      !reason.empty()) {
    why = reason;
    return failure();
  }

  cx::Epilogue ep;
  ep.customBody = emitted->body;
  for (size_t i = 0; i < emitted->operands.size(); ++i)
    ep.customOperands.push_back("epilogue" + std::to_string(i));
  cx::GenerateOptions options;
  options.smVersion = smVersion;
  options.name = kiln::kEntryPlaceholder.str();
  kiln::runtime::Expected<cx::GemmKernels> kernels =
      cx::specializeDepthwise(cp, config, ep, options);
  if (!kernels) {
    why = kernels.error().message();
    return failure();
  }
  nameKernels(*kernels, "kiln_dwconv_");
  if (!lastKernelShared)
    declareBinary(*kernels, kernels->kernels.front(), fusion.getLoc());

  Value reordered = depthwiseFilter(filter, fusion, /*dryRun=*/false);
  SmallVector<std::pair<std::string, Value>> pointers = {
      {"A", inputSource}, {"B", reordered}};
  for (auto [i, operand] : llvm::enumerate(emitted->operands))
    pointers.push_back({"epilogue" + std::to_string(i), operand});
  std::string described = cx::describeDepthwise(config);
  Value stored = buildKernelCall(
      fusion, kernels->kernels.front(), pointers,
      cast<RankedTensorType>(result.getType()), attr,
      static_cast<int64_t>(2 * cp.n * cp.p * cp.q * cp.o * cp.kh * cp.kw));
  report.push_back(
      llvm::formatv("{0}: {1}, depthwise conv {2}x{3}x{4}x{5} * {6}x{7}, "
                    "stride {8}",
                    kernels->kernels.front().name, described, in[0], in[1],
                    in[2], in[3], window[1], window[2], cp.strideH)
          .str());
  replaceResults(fusion, *storedIndex, stored);
  return success();
}

} // namespace kiln::templates
