//===- MLHandlers.cpp - ONNX ops of the ai.onnx.ml domain -----------------===//
//
// The traditional-ML ops (ai.onnx.ml) that are exact compositions of kiln
// ops: Binarizer (a comparison and a select), ArrayFeatureExtractor (a
// gather along the last axis) and TreeEnsemble (every split compared at
// once, then each tree walked one level per step with gathers). They are registered under qualified names
// ("ai.onnx.ml.Binarizer") and versioned by that domain's opset. LabelEncoder
// on strings is a host step (HostPartition.cpp), not a handler.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// The element types both ops take for X: tensor(float), tensor(double),
/// tensor(int64), tensor(int32).
bool isMLNumericType(Type type) {
  return type.isF32() || type.isF64() || type.isSignlessInteger(64) ||
         type.isSignlessInteger(32);
}

/// y = x > threshold ? 1 : 0, in x's type. For integer x the threshold is
/// floored first (x > t and x > floor(t) agree on integers), and clamped to
/// the type's range so that the constant does not wrap; a NaN threshold,
/// which nothing exceeds, becomes the type's maximum.
LogicalResult importBinarizer(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  Value x = n.input(0);
  Type type = n.inputType(0).getElementType();
  if (!isMLNumericType(type))
    return n.fail("input 'X' must be float, double, int64 or int32, not " +
                  typeText(type));
  double threshold = n.floatAttr("threshold", 0.0f);
  if (isa<IntegerType>(type)) {
    double low = type.isSignlessInteger(32)
                     ? double(std::numeric_limits<int32_t>::min())
                     : double(std::numeric_limits<int64_t>::min());
    double high = type.isSignlessInteger(32)
                      ? double(std::numeric_limits<int32_t>::max())
                      : 9.2233720368547748e18; // below 2^63, exact in double
    threshold = std::isnan(threshold)
                    ? high
                    : std::min(std::max(std::floor(threshold), low), high);
  }
  Composer c(n);
  Value above = c.make<GreaterOp>({x, c.scalar(type, threshold)});
  return bindComposed(
      c, c.make<SelectOp>({above, c.scalar(type, 1.0), c.scalar(type, 0.0)}));
}

/// z = x[..., indices] with the indices (int64, any shape) flattened: the
/// result is [..., len] for x of rank 2 or more and [1, len] for a 1-D x
/// (onnxruntime's behaviour, which ONNX's reference follows). Negative
/// indices count from the end, as in Gather; constant ones are range-checked.
LogicalResult importArrayFeatureExtractor(NodeImporter &n) {
  if (failed(n.checkArity(2, 2)))
    return failure();
  RankedTensorType xType = n.inputType(0);
  RankedTensorType yType = n.inputType(1);
  if (!isMLNumericType(xType.getElementType()))
    return n.fail("input 'X' must be float, double, int64 or int32, not " +
                  typeText(xType.getElementType()));
  if (!yType.getElementType().isSignlessInteger(64))
    return n.fail("indices '" + n.node().input(1) + "' must be int64, not " +
                  typeText(yType.getElementType()));
  if (xType.getRank() == 0)
    return n.fail("input 'X' must have rank 1 or more, got a scalar");
  int64_t extent = xType.getDimSize(xType.getRank() - 1);
  if (std::optional<DenseElementsAttr> indices = n.constantInput(1))
    for (const APInt &v : indices->getValues<APInt>()) {
      int64_t index = v.getSExtValue();
      if (index < -extent || index >= extent)
        return n.fail("index " + Twine(index) +
                      " is out of range for a last axis of size " +
                      Twine(extent));
    }
  int64_t count = yType.getNumElements();
  int64_t axis = xType.getRank() - 1;
  Composer c(n);
  Value gathered =
      count == 0
          ? c.sliceAxis(n.input(0), axis, 0, 0)
          : c.make<GatherOp>({n.input(0), c.reshape(n.input(1), {count})},
                             {n.namedI64("axis", axis)});
  if (xType.getRank() == 1)
    gathered = c.reshape(gathered, {1, count});
  return bindComposed(c, gathered);
}


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

/// ai.onnx.ml TreeEnsemble (opset 5): every tree's nodes, splits and leaves
/// are attributes, so the whole ensemble is constants.
///
/// Nodes and leaves share one index space: node i is i, leaf j is K + j (K
/// nodes). Every node's condition is computed for every sample at once
/// (X's feature columns gathered, compared with the splits under each
/// node's mode; set membership as a 0/1 matmul of equalities; NaN goes to
/// the true branch where nodes_missing_value_tracks_true says so). Then all
/// trees step together: `cur` ([N, trees]) starts at the roots and each of
/// `depth` steps takes the true or false child of the node it is at; a leaf
/// is its own child, so trees shallower than the deepest stay put. The
/// leaves' weights, one [leaves, n_targets] table with each weight in its
/// target's column, are gathered and reduced over the trees (SUM, AVERAGE:
/// the sum over the number of trees, MIN, MAX: targets no leaf reached stay
/// at the type's largest or lowest value, as in onnx's reference).
/// post_transform NONE, LOGISTIC and SOFTMAX; SOFTMAX_ZERO and PROBIT are
/// refused. membership_values lists each BRANCH_MEMBER node's set in node
/// order, NaN after each (the operator's definition).
LogicalResult importTreeEnsemble(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  RankedTensorType xType = n.inputType(0);
  Type type = xType.getElementType();
  if (!(type.isF32() || type.isF64() || type.isF16()))
    return n.fail("input 'X' must be float, double or float16, not " +
                  typeText(type));
  if (xType.getRank() != 2 || xType.isDynamicDim(1))
    return n.fail("input 'X' must be [N, features] with the features known "
                  "at compile time");
  int64_t batch = xType.getDimSize(0), features = xType.getDimSize(1);

  SmallVector<int64_t> featureIds = n.intsAttr("nodes_featureids");
  SmallVector<int64_t> trueIds = n.intsAttr("nodes_truenodeids");
  SmallVector<int64_t> falseIds = n.intsAttr("nodes_falsenodeids");
  SmallVector<int64_t> trueLeafs = n.intsAttr("nodes_trueleafs");
  SmallVector<int64_t> falseLeafs = n.intsAttr("nodes_falseleafs");
  SmallVector<int64_t> roots = n.intsAttr("tree_roots");
  SmallVector<int64_t> targetIds = n.intsAttr("leaf_targetids");
  SmallVector<int64_t> tracksTrue =
      n.intsAttr("nodes_missing_value_tracks_true");
  int64_t targets = n.intAttr("n_targets", 0);
  int64_t aggregate = n.intAttr("aggregate_function", 1);
  int64_t post = n.intAttr("post_transform", 0);
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
  if (targets <= 0)
    return n.fail("n_targets must be positive, got " + Twine(targets));
  if (aggregate < 0 || aggregate > 3)
    return n.fail("aggregate_function " + Twine(aggregate) +
                  " is not one of 0 (AVERAGE), 1 (SUM), 2 (MIN), 3 (MAX)");
  if (post != 0 && post != 1 && post != 2)
    return n.fail("post_transform " + Twine(post) +
                  " is not supported (0 NONE, 1 SOFTMAX and 2 LOGISTIC are)");
  for (int64_t t : targetIds)
    if (t < 0 || t >= targets)
      return n.fail("leaf target id " + Twine(t) + " is out of range for " +
                    Twine(targets) + " targets");

  // The unified index of node i's true or false child.
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
  SmallVector<double> trueNext, falseNext, columns, splitRow;
  for (size_t i = 0; i < nodes; ++i) {
    FailureOr<int64_t> t = child(i, true), f = child(i, false);
    if (failed(t) || failed(f))
      return failure();
    trueNext.push_back(*t);
    falseNext.push_back(*f);
    if (modes[i] > 6)
      return n.fail("node " + Twine(i) + "'s mode " + Twine(modes[i]) +
                    " is not one of 0-6 (BRANCH_LEQ ... BRANCH_MEMBER)");
    if (featureIds[i] < 0 || featureIds[i] >= features)
      return n.fail("node " + Twine(i) + "'s feature id " +
                    Twine(featureIds[i]) + " is out of range for " +
                    Twine(features) + " features");
    columns.push_back(featureIds[i]);
    splitRow.push_back((*splits)[i]);
  }
  for (size_t j = 0; j < leaves; ++j) {
    trueNext.push_back(k + j);
    falseNext.push_back(k + j);
    columns.push_back(0);
    splitRow.push_back(0);
  }
  // Each tree's root; a root whose two children are the same leaf is that
  // leaf (onnx's degenerate one-leaf tree).
  SmallVector<double> start;
  for (int64_t r : roots) {
    if (r < 0 || r >= k)
      return n.fail("tree root " + Twine(r) + " is out of range (" + Twine(k) +
                    " nodes)");
    bool leafTree = trueLeafs[r] && falseLeafs[r] && trueIds[r] == falseIds[r];
    start.push_back(leafTree ? trueNext[r] : r);
  }
  // The depth: the longest path from a root, found by walking; a cycle (a
  // path longer than the node count) is an error.
  int64_t depth = 0;
  SmallVector<std::pair<int64_t, int64_t>> stack;
  for (double s : start)
    if (s < k)
      stack.push_back({static_cast<int64_t>(s), 1});
  while (!stack.empty()) {
    auto [i, d] = stack.pop_back_val();
    if (d > k)
      return n.fail("the trees' node ids form a cycle");
    depth = std::max(depth, d);
    for (double next : {trueNext[i], falseNext[i]})
      if (next < k)
        stack.push_back({static_cast<int64_t>(next), d + 1});
  }
  // Each BRANCH_MEMBER node's set, in node order.
  SmallVector<double> memberColumns, memberValues, memberNode;
  if (llvm::is_contained(modes, 6)) {
    FailureOr<SmallVector<double>> members =
        floatTensorAttr(n, "membership_values");
    if (failed(members))
      return failure();
    size_t at = 0;
    for (size_t i = 0; i < nodes; ++i) {
      if (modes[i] != 6)
        continue;
      for (; at < members->size() && !std::isnan((*members)[at]); ++at) {
        memberColumns.push_back(featureIds[i]);
        memberValues.push_back((*members)[at]);
        memberNode.push_back(i);
      }
      if (at == members->size())
        return n.fail("membership_values ends before node " + Twine(i) +
                      "'s set does (each set ends with a NaN)");
      ++at;
    }
  }

  Composer c(n);
  int64_t total = k + static_cast<int64_t>(leaves);
  int64_t trees = static_cast<int64_t>(roots.size());
  Type i64 = n.builder().getI64Type(), i1 = n.builder().getI1Type();
  auto vec = [&](Type element, ArrayRef<double> values) {
    return c.constant(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, element),
        values);
  };
  // x's value at each node's feature, [N, total], and the conditions.
  Value xs = c.make<GatherOp>({n.input(0), vec(i64, columns)},
                              {n.namedI64("axis", 1)});
  Value split = vec(type, splitRow);
  Value cond = c.broadcast(c.scalar(i1, 0), {batch, total});
  auto modeMask = [&](int64_t mode) {
    SmallVector<double> mask(total, 0);
    for (size_t i = 0; i < nodes; ++i)
      mask[i] = modes[i] == mode;
    return vec(i1, mask);
  };
  auto withMode = [&](int64_t mode, Value hit) {
    if (llvm::is_contained(modes, mode))
      cond = c.make<SelectOp>({c.broadcast(modeMask(mode), {batch, total}),
                               hit, cond});
  };
  withMode(0, c.make<LessEqualOp>({xs, split}));
  withMode(1, c.make<LessOp>({xs, split}));
  withMode(2, c.make<GreaterEqualOp>({xs, split}));
  withMode(3, c.make<GreaterOp>({xs, split}));
  withMode(4, c.make<EqualOp>({xs, split}));
  withMode(5, c.make<NotOp>(c.make<EqualOp>({xs, split})));
  if (!memberValues.empty()) {
    // hits[n, node] = sum over the node's members of (x == member).
    int64_t count = static_cast<int64_t>(memberValues.size());
    Value gathered = c.make<GatherOp>({n.input(0), vec(i64, memberColumns)},
                                      {n.namedI64("axis", 1)});
    Value equal = c.cast(c.make<EqualOp>({gathered, vec(type, memberValues)}),
                         n.builder().getF32Type());
    SmallVector<double> owner(count * total, 0);
    for (int64_t m = 0; m < count; ++m)
      owner[m * total + static_cast<int64_t>(memberNode[m])] = 1;
    Value ownerMatrix = c.constant(
        RankedTensorType::get({count, total}, n.builder().getF32Type()),
        owner);
    Value hits = c.make<MatmulOp>({equal, ownerMatrix});
    withMode(6, c.make<GreaterOp>(
                    {hits, c.scalar(n.builder().getF32Type(), 0.5)}));
  }
  if (llvm::is_contained(tracksTrue, 1)) {
    SmallVector<double> mask(total, 0);
    for (size_t i = 0; i < nodes; ++i)
      mask[i] = tracksTrue[i] != 0;
    Value isNan = c.make<NotOp>(c.make<EqualOp>({xs, xs}));
    cond = c.make<OrOp>(
        {cond, c.make<AndOp>({isNan, c.broadcast(vec(i1, mask),
                                                 {batch, total})})});
  }

  // Walk: cur[N, trees] steps to the true or false child `depth` times.
  Value cur = c.broadcast(vec(i64, start), {batch, trees});
  Value trueTable = vec(i64, trueNext), falseTable = vec(i64, falseNext);
  for (int64_t step = 0; step < depth; ++step) {
    Value taken = c.make<GatherElementsOp>({cond, cur}, {n.namedI64("axis", 1)});
    Value onTrue =
        c.make<GatherOp>({trueTable, cur}, {n.namedI64("axis", 0)});
    Value onFalse =
        c.make<GatherOp>({falseTable, cur}, {n.namedI64("axis", 0)});
    cur = c.make<SelectOp>({taken, onTrue, onFalse});
  }
  Value leaf = c.make<SubOp>({cur, c.scalar(i64, static_cast<double>(k))});

  // Each leaf's weight in its target's column; the other columns hold the
  // aggregate's identity.
  double identity = 0;
  if (aggregate == 2 || aggregate == 3) {
    const llvm::fltSemantics &sem = cast<FloatType>(type).getFloatSemantics();
    APFloat extreme = APFloat::getLargest(sem, /*Negative=*/aggregate == 3);
    bool lost = false;
    extreme.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    identity = extreme.convertToDouble();
  }
  SmallVector<double> table(leaves * targets, identity);
  for (size_t j = 0; j < leaves; ++j)
    table[j * targets + targetIds[j]] = (*weights)[j];
  Value weightTable = c.constant(
      RankedTensorType::get({static_cast<int64_t>(leaves), targets}, type),
      table);
  Value perTree = c.make<GatherOp>({weightTable, leaf},
                                   {n.namedI64("axis", 0)}); // [N, trees, T]
  ReduceKind kind = aggregate == 2   ? ReduceKind::Min
                    : aggregate == 3 ? ReduceKind::Max
                                     : ReduceKind::Sum;
  Value y = c.reduce(kind, perTree, {1}, /*keepdims=*/false);
  if (aggregate == 0)
    y = c.make<MulOp>({y, c.scalar(type, 1.0 / static_cast<double>(trees))});
  if (post == 1)
    y = c.make<SoftmaxOp>(y, {n.namedI64("axis", 1)});
  if (post == 2)
    y = c.make<SigmoidOp>(y);
  return bindComposed(c, y);
}

/// A LabelEncoder's numeric keys, values or default: the one attribute of
/// `prefix` ("keys_", "values_", "default_") the node sets, as doubles with
/// its element type. `name` is left empty when none is set.
struct NumericTable {
  std::string name;
  Type type;
  SmallVector<double> values;
};

FailureOr<NumericTable> numericTable(NodeImporter &n, StringRef prefix) {
  NumericTable table;
  OpBuilder &b = n.builder();
  for (const onnx::AttributeProto &attr : n.node().attribute()) {
    StringRef name = attr.name();
    if (!name.starts_with(prefix))
      continue;
    if (!table.name.empty())
      return n.fail("attributes '" + table.name + "' and '" + name +
                    "' both set; give one");
    table.name = name.str();
    if (name == (prefix + "int64s").str()) {
      table.type = b.getI64Type();
      for (int64_t v : attr.ints())
        table.values.push_back(static_cast<double>(v));
      if (llvm::any_of(attr.ints(), [](int64_t v) {
            return std::abs(v) > (int64_t{1} << 53);
          }))
        return n.fail("attribute '" + name +
                      "' holds an integer beyond 2^53 (not supported)");
    } else if (name == (prefix + "floats").str()) {
      table.type = b.getF32Type();
      for (float v : attr.floats())
        table.values.push_back(v);
    } else if (name == "default_int64") {
      table.type = b.getI64Type();
      table.values.push_back(static_cast<double>(attr.i()));
    } else if (name == "default_float") {
      table.type = b.getF32Type();
      table.values.push_back(attr.f());
    } else if (name == (prefix + "tensor").str()) {
      FailureOr<DenseElementsAttr> tensor = n.tensorAttr(name);
      if (failed(tensor))
        return failure();
      table.type = tensor->getElementType();
      if (auto integer = dyn_cast<IntegerType>(table.type)) {
        for (const APInt &v : tensor->getValues<APInt>())
          table.values.push_back(
              static_cast<double>(integer.isUnsigned() ? v.getZExtValue()
                                                       : v.getSExtValue()));
      } else if (isa<FloatType>(table.type)) {
        for (APFloat v : tensor->getValues<APFloat>()) {
          bool lost = false;
          v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                    &lost);
          table.values.push_back(v.convertToDouble());
        }
      } else {
        return n.fail("attribute '" + name + "' has element type " +
                      typeText(table.type) + ", not a number");
      }
    } else {
      return n.fail("attribute '" + name + "' is not one of LabelEncoder's");
    }
  }
  return table;
}

/// ai.onnx.ml LabelEncoder from numbers to numbers (opset 2 and 4; from or
/// to strings it is a host step, HostPartition.cpp). y = values[i] for the
/// first key i equal to x, else the default (-1 or -0.0 unless given), as
/// onnxruntime does: one comparison of x against every key ([..., K]), an
/// argmax for the first match, and a gather. From opset 4 a NaN key matches
/// a NaN x (the opset's "bit-wise comparison", which onnxruntime applies to
/// NaN only: 0.0 and -0.0 still match each other there, and here); at
/// opset 2 NaN matches nothing. A key listed twice: the first wins, as in
/// onnxruntime. An integer key outside x's type matches nothing.
LogicalResult importLabelEncoder(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  RankedTensorType xType = n.inputType(0);
  Type xElement = xType.getElementType();
  if (!(xElement.isF32() || xElement.isF64() ||
        xElement.isSignlessInteger(64) || xElement.isSignlessInteger(32) ||
        xElement.isSignlessInteger(16)))
    return n.fail("input 'X' must be strings, int64, int32, int16, float or "
                  "double, not " + typeText(xElement));
  FailureOr<NumericTable> keys = numericTable(n, "keys_");
  FailureOr<NumericTable> values = numericTable(n, "values_");
  FailureOr<NumericTable> fallback = numericTable(n, "default_");
  if (failed(keys) || failed(values) || failed(fallback))
    return failure();
  if (keys->name.empty() || values->name.empty())
    return n.fail("needs a keys_* and a values_* attribute");
  if (keys->type != xElement)
    return n.fail("keys '" + keys->name + "' are " + typeText(keys->type) +
                  "; input 'X' is " + typeText(xElement));
  if (keys->values.size() != values->values.size())
    return n.fail(Twine(keys->values.size()) + " keys but " +
                  Twine(values->values.size()) + " values");
  Type yType = values->type;
  double defaultValue = isa<FloatType>(yType) ? -0.0 : -1.0;
  if (!fallback->name.empty()) {
    if (fallback->type != yType || fallback->values.size() != 1)
      return n.fail("default '" + fallback->name +
                    "' does not match values '" + values->name + "' (" +
                    typeText(yType) + ")");
    defaultValue = fallback->values.front();
  }
  bool nanMatches = n.domainOpset() >= 4;

  // Keys that cannot equal any x of its type are dropped (an int64 key
  // beyond int32's range for an int32 x).
  SmallVector<double> keyList, valueList, nanKey;
  for (auto [key, value] : llvm::zip(keys->values, values->values)) {
    if (auto integer = dyn_cast<IntegerType>(xElement)) {
      double limit = std::ldexp(1.0, integer.getWidth() - 1);
      if (key < -limit || key >= limit)
        continue;
    }
    keyList.push_back(key);
    valueList.push_back(value);
    nanKey.push_back(nanMatches && std::isnan(key));
  }
  Composer c(n);
  if (keyList.empty())
    return bindComposed(
        c, c.broadcast(c.scalar(yType, defaultValue), xType.getShape()));
  int64_t count = static_cast<int64_t>(keyList.size());
  Type i1 = n.builder().getI1Type();
  auto vec = [&](Type element, ArrayRef<double> v) {
    return c.constant(
        RankedTensorType::get({static_cast<int64_t>(v.size())}, element), v);
  };
  SmallVector<int64_t> shape(xType.getShape());
  SmallVector<int64_t> column(shape), table(shape);
  column.push_back(1);
  table.push_back(count);
  int64_t last = static_cast<int64_t>(shape.size());
  Value x = c.reshape(n.input(0), column); // [..., 1]
  Value match = c.make<EqualOp>({x, vec(xElement, keyList)}); // [..., K]
  if (llvm::is_contained(nanKey, 1.0)) {
    Value isNan = c.make<NotOp>(c.make<EqualOp>({x, x}));
    match = c.make<OrOp>({match, c.make<AndOp>({isNan, vec(i1, nanKey)})});
  }
  match = c.broadcast(match, table);
  Value position = c.make<ArgMaxOp>(
      c.cast(match, n.builder().getI32Type()),
      {n.namedI64("axis", last),
       n.named("keepdims", n.builder().getBoolAttr(false))});
  Value found = c.reduce(ReduceKind::Max, c.cast(match, n.builder().getI32Type()),
                         {last}, /*keepdims=*/false);
  Value mapped =
      c.make<GatherOp>({vec(yType, valueList), position},
                       {n.namedI64("axis", 0)});
  Value y = c.make<SelectOp>(
      {c.cast(found, i1), mapped, c.scalar(yType, defaultValue)});
  return bindComposed(c, c.broadcast(y, shape));
}
} // namespace

void registerMLHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"ai.onnx.ml.Binarizer", 1, importBinarizer, ""},
      {"ai.onnx.ml.ArrayFeatureExtractor", 1, importArrayFeatureExtractor,
       "numeric X only (no STRING); 1-D X gives [1, N]"},
      {"ai.onnx.ml.LabelEncoder", 2, importLabelEncoder,
       "from numbers to numbers on the device; from numbers to strings the "
       "device finds the key and a host step maps it; from strings a host "
       "step (keys_strings or a STRING keys_tensor). NaN keys match from "
       "opset 4; of a key listed twice the first wins (strings: refused)"},
      {"ai.onnx.ml.TreeEnsemble", 5, importTreeEnsemble,
       "post_transform NONE, SOFTMAX or LOGISTIC (not SOFTMAX_ZERO or "
       "PROBIT); X of known feature count"},
  });
}

} // namespace kiln::onnx_frontend
