//===- MLHandlers.cpp - ONNX ops of the ai.onnx.ml domain -----------------===//
//
// The traditional-ML ops (ai.onnx.ml) that are exact compositions of kiln
// ops: Binarizer (a comparison and a select), ArrayFeatureExtractor (a
// gather along the last axis) and LabelEncoder from numbers (a comparison
// with every key, an argmax and a gather). The tree ensembles are in
// TreeEnsembleHandlers.cpp. They are registered under qualified names
// ("ai.onnx.ml.Binarizer") and versioned by that domain's opset. LabelEncoder
// on strings is a host step (HostPartition.cpp), not a handler.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include "TreeEnsembleHandlers.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

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
  });
  registerTreeEnsembleHandlers(handlers);
}

} // namespace kiln::onnx_frontend
