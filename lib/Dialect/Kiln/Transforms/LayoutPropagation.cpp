//===- LayoutPropagation.cpp - Sinking layout transposes through ops ------===//
//
// kiln-assign-layout wraps every op it converts in two transposes: into the
// target layout before the op, back to the other layout after it. The
// patterns here move each "back" transpose below the layout-agnostic ops
// that read it, rewriting those ops to work in the target layout (axes,
// per-dimension attributes and broadcast operands permuted), until it meets
// the next converted op's "into" transpose and TransposeOp's folder cancels
// the pair. Where a back transpose cannot move on (a function result, an op
// that only exists in the other layout, a broadcast operand that is neither
// known at compile time nor a pure relabeling), the layouts meet and the
// transpose stays.
//
//===----------------------------------------------------------------------===//

#include "LayoutPropagation.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::layout;

//===----------------------------------------------------------------------===//
// Permutations
//===----------------------------------------------------------------------===//

Permutation layout::permutationTo(DataFormat to, int64_t rank) {
  Permutation perm{0};
  if (to == DataFormat::ChannelsLast) {
    for (int64_t d = 2; d < rank; ++d)
      perm.push_back(d);
    perm.push_back(1);
  } else {
    perm.push_back(rank - 1);
    for (int64_t d = 1; d < rank - 1; ++d)
      perm.push_back(d);
  }
  return perm;
}

DataFormat layout::otherFormat(DataFormat format) {
  return format == DataFormat::ChannelsLast ? DataFormat::ChannelsFirst
                                            : DataFormat::ChannelsLast;
}

Permutation layout::invertPermutation(ArrayRef<int64_t> perm) {
  Permutation inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return inverse;
}

SmallVector<int64_t> layout::permute(ArrayRef<int64_t> values,
                                     ArrayRef<int64_t> perm) {
  SmallVector<int64_t> result;
  for (int64_t p : perm)
    result.push_back(values[p]);
  return result;
}

RankedTensorType layout::permuteType(RankedTensorType type,
                                     ArrayRef<int64_t> perm) {
  return RankedTensorType::get(permute(type.getShape(), perm),
                               type.getElementType());
}

bool layout::isRelabeling(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  int64_t last = -1;
  for (int64_t p : perm) {
    if (shape[p] == 1)
      continue;
    if (p < last)
      return false;
    last = p;
  }
  return true;
}

bool layout::isCompileTimeValue(Value value) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return false;
  // global_load_const only reads immutable globals (its verifier says so).
  if (isa<ConstantOp, ml_program::GlobalLoadConstOp>(op))
    return true;
  if (isa<ReshapeOp, TransposeOp>(op))
    return isCompileTimeValue(op->getOperand(0));
  if (auto pad = dyn_cast<PadOp>(op))
    return pad.getMode() == PadMode::Constant &&
           isCompileTimeValue(pad.getInput());
  return false;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

bool isElementwise(Operation *op) {
  return isBroadcastingElementwise(op) || isa<SelectOp>(op);
}

/// The folders of transpose (composition, identity, constants) and reshape
/// (chains, identity, constants), run as a pattern: the pass turns generic
/// folding off so that it changes no other op.
template <typename OpTy> struct FoldDataMovement : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Attribute input;
    matchPattern(op->getOperand(0), m_Constant(&input));
    SmallVector<OpFoldResult> results;
    rewriter.startOpModification(op);
    if (failed(op->fold(ArrayRef<Attribute>{input}, results)) ||
        results.empty()) {
      rewriter.cancelOpModification(op);
      return failure();
    }
    OpFoldResult folded = results.front();
    if (auto value = dyn_cast<Value>(folded);
        value && value == op.getResult()) {
      rewriter.finalizeOpModification(op); // folded in place
      return success();
    }
    rewriter.finalizeOpModification(op);
    Value replacement = dyn_cast<Value>(folded);
    if (!replacement) {
      auto elements = dyn_cast<ElementsAttr>(cast<Attribute>(folded));
      if (!elements)
        return failure();
      replacement = ConstantOp::create(rewriter, op.getLoc(), elements);
    }
    rewriter.replaceOp(op, replacement);
    return success();
  }
};

/// A transpose that only moves unit dimensions keeps every element where it
/// is: it is a reshape, which costs no kernel. (A layout transpose of a
/// [N, C, 1, 1] tensor with N = 1 is one: global pooling's result.)
/// `operand` of an op of rank `rank` (numpy-broadcast, so it may have fewer
/// dims) as seen by the same op permuted by `to`: unchanged when it is all
/// ones, reshaped when the permutation only relabels its dims, else (reshaped
/// to full rank and) transposed.
Value permuteOperand(PatternRewriter &rewriter, Location loc, Value operand,
                     int64_t rank, ArrayRef<int64_t> to) {
  auto type = cast<RankedTensorType>(operand.getType());
  SmallVector<int64_t> extended(rank - type.getRank(), 1);
  llvm::append_range(extended, type.getShape());
  if (llvm::all_of(extended, [](int64_t d) { return d == 1; }))
    return operand;
  auto extendedType = RankedTensorType::get(extended, type.getElementType());
  if (isRelabeling(extended, to))
    return ReshapeOp::create(rewriter, loc, permuteType(extendedType, to),
                             operand);
  Value full = operand;
  if (type.getRank() < rank)
    full = ReshapeOp::create(rewriter, loc, extendedType, operand);
  return TransposeOp::create(rewriter, loc, full,
                             rewriter.getDenseI64ArrayAttr(to));
}

struct TransposeOfUnitDimsToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (!isRelabeling(op.getInput().getType().getShape(), op.getPermutation()))
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getInput());
    return success();
  }
};

/// The input of `value`'s defining transpose when it transposes an
/// activation (of a rank `isLayoutRank` accepts) into format `to`, else null.
Value transposedBy(Value value, DataFormat to) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose)
    return nullptr;
  int64_t rank = transpose.getType().getRank();
  if (!isLayoutRank(rank) ||
      transpose.getPermutation() != ArrayRef<int64_t>(permutationTo(to, rank)))
    return nullptr;
  return transpose.getInput();
}

/// Whether `split` is `whole` with dim `at` split into two or more factors:
/// whole = [N, C, S...], split = [N, c1, ..., ck, S...] with k >= 2 and the
/// product of the ci equal to C. Returns k, or 0.
int64_t channelFactors(ArrayRef<int64_t> whole, ArrayRef<int64_t> split) {
  int64_t k = static_cast<int64_t>(split.size() - whole.size()) + 1;
  if (k < 2 || whole[0] != split[0] ||
      !llvm::equal(whole.drop_front(2), split.drop_front(k + 1)))
    return 0;
  int64_t product = 1;
  for (int64_t c : split.slice(1, k))
    product *= c;
  return product == whole[1] ? k : 0;
}

/// NHWC only: reshape(T_back(a)) that splits the channel dim, [N, C, S...]
/// to [N, c1..ck, S...] (ShuffleNet's channel shuffle), is a split of a's
/// channel dim, [N, S..., c1..ck], then a transpose putting the factors
/// second. That transpose then composes with whatever reorders the factors.
struct SinkThroughChannelSplit : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    Value input = transposedBy(op.getInput(), DataFormat::ChannelsFirst);
    if (!input)
      return failure();
    ArrayRef<int64_t> whole = op.getInput().getType().getShape();
    ArrayRef<int64_t> split = op.getType().getShape();
    int64_t k = channelFactors(whole, split);
    if (k == 0)
      return failure();
    int64_t spatial = whole.size() - 2;
    SmallVector<int64_t> shape{whole[0]};
    llvm::append_range(shape, whole.drop_front(2));
    llvm::append_range(shape, split.slice(1, k));
    Permutation perm{0};
    for (int64_t i = 0; i < k; ++i)
      perm.push_back(spatial + 1 + i);
    for (int64_t i = 0; i < spatial; ++i)
      perm.push_back(1 + i);
    Value reshaped = ReshapeOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, op.getType().getElementType()), input);
    rewriter.replaceOpWithNewOp<TransposeOp>(
        op, op.getType(), reshaped, rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// NHWC only, the converse: T_to(reshape(z)) where the reshape merges dims
/// 1..k of z = [N, c1..ck, S...] into the channels is a transpose of z
/// putting the factors last, then a merge of them: the transpose composes
/// with the one that made z, and no layout transpose is left.
struct HoistThroughChannelMerge : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    Value input = transposedBy(op.getResult(), DataFormat::ChannelsLast);
    auto reshape = input ? input.getDefiningOp<ReshapeOp>() : nullptr;
    if (!reshape)
      return failure();
    ArrayRef<int64_t> whole = reshape.getType().getShape();
    ArrayRef<int64_t> split = reshape.getInput().getType().getShape();
    int64_t k = channelFactors(whole, split);
    if (k == 0)
      return failure();
    int64_t spatial = whole.size() - 2;
    Permutation perm{0};
    for (int64_t i = 0; i < spatial; ++i)
      perm.push_back(k + 1 + i);
    for (int64_t i = 0; i < k; ++i)
      perm.push_back(1 + i);
    Value transposed =
        TransposeOp::create(rewriter, op.getLoc(), reshape.getInput(),
                            rewriter.getDenseI64ArrayAttr(perm));
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), transposed);
    return success();
  }
};

/// NHWC only: a classifier reading a flattened activation,
/// matmul(reshape(T_back(y)), W) with y = [N, S..., C] flattened in NCHW
/// order (c, s) and W = [C * S, O] known at compile time, reads y flattened
/// in its own order (s, c) instead, with W's rows permuted to match
/// (reshape to [C, S..., O], transpose to [S..., C, O], reshape back; the
/// weight rule folds that into the global). VGG's and AlexNet's flatten
/// before their first fully connected layer needs no transpose then.
struct FlattenIntoMatmulWeights : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto flatten = op.getLhs().getDefiningOp<ReshapeOp>();
    if (!flatten)
      return failure();
    Value y = transposedBy(flatten.getInput(), DataFormat::ChannelsFirst);
    RankedTensorType lhsType = op.getLhs().getType();
    RankedTensorType rhsType = op.getRhs().getType();
    if (!y || lhsType.getRank() != 2 || rhsType.getRank() != 2 ||
        !isCompileTimeValue(op.getRhs()))
      return failure();
    ArrayRef<int64_t> shape = cast<RankedTensorType>(y.getType()).getShape();
    if (lhsType.getDimSize(0) != shape[0])
      return failure(); // the flatten must keep the batch dim apart
    int64_t rank = shape.size();
    Location loc = op.getLoc();
    Type elementType = rhsType.getElementType();
    // W as [C, S..., O]: its rows in NCHW flatten order.
    SmallVector<int64_t> split{shape[rank - 1]};
    llvm::append_range(split, shape.slice(1, rank - 2));
    split.push_back(rhsType.getDimSize(1));
    Permutation perm;
    for (int64_t i = 1; i < rank - 1; ++i)
      perm.push_back(i);
    perm.push_back(0);
    perm.push_back(rank - 1);
    Value rows = ReshapeOp::create(
        rewriter, loc, RankedTensorType::get(split, elementType), op.getRhs());
    Value permuted = TransposeOp::create(rewriter, loc, rows,
                                         rewriter.getDenseI64ArrayAttr(perm));
    Value weights = ReshapeOp::create(rewriter, loc, rhsType, permuted);
    Value input = ReshapeOp::create(rewriter, loc, lhsType, y);
    rewriter.modifyOpInPlace(op, [&] {
      op.getLhsMutable().assign(input);
      op.getRhsMutable().assign(weights);
    });
    return success();
  }
};

/// Sinks transposes from `target` back to the other layout below the op
/// that reads them. Each case rewrites the op to read the untransposed
/// value (the "back" permutation B says that dim i of the transposed value
/// is dim B[i] of its input) and transposes the op's results back instead.
class SinkLayoutTranspose : public RewritePattern {
public:
  SinkLayoutTranspose(MLIRContext *context, DataFormat target)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context),
        target(target) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    // Ops inside kiln.fusion regions are left alone: layout assignment runs
    // before fusion, and a region's yield fixes its result types.
    if (!isa_and_nonnull<KilnDialect>(op->getDialect()) ||
        !isa<func::FuncOp>(op->getParentOp()) ||
        llvm::none_of(op->getOperands(),
                      [&](Value v) { return backTransposed(v) != nullptr; }))
      return failure();
    if (isElementwise(op))
      return sinkElementwise(op, rewriter);
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case<SoftmaxOp, LogSoftmaxOp>([&](auto softmax) {
          return sinkAxisOp(softmax, rewriter, /*keepdims=*/true);
        })
        .Case<ArgMaxOp, ArgMinOp>([&](auto arg) {
          return sinkAxisOp(arg, rewriter, arg.getKeepdims());
        })
        .Case<ReduceOp>(
            [&](ReduceOp reduce) { return sinkReduce(reduce, rewriter); })
        .Case<ConcatOp>(
            [&](ConcatOp concat) { return sinkConcat(concat, rewriter); })
        .Case<SplitOp>(
            [&](SplitOp split) { return sinkSplit(split, rewriter); })
        .Case<SliceOp>([&](SliceOp slice) {
          return sinkPerDimAttrs(slice, rewriter,
                                 {slice.getStartsAttrName(),
                                  slice.getLimitsAttrName(),
                                  slice.getStepsAttrName()});
        })
        .Case<PadOp>([&](PadOp pad) {
          return sinkPerDimAttrs(pad, rewriter,
                                 {pad.getLowAttrName(), pad.getHighAttrName()});
        })
        .Case<TileOp>([&](TileOp tile) {
          return sinkPerDimAttrs(tile, rewriter, {tile.getRepeatsAttrName()});
        })
        .Case<BatchNormOp, GlobalPoolOp, PoolOp>(
            [&](auto formatted) { return sinkFormatted(formatted, rewriter); })
        .Default([](Operation *) { return failure(); });
  }

private:
  /// The input of a transpose from the target layout back to the other one
  /// that defines `value`, or null.
  Value backTransposed(Value value) const {
    auto transpose = value.getDefiningOp<TransposeOp>();
    if (!transpose)
      return nullptr;
    int64_t rank = transpose.getType().getRank();
    if (!isLayoutRank(rank) ||
        transpose.getPermutation() != ArrayRef<int64_t>(backPermutation(rank)))
      return nullptr;
    return transpose.getInput();
  }

  Permutation backPermutation(int64_t rank) const {
    return permutationTo(otherFormat(target), rank);
  }

  Value transposeBack(PatternRewriter &rewriter, Location loc,
                      Value value) const {
    int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
    return TransposeOp::create(
        rewriter, loc, value,
        rewriter.getDenseI64ArrayAttr(backPermutation(rank)));
  }

  /// Replaces `op` by `clone`, whose results are in the target layout.
  void replaceWithTransposedBack(PatternRewriter &rewriter, Operation *op,
                                 Operation *clone) const {
    SmallVector<Value> results;
    for (Value result : clone->getResults())
      results.push_back(transposeBack(rewriter, op->getLoc(), result));
    rewriter.replaceOp(op, results);
  }

  /// Elementwise ops: every operand is a back transpose (its input is used),
  /// or all ones (used as is), or is broadcast: extended to the full rank
  /// and permuted into the target layout, which is free when it only moves
  /// unit dims (per-channel [C, 1, 1] parameters) and folds into the weight
  /// when the operand is known at compile time. Any other operand would
  /// need a transpose at run time, so the op stays.
  LogicalResult sinkElementwise(Operation *op,
                                PatternRewriter &rewriter) const {
    if (op->getNumResults() != 1)
      return failure();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t rank = resultType.getRank();
    if (!isLayoutRank(rank))
      return failure();
    Permutation to = permutationTo(target, rank);
    for (Value operand : op->getOperands()) {
      auto type = cast<RankedTensorType>(operand.getType());
      if (backTransposed(operand)) {
        if (type.getRank() != rank)
          return failure();
        continue;
      }
      if (type.getRank() > rank)
        return failure();
      SmallVector<int64_t> extended(rank - type.getRank(), 1);
      llvm::append_range(extended, type.getShape());
      if (!isRelabeling(extended, to) && !isCompileTimeValue(operand))
        return failure();
    }

    Location loc = op->getLoc();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      if (Value input = backTransposed(operand)) {
        operands.push_back(input);
        continue;
      }
      operands.push_back(permuteOperand(rewriter, loc, operand, rank, to));
    }
    Operation *clone = rewriter.clone(*op);
    clone->setOperands(operands);
    clone->getResult(0).setType(permuteType(resultType, to));
    replaceWithTransposedBack(rewriter, op, clone);
    return success();
  }

  /// Replaces `op`, a reduction over the (transposed-space) dims `reduced`
  /// of a rank-`rank` value, by `clone`, which reduced the matching dims of
  /// the untransposed value. With keepdims the result is transposed back
  /// like the input; without, the surviving dims keep the input's order,
  /// which a smaller transpose restores (none when the order agrees).
  void replaceReduction(PatternRewriter &rewriter, Operation *op,
                        Operation *clone, int64_t rank,
                        ArrayRef<int64_t> reduced, bool keepdims) const {
    Permutation back = backPermutation(rank);
    auto oldType = cast<RankedTensorType>(op->getResult(0).getType());
    if (keepdims) {
      clone->getResult(0).setType(
          permuteType(oldType, permutationTo(target, rank)));
      replaceWithTransposedBack(rewriter, op, clone);
      return;
    }
    // Surviving input dims, in the order the clone produces them.
    SmallVector<int64_t> survivors;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(reduced, invertPermutation(back)[d]))
        survivors.push_back(d);
    // The old result lists surviving transposed dims i in order: input dim
    // back[i], at position q[k] of the clone's result.
    Permutation q;
    for (int64_t i = 0; i < rank; ++i)
      if (!llvm::is_contained(reduced, i))
        q.push_back(llvm::find(survivors, back[i]) - survivors.begin());
    auto sourceType = cast<RankedTensorType>(clone->getOperand(0).getType());
    SmallVector<int64_t> shape;
    for (int64_t d : survivors)
      shape.push_back(sourceType.getDimSize(d));
    clone->getResult(0).setType(
        RankedTensorType::get(shape, oldType.getElementType()));
    Value result = clone->getResult(0);
    if (!llvm::equal(q, llvm::seq<int64_t>(0, q.size())))
      result = TransposeOp::create(rewriter, op->getLoc(), result,
                                   rewriter.getDenseI64ArrayAttr(q));
    rewriter.replaceOp(op, result);
  }

  /// softmax, log_softmax, argmax, argmin: one `axis`.
  template <typename OpTy>
  LogicalResult sinkAxisOp(OpTy op, PatternRewriter &rewriter,
                           bool keepdims) const {
    Value input = backTransposed(op.getInput());
    if (!input)
      return failure();
    int64_t rank = op.getInput().getType().getRank();
    int64_t axis = normalizeAxis(op.getAxis(), rank);
    if (axis < 0)
      return failure();
    auto clone = cast<OpTy>(rewriter.clone(*op));
    clone->setOperand(0, input);
    clone.setAxis(backPermutation(rank)[axis]);
    replaceReduction(rewriter, op, clone, rank, {axis}, keepdims);
    return success();
  }

  LogicalResult sinkReduce(ReduceOp op, PatternRewriter &rewriter) const {
    Value input = backTransposed(op.getInput());
    if (!input)
      return failure();
    int64_t rank = op.getInput().getType().getRank();
    Permutation back = backPermutation(rank);
    SmallVector<int64_t> axes;
    for (int64_t axis : op.getAxes())
      axes.push_back(back[axis]);
    llvm::sort(axes);
    auto clone = cast<ReduceOp>(rewriter.clone(*op));
    clone->setOperand(0, input);
    clone.setAxes(axes);
    replaceReduction(rewriter, op, clone, rank, op.getAxes(), op.getKeepdims());
    return success();
  }

  /// concat: every input a back transpose or known at compile time.
  LogicalResult sinkConcat(ConcatOp op, PatternRewriter &rewriter) const {
    int64_t rank = op.getType().getRank();
    if (!isLayoutRank(rank) || !llvm::all_of(op.getInputs(), [&](Value v) {
          return backTransposed(v) || isCompileTimeValue(v);
        }))
      return failure();
    Permutation to = permutationTo(target, rank);
    SmallVector<Value> inputs;
    for (Value v : op.getInputs()) {
      Value input = backTransposed(v);
      inputs.push_back(
          input ? input
                : TransposeOp::create(rewriter, op.getLoc(), v,
                                      rewriter.getDenseI64ArrayAttr(to)));
    }
    auto clone = cast<ConcatOp>(rewriter.clone(*op));
    clone->setOperands(inputs);
    clone.setAxis(backPermutation(rank)[op.getAxis()]);
    clone.getResult().setType(permuteType(op.getType(), to));
    replaceWithTransposedBack(rewriter, op, clone);
    return success();
  }

  LogicalResult sinkSplit(SplitOp op, PatternRewriter &rewriter) const {
    Value input = backTransposed(op.getInput());
    if (!input)
      return failure();
    int64_t rank = op.getInput().getType().getRank();
    Permutation to = permutationTo(target, rank);
    auto clone = cast<SplitOp>(rewriter.clone(*op));
    clone->setOperand(0, input);
    clone.setAxis(backPermutation(rank)[op.getAxis()]);
    for (OpResult result : clone->getResults())
      result.setType(permuteType(cast<RankedTensorType>(result.getType()), to));
    replaceWithTransposedBack(rewriter, op, clone);
    return success();
  }

  /// slice, pad, tile: attributes with one entry per dimension.
  LogicalResult sinkPerDimAttrs(Operation *op, PatternRewriter &rewriter,
                                ArrayRef<StringAttr> names) const {
    Value input = backTransposed(op->getOperand(0));
    if (!input)
      return failure();
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    Permutation to = permutationTo(target, rank);
    Operation *clone = rewriter.clone(*op);
    clone->setOperand(0, input);
    for (StringAttr name : names) {
      auto values = cast<DenseI64ArrayAttr>(op->getAttr(name));
      clone->setAttr(name, rewriter.getDenseI64ArrayAttr(
                               permute(values.asArrayRef(), to)));
    }
    clone->getResult(0).setType(
        permuteType(cast<RankedTensorType>(op->getResult(0).getType()), to));
    replaceWithTransposedBack(rewriter, op, clone);
    return success();
  }

  /// batch_norm, global_pool, pool: ops with a data_format switch to the
  /// target layout when their input arrives in it.
  template <typename OpTy>
  LogicalResult sinkFormatted(OpTy op, PatternRewriter &rewriter) const {
    Value input = backTransposed(op.getInput());
    if (!input || op.getDataFormat() == target)
      return failure();
    int64_t rank = op.getInput().getType().getRank();
    auto clone = cast<OpTy>(rewriter.clone(*op));
    clone->setOperand(0, input);
    clone.setDataFormat(target);
    clone.getResult().setType(
        permuteType(op.getType(), permutationTo(target, rank)));
    replaceWithTransposedBack(rewriter, op, clone);
    return success();
  }

  DataFormat target;
};

/// The converse direction for transposes into `target`: a transpose into
/// the target layout of an elementwise op's only use moves above the op, so
/// that it reaches a back transpose to cancel with (or a reshape that
/// merges channels, or the function argument: the graph boundary). Every
/// operand gets the transpose; allowed when at most one operand would need
/// it at run time (the others are back transposes, which cancel, or are
/// broadcast operands that are free or known at compile time, as when
/// sinking), so the count of run-time transposes never grows.
class HoistLayoutTranspose : public OpRewritePattern<TransposeOp> {
public:
  HoistLayoutTranspose(MLIRContext *context, DataFormat target)
      : OpRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    Operation *producer = op.getInput().getDefiningOp();
    int64_t rank = op.getType().getRank();
    if (!producer || !isElementwise(producer) ||
        producer->getNumResults() != 1 || !producer->hasOneUse() ||
        !isa<func::FuncOp>(producer->getParentOp()) || !isLayoutRank(rank) ||
        op.getPermutation() != ArrayRef<int64_t>(permutationTo(target, rank)))
      return failure();
    Permutation to = permutationTo(target, rank);
    int64_t runtime = 0;
    for (Value operand : producer->getOperands()) {
      auto type = cast<RankedTensorType>(operand.getType());
      if (type.getRank() > rank)
        return failure();
      if (transposedBy(operand, otherFormat(target)) ||
          isCompileTimeValue(operand))
        continue;
      SmallVector<int64_t> extended(rank - type.getRank(), 1);
      llvm::append_range(extended, type.getShape());
      if (!isRelabeling(extended, to))
        ++runtime;
    }
    if (runtime > 1)
      return failure();

    Location loc = producer->getLoc();
    SmallVector<Value> operands;
    for (Value operand : producer->getOperands()) {
      operands.push_back(permuteOperand(rewriter, loc, operand, rank, to));
    }
    Operation *clone = rewriter.clone(*producer);
    clone->setOperands(operands);
    clone->getResult(0).setType(op.getType());
    rewriter.replaceOp(op, clone->getResults());
    return success();
  }

private:
  DataFormat target;
};

} // namespace

void layout::populateLayoutPropagationPatterns(RewritePatternSet &patterns,
                                               DataFormat target) {
  patterns.add<TransposeOfUnitDimsToReshape, FoldDataMovement<TransposeOp>,
               FoldDataMovement<ReshapeOp>>(patterns.getContext());
  patterns.add<SinkLayoutTranspose, HoistLayoutTranspose>(patterns.getContext(),
                                                          target);
  if (target == DataFormat::ChannelsLast)
    patterns.add<SinkThroughChannelSplit, HoistThroughChannelMerge,
                 FlattenIntoMatmulWeights>(patterns.getContext());
}
