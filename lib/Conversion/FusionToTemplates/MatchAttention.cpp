//===- MatchAttention.cpp - Attention regions to the fused kernel ---------===//
//
// A kiln.fusion region of kind "attention" (kiln-fuse's rule 5) holds
//   s = matmul(Q, Kt) -> elementwise (scale, masks) -> softmax(last axis)
//     -> casts -> matmul(P, V) -> elementwise (the output's epilogue)
// and becomes one flash-attention kernel (include/kiln/Target/CUDA/
// AttentionKernels.h). Q, K and V are read where they lie: each is traced
// back through reshapes, transposes and broadcasts (the head split, K's
// transpose, GQA's expand of K and V) and multiplications by constants
// (a scale on Q or K) to a buffer with element strides. An operand that is
// computed some other way is split off into a region of its own first. The
// ops between the first matmul and the softmax become the kernel's score
// body, those after the second matmul its output epilogue (both through
// EpilogueEmitter; a causal `kiln.select` on a constant triangle becomes an
// index comparison, and lets the kernel skip key tiles past the diagonal).
//
// A region that does not fit is split back into its scores part (first
// matmul to softmax, a generic row kernel) and its P V matmul, which the
// matmul path matches as usual; the report says why.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Target/CUDA/AttentionKernels.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

namespace {

/// One dimension of a strided view: index i is at i / div * stride
/// elements (div > 1: a broadcast head dimension merged into a real one,
/// as GQA's expand + reshape makes it).
struct ViewDim {
  int64_t size = 1, stride = 0, div = 1;
};

/// A tensor as element strides over a buffer.
struct StridedView {
  Value buffer;
  SmallVector<ViewDim> dims;
  /// A constant factor the chain multiplied the values by (scale on Q/K).
  double scale = 1.0;
  /// Elements from the buffer's start to the view's first element (a
  /// slice of a horizontally fused projection: Q, K or V of one GEMM).
  int64_t offset = 0;
};

StridedView packedView(Value buffer) {
  StridedView view;
  view.buffer = buffer;
  ArrayRef<int64_t> shape = cast<ShapedType>(buffer.getType()).getShape();
  int64_t stride = 1;
  view.dims.resize(shape.size());
  for (int64_t i = shape.size() - 1; i >= 0; --i) {
    view.dims[i] = {shape[i], stride, 1};
    stride *= shape[i];
  }
  return view;
}

/// Reshape: dimensions of size 1 are dropped, the rest grouped by equal
/// products; a group that merges must be packed (or be a real dimension
/// merged with a broadcast one inside it), a group that splits one
/// dimension gets packed strides.
LogicalResult reshapeView(StridedView &view, ArrayRef<int64_t> shape) {
  SmallVector<ViewDim> in;
  for (const ViewDim &d : view.dims)
    if (d.size != 1)
      in.push_back(d);
  SmallVector<ViewDim> out;
  size_t i = 0;
  for (size_t o = 0; o < shape.size();) {
    if (shape[o] == 1) {
      out.push_back({1, 0, 1});
      ++o;
      continue;
    }
    if (i >= in.size())
      return failure();
    // Grow the input group and the output group until their products meet.
    size_t i1 = i + 1, o1 = o + 1;
    int64_t inProduct = in[i].size, outProduct = shape[o];
    while (inProduct != outProduct) {
      if (inProduct < outProduct) {
        if (i1 >= in.size())
          return failure();
        inProduct *= in[i1++].size;
      } else {
        if (o1 >= shape.size())
          return failure();
        outProduct *= shape[o1++];
      }
    }
    // Trailing 1s of the output group belong to the next group.
    ViewDim merged = in[i1 - 1];
    bool packed = true;
    for (size_t k = i; k + 1 < i1; ++k)
      packed &= in[k].div == 1 && in[k + 1].div == 1 &&
                in[k].stride == in[k + 1].stride * in[k + 1].size;
    if (i1 - i == 1) {
      merged = in[i];
    } else if (packed) {
      merged = {inProduct, in[i1 - 1].stride, 1};
    } else if (i1 - i == 2 && in[i + 1].stride == 0 && in[i].div == 1 &&
               in[i + 1].div == 1 && o1 - o == 1) {
      merged = {inProduct, in[i].stride, in[i + 1].size};
    } else {
      return failure();
    }
    if (o1 - o == 1) {
      out.push_back(merged);
    } else {
      if (merged.div != 1)
        return failure();
      int64_t stride = merged.stride;
      SmallVector<ViewDim> split;
      for (size_t k = o1; k-- > o;) {
        split.push_back({shape[k], stride, 1});
        stride *= shape[k];
      }
      out.append(split.rbegin(), split.rend());
    }
    i = i1;
    o = o1;
  }
  if (i != in.size())
    return failure();
  view.dims = std::move(out);
  return success();
}

LogicalResult broadcastView(StridedView &view, ArrayRef<int64_t> shape) {
  if (shape.size() < view.dims.size())
    return failure();
  SmallVector<ViewDim> out(shape.size());
  size_t offset = shape.size() - view.dims.size();
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k < offset) {
      out[k] = {shape[k], 0, 1};
      continue;
    }
    ViewDim d = view.dims[k - offset];
    if (d.size == shape[k])
      out[k] = d;
    else if (d.size == 1)
      out[k] = {shape[k], 0, 1};
    else
      return failure();
  }
  view.dims = std::move(out);
  return success();
}

std::optional<double> splatOf(Value v) {
  auto constant = v.getDefiningOp<kiln::ConstantOp>();
  auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue())
                        : DenseElementsAttr();
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

bool isViewOp(Value v) {
  while (auto reshape = v.getDefiningOp<kiln::ReshapeOp>())
    v = reshape.getInput();
  return v.getDefiningOp<kiln::SplitOp>() || v.getDefiningOp<kiln::SliceOp>();
}

/// `v` as strides over a buffer the region reads, through reshapes,
/// transposes, broadcasts and (with `scales`) multiplications or divisions
/// by splat constants; failure when it is computed some other way.
FailureOr<StridedView> traceView(Value v, kiln::FusionOp fusion,
                                 bool scales) {
  SmallVector<Operation *> chain;
  double scale = 1.0;
  while (Operation *def = v.getDefiningOp()) {
    if (isa<kiln::ReshapeOp>(def)) {
      chain.push_back(def);
      v = def->getOperand(0);
      continue;
    }
    if (!inRegion(v, fusion))
      break;
    if (isa<kiln::TransposeOp, kiln::BroadcastOp>(def)) {
      chain.push_back(def);
      v = def->getOperand(0);
      continue;
    }
    if (auto slice = dyn_cast<kiln::SliceOp>(def);
        slice && llvm::all_of(slice.getSteps(),
                              [](int64_t step) { return step == 1; })) {
      chain.push_back(def);
      v = slice.getInput();
      continue;
    }
    if (scales && isa<kiln::MulOp, kiln::DivOp>(def) &&
        def->getOperand(0).getType() == def->getResult(0).getType()) {
      std::optional<double> c = splatOf(def->getOperand(1));
      if (c && *c != 0) {
        scale *= isa<kiln::MulOp>(def) ? *c : 1.0 / *c;
        v = def->getOperand(0);
        continue;
      }
    }
    return failure();
  }
  if (inRegion(v, fusion) || isViewOp(v) || !isa<RankedTensorType>(v.getType()) ||
      !cast<RankedTensorType>(v.getType()).hasStaticShape())
    return failure();
  StridedView view = packedView(v);
  view.scale = scale;
  for (Operation *op : llvm::reverse(chain)) {
    ArrayRef<int64_t> shape =
        cast<ShapedType>(op->getResult(0).getType()).getShape();
    if (auto transpose = dyn_cast<kiln::TransposeOp>(op)) {
      SmallVector<ViewDim> out;
      for (int64_t p : transpose.getPermutation())
        out.push_back(view.dims[p]);
      view.dims = std::move(out);
    } else if (isa<kiln::BroadcastOp>(op)) {
      if (failed(broadcastView(view, shape)))
        return failure();
    } else if (auto slice = dyn_cast<kiln::SliceOp>(op)) {
      // A window: its start moves the base, its extent the size.
      for (auto [d, start] : llvm::enumerate(slice.getStarts())) {
        if (start != 0 && view.dims[d].div != 1)
          return failure();
        view.offset += start * view.dims[d].stride;
        view.dims[d].size = shape[d];
      }
    } else if (failed(reshapeView(view, shape))) {
      return failure();
    }
  }
  return view;
}

/// The (outer, head) strides of the leading dimensions `lead` (those of
/// the problem, of which at most two are not 1), with the head's divisor.
struct Leading {
  cx::AttentionStrides strides;
  int64_t headDiv = 1;
};

/// The problem's leading dimensions: [outer, heads] from the result's
/// leading sizes (the non-1 ones; more than two fail).
FailureOr<std::pair<int64_t, int64_t>>
leadingExtents(ArrayRef<int64_t> lead, SmallVector<int64_t> &which) {
  for (size_t k = 0; k < lead.size(); ++k)
    if (lead[k] != 1)
      which.push_back(k);
  if (which.size() > 2)
    return failure();
  if (which.empty())
    return std::make_pair<int64_t, int64_t>(1, 1);
  if (which.size() == 1)
    return std::make_pair<int64_t, int64_t>(1, int64_t(lead[which[0]]));
  return std::make_pair(lead[which[0]], lead[which[1]]);
}

FailureOr<Leading> leadingOf(const StridedView &view,
                             ArrayRef<int64_t> which) {
  Leading l;
  if (which.size() == 2) {
    const ViewDim &outer = view.dims[which[0]];
    if (outer.div != 1)
      return failure();
    l.strides.outer = outer.stride;
  }
  if (!which.empty()) {
    const ViewDim &head = view.dims[which.back()];
    l.strides.head = head.stride;
    l.headDiv = head.div;
  }
  return l;
}

bool dependsOnOp(Value v, Operation *op, kiln::FusionOp fusion);

/// The ops of `fusion` after `from` that depend on it and that `to`
/// depends on (`to`'s own op included), in block order. What else they
/// read is an input of the chain.
SmallVector<Operation *> between(Operation *from, Value to,
                                 kiln::FusionOp fusion) {
  llvm::SmallPtrSet<Operation *, 16> needed;
  SmallVector<Value> work{to};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || def == from || !inRegion(v, fusion) ||
        !needed.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ops;
  for (Operation &op : fusion.getBody().front().without_terminator())
    if (needed.contains(&op) && from->isBeforeInBlock(&op) &&
        dependsOnOp(op.getResult(0), from, fusion))
      ops.push_back(&op);
  return ops;
}

bool dependsOnOp(Value v, Operation *op, kiln::FusionOp fusion) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !fusion->isProperAncestor(def) || !seen.insert(def).second)
      continue;
    if (def == op)
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

} // namespace

FailureOr<Matcher::AttentionOperand>
Matcher::attentionOperand(Value v, kiln::FusionOp fusion, bool transposed,
                          bool scales, ArrayRef<int64_t> resultShape) {
  // The operand as the problem sees it: [lead..., rows, cols] broadcast to
  // the result's leading dimensions.
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(resultShape.drop_back(2));
  llvm::append_range(shape, type.getShape().take_back(2));
  FailureOr<StridedView> view = traceView(v, fusion, scales);
  if (succeeded(view) && failed(broadcastView(*view, shape)))
    view = failure();
  if (succeeded(view)) {
    // The head dimension (the last for Q and V, the first of the two for
    // Kt) must be contiguous.
    const ViewDim &inner = view->dims[shape.size() - (transposed ? 2 : 1)];
    if (inner.stride != 1 || inner.div != 1 ||
        view->dims[shape.size() - (transposed ? 1 : 2)].div != 1)
      view = failure();
  }
  if (failed(view)) {
    // Computed or laid out another way: a region of its own stores it
    // packed, K with its last two dimensions swapped back.
    Value packed = v;
    OpBuilder b(v.getContext());
    Operation *swap = nullptr;
    if (transposed) {
      b.setInsertionPointAfterValue(v);
      if (!inRegion(v, fusion))
        b.setInsertionPointToStart(&fusion.getBody().front());
      SmallVector<int64_t> perm;
      for (int64_t k = 0; k < type.getRank(); ++k)
        perm.push_back(k);
      std::swap(perm[type.getRank() - 1], perm[type.getRank() - 2]);
      SmallVector<int64_t> swappedShape(type.getShape());
      std::swap(swappedShape[type.getRank() - 1],
                swappedShape[type.getRank() - 2]);
      swap = kiln::TransposeOp::create(
          b, fusion.getLoc(),
          RankedTensorType::get(swappedShape, type.getElementType()), v,
          b.getDenseI64ArrayAttr(perm));
      packed = swap->getResult(0);
    }
    Value stored = materialize(packed, fusion);
    if (swap)
      swap->erase();
    SmallVector<int64_t> storedShape(resultShape.drop_back(2));
    auto storedType = cast<RankedTensorType>(stored.getType());
    llvm::append_range(storedShape, storedType.getShape().take_back(2));
    view = packedView(stored);
    if (failed(broadcastView(*view, storedShape)))
      return failure();
    if (transposed) // Describe it as Kt again: [lead..., D, Sk].
      std::swap(view->dims[storedShape.size() - 1],
                view->dims[storedShape.size() - 2]);
  }
  AttentionOperand out;
  out.buffer = view->buffer;
  out.scale = view->scale;
  out.offset = view->offset;
  size_t rank = shape.size();
  const ViewDim &rows = view->dims[rank - (transposed ? 1 : 2)];
  out.rowStride = rows.stride;
  SmallVector<int64_t> which;
  if (failed(leadingExtents(resultShape.drop_back(2), which)))
    return failure();
  FailureOr<Leading> lead = leadingOf(*view, which);
  if (failed(lead))
    return failure();
  out.outerStride = lead->strides.outer;
  out.headStride = lead->strides.head;
  out.headDiv = lead->headDiv;
  return out;
}

LogicalResult Matcher::rewriteAttention(kiln::FusionOp fusion,
                                        std::string &why) {
  Block &body = fusion.getBody().front();
  SmallVector<kiln::MatmulOp> matmuls;
  kiln::SoftmaxOp softmax;
  for (Operation &op : body.without_terminator()) {
    if (auto m = dyn_cast<kiln::MatmulOp>(op))
      matmuls.push_back(m);
    else if (auto s = dyn_cast<kiln::SoftmaxOp>(op))
      softmax = s;
  }
  if (matmuls.size() != 2 || !softmax) {
    why = "not two matmuls around a softmax";
    return failure();
  }
  kiln::MatmulOp first = matmuls[0], second = matmuls[1];
  auto scoresType = cast<RankedTensorType>(first.getType());
  auto outType = cast<RankedTensorType>(second.getType());
  auto qType = cast<RankedTensorType>(first.getLhs().getType());
  auto vType = cast<RankedTensorType>(second.getRhs().getType());
  if (scoresType.getRank() < 2 || !scoresType.hasStaticShape() ||
      !outType.hasStaticShape() || qType.getRank() < 2 ||
      vType.getRank() < 2) {
    why = "attention with dynamic shapes or 1-D operands";
    return failure();
  }
  if (scoresType.getShape().drop_back(2) != outType.getShape().drop_back(2)) {
    why = "the two matmuls have different batch dimensions";
    return failure();
  }
  // P: the softmax, through casts, is the second matmul's left operand.
  for (Operation *op : between(softmax, second.getLhs(), fusion))
    if (!isa<kiln::CastOp>(op)) {
      why = op->getName().getStringRef().str() + " between softmax and P V";
      return failure();
    }
  if (!dependsOnOp(second.getLhs(), softmax, fusion) &&
      second.getLhs() != softmax.getResult()) {
    why = "the second matmul does not read the softmax";
    return failure();
  }
  // The score ops: from the first matmul to the softmax, elementwise (or a
  // causal select), each on the scores' shape.
  SmallVector<Operation *> scoreOps =
      between(first, softmax.getInput(), fusion);
  ArrayRef<int64_t> scoresShape = scoresType.getShape();
  for (Operation *op : scoreOps)
    if (!hasEpilogueForm(op) ||
        cast<ShapedType>(op->getResult(0).getType()).getShape() !=
            scoresShape) {
      why = op->getName().getStringRef().str() + " in the scores";
      return failure();
    }
  if (!dependsOnOp(softmax.getInput(), first, fusion) &&
      softmax.getInput() != first.getResult()) {
    why = "the softmax does not read the first matmul";
    return failure();
  }
  // Nothing else may read the scores or P (the kernel never stores them).
  llvm::SmallPtrSet<Operation *, 16> inside(scoreOps.begin(), scoreOps.end());
  inside.insert(first);
  inside.insert(softmax);
  for (Operation *op : between(softmax, second.getLhs(), fusion))
    inside.insert(op);
  for (Operation &op : body) {
    if (&op == second.getOperation() || inside.contains(&op))
      continue;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp(); def && inside.contains(def)) {
        why = "a value between the matmuls is used elsewhere";
        return failure();
      }
  }
  llvm::SetVector<Operation *> epilogue;
  std::optional<unsigned> storedIndex =
      storedEpilogue(fusion, second, epilogue, why);
  if (!storedIndex)
    return failure();
  Value result = fusion.getYield().getValues()[*storedIndex];

  bool tf32 = first->hasAttr(KilnDialect::Tf32AttrHelper::getNameStr());
  Value qValue = tf32 ? peelTf32Rounding(first.getLhs()) : first.getLhs();
  Value kValue = tf32 ? peelTf32Rounding(first.getRhs()) : first.getRhs();
  Value vValue = second->hasAttr(KilnDialect::Tf32AttrHelper::getNameStr())
                     ? peelTf32Rounding(second.getRhs())
                     : second.getRhs();
  std::optional<cx::DType> inputType = kernelDType(qValue.getType());
  if (!inputType || kernelDType(kValue.getType()) != inputType ||
      kernelDType(vValue.getType()) != inputType ||
      kernelDType(scoresType) != cx::DType::F32 ||
      kernelDType(outType) != cx::DType::F32) {
    why = "operand or accumulator types the attention kernel does not take";
    return failure();
  }

  cx::AttentionProblem problem;
  problem.inputType = *inputType;
  int64_t rank = scoresType.getRank();
  problem.seqQ = scoresShape[rank - 2];
  problem.seqK = scoresShape[rank - 1];
  problem.headDim = qType.getShape().back();
  problem.valueDim = outType.getShape().back();
  SmallVector<int64_t> which;
  FailureOr<std::pair<int64_t, int64_t>> extents =
      leadingExtents(scoresShape.drop_back(2), which);
  if (failed(extents)) {
    why = "more than two batch dimensions that are not 1";
    return failure();
  }
  problem.outer = extents->first;
  problem.heads = extents->second;
  if (std::string reason = cx::unsupportedReason(problem); !reason.empty()) {
    why = "attention: " + reason;
    return failure();
  }

  FailureOr<AttentionOperand> q =
      attentionOperand(qValue, fusion, false, true, scoresShape);
  FailureOr<AttentionOperand> k =
      attentionOperand(kValue, fusion, true, true, scoresShape);
  FailureOr<AttentionOperand> v =
      attentionOperand(vValue, fusion, false, false, outType.getShape());
  if (failed(q) || failed(k) || failed(v) || q->headDiv != 1) {
    why = "an operand the attention kernel cannot index";
    return failure();
  }
  problem.q = {static_cast<uint64_t>(q->outerStride),
               static_cast<uint64_t>(q->headStride),
               static_cast<uint64_t>(q->rowStride),
               static_cast<uint64_t>(q->offset)};
  problem.k = {static_cast<uint64_t>(k->outerStride),
               static_cast<uint64_t>(k->headStride),
               static_cast<uint64_t>(k->rowStride),
               static_cast<uint64_t>(k->offset)};
  problem.v = {static_cast<uint64_t>(v->outerStride),
               static_cast<uint64_t>(v->headStride),
               static_cast<uint64_t>(v->rowStride),
               static_cast<uint64_t>(v->offset)};
  problem.keyHeadGroup = k->headDiv;
  problem.valueHeadGroup = v->headDiv;
  double operandScale = q->scale * k->scale;

  // The score body; a causal select lets the kernel skip key tiles when
  // nothing after it can lift a masked score above -1e30.
  OutputIndexing scoreIndexing;
  scoreIndexing.shape.assign(scoresShape.begin(), scoresShape.end());
  FailureOr<EmittedEpilogue> score =
      emitRegionEpilogue(fusion, first, scoreOps, softmax.getInput(),
                         scoreIndexing, Value(), why);
  if (failed(score))
    return failure();
  for (auto [index, op] : llvm::enumerate(scoreOps)) {
    auto select = dyn_cast<kiln::SelectOp>(op);
    if (!select)
      continue;
    std::optional<Triangle> tri =
        constantTriangle(select.getCondition(), scoresShape);
    bool scoresIfTrue = !isSplatConstant(select.getTrueValue());
    Value fill = scoresIfTrue ? select.getFalseValue() : select.getTrueValue();
    std::optional<double> fillValue = splatOf(fill);
    bool after = llvm::all_of(
        ArrayRef<Operation *>(scoreOps).drop_front(index + 1),
        [](Operation *later) {
          if (!isa<kiln::MulOp, kiln::DivOp>(later))
            return false;
          std::optional<double> c = splatOf(later->getOperand(1));
          return c && *c > 0;
        });
    if (!tri || !fillValue || *fillValue > -1e30 || !after)
      continue;
    if (!tri->upper && scoresIfTrue) {
      problem.causalSkip = true;
      problem.causalOffset = tri->k;
    } else if (tri->upper && !scoresIfTrue) {
      problem.causalSkip = true;
      problem.causalOffset = tri->k - 1;
    }
  }

  OutputIndexing outIndexing;
  outIndexing.shape.assign(outType.getShape().begin(), outType.getShape().end());
  FailureOr<EmittedEpilogue> output = emitRegionEpilogue(
      fusion, second, epilogue.getArrayRef(), result, outIndexing, Value(), why);
  if (failed(output))
    return failure();
  problem.outputType = output->outputType;

  cx::AttentionBodies bodies;
  bodies.score = score->body;
  if (operandScale != 1.0) {
    char literal[64];
    std::snprintf(literal, sizeof(literal), "%.9g", operandScale);
    bodies.score = std::string("  acc *= (float)") + literal + ";\n" +
                   bodies.score;
  }
  for (size_t i = 0; i < score->operands.size(); ++i)
    bodies.scoreOperands.push_back("score" + std::to_string(i));
  bodies.output = output->body;
  for (size_t i = 0; i < output->operands.size(); ++i)
    bodies.outputOperands.push_back("out" + std::to_string(i));

  bool tensorCores = problem.inputType != cx::DType::F32;
  cx::AttentionConfig config;
  if (selecting()) {
    config = cx::pickAttentionConfig(problem, smVersion, wgmma);
    selected = toAttr(module.getContext(), config, tensorCores);
    return success();
  }
  auto attr = configOf<AttentionConfigAttr>(fusion, why);
  if (!attr)
    return failure();
  config = fromAttr(attr);
  AttentionFamily expected = tensorCores ? AttentionFamily::MmaF16
                                         : AttentionFamily::SimtF32;
  if (attr.getFamily() != expected &&
      !(tensorCores && attr.getFamily() == AttentionFamily::WgmmaF16)) {
    why = "the attention kernel's " +
          stringifyAttentionFamily(attr.getFamily()).str() +
          " family does not take " + (tensorCores ? "16-bit" : "f32") +
          " inputs";
    return failure();
  }
  if (config.wgmma && smVersion != 90) {
    why = "the wgmma attention kernel needs sm_90, not sm_" +
          std::to_string(smVersion);
    return failure();
  }
  cx::GenerateOptions options;
  options.smVersion = smVersion;
  options.name = kiln::kEntryPlaceholder.str();
  kiln::runtime::Expected<cx::GemmKernels> kernels =
      cx::specializeAttention(problem, config, bodies, options);
  if (!kernels) {
    why = kernels.error().message();
    return failure();
  }
  nameKernels(*kernels, "kiln_attn_");
  if (!lastKernelShared)
    declareBinary(*kernels, kernels->kernels.front(), fusion.getLoc());

  // The call: Q, K, V, the bodies' operands, then the output.
  SmallVector<std::pair<std::string, Value>> pointers = {
      {"Q", q->buffer}, {"K", k->buffer}, {"V", v->buffer}};
  for (auto [i, operand] : llvm::enumerate(score->operands))
    pointers.push_back({"score" + std::to_string(i), operand});
  for (auto [i, operand] : llvm::enumerate(output->operands))
    pointers.push_back({"out" + std::to_string(i), operand});
  auto resultType = cast<RankedTensorType>(result.getType());
  Value replacement = buildKernelCall(
      fusion, kernels->kernels.front(), pointers, resultType, attr,
      static_cast<int64_t>(2 * problem.outer * problem.heads * problem.seqQ *
                           problem.seqK *
                           (problem.headDim + problem.valueDim)));
  report.push_back(
      llvm::formatv("{0}: {1}, batch={2} heads={3} Sq={4} Sk={5} Dv={6}{7}",
                    kernels->kernels.front().name, config.describe(problem),
                    problem.outer, problem.heads, problem.seqQ, problem.seqK,
                    problem.valueDim,
                    problem.keyHeadGroup > 1 || problem.valueHeadGroup > 1
                        ? ", grouped kv heads"
                        : "")
          .str());
  replaceResults(fusion, *storedIndex, replacement);
  return success();
}

Value Matcher::buildKernelCall(
    kiln::FusionOp fusion, const cx::GemmKernel &kernel,
    ArrayRef<std::pair<std::string, Value>> pointers,
    RankedTensorType resultType, Attribute config, int64_t flops) {
  MLIRContext *ctx = module.getContext();
  Location loc = fusion.getLoc();
  OpBuilder builder(fusion);
  Value output = tensor::EmptyOp::create(builder, loc, resultType.getShape(),
                                         resultType.getElementType());
  SmallVector<Value> inputs;
  SmallVector<int32_t> order;
  for (const cx::KernelParameter &p : kernel.params) {
    if (p.name == "C") {
      order.push_back(-1);
      continue;
    }
    auto it = llvm::find_if(pointers,
                            [&](const auto &entry) { return entry.first == p.name; });
    order.push_back(static_cast<int32_t>(inputs.size()));
    inputs.push_back(it->second);
  }
  for (int32_t &index : order)
    if (index < 0)
      index = static_cast<int32_t>(inputs.size());
  auto call = kiln::CallKernelOp::create(
      builder, loc, TypeRange{output.getType()},
      SymbolRefAttr::get(ctx, kernel.name,
                         {FlatSymbolRefAttr::get(ctx, kernel.name)}),
      inputs, ValueRange{output},
      builder.getDenseI32ArrayAttr({static_cast<int32_t>(kernel.grid.x),
                                    static_cast<int32_t>(kernel.grid.y),
                                    static_cast<int32_t>(kernel.grid.z)}),
      builder.getDenseI32ArrayAttr({static_cast<int32_t>(kernel.block.x),
                                    static_cast<int32_t>(kernel.block.y),
                                    static_cast<int32_t>(kernel.block.z)}),
      builder.getI32IntegerAttr(kernel.dynamicSharedBytes),
      builder.getArrayAttr({}), builder.getDenseI32ArrayAttr(order));
  call->setAttr(kKernelAttr, config);
  call->setAttr(KilnDialect::FlopsAttrHelper::getNameStr(),
                builder.getI64IntegerAttr(flops));
  return call.getResult(0);
}

SmallVector<kiln::FusionOp> splitAttention(kiln::FusionOp fusion) {
  // The scores part ends at the second matmul's left operand (P).
  kiln::MatmulOp second;
  for (Operation &op : fusion.getBody().front().without_terminator())
    if (auto m = dyn_cast<kiln::MatmulOp>(op))
      second = m;
  if (!second)
    return {fusion};
  Value p = second.getLhs();
  OpBuilder b(fusion);
  auto build = [&](ArrayRef<Value> results, StringRef kind,
                   const IRMapping &outer) {
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    auto part = kiln::FusionOp::create(b, fusion.getLoc(), types,
                                       b.getStringAttr(kind));
    OpBuilder inner(part.getContext());
    inner.setInsertionPointToStart(inner.createBlock(&part.getBody()));
    IRMapping mapping = outer;
    // The cone of the results, in block order.
    llvm::SmallPtrSet<Operation *, 32> cone;
    SmallVector<Value> work(results.begin(), results.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (mapping.contains(v) || !inRegion(v, fusion) ||
          !cone.insert(v.getDefiningOp()).second)
        continue;
      llvm::append_range(work, v.getDefiningOp()->getOperands());
    }
    for (Operation &op : fusion.getBody().front().without_terminator())
      if (cone.contains(&op))
        inner.clone(op, mapping);
    SmallVector<Value> yielded;
    for (Value v : results)
      yielded.push_back(mapping.lookupOrDefault(v));
    kiln::YieldOp::create(inner, fusion.getLoc(), yielded);
    return part;
  };
  kiln::FusionOp scores = build({p}, "matmul+softmax", IRMapping());
  IRMapping afterScores;
  afterScores.map(p, scores.getResult(0));
  SmallVector<Value> results(fusion.getYield().getValues());
  kiln::FusionOp rest = build(results, "matmul", afterScores);
  fusion.replaceAllUsesWith(rest.getResults());
  fusion.erase();
  return {scores, rest};
}

bool Matcher::selectAttention(kiln::FusionOp fusion) {
  std::string why;
  size_t splitBefore = splitOff.size();
  selected = {};
  LogicalResult matched = rewriteAttention(fusion, why);
  // The selection leaves the IR as it was.
  while (splitOff.size() > splitBefore) {
    kiln::FusionOp split = splitOff.pop_back_val();
    split.erase();
  }
  if (succeeded(matched)) {
    fusion->setAttr(kKernelAttr, selected);
    return true;
  }
  std::string where;
  llvm::raw_string_ostream os(where);
  fusion.getLoc().print(os);
  attentionSplitNote = "attention split (" + why + ") at " + where;
  return false;
}

} // namespace kiln::templates
