//===- Composer.h - Building an ONNX op out of kiln ops ---------*- C++ -*-===//
//
// Many ONNX ops are exact compositions of kiln ops (Hardmax is argmax and a
// comparison with an iota, Einsum transposes around a matmul, ...). A
// Composer builds such a composition without a failure check after every
// step: each builder returns a null Value once any step has failed (the
// NodeImporter already holds the error naming the node), and later steps
// given a null operand stay null. The handler checks `failed()` once.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_COMPOSER_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_COMPOSER_H

#include "../NodeImporter.h"

#include "mlir/IR/BuiltinTypes.h"

#include <functional>
#include <numeric>

namespace kiln::onnx_frontend {

class Composer {
public:
  explicit Composer(NodeImporter &n) : n(n) {}

  NodeImporter &importer() { return n; }
  bool failed() const { return hasFailed; }

  /// `OpTy` with inferred result types; null after a failure.
  template <typename OpTy>
  mlir::Value make(mlir::ValueRange operands,
                   llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (!usable(operands))
      return {};
    return take(n.make<OpTy>(operands, attrs));
  }
  /// `OpTy` with the result type given.
  template <typename OpTy>
  mlir::Value makeTyped(mlir::Type type, mlir::ValueRange operands,
                        llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (!usable(operands))
      return {};
    return take(n.makeTyped<OpTy>(type, operands, attrs));
  }
  /// `OpTy` with several inferred results.
  template <typename OpTy>
  llvm::SmallVector<mlir::Value>
  makeMulti(unsigned numResults, mlir::ValueRange operands,
            llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (!usable(operands))
      return llvm::SmallVector<mlir::Value>(numResults);
    auto values = n.makeMulti<OpTy>(numResults, operands, attrs);
    if (mlir::failed(values)) {
      hasFailed = true;
      return llvm::SmallVector<mlir::Value>(numResults);
    }
    return *values;
  }

  /// Records an error naming the node; returns null.
  mlir::Value fail(const llvm::Twine &message) {
    if (!hasFailed)
      (void)n.fail(message);
    hasFailed = true;
    return {};
  }

  //===--------------------------------------------------------------------===//
  // Shorthands
  //===--------------------------------------------------------------------===//

  mlir::Value scalar(mlir::Type elementType, double value) {
    return n.scalar(elementType, value);
  }
  /// A constant of `type` from doubles in row-major order (one value is a
  /// splat), converted to the element type.
  mlir::Value constant(mlir::RankedTensorType type,
                       llvm::ArrayRef<double> values);
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
    if (!v)
      return {};
    if (typeOf(v).getShape() == shape)
      return v;
    return makeTyped<ReshapeOp>(
        mlir::RankedTensorType::get(shape, typeOf(v).getElementType()), v);
  }
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> permutation) {
    if (!v)
      return {};
    bool identity = true;
    for (auto [i, p] : llvm::enumerate(permutation))
      identity &= static_cast<int64_t>(i) == p;
    if (identity)
      return v;
    return make<TransposeOp>(v, {n.namedArray("permutation", permutation)});
  }
  mlir::Value cast(mlir::Value v, mlir::Type elementType) {
    if (!v)
      return {};
    if (typeOf(v).getElementType() == elementType)
      return v;
    return makeTyped<CastOp>(
        mlir::RankedTensorType::get(typeOf(v).getShape(), elementType), v);
  }
  mlir::Value reduce(ReduceKind kind, mlir::Value v,
                     llvm::ArrayRef<int64_t> axes, bool keepdims) {
    if (!v)
      return {};
    if (axes.empty())
      return v;
    return make<ReduceOp>(
        v, {n.named("kind", ReduceKindAttr::get(n.context(), kind)),
            n.namedArray("axes", axes),
            n.named("keepdims", n.builder().getBoolAttr(keepdims))});
  }
  /// `v[starts:limits:steps]`, one entry per dimension.
  mlir::Value slice(mlir::Value v, llvm::ArrayRef<int64_t> starts,
                    llvm::ArrayRef<int64_t> limits,
                    llvm::ArrayRef<int64_t> steps = {});
  /// `v[start:limit]` along `axis`, other dimensions whole.
  mlir::Value sliceAxis(mlir::Value v, int64_t axis, int64_t start,
                        int64_t limit, int64_t step = 1);
  /// `v` broadcast (numpy rules) to `shape`.
  mlir::Value broadcast(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
    if (!v)
      return {};
    if (typeOf(v).getShape() == shape)
      return v;
    return makeTyped<BroadcastOp>(
        mlir::RankedTensorType::get(shape, typeOf(v).getElementType()), v);
  }
  /// 0, 1, ..., size - 1 of `elementType`, shaped to lie along `axis` of a
  /// rank-`rank` tensor (every other dimension 1).
  mlir::Value iotaAlong(int64_t size, int64_t axis, int64_t rank,
                        mlir::Type elementType);
  mlir::Value concat(mlir::ValueRange values, int64_t axis) {
    if (!usable(values))
      return {};
    if (values.size() == 1)
      return values.front();
    return make<ConcatOp>(values, {n.namedI64("axis", axis)});
  }

  /// The Philox stream of a random node (RandomHandlers.cpp, training-mode
  /// Dropout): FNV-1a (32-bit) of its first output's name, kept below 2^30
  /// and doubled, so that `stream + 1` (a second draw) never meets another
  /// node's stream. Documented so tests can recompute it.
  static int64_t philoxStream(llvm::StringRef name) {
    uint32_t hash = 2166136261u;
    for (char ch : name) {
      hash ^= static_cast<uint8_t>(ch);
      hash *= 16777619u;
    }
    return static_cast<int64_t>(hash & 0x3fffffffu) * 2;
  }

  static int64_t product(llvm::ArrayRef<int64_t> dims) {
    return std::accumulate(dims.begin(), dims.end(), int64_t{1},
                           std::multiplies<>());
  }

private:
  bool usable(mlir::ValueRange operands) {
    if (hasFailed)
      return false;
    for (mlir::Value v : operands)
      if (!v) {
        hasFailed = true;
        return false;
      }
    return true;
  }
  mlir::Value take(llvm::FailureOr<mlir::Value> value) {
    if (mlir::failed(value)) {
      hasFailed = true;
      return {};
    }
    return *value;
  }

  NodeImporter &n;
  bool hasFailed = false;
};

/// A type as MLIR prints it ("f32", "tensor<2x3xi64>"), for errors.
inline std::string typeText(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// Binds the composition's results, or fails when any step failed.
inline llvm::LogicalResult bindComposed(Composer &c, mlir::ValueRange values) {
  if (c.failed())
    return mlir::failure();
  for (mlir::Value v : values)
    if (!v)
      return mlir::failure();
  return c.importer().setResults(values);
}

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_COMPOSER_H
