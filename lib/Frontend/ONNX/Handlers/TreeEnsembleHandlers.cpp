//===- TreeEnsembleHandlers.cpp - ai.onnx.ml's tree ensembles -------------===//
//
// TreeEnsemble (opset 5) and TreeEnsembleRegressor (opsets 1 and 3, what
// sklearn-onnx writes for forests and boosted trees). Every tree's nodes,
// splits and leaves are attributes, so the whole ensemble is constants;
// each op's attributes are normalised to one `EnsembleSpec` and composed
// the same way:
//
// Nodes and leaves share one index space: node i is i, leaf j is K + j (K
// nodes). Every node's condition is computed for every sample at once
// (X's feature columns gathered, compared with the splits under each
// node's mode; set membership as a 0/1 matmul of equalities; NaN goes to
// the true branch where the node's missing-value flag says so). Then all
// trees step together: `cur` ([N, trees]) starts at the roots and each of
// `depth` steps takes the true or false child of the node it is at; a leaf
// is its own child, so trees shallower than the deepest stay put. The
// leaves' weights, one [leaves, targets] table, are gathered and reduced
// over the trees (SUM; AVERAGE, the sum over the number of trees; MIN and
// MAX), the base values added, and the post-transform applied (NONE,
// SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT, the last two as onnxruntime
// computes them).
//
//===----------------------------------------------------------------------===//

#include "TreeEnsembleHandlers.h"

#include "Composer.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <map>
#include <set>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

enum Mode : int64_t { LEQ, LT, GTE, GT, EQ, NEQ, MEMBER };
enum Aggregate : int64_t { Average, Sum, Min, Max };
/// post_transform, numbered as TreeEnsemble (opset 5) numbers it.
enum Post : int64_t { None, Softmax, Logistic, SoftmaxZero, Probit };

/// One ensemble, whichever op described it.
struct EnsembleSpec {
  // Nodes, K of them: the feature each compares, its Mode, its split and
  // its children in the shared index space (a leaf j is K + j).
  SmallVector<int64_t> features, modes;
  SmallVector<double> splits;
  SmallVector<int64_t> trueNext, falseNext;
  SmallVector<bool> tracksTrue; // empty: none
  SmallVector<std::pair<int64_t, double>> members; // (node, member)
  int64_t leaves = 0, targets = 0;
  SmallVector<double> weights; // [leaves, targets]
  SmallVector<int64_t> start;  // each tree's root, shared index space
  int64_t aggregate = Sum;
  int64_t post = None;
  SmallVector<double> baseValues; // empty or one per target
  // [leaves, targets], 1 where the leaf scores the target. Empty: MIN and
  // MAX leave a target no reached leaf scores at the identity (onnx's
  // reference); else at 0 (onnxruntime's rule for the regressor).
  SmallVector<double> scored;
  Type compareType, outputType;
};

/// The values of a float tensor attribute as doubles (float16, float,
/// double), or failure naming it.
FailureOr<SmallVector<double>> floatTensorAttr(NodeImporter &n,
                                               StringRef name) {
  FailureOr<DenseElementsAttr> attr = n.tensorAttr(name);
  if (failed(attr))
    return failure();
  if (!isa<FloatType>(attr->getElementType()))
    return n.fail("attribute '" + name + "' must be a float tensor");
  SmallVector<double> values;
  for (APFloat v : attr->getValues<APFloat>()) {
    bool lost = false;
    v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(v.convertToDouble());
  }
  return values;
}

/// A float list attribute of opsets 1-3's tree ensembles: `name` (floats)
/// or `name`_as_tensor (opset 3, for doubles). Empty when neither is set.
FailureOr<SmallVector<double>> floatsOrTensor(NodeImporter &n,
                                              const std::string &name) {
  if (n.hasAttr(name + "_as_tensor"))
    return floatTensorAttr(n, name + "_as_tensor");
  SmallVector<double> values;
  for (float v : n.floatsAttr(name))
    values.push_back(v);
  return values;
}

/// The extreme value of a float type (MIN's and MAX's identity).
double largest(Type type, bool negative) {
  APFloat extreme =
      APFloat::getLargest(cast<FloatType>(type).getFloatSemantics(), negative);
  bool lost = false;
  extreme.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return extreme.convertToDouble();
}

/// `y` ([N, targets]) through a post_transform. SOFTMAX_ZERO and PROBIT
/// are onnxruntime's (ml_common.h), which onnx's reference follows but for
/// two corners noted here: SOFTMAX_ZERO leaves the scores within 1e-7 of 0
/// out of the exponentials, scaling them by exp(-max) instead, and out of
/// the sum (the reference adds them to it, and makes an all-zero row 0.5);
/// PROBIT is sqrt(2) erfinv(2y - 1) with Winitzki's approximation of erfinv
/// (a = 0.147), which is +-inf at y = 0 or 1 (the reference: 0).
Value postTransform(NodeImporter &n, Composer &c, Value y, int64_t post) {
  if (!y)
    return y;
  if (post == Softmax)
    return c.make<SoftmaxOp>(y, {n.namedI64("axis", 1)});
  if (post == Logistic)
    return c.make<SigmoidOp>(y);
  Type type = cast<RankedTensorType>(y.getType()).getElementType();
  auto k = [&](double v) { return c.scalar(type, v); };
  if (post == SoftmaxZero) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(y.getType()).getShape();
    Value max = c.broadcast(c.reduce(ReduceKind::Max, y, {1}, true), shape);
    Value away = c.make<GreaterOp>({c.make<AbsOp>(y), k(1e-7)});
    Value e = c.make<SelectOp>(
        {away, c.make<ExpOp>(c.make<SubOp>({y, max})),
         c.make<MulOp>({y, c.make<ExpOp>(c.make<NegOp>(max))})});
    Value sum = c.reduce(ReduceKind::Sum, c.make<SelectOp>({away, e, k(0)}),
                         {1}, true);
    return c.make<DivOp>({e, c.broadcast(sum, shape)});
  }
  if (post == Probit) {
    Value x = c.make<SubOp>({c.make<MulOp>({y, k(2)}), k(1)});
    Value sign = c.make<SelectOp>({c.make<LessOp>({x, k(0)}), k(-1), k(1)});
    Value log = c.make<LogOp>(c.make<MulOp>(
        {c.make<SubOp>({k(1), x}), c.make<AddOp>({k(1), x})}));
    Value v = c.make<AddOp>(
        {k(2 / (llvm::numbers::pi * 0.147)), c.make<MulOp>({k(0.5), log})});
    Value v2 = c.make<MulOp>({k(1 / 0.147), log});
    Value v3 = c.make<AddOp>(
        {c.make<NegOp>(v),
         c.make<SqrtOp>(c.make<SubOp>({c.make<MulOp>({v, v}), v2}))});
    return c.make<MulOp>(
        {k(llvm::numbers::sqrt2), c.make<MulOp>({sign, c.make<SqrtOp>(v3)})});
  }
  return y;
}

/// The ensemble's scores before the post-transform, [N, targets] (null
/// after an error, which `c` holds).
Value composeEnsemble(NodeImporter &n, Composer &c, const EnsembleSpec &spec) {
  RankedTensorType xType = n.inputType(0);
  int64_t batch = xType.getDimSize(0);
  int64_t k = static_cast<int64_t>(spec.features.size());
  int64_t total = k + spec.leaves;
  int64_t trees = static_cast<int64_t>(spec.start.size());
  // The depth: the longest path from a root, found by walking; a path
  // longer than the node count is a cycle.
  int64_t depth = 0;
  SmallVector<std::pair<int64_t, int64_t>> stack;
  for (int64_t s : spec.start)
    if (s < k)
      stack.push_back({s, 1});
  while (!stack.empty()) {
    auto [i, d] = stack.pop_back_val();
    if (d > k)
      return c.fail("the trees' node ids form a cycle");
    depth = std::max(depth, d);
    for (int64_t next : {spec.trueNext[i], spec.falseNext[i]})
      if (next < k)
        stack.push_back({next, d + 1});
  }

  Type type = spec.compareType;
  Type i64 = n.builder().getI64Type(), i1 = n.builder().getI1Type();
  Type f32 = n.builder().getF32Type();
  auto vec = [&](Type element, ArrayRef<double> values) {
    return c.constant(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, element),
        values);
  };
  auto doubles = [](ArrayRef<int64_t> v) {
    return SmallVector<double>(v.begin(), v.end());
  };
  // x's value at each node's feature, [N, total], and the conditions.
  SmallVector<double> columns = doubles(spec.features), splitRow(spec.splits);
  SmallVector<double> trueTable = doubles(spec.trueNext),
                      falseTable = doubles(spec.falseNext);
  for (int64_t j = 0; j < spec.leaves; ++j) {
    columns.push_back(0);
    splitRow.push_back(0);
    trueTable.push_back(k + j);
    falseTable.push_back(k + j);
  }
  Value x = c.cast(n.input(0), type);
  Value xs = c.make<GatherOp>({x, vec(i64, columns)}, {n.namedI64("axis", 1)});
  Value split = vec(type, splitRow);
  Value cond = c.broadcast(c.scalar(i1, 0), {batch, total});
  auto withMode = [&](int64_t mode, Value hit) {
    if (!llvm::is_contained(spec.modes, mode))
      return;
    SmallVector<double> mask(total, 0);
    for (int64_t i = 0; i < k; ++i)
      mask[i] = spec.modes[i] == mode;
    cond = c.make<SelectOp>(
        {c.broadcast(vec(i1, mask), {batch, total}), hit, cond});
  };
  withMode(LEQ, c.make<LessEqualOp>({xs, split}));
  withMode(LT, c.make<LessOp>({xs, split}));
  withMode(GTE, c.make<GreaterEqualOp>({xs, split}));
  withMode(GT, c.make<GreaterOp>({xs, split}));
  withMode(EQ, c.make<EqualOp>({xs, split}));
  withMode(NEQ, c.make<NotOp>(c.make<EqualOp>({xs, split})));
  if (!spec.members.empty()) {
    // hits[n, node] = how many of the node's members x equals.
    int64_t count = static_cast<int64_t>(spec.members.size());
    SmallVector<double> memberColumns, memberValues,
        owner(count * total, 0);
    for (auto [m, member] : llvm::enumerate(spec.members)) {
      memberColumns.push_back(spec.features[member.first]);
      memberValues.push_back(member.second);
      owner[m * total + member.first] = 1;
    }
    Value gathered = c.make<GatherOp>({x, vec(i64, memberColumns)},
                                      {n.namedI64("axis", 1)});
    Value equal =
        c.cast(c.make<EqualOp>({gathered, vec(type, memberValues)}), f32);
    Value ownerMatrix =
        c.constant(RankedTensorType::get({count, total}, f32), owner);
    Value hits = c.make<MatmulOp>({equal, ownerMatrix});
    withMode(MEMBER, c.make<GreaterOp>({hits, c.scalar(f32, 0.5)}));
  }
  if (llvm::is_contained(spec.tracksTrue, true)) {
    SmallVector<double> mask(total, 0);
    for (int64_t i = 0; i < k; ++i)
      mask[i] = spec.tracksTrue[i];
    Value isNan = c.make<NotOp>(c.make<EqualOp>({xs, xs}));
    cond = c.make<OrOp>(
        {cond,
         c.make<AndOp>({isNan, c.broadcast(vec(i1, mask), {batch, total})})});
  }

  // Walk: cur[N, trees] steps to the true or false child `depth` times.
  Value cur = c.broadcast(vec(i64, doubles(spec.start)), {batch, trees});
  Value onTrueTable = vec(i64, trueTable), onFalseTable = vec(i64, falseTable);
  for (int64_t step = 0; step < depth; ++step) {
    Value taken =
        c.make<GatherElementsOp>({cond, cur}, {n.namedI64("axis", 1)});
    Value onTrue =
        c.make<GatherOp>({onTrueTable, cur}, {n.namedI64("axis", 0)});
    Value onFalse =
        c.make<GatherOp>({onFalseTable, cur}, {n.namedI64("axis", 0)});
    cur = c.make<SelectOp>({taken, onTrue, onFalse});
  }
  Value leaf = c.make<SubOp>({cur, c.scalar(i64, static_cast<double>(k))});

  Type out = spec.outputType;
  Value weightTable = c.constant(
      RankedTensorType::get({spec.leaves, spec.targets}, out), spec.weights);
  Value perTree = c.make<GatherOp>({weightTable, leaf},
                                   {n.namedI64("axis", 0)}); // [N, trees, T]
  ReduceKind kind = spec.aggregate == Min   ? ReduceKind::Min
                    : spec.aggregate == Max ? ReduceKind::Max
                                            : ReduceKind::Sum;
  Value y = c.reduce(kind, perTree, {1}, /*keepdims=*/false);
  if (spec.aggregate == Average)
    y = c.make<MulOp>({y, c.scalar(out, 1.0 / static_cast<double>(trees))});
  if (!spec.scored.empty()) {
    // A target no reached leaf scores is 0.
    Value scoredTable = c.constant(
        RankedTensorType::get({spec.leaves, spec.targets}, f32), spec.scored);
    Value any = c.reduce(
        ReduceKind::Max,
        c.make<GatherOp>({scoredTable, leaf}, {n.namedI64("axis", 0)}), {1},
        /*keepdims=*/false);
    y = c.make<SelectOp>(
        {c.make<GreaterOp>({any, c.scalar(f32, 0.5)}), y, c.scalar(out, 0)});
  }
  if (!spec.baseValues.empty())
    y = c.make<AddOp>({y, vec(out, spec.baseValues)});
  return y;
}

/// The input both ops take: [N, features], features known.
FailureOr<int64_t> featureCount(NodeImporter &n) {
  RankedTensorType xType = n.inputType(0);
  if (xType.getRank() != 2 || xType.isDynamicDim(1))
    return n.fail("input 'X' must be [N, features] with the features known "
                  "at compile time");
  return xType.getDimSize(1);
}

/// ai.onnx.ml TreeEnsemble (opset 5). MIN and MAX leave the targets no
/// leaf reached at the type's largest or lowest value, as onnx's reference
/// does. post_transform as postTransform computes it. membership_values lists each BRANCH_MEMBER node's set in
/// node order, NaN after each (the operator's definition).
LogicalResult importTreeEnsemble(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Type type = n.inputType(0).getElementType();
  if (!(type.isF32() || type.isF64() || type.isF16()))
    return n.fail("input 'X' must be float, double or float16, not " +
                  typeText(type));
  FailureOr<int64_t> features = featureCount(n);
  if (failed(features))
    return failure();

  SmallVector<int64_t> featureIds = n.intsAttr("nodes_featureids");
  SmallVector<int64_t> trueIds = n.intsAttr("nodes_truenodeids");
  SmallVector<int64_t> falseIds = n.intsAttr("nodes_falsenodeids");
  SmallVector<int64_t> trueLeafs = n.intsAttr("nodes_trueleafs");
  SmallVector<int64_t> falseLeafs = n.intsAttr("nodes_falseleafs");
  SmallVector<int64_t> roots = n.intsAttr("tree_roots");
  SmallVector<int64_t> targetIds = n.intsAttr("leaf_targetids");
  SmallVector<int64_t> tracksTrue =
      n.intsAttr("nodes_missing_value_tracks_true");
  EnsembleSpec spec;
  spec.targets = n.intAttr("n_targets", 0);
  spec.aggregate = n.intAttr("aggregate_function", 1);
  spec.post = n.intAttr("post_transform", 0);
  spec.compareType = spec.outputType = type;
  FailureOr<SmallVector<double>> splits = floatTensorAttr(n, "nodes_splits");
  FailureOr<SmallVector<double>> weights = floatTensorAttr(n, "leaf_weights");
  FailureOr<DenseElementsAttr> modesAttr = n.tensorAttr("nodes_modes");
  if (failed(splits) || failed(weights) || failed(modesAttr))
    return failure();
  if (!isa<IntegerType>(modesAttr->getElementType()))
    return n.fail("attribute 'nodes_modes' must be an integer tensor");
  SmallVector<int64_t> modes;
  for (const APInt &v : modesAttr->getValues<APInt>())
    modes.push_back(v.getZExtValue());

  size_t nodes = featureIds.size(), leaves = targetIds.size();
  auto sameLength = [&](size_t size, StringRef name) -> LogicalResult {
    if (size == nodes)
      return success();
    return n.fail("attribute '" + name + "' has " + Twine(size) +
                  " entries; nodes_featureids has " + Twine(nodes));
  };
  if (nodes == 0 || roots.empty())
    return n.fail("the ensemble has no nodes or no trees");
  if (failed(sameLength(trueIds.size(), "nodes_truenodeids")) ||
      failed(sameLength(falseIds.size(), "nodes_falsenodeids")) ||
      failed(sameLength(trueLeafs.size(), "nodes_trueleafs")) ||
      failed(sameLength(falseLeafs.size(), "nodes_falseleafs")) ||
      failed(sameLength(modes.size(), "nodes_modes")) ||
      failed(sameLength(splits->size(), "nodes_splits")) ||
      (!tracksTrue.empty() &&
       failed(sameLength(tracksTrue.size(),
                         "nodes_missing_value_tracks_true"))))
    return failure();
  if (weights->size() != leaves)
    return n.fail("attribute 'leaf_weights' has " + Twine(weights->size()) +
                  " entries; leaf_targetids has " + Twine(leaves));
  if (spec.targets <= 0)
    return n.fail("n_targets must be positive, got " + Twine(spec.targets));
  if (spec.aggregate < 0 || spec.aggregate > 3)
    return n.fail("aggregate_function " + Twine(spec.aggregate) +
                  " is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)");
  if (spec.post < None || spec.post > Probit)
    return n.fail("post_transform " + Twine(spec.post) +
                  " is not one of 0 (NONE), 1 (SOFTMAX), 2 (LOGISTIC), 3 "
                  "(SOFTMAX_ZERO), 4 (PROBIT)");
  for (int64_t t : targetIds)
    if (t < 0 || t >= spec.targets)
      return n.fail("leaf target id " + Twine(t) + " is out of range for " +
                    Twine(spec.targets) + " targets");

  int64_t k = static_cast<int64_t>(nodes);
  auto child = [&](size_t i, bool isTrue) -> FailureOr<int64_t> {
    int64_t id = isTrue ? trueIds[i] : falseIds[i];
    bool leaf = (isTrue ? trueLeafs[i] : falseLeafs[i]) != 0;
    int64_t limit = leaf ? static_cast<int64_t>(leaves) : k;
    if (id < 0 || id >= limit)
      return n.fail("node " + Twine(i) + "'s " + (isTrue ? "true" : "false") +
                    " " + (leaf ? "leaf" : "node") + " id " + Twine(id) +
                    " is out of range (" + Twine(limit) + ")");
    return leaf ? k + id : id;
  };
  for (size_t i = 0; i < nodes; ++i) {
    FailureOr<int64_t> t = child(i, true), f = child(i, false);
    if (failed(t) || failed(f))
      return failure();
    if (modes[i] > MEMBER)
      return n.fail("node " + Twine(i) + "'s mode " + Twine(modes[i]) +
                    " is not one of 0-6 (BRANCH_LEQ ... BRANCH_MEMBER)");
    if (featureIds[i] < 0 || featureIds[i] >= *features)
      return n.fail("node " + Twine(i) + "'s feature id " +
                    Twine(featureIds[i]) + " is out of range for " +
                    Twine(*features) + " features");
    spec.trueNext.push_back(*t);
    spec.falseNext.push_back(*f);
    spec.tracksTrue.push_back(!tracksTrue.empty() && tracksTrue[i] != 0);
  }
  spec.features = featureIds;
  spec.modes = modes;
  spec.splits = *splits;
  // A root whose two children are the same leaf is that leaf (onnx's
  // one-leaf tree).
  for (int64_t r : roots) {
    if (r < 0 || r >= k)
      return n.fail("tree root " + Twine(r) + " is out of range (" + Twine(k) +
                    " nodes)");
    bool leafTree = trueLeafs[r] && falseLeafs[r] && trueIds[r] == falseIds[r];
    spec.start.push_back(leafTree ? spec.trueNext[r] : r);
  }
  // Each leaf's weight in its target's column; the other columns hold the
  // aggregate's identity.
  double identity = spec.aggregate == Min   ? largest(type, false)
                    : spec.aggregate == Max ? largest(type, true)
                                            : 0.0;
  spec.leaves = static_cast<int64_t>(leaves);
  spec.weights.assign(leaves * spec.targets, identity);
  for (size_t j = 0; j < leaves; ++j)
    spec.weights[j * spec.targets + targetIds[j]] = (*weights)[j];
  // Each BRANCH_MEMBER node's set, in node order.
  if (llvm::is_contained(modes, MEMBER)) {
    FailureOr<SmallVector<double>> members =
        floatTensorAttr(n, "membership_values");
    if (failed(members))
      return failure();
    size_t at = 0;
    for (size_t i = 0; i < nodes; ++i) {
      if (modes[i] != MEMBER)
        continue;
      for (; at < members->size() && !std::isnan((*members)[at]); ++at)
        spec.members.push_back({static_cast<int64_t>(i), (*members)[at]});
      if (at == members->size())
        return n.fail("membership_values ends before node " + Twine(i) +
                      "'s set does (each set ends with a NaN)");
      ++at;
    }
  }
  Composer c(n);
  return bindComposed(
      c, postTransform(n, c, composeEnsemble(n, c, spec), spec.post));
}

/// The nodes and leaves of TreeEnsembleRegressor and TreeEnsembleClassifier
/// (opsets 1 and 3), as onnxruntime reads them: nodes are named by (tree
/// id, node id) and their children by node id within the tree; a LEAF
/// node's contributions are the `leaf`* entries naming it ("target_" or
/// "class_"; several targets, or several entries for one, add up). X
/// (float, double, int64 or int32) is compared in float (double for a
/// double X), the splits being nodes_values (floats) or opset 3's
/// nodes_values_as_tensor; the scores are float. Each tree's root is its
/// one node no other node names as a child. `spec.targets` is set by the
/// caller; `what` names a leaf entry's target in errors.
LogicalResult parseLegacyEnsemble(NodeImporter &n, const std::string &leaf,
                                  StringRef what, EnsembleSpec &spec) {
  if (failed(n.checkArity(1, 1, /*maxOutputs=*/2)))
    return failure();
  Type xType = n.inputType(0).getElementType();
  OpBuilder &b = n.builder();
  if (!(xType.isF32() || xType.isF64() || xType.isSignlessInteger(64) ||
        xType.isSignlessInteger(32)))
    return n.fail("input 'X' must be float, double, int64 or int32, not " +
                  typeText(xType));
  FailureOr<int64_t> features = featureCount(n);
  if (failed(features))
    return failure();
  spec.compareType = xType.isF64() ? b.getF64Type() : b.getF32Type();
  spec.outputType = b.getF32Type();
  static const char *const kPosts[] = {"NONE", "SOFTMAX", "LOGISTIC",
                                       "SOFTMAX_ZERO", "PROBIT"};
  std::string post = n.stringAttr("post_transform", "NONE");
  auto *postName = llvm::find(kPosts, post);
  if (postName == std::end(kPosts))
    return n.fail("post_transform '" + post +
                  "' is not one of NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, "
                  "PROBIT");
  spec.post = postName - std::begin(kPosts);

  SmallVector<int64_t> treeIds = n.intsAttr("nodes_treeids");
  SmallVector<int64_t> nodeIds = n.intsAttr("nodes_nodeids");
  SmallVector<int64_t> featureIds = n.intsAttr("nodes_featureids");
  SmallVector<int64_t> trueIds = n.intsAttr("nodes_truenodeids");
  SmallVector<int64_t> falseIds = n.intsAttr("nodes_falsenodeids");
  SmallVector<int64_t> tracksTrue =
      n.intsAttr("nodes_missing_value_tracks_true");
  SmallVector<std::string> modeNames = n.stringsAttr("nodes_modes");
  FailureOr<SmallVector<double>> valuesOr = floatsOrTensor(n, "nodes_values");
  SmallVector<int64_t> targetTrees = n.intsAttr(leaf + "treeids");
  SmallVector<int64_t> targetNodes = n.intsAttr(leaf + "nodeids");
  SmallVector<int64_t> targetIds = n.intsAttr(leaf + "ids");
  FailureOr<SmallVector<double>> weightsOr = floatsOrTensor(n, leaf + "weights");
  FailureOr<SmallVector<double>> baseOr = floatsOrTensor(n, "base_values");
  if (failed(valuesOr) || failed(weightsOr) || failed(baseOr))
    return failure();
  SmallVector<double> &values = *valuesOr, &targetWeights = *weightsOr;
  spec.baseValues = *baseOr;

  size_t count = nodeIds.size();
  for (auto [size, name] :
       {std::pair<size_t, StringRef>{treeIds.size(), "nodes_treeids"},
        {featureIds.size(), "nodes_featureids"},
        {trueIds.size(), "nodes_truenodeids"},
        {falseIds.size(), "nodes_falsenodeids"},
        {modeNames.size(), "nodes_modes"},
        {values.size(), "nodes_values"}})
    if (size != count)
      return n.fail("attribute '" + name + "' has " + Twine(size) +
                    " entries; nodes_nodeids has " + Twine(count));
  if (!tracksTrue.empty() && tracksTrue.size() != count)
    return n.fail("attribute 'nodes_missing_value_tracks_true' has " +
                  Twine(tracksTrue.size()) + " entries; nodes_nodeids has " +
                  Twine(count));
  if (targetNodes.size() != targetTrees.size() ||
      targetIds.size() != targetTrees.size() ||
      targetWeights.size() != targetTrees.size())
    return n.fail(leaf + "treeids, " + leaf + "nodeids, " + leaf + "ids and " +
                  leaf + "weights differ in length");
  if (count == 0)
    return n.fail("the ensemble has no nodes");
  if (!spec.baseValues.empty() &&
      static_cast<int64_t>(spec.baseValues.size()) != spec.targets)
    return n.fail("base_values has " + Twine(spec.baseValues.size()) +
                  " entries for " + Twine(spec.targets) + " targets");

  // Number the branch nodes 0..K-1 and the leaves 0..L-1, in order.
  static const char *const kModes[] = {"BRANCH_LEQ", "BRANCH_LT",
                                       "BRANCH_GTE", "BRANCH_GT",
                                       "BRANCH_EQ",  "BRANCH_NEQ"};
  std::map<std::pair<int64_t, int64_t>, size_t> byId; // (tree, node) -> i
  SmallVector<int64_t> shared(count);                 // i -> shared index
  SmallVector<bool> isLeaf(count);
  int64_t branches = 0, leaves = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!byId.emplace(std::make_pair(treeIds[i], nodeIds[i]), i).second)
      return n.fail("tree " + Twine(treeIds[i]) + " lists node " +
                    Twine(nodeIds[i]) + " twice");
    isLeaf[i] = modeNames[i] == "LEAF";
    if (!isLeaf[i]) {
      auto *mode = llvm::find(kModes, modeNames[i]);
      if (mode == std::end(kModes))
        return n.fail("node mode '" + modeNames[i] +
                      "' is not one of BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, "
                      "BRANCH_GT, BRANCH_EQ, BRANCH_NEQ, LEAF");
      if (featureIds[i] < 0 || featureIds[i] >= *features)
        return n.fail("tree " + Twine(treeIds[i]) + " node " +
                      Twine(nodeIds[i]) + "'s feature id " +
                      Twine(featureIds[i]) + " is out of range for " +
                      Twine(*features) + " features");
      spec.modes.push_back(mode - std::begin(kModes));
      spec.features.push_back(featureIds[i]);
      spec.splits.push_back(values[i]);
      spec.tracksTrue.push_back(!tracksTrue.empty() && tracksTrue[i] != 0);
    }
  }
  for (size_t i = 0; i < count; ++i)
    shared[i] = isLeaf[i] ? leaves++ : branches++;
  for (size_t i = 0; i < count; ++i)
    if (isLeaf[i])
      shared[i] += branches;
  // Children, by node id within the tree; and the roots: the nodes no
  // other node of their tree names.
  llvm::DenseSet<size_t> named;
  for (size_t i = 0; i < count; ++i) {
    if (isLeaf[i])
      continue;
    for (bool isTrue : {true, false}) {
      int64_t id = isTrue ? trueIds[i] : falseIds[i];
      auto it = byId.find({treeIds[i], id});
      if (it == byId.end())
        return n.fail("tree " + Twine(treeIds[i]) + " node " +
                      Twine(nodeIds[i]) + "'s " + (isTrue ? "true" : "false") +
                      " child " + Twine(id) + " is not a node of the tree");
      named.insert(it->second);
      (isTrue ? spec.trueNext : spec.falseNext).push_back(shared[it->second]);
    }
  }
  std::map<int64_t, int64_t> rootOf; // tree -> shared index
  for (size_t i = 0; i < count; ++i) {
    if (named.contains(i))
      continue;
    if (!rootOf.emplace(treeIds[i], shared[i]).second)
      return n.fail("tree " + Twine(treeIds[i]) +
                    " has more than one root (nodes no other node names)");
  }
  if (rootOf.size() != std::set<int64_t>(treeIds.begin(), treeIds.end()).size())
    return n.fail("a tree has no root (its nodes form a cycle)");
  for (auto [tree, root] : rootOf)
    spec.start.push_back(root);
  // The leaves' contributions. Under MIN and MAX (onnxruntime's rule) a
  // leaf's entries for several targets each count once, and a target no
  // reached leaf scores is 0; with one target, every leaf scores it (0
  // where it has no entry).
  spec.leaves = leaves;
  bool extreme = spec.aggregate == Min || spec.aggregate == Max;
  bool sparse = extreme && spec.targets > 1;
  spec.weights.assign(leaves * spec.targets,
                      sparse ? largest(spec.outputType, spec.aggregate == Max)
                             : 0.0);
  if (sparse)
    spec.scored.assign(leaves * spec.targets, 0.0);
  SmallVector<bool> entered(extreme ? leaves * spec.targets : 0);
  for (size_t t = 0; t < targetTrees.size(); ++t) {
    auto it = byId.find({targetTrees[t], targetNodes[t]});
    if (it == byId.end() || !isLeaf[it->second])
      return n.fail(Twine(what) + " entry " + Twine(t) + " names tree " +
                    Twine(targetTrees[t]) + " node " + Twine(targetNodes[t]) +
                    ", which is not a LEAF");
    if (targetIds[t] < 0 || targetIds[t] >= spec.targets)
      return n.fail(Twine(what) + " id " + Twine(targetIds[t]) +
                    " is out of range for " + Twine(spec.targets) + " " +
                    what + "s");
    int64_t at = (shared[it->second] - branches) * spec.targets + targetIds[t];
    if (!extreme) {
      spec.weights[at] += targetWeights[t];
      continue;
    }
    if (entered[at])
      return n.fail("tree " + Twine(targetTrees[t]) + " leaf " +
                    Twine(targetNodes[t]) + " has two entries for " + what +
                    " " + Twine(targetIds[t]) + " (MIN and MAX take one)");
    entered[at] = true;
    spec.weights[at] = targetWeights[t];
    if (sparse)
      spec.scored[at] = 1;
  }
  return success();
}


/// ai.onnx.ml TreeEnsembleRegressor (opsets 1 and 3): parseLegacyEnsemble's
/// trees with target_* leaves, n_targets outputs. AVERAGE divides the sum
/// by the number of trees; MIN and MAX take the extreme leaf weight per
/// target, 0 for a target no reached leaf scores (onnxruntime's rule; onnx's
/// reference leaves such a target at the type's extreme); base_values are
/// added after. onnxruntime 1.20.1 ignores post_transform (but PROBIT) on a
/// one-target regressor; Kiln applies it, as the operator's definition
/// says.
LogicalResult importTreeEnsembleRegressor(NodeImporter &n) {
  EnsembleSpec spec;
  spec.targets = n.intAttr("n_targets", 1);
  if (spec.targets <= 0)
    return n.fail("n_targets must be positive, got " + Twine(spec.targets));
  static const char *const kAggregates[] = {"AVERAGE", "SUM", "MIN", "MAX"};
  std::string aggregate = n.stringAttr("aggregate_function", "SUM");
  auto *aggregateName = llvm::find(kAggregates, aggregate);
  if (aggregateName == std::end(kAggregates))
    return n.fail("aggregate_function '" + aggregate +
                  "' is not one of AVERAGE, SUM, MIN, MAX");
  spec.aggregate = aggregateName - std::begin(kAggregates);
  if (failed(parseLegacyEnsemble(n, "target_", "target", spec)))
    return failure();
  Composer c(n);
  return bindComposed(
      c, postTransform(n, c, composeEnsemble(n, c, spec), spec.post));
}

/// ai.onnx.ml TreeEnsembleClassifier (opsets 1 and 3): parseLegacyEnsemble's
/// trees with class_* leaves, one score per class label, summed over the
/// trees, base_values added, post_transform applied: Z, [N, classes]. Y is
/// the label of the highest score before post_transform (the first of
/// equal ones), from classlabels_int64s; classlabels_strings are mapped on
/// the host (HostPartition.cpp replaces them with positions first).
///
/// Two classes whose leaves score the first only (sklearn-onnx's binary
/// forests and boosted trees) follow onnxruntime, whose rule onnx's
/// reference shares where it matters (below): s is the summed score plus
/// base_values[0]. With every class weight >= 0 (a forest's
/// probabilities), Z = [1 - s, s] and the label is the second if s > 0.5;
/// otherwise (boosting's log-odds) Z = [sigmoid(-s), sigmoid(s)] under
/// LOGISTIC, [-s, s] under NONE, SOFTMAX and SOFTMAX_ZERO (onnxruntime
/// applies neither; the reference gives [1 - s, s] under NONE), and the
/// label is the second if s > 0. Refused there: PROBIT (onnxruntime writes
/// one score of two), two base values, and leaves that score only the
/// second class (onnxruntime's scores drop the trees' sum).
///
/// Two classes both scored take the top raw score's class as with more
/// (onnxruntime
/// 1.20.1 instead labels every row whose second score is above 0 with the
/// second label).
LogicalResult importTreeEnsembleClassifier(NodeImporter &n) {
  SmallVector<int64_t> labels = n.intsAttr("classlabels_int64s");
  if (n.hasAttr("classlabels_strings"))
    return n.fail("classlabels_strings reach the device (an internal error: "
                  "the host partition maps them)");
  if (labels.empty())
    return n.fail("needs classlabels_int64s or classlabels_strings");
  SmallVector<int64_t> classIds = n.intsAttr("class_ids");
  bool binary =
      labels.size() == 2 && !classIds.empty() && llvm::all_equal(classIds);
  EnsembleSpec spec;
  spec.targets = binary ? 1 : static_cast<int64_t>(labels.size());
  spec.aggregate = Sum;
  if (binary) {
    if (classIds[0] != 0)
      return n.fail("two classes of which the leaves score the second only "
                    "are not supported (onnxruntime's scores drop the trees' "
                    "sum; score the first, as sklearn-onnx does)");
    FailureOr<SmallVector<double>> bases = floatsOrTensor(n, "base_values");
    if (failed(bases))
      return failure();
    if (bases->size() > 1)
      return n.fail("two classes of which the leaves score one take at most "
                    "one base value, got " + Twine(bases->size()));
  }
  if (failed(parseLegacyEnsemble(n, "class_", "class", spec)))
    return failure();
  Type i64 = n.builder().getI64Type();
  Composer c(n);
  SmallVector<double> labelValues(labels.begin(), labels.end());
  Value labelTable = c.constant(
      RankedTensorType::get({static_cast<int64_t>(labels.size())}, i64),
      labelValues);
  if (binary) {
    if (spec.post == Probit)
      return n.fail("post_transform PROBIT on two classes of which the "
                    "leaves score one is not supported (onnxruntime writes "
                    "one score of the two)");
    Value s = composeEnsemble(n, c, spec); // [N, 1]
    if (!s)
      return failure();
    Type f32 = n.builder().getF32Type();
    FailureOr<SmallVector<double>> weights = floatsOrTensor(n, "class_weights");
    if (failed(weights))
      return failure();
    bool positive = llvm::none_of(*weights, [](double w) { return w < 0; });
    Value first = positive ? c.make<SubOp>({c.scalar(f32, 1), s})
                           : c.make<NegOp>(s);
    Value second = s;
    if (!positive && spec.post == Logistic) {
      first = c.make<SigmoidOp>(first);
      second = c.make<SigmoidOp>(second);
    }
    Value scores = c.concat({first, second}, 1);
    int64_t batch = n.inputType(0).getDimSize(0);
    Value wins = c.make<GreaterOp>({s, c.scalar(f32, positive ? 0.5 : 0)});
    Value position = c.reshape(c.cast(wins, i64), {batch});
    Value label =
        c.make<GatherOp>({labelTable, position}, {n.namedI64("axis", 0)});
    return bindComposed(c, {label, scores});
  }
  // The label is the top raw score's, as onnxruntime takes it (the same
  // class after every post_transform but SOFTMAX_ZERO, which is not
  // monotonic).
  Value raw = composeEnsemble(n, c, spec);
  Value best = c.make<ArgMaxOp>(
      raw, {n.namedI64("axis", 1),
            n.named("keepdims", n.builder().getBoolAttr(false))});
  Value label =
      c.make<GatherOp>({labelTable, best}, {n.namedI64("axis", 0)});
  return bindComposed(c, {label, postTransform(n, c, raw, spec.post)});
}

} // namespace

void registerTreeEnsembleHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"ai.onnx.ml.TreeEnsemble", 5, importTreeEnsemble,
       "X of known feature count"},
      {"ai.onnx.ml.TreeEnsembleRegressor", 1, importTreeEnsembleRegressor,
       "MIN and MAX score an unreached target 0, as onnxruntime; X of known "
       "feature count"},
      {"ai.onnx.ml.TreeEnsembleRegressor", 3, importTreeEnsembleRegressor,
       "MIN and MAX score an unreached target 0, as onnxruntime; X of known "
       "feature count"},
      {"ai.onnx.ml.TreeEnsembleClassifier", 1, importTreeEnsembleClassifier,
       "two classes with the first scored as onnxruntime (not under "
       "PROBIT); string labels through a host step"},
      {"ai.onnx.ml.TreeEnsembleClassifier", 3, importTreeEnsembleClassifier,
       "two classes with the first scored as onnxruntime (not under "
       "PROBIT); string labels through a host step"},
  });
}

} // namespace kiln::onnx_frontend
