//===- FuseQuantized.cpp - Quantized contractions into int8 regions -------===//
//
// kiln-fuse-quantized (issue 26): finds the compositions the importer writes
// for QLinearMatMul, MatMulInteger, QLinearConv, ConvInteger and QDQ
// (DequantizeLinear -> MatMul/Conv -> QuantizeLinear, in int8 or float8)
// around each kiln.matmul and kiln.conv with a constant weight
// (QuantizedChains.h), and
//   - puts each chain into a `kiln.fusion` region of kind `quantized_matmul`
//     or, for a channels-last convolution, `quantized_conv` (option
//     `regions`), which kiln-select-contraction-kernels gives an `mma_s8`
//     (float8: `wgmma_f8` or `mma_f8`) config and kiln-match-contractions
//     makes the int8 (fp8) tensor-core kernel (an implicit GEMM for
//     convolutions); the region's ops are the chain
//     itself, so a region no kernel takes still computes the exact fallback;
//   - records, on the function, one line per chain that stays on the exact
//     fallback and why (`kiln.quantized_report`, kilnc --stats);
//   - with `report`, emits one remark per chain: the kernel's parameters,
//     or why it falls back.
// Options `matmuls` and `convolutions` restrict it to one kind of chain:
// kilnc takes matmuls before sibling fusion and convolutions once
// kiln-assign-layout has made them NHWC (docs/architecture.md, "Quantized
// models").
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/QuantizedChains.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/IRMapping.h"

#include <string>

namespace kiln {
#define GEN_PASS_DEF_FUSEQUANTIZEDPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// "node 'Foo_3'" from the importer's NameLoc, else the op's name.
std::string nodeName(Operation *op) {
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto named = dyn_cast<NameLoc>(loc))
    return "node '" + named.getName().str() + "'";
  return op->getName().getStringRef().str();
}

/// Replaces the chain by one region computing its result from its 8-bit
/// operands; its constants are computed in the region too, so that kiln-fuse
/// cannot move their reshapes and casts into regions of their own.
void formRegion(const QuantizedChain &chain, StringRef kind) {
  SmallVector<Operation *> ops = chainOps(chain);
  Operation *last = chain.result.getDefiningOp();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  auto fusion = FusionOp::create(b, chain.contraction->getLoc(),
                                 TypeRange{chain.result.getType()},
                                 b.getStringAttr(kind));
  b.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Operation *op : ops)
    b.clone(*op, mapping);
  YieldOp::create(b, chain.contraction->getLoc(),
                  ValueRange{mapping.lookup(chain.result)});
  Value(chain.result).replaceUsesWithIf(fusion.getResult(0), [&](OpOperand &use) {
    return !fusion->isProperAncestor(use.getOwner());
  });
  // The originals nothing else reads go; one read elsewhere (a dequantized
  // activation also used by a float op) stays for that reader.
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty())
      op->erase();
}

/// Whether `v` holds one element (a per-tensor scale or zero point).
bool isScalar(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() && type.getNumElements() == 1;
}

/// kiln-assign-layout makes a convolution NHWC by transposing its operand.
/// When that operand is a per-tensor dequantize of an 8-bit tensor (a cast
/// up, then sub/mul/add by scalars: a graph input's QDQ, which nothing had
/// made NHWC before), the transpose moves below the cast: the 8-bit tensor
/// is transposed and dequantized after, which computes the same values and
/// leaves the chain's A a dequantized 8-bit tensor the int8 kernel reads.
void sinkTransposeBelowDequantize(ConvOp conv) {
  // A transpose, or a reshape where one of the dims moved is 1 (what
  // canonicalization makes of such a transpose: an image of one channel).
  Operation *transpose = conv->getOperand(0).getDefiningOp();
  if (!isa_and_nonnull<TransposeOp, ReshapeOp>(transpose))
    return;
  // From the transpose's input down to the cast up from 8 bits.
  SmallVector<Operation *> chain;
  Value v = transpose->getOperand(0);
  while (true) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getNumResults() != 1)
      return;
    chain.push_back(def);
    if (auto cast = dyn_cast<CastOp>(def)) {
      Type from = getElementTypeOrSelf(cast.getInput());
      if (!from.isIntOrFloat() || from.getIntOrFloatBitWidth() != 8)
        return; // int8, uint8 or float8 bytes
      break;
    }
    if (!isa<MulOp, SubOp, AddOp>(def))
      return;
    Value lhs = def->getOperand(0), rhs = def->getOperand(1);
    if (isScalar(rhs) && !isScalar(lhs))
      v = lhs;
    else if (isScalar(lhs) && !isScalar(rhs))
      v = rhs;
    else
      return;
  }
  OpBuilder b(transpose);
  Value bytes = cast<CastOp>(chain.back()).getInput();
  IRMapping mapping;
  mapping.map(transpose->getOperand(0), bytes);
  auto movedType = cast<RankedTensorType>(transpose->getResult(0).getType());
  Operation *moved = b.clone(*transpose, mapping);
  moved->getResult(0).setType(
      movedType.clone(getElementTypeOrSelf(bytes.getType())));
  mapping.clear();
  mapping.map(bytes, moved->getResult(0));
  Value last;
  for (Operation *op : llvm::reverse(chain)) {
    Operation *clone = b.clone(*op, mapping);
    Type element = getElementTypeOrSelf(op->getResult(0).getType());
    clone->getResult(0).setType(movedType.clone(element));
    last = clone->getResult(0);
  }
  transpose->getResult(0).replaceAllUsesWith(last);
  transpose->erase();
  for (Operation *op : chain)
    if (op->use_empty())
      op->erase();
}

/// "fp8" when the contraction's A is a dequantized float8 tensor (a cast up
/// from float8, then a scale and zero point), else "int8": which kernel a
/// chain's remark and report line name.
StringRef kernelKind(Operation *contraction) {
  Value v = contraction->getOperand(0);
  while (Operation *def = v.getDefiningOp()) {
    if (isa<MulOp, SubOp, ReshapeOp, TransposeOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    if (auto cast = dyn_cast<CastOp>(def)) {
      Type from = getElementTypeOrSelf(cast.getInput());
      if (isa<FloatType>(from) && from.getIntOrFloatBitWidth() == 8)
        return "fp8";
    }
    break;
  }
  return "int8";
}

struct FuseQuantizedPass
    : kiln::impl::FuseQuantizedPassBase<FuseQuantizedPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> contractions;
    func.walk([&](Operation *op) {
      if (op->getParentOfType<FusionOp>())
        return;
      if ((matmuls && isa<MatmulOp>(op)) || (convolutions && isa<ConvOp>(op)))
        contractions.push_back(op);
    });
    // An earlier run's lines stay first.
    SmallVector<Attribute> lines;
    StringRef reportName = KilnDialect::QuantizedReportAttrHelper::getNameStr();
    if (auto earlier = func->getAttrOfType<ArrayAttr>(reportName))
      llvm::append_range(lines, earlier.getValue());
    size_t earlierLines = lines.size();
    Builder b(func.getContext());
    if (convolutions)
      for (Operation *op : contractions)
        if (auto conv = dyn_cast<ConvOp>(op))
          sinkTransposeBelowDequantize(conv);
    for (Operation *op : contractions) {
      std::string why;
      std::optional<QuantizedChain> chain = matchQuantizedChain(op, why);
      if (chain && chain->conv)
        why = convolutionFallback(cast<ConvOp>(op));
      if (!chain || !why.empty()) {
        if (why.empty())
          continue; // Not a quantized chain.
        StringRef kind = kernelKind(op);
        if (report)
          op->emitRemark() << kind << " fallback: " << why;
        lines.push_back(b.getStringAttr(nodeName(op) + ": exact fallback (no " +
                                        kind + " kernel): " + why));
        continue;
      }
      if (report)
        op->emitRemark() << (chain->fp8 ? "fp8" : "int8") << " kernel "
                         << describeChain(*chain);
      if (regions)
        formRegion(*chain,
                   chain->conv ? kQuantizedConvKind : kQuantizedMatmulKind);
    }
    if (lines.size() != earlierLines)
      func->setAttr(reportName, b.getArrayAttr(lines));
  }

  /// Why a matched convolution chain cannot take the int8 kernel, or empty.
  static std::string convolutionFallback(ConvOp conv) {
    auto filter = cast<RankedTensorType>(conv.getFilter().getType());
    if (filter.getRank() != 4)
      return "a 1-D or 3-D convolution (the int8 kernel takes 2-D ones)";
    if (conv.getDataFormat() != DataFormat::ChannelsLast)
      return "a channels-first convolution (the int8 kernel reads NHWC "
             "images: compile with --layout=nhwc or auto)";
    if (conv.getGroups() > 1 && filter.getShape().back() == 1)
      return "a depthwise convolution (one channel per group: the int8 "
             "kernel's 16-channel chunks would be 15/16 zeros)";
    return "";
  }
};

} // namespace
