//===- MLHandlers.cpp - ONNX ops of the ai.onnx.ml domain -----------------===//
//
// The traditional-ML ops (ai.onnx.ml) that are exact compositions of kiln
// ops: Binarizer (a comparison and a select) and ArrayFeatureExtractor (a
// gather along the last axis). They are registered under qualified names
// ("ai.onnx.ml.Binarizer") and versioned by that domain's opset. LabelEncoder
// on strings is a host step (HostPartition.cpp), not a handler.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

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

} // namespace

void registerMLHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"ai.onnx.ml.Binarizer", 1, importBinarizer, ""},
      {"ai.onnx.ml.ArrayFeatureExtractor", 1, importArrayFeatureExtractor,
       "numeric X only (no STRING); 1-D X gives [1, N]"},
  });
}

} // namespace kiln::onnx_frontend
