//===- ResizeToLinalg.cpp - kiln.resize to linalg -------------------------===//
//
// kiln.resize becomes one linalg.generic over the result that computes each
// element's input coordinate per resized dimension (in f64, as ONNX's
// reference) from linalg.index and reads the pixels around it with
// tensor.extract: one for nearest, 2 per dimension for linear, 4 for cubic,
// and with antialias every pixel the kernel stretched by 1 / scale covers.
// Scales and a tf_crop_and_resize region given at run time are read in the
// body with tensor.extract; the mapping's arithmetic folds in C++ where
// every operand is a constant.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// How one dimension is resampled.
struct ResizeAxis {
  int64_t inSize, outSize;
  double scale;
  /// False when the dimension maps identically (same size, unit scale, and
  /// for tf_crop_and_resize the whole extent): it then reads the output
  /// coordinate unchanged.
  bool resized;
  /// tf_crop_and_resize's region along this dimension.
  double roiStart = 0, roiEnd = 1;
  /// The dimension's position in value_axes when a scale or region given
  /// at run time covers it, else -1.
  int64_t runtimeScale = -1, runtimeRoi = -1;
};

/// An f64 that is a compile-time constant (`v` null) or a value: the
/// arithmetic of the coordinate mapping folds where both sides are
/// constants, so a resize without run-time values computes its constants
/// in C++ exactly as before.
struct F64 {
  Value v;
  double c = 0;
};

/// Input coordinates are computed in f64, as ONNX's reference does: in f32,
/// `4 / 1.6f` rounds to exactly 2.5 and a nearest tie flips. Scales are the
/// model's (f32) values held exactly in f64.
struct CoordinateBuilder {
  OpBuilder &b;
  Location loc;
  CoordinateMode mode;
  /// Scales and region given at run time (null when not).
  Value runtimeScales = nullptr, runtimeRoi = nullptr;
  int64_t numValueAxes = 0;
  /// tf_crop_and_resize: whether any coordinate computed so far falls
  /// outside the input (null until one is computed).
  mutable Value outside = nullptr;

  Value constant(double v) const {
    return scalarConstant(b, loc, b.getF64Type(), v);
  }
  Value value(F64 x) const { return x.v ? x.v : constant(x.c); }
  F64 add(F64 x, F64 y) const {
    if (!x.v && !y.v)
      return {nullptr, x.c + y.c};
    return {arith::AddFOp::create(b, loc, value(x), value(y))};
  }
  F64 sub(F64 x, F64 y) const {
    if (!x.v && !y.v)
      return {nullptr, x.c - y.c};
    return {arith::SubFOp::create(b, loc, value(x), value(y))};
  }
  F64 mul(F64 x, F64 y) const {
    if (!x.v && !y.v)
      return {nullptr, x.c * y.c};
    return {arith::MulFOp::create(b, loc, value(x), value(y))};
  }
  F64 div(F64 x, F64 y) const {
    if (!x.v && !y.v)
      return {nullptr, x.c / y.c};
    return {arith::DivFOp::create(b, loc, value(x), value(y))};
  }
  /// `length == 1 ? whenOne() : otherwise()`, decided at compile time for a
  /// constant length.
  F64 unlessUnit(F64 length, llvm::function_ref<F64()> whenOne,
                 llvm::function_ref<F64()> otherwise) const {
    if (!length.v)
      return length.c == 1 ? whenOne() : otherwise();
    Value one = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                      length.v, constant(1));
    return {arith::SelectOp::create(b, loc, one, value(whenOne()),
                                    value(otherwise()))};
  }
  /// Entry `k` of a run-time tensor of scales or region values, in f64.
  F64 entry(Value tensor, int64_t k) const {
    Value v =
        tensor::ExtractOp::create(b, loc, tensor, {indexConstant(b, loc, k)});
    if (!v.getType().isF64())
      v = arith::ExtFOp::create(b, loc, b.getF64Type(), v);
    return {v};
  }
  F64 scaleOf(const ResizeAxis &axis) const {
    if (axis.runtimeScale >= 0)
      return entry(runtimeScales, axis.runtimeScale);
    return {nullptr, axis.scale};
  }
  F64 roiStartOf(const ResizeAxis &axis) const {
    if (axis.runtimeRoi >= 0)
      return entry(runtimeRoi, axis.runtimeRoi);
    return {nullptr, axis.roiStart};
  }
  F64 roiEndOf(const ResizeAxis &axis) const {
    if (axis.runtimeRoi >= 0)
      return entry(runtimeRoi, numValueAxes + axis.runtimeRoi);
    return {nullptr, axis.roiEnd};
  }

  /// The (fractional) input coordinate of output index `index` along `axis`.
  /// As in ONNX's reference, align_corners and pytorch_half_pixel measure the
  /// resized length as scale * input length, which differs from the output
  /// size when the scale does not divide evenly.
  Value sourceCoordinate(Value index, const ResizeAxis &axis) const {
    Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
    F64 x{arith::SIToFPOp::create(b, loc, b.getF64Type(), i)};
    F64 scale = scaleOf(axis);
    F64 inSize{nullptr, static_cast<double>(axis.inSize)};
    F64 one{nullptr, 1}, half{nullptr, 0.5}, zero{nullptr, 0};
    F64 resizedLength = mul(scale, inSize);
    auto halfPixel = [&] { return sub(div(add(x, half), scale), half); };
    switch (mode) {
    case CoordinateMode::HalfPixel:
      return value(halfPixel());
    case CoordinateMode::PytorchHalfPixel:
      return value(unlessUnit(
          resizedLength, [&] { return zero; }, halfPixel));
    case CoordinateMode::AlignCorners:
      return value(unlessUnit(
          resizedLength, [&] { return zero; },
          [&] {
            return div(mul(x, {nullptr, static_cast<double>(axis.inSize - 1)}),
                       sub(resizedLength, one));
          }));
    case CoordinateMode::Asymmetric:
      return value(div(x, scale));
    case CoordinateMode::TfCropAndResize: {
      // As ONNX's reference: the region [start, end] of the input spans the
      // resized length; outside [0, size - 1] the output is extrapolated.
      F64 extent{nullptr, static_cast<double>(axis.inSize - 1)};
      F64 roiStart = roiStartOf(axis), roiEnd = roiEndOf(axis);
      F64 start = mul(roiStart, extent);
      F64 span = mul(sub(roiEnd, roiStart), extent);
      Value source = value(unlessUnit(
          resizedLength,
          [&] {
            return add(div(span, {nullptr, 2}), start);
          },
          [&] {
            return add(mul(x, div(span, sub(resizedLength, one))), start);
          }));
      Value out = arith::OrIOp::create(
          b, loc,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, source,
                                constant(0)),
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, source,
                                value(extent)));
      outside =
          outside ? Value(arith::OrIOp::create(b, loc, outside, out)) : out;
      return source;
    }
    case CoordinateMode::TfHalfPixelForNn:
      return value(div(add(x, half), scale));
    case CoordinateMode::HalfPixelSymmetric: {
      // half_pixel, shifted so that the output stays centred on the input
      // when the output size is a rounded scale * input size.
      F64 adjustment =
          div({nullptr, static_cast<double>(axis.outSize)}, resizedLength);
      F64 offset = mul({nullptr, static_cast<double>(axis.inSize) / 2},
                       sub(one, adjustment));
      return value(add(halfPixel(), offset));
    }
    }
    llvm_unreachable("unknown coordinate mode");
  }

  /// An integral f64 as an index clamped into [0, size): reads past the
  /// border repeat the edge, as ONNX's edge padding does.
  Value clampedIndex(Value integral, int64_t size) const {
    Value i = arith::FPToSIOp::create(b, loc, b.getI64Type(), integral);
    Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
    index = arith::MaxSIOp::create(b, loc, index, indexConstant(b, loc, 0));
    return arith::MinSIOp::create(b, loc, index,
                                  indexConstant(b, loc, size - 1));
  }

  /// The pixel nearest to `x`. Ties are decided on the exact fraction
  /// `x - floor(x)` (never on `x + 0.5`, which can round up across an
  /// integer).
  Value nearest(Value x, NearestMode rounding) const {
    if (rounding == NearestMode::Floor)
      return math::FloorOp::create(b, loc, x);
    if (rounding == NearestMode::Ceil)
      return math::CeilOp::create(b, loc, x);
    Value floor = math::FloorOp::create(b, loc, x);
    Value fraction = arith::SubFOp::create(b, loc, x, floor);
    auto predicate = rounding == NearestMode::RoundPreferFloor
                         ? arith::CmpFPredicate::OGT
                         : arith::CmpFPredicate::OGE;
    Value up =
        arith::CmpFOp::create(b, loc, predicate, fraction, constant(0.5));
    Value next = arith::AddFOp::create(b, loc, floor, constant(1));
    return arith::SelectOp::create(b, loc, up, next, floor);
  }
};

/// Keys' cubic convolution weights of the four pixels floor(x) - 1 ..
/// floor(x) + 2 for the fraction t = x - floor(x) (ONNX's cubic_coeff_a =
/// A), in f64. With `excludeOutside`, pixels outside [0, size) get weight 0
/// and the rest are rescaled to sum to 1.
SmallVector<Value> cubicWeights(const CoordinateBuilder &c, Value floor,
                                Value t, double a, bool excludeOutside,
                                int64_t size) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  auto add = [&](Value x, Value y) {
    return Value(arith::AddFOp::create(b, loc, x, y));
  };
  auto sub = [&](Value x, Value y) {
    return Value(arith::SubFOp::create(b, loc, x, y));
  };
  auto mul = [&](Value x, Value y) {
    return Value(arith::MulFOp::create(b, loc, x, y));
  };
  Value one = c.constant(1);
  // |d| in (1, 2): ((A d - 5A) d + 8A) d - 4A; |d| <= 1: ((A + 2) d - (A +
  // 3)) d^2 + 1.
  auto outer = [&](Value d) {
    return sub(mul(add(mul(sub(mul(c.constant(a), d), c.constant(5 * a)), d),
                       c.constant(8 * a)),
                   d),
               c.constant(4 * a));
  };
  auto inner = [&](Value d) {
    return add(
        mul(sub(mul(c.constant(a + 2), d), c.constant(a + 3)), mul(d, d)), one);
  };
  Value oneMinusT = sub(one, t);
  SmallVector<Value> weights{outer(add(t, one)), inner(t), inner(oneMinusT),
                             outer(add(oneMinusT, one))};
  if (!excludeOutside)
    return weights;
  Value zero = c.constant(0), sum = zero;
  for (auto [k, w] : llvm::enumerate(weights)) {
    Value position = add(floor, c.constant(static_cast<double>(k) - 1));
    Value inside = arith::AndIOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, position,
                              zero),
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, position,
                              c.constant(static_cast<double>(size))));
    w = arith::SelectOp::create(b, loc, inside, w, zero);
    sum = add(sum, w);
  }
  for (Value &w : weights)
    w = arith::DivFOp::create(b, loc, w, sum);
  return weights;
}

/// One cubic-resampled element: per resized dimension the four pixels
/// around the input coordinate (edge-clamped) and their weights; the 4^k
/// pixels are blended one dimension at a time from the innermost.
Value cubicSample(OpBuilder &b, Location loc, const CoordinateBuilder &c,
                  Value input, SmallVector<Value> coords, ValueRange indices,
                  ArrayRef<ResizeAxis> axes, Type blendType, double a,
                  bool excludeOutside) {
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  SmallVector<int64_t> resizedDims;
  SmallVector<SmallVector<Value>> taps, weights;
  for (auto [d, axis] : llvm::enumerate(axes)) {
    if (!axis.resized)
      continue;
    Value x = c.sourceCoordinate(indices[d], axis);
    Value floor = math::FloorOp::create(b, loc, x);
    Value t = arith::SubFOp::create(b, loc, x, floor);
    SmallVector<Value> w =
        cubicWeights(c, floor, t, a, excludeOutside, axis.inSize);
    SmallVector<Value> pixels;
    for (int k = 0; k < 4; ++k) {
      pixels.push_back(c.clampedIndex(
          arith::AddFOp::create(b, loc, floor, c.constant(k - 1)),
          axis.inSize));
      if (blendType != w[k].getType())
        w[k] = arith::TruncFOp::create(b, loc, blendType, w[k]);
    }
    resizedDims.push_back(d);
    taps.push_back(std::move(pixels));
    weights.push_back(std::move(w));
  }
  // Pixel m takes tap (m / 4^(n-1-k)) % 4 in resized dimension k: the four
  // pixels 4j .. 4j + 3 differ only in the innermost resized dimension.
  size_t n = resizedDims.size();
  uint64_t count = uint64_t{1} << (2 * n);
  SmallVector<Value> values;
  for (uint64_t m = 0; m < count; ++m) {
    for (size_t k = 0; k < n; ++k)
      coords[resizedDims[k]] = taps[k][(m >> (2 * (n - 1 - k))) & 3];
    Value v = tensor::ExtractOp::create(b, loc, input, coords);
    if (elementType != blendType)
      v = arith::ExtFOp::create(b, loc, blendType, v);
    values.push_back(v);
  }
  for (size_t k = n; k-- > 0;) {
    SmallVector<Value> blended;
    for (size_t j = 0; j < values.size(); j += 4) {
      Value sum = arith::MulFOp::create(b, loc, values[j], weights[k][0]);
      for (int i = 1; i < 4; ++i)
        sum = arith::AddFOp::create(
            b, loc, sum,
            arith::MulFOp::create(b, loc, values[j + i], weights[k][i]));
      blended.push_back(sum);
    }
    values = std::move(blended);
  }
  Value v = values.front();
  if (elementType != blendType)
    v = arith::TruncFOp::create(b, loc, elementType, v);
  return v;
}

/// The antialiased filter of one downsampled dimension (ONNX Resize-18's
/// antialias, as its reference computes it): the kernel (triangle for
/// linear, Keys' cubic) stretched by 1 / scale, evaluated at the 2m pixels
/// floor(x) + 1 - m .. floor(x) + m around the input coordinate x (m =
/// ceil(support / scale), support 1 or 2: every pixel the stretched kernel
/// reaches), the weights normalised to sum to 1. Pixels past the border
/// repeat the edge, or with `excludeOutside` weigh nothing.
struct AntialiasTaps {
  SmallVector<Value> pixels, weights;
};
AntialiasTaps antialiasTaps(const CoordinateBuilder &c, Value x,
                            const ResizeAxis &axis, bool cubic, double a,
                            bool excludeOutside) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  // A scale given at run time is at least out / in (the guard checked
  // floor(in * scale) == out): the taps that bound needs cover every scale
  // it allows, the ones past the kernel's support weighing exactly 0.
  double least = axis.runtimeScale >= 0
                     ? static_cast<double>(axis.outSize) / axis.inSize
                     : axis.scale;
  double support = cubic ? 2.0 : 1.0;
  int64_t m =
      -static_cast<int64_t>(std::floor(-support / std::min(least, 1.0)));
  Value scale = axis.runtimeScale >= 0
                    ? Value(arith::MinimumFOp::create(
                          b, loc, c.value(c.scaleOf(axis)), c.constant(1)))
                    : c.constant(std::min(axis.scale, 1.0));
  Value floor = math::FloorOp::create(b, loc, x);
  Value t = arith::SubFOp::create(b, loc, x, floor);
  auto kernel = [&](Value d) -> Value {
    Value ad = math::AbsFOp::create(b, loc, d);
    Value zero = c.constant(0), one = c.constant(1);
    if (!cubic) // max(0, 1 - |d|)
      return arith::MaximumFOp::create(
          b, loc, zero, arith::SubFOp::create(b, loc, one, ad));
    auto mul = [&](Value p, Value q) {
      return Value(arith::MulFOp::create(b, loc, p, q));
    };
    auto add = [&](Value p, Value q) {
      return Value(arith::AddFOp::create(b, loc, p, q));
    };
    Value d2 = mul(ad, ad), d3 = mul(d2, ad);
    // |d| <= 1: (A + 2) d^3 - (A + 3) d^2 + 1; |d| < 2: A d^3 - 5A d^2 +
    // 8A d - 4A; else 0.
    Value near = add(add(mul(c.constant(a + 2), d3),
                         mul(c.constant(-(a + 3)), d2)),
                     one);
    Value far = add(add(add(mul(c.constant(a), d3), mul(c.constant(-5 * a), d2)),
                        mul(c.constant(8 * a), ad)),
                    c.constant(-4 * a));
    Value isNear = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLE, ad,
                                         one);
    Value isFar = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, ad,
                                        c.constant(2));
    return arith::SelectOp::create(
        b, loc, isNear, near, arith::SelectOp::create(b, loc, isFar, far, zero));
  };
  AntialiasTaps taps;
  Value sum = c.constant(0);
  for (int64_t i = 1 - m; i <= m; ++i) {
    Value position = arith::AddFOp::create(b, loc, floor,
                                           c.constant(static_cast<double>(i)));
    Value d = arith::MulFOp::create(
        b, loc,
        arith::SubFOp::create(b, loc, c.constant(static_cast<double>(i)), t),
        scale);
    Value w = kernel(d);
    if (excludeOutside) {
      Value inside = arith::AndIOp::create(
          b, loc,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, position,
                                c.constant(0)),
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, position,
                                c.constant(static_cast<double>(axis.inSize))));
      w = arith::SelectOp::create(b, loc, inside, w, c.constant(0));
    }
    sum = arith::AddFOp::create(b, loc, sum, w);
    taps.pixels.push_back(c.clampedIndex(position, axis.inSize));
    taps.weights.push_back(w);
  }
  for (Value &w : taps.weights)
    w = arith::DivFOp::create(b, loc, w, sum);
  return taps;
}

/// One antialiased element: each resized dimension contributes its taps
/// (antialiasTaps where it shrinks; the plain two linear or four cubic taps
/// where it does not), blended one dimension at a time from the innermost.
Value antialiasSample(OpBuilder &b, Location loc, const CoordinateBuilder &c,
                      Value input, SmallVector<Value> coords,
                      ValueRange indices, ArrayRef<ResizeAxis> axes,
                      Type blendType, bool cubic, double a,
                      bool excludeOutside) {
  Type elementType = cast<RankedTensorType>(input.getType()).getElementType();
  SmallVector<int64_t> resizedDims;
  SmallVector<AntialiasTaps> taps;
  for (auto [d, axis] : llvm::enumerate(axes)) {
    if (!axis.resized)
      continue;
    Value x = c.sourceCoordinate(indices[d], axis);
    AntialiasTaps t = antialiasTaps(c, x, axis, cubic, a, excludeOutside);
    for (Value &w : t.weights)
      if (blendType != w.getType())
        w = arith::TruncFOp::create(b, loc, blendType, w);
    resizedDims.push_back(d);
    taps.push_back(std::move(t));
  }
  // Recursive blend: the outer dimension's taps weigh the blends of the
  // inner ones.
  std::function<Value(size_t)> blend = [&](size_t k) -> Value {
    if (k == resizedDims.size()) {
      Value v = tensor::ExtractOp::create(b, loc, input, coords);
      if (elementType != blendType)
        v = arith::ExtFOp::create(b, loc, blendType, v);
      return v;
    }
    Value sum;
    for (auto [pixel, weight] : llvm::zip(taps[k].pixels, taps[k].weights)) {
      coords[resizedDims[k]] = pixel;
      Value term = arith::MulFOp::create(b, loc, blend(k + 1), weight);
      sum = sum ? Value(arith::AddFOp::create(b, loc, sum, term)) : term;
    }
    return sum;
  };
  Value v = blend(0);
  if (elementType != blendType)
    v = arith::TruncFOp::create(b, loc, elementType, v);
  return v;
}

/// A generic over the result. Per resized dimension it computes the input
/// coordinate; nearest rounds it to one pixel, linear reads the two pixels
/// around it and blends them (in f32, or f64 for f64 tensors), one
/// dimension at a time from the innermost, so k resized dimensions read 2^k
/// pixels; cubic reads four per dimension (4^k pixels).
struct ResizeToGeneric : OpRewritePattern<ResizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ResizeOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType(), outType = op.getType();
    Location loc = op.getLoc();
    if (outType.getNumElements() == 0) {
      rewriter.replaceOp(op, emptyTensor(rewriter, loc, outType));
      return success();
    }
    if (inType.getNumElements() == 0)
      return rewriter.notifyMatchFailure(op, "resizing an empty tensor");
    ArrayRef<double> scales = op.getScales();
    ArrayRef<int64_t> valueAxes =
        op.getValueAxes().value_or(ArrayRef<int64_t>());
    SmallVector<ResizeAxis> axes;
    for (int64_t d = 0; d < inType.getRank(); ++d) {
      int64_t in = inType.getDimSize(d), out = outType.getDimSize(d);
      double scale = scales.empty() ? static_cast<double>(out) / in : scales[d];
      ResizeAxis axis{in, out, scale, in != out || scale != 1.0};
      if (std::optional<ArrayRef<double>> roi = op.getRoi()) {
        axis.roiStart = (*roi)[d];
        axis.roiEnd = (*roi)[inType.getRank() + d];
        axis.resized |= axis.roiStart != 0 || axis.roiEnd != 1;
      }
      const int64_t *at = llvm::find(valueAxes, d);
      if (at != valueAxes.end()) {
        int64_t position = at - valueAxes.begin();
        // A run-time scale resamples the dimension, unless it has one
        // pixel in and out: every read is that pixel whatever the scale.
        if (op.getRuntimeScales()) {
          axis.runtimeScale = position;
          axis.resized |= in != 1 || out != 1;
        }
        if (op.getRuntimeRoi()) {
          axis.runtimeRoi = position;
          axis.resized = true;
        }
      }
      axes.push_back(axis);
    }
    double extrapolation = op.getExtrapolationValue().convertToDouble();
    Type elementType = inType.getElementType();
    Type blendType = elementType.isF64() ? elementType : rewriter.getF32Type();
    bool linear = op.getMode() == ResizeMode::Linear;
    bool cubic = op.getMode() == ResizeMode::Cubic;
    double cubicA = op.getCubicCoeffA().convertToDouble();
    bool excludeOutside = op.getExcludeOutside();
    NearestMode nearestMode = op.getNearestMode();
    CoordinateMode coordinateMode = op.getCoordinateMode();
    Value input = op.getInput();

    // One output element from its indices.
    auto interpolate = [&](OpBuilder &b, Location nestedLoc,
                           const CoordinateBuilder &c,
                           ValueRange indices) -> Value {
      SmallVector<Value> coords = llvm::to_vector(indices);
      if (!linear && !cubic) {
        for (auto [d, axis] : llvm::enumerate(axes))
          if (axis.resized)
            coords[d] = c.clampedIndex(
                c.nearest(c.sourceCoordinate(indices[d], axis), nearestMode),
                axis.inSize);
        return tensor::ExtractOp::create(b, nestedLoc, input, coords);
      }
      if (op.getAntialias())
        return antialiasSample(b, nestedLoc, c, input, coords, indices, axes,
                               blendType, cubic, cubicA, excludeOutside);
      if (cubic)
        return cubicSample(b, nestedLoc, c, input, coords, indices, axes,
                           blendType, cubicA, excludeOutside);
      // Per resized dimension: the two neighbouring pixels and the
      // weight of the upper one.
      SmallVector<int64_t> resizedDims;
      SmallVector<Value> lower, upper, weights;
      for (auto [d, axis] : llvm::enumerate(axes)) {
        if (!axis.resized)
          continue;
        Value x = c.sourceCoordinate(indices[d], axis);
        Value floor = math::FloorOp::create(b, nestedLoc, x);
        Value weight = arith::SubFOp::create(b, nestedLoc, x, floor);
        if (blendType != weight.getType())
          weight = arith::TruncFOp::create(b, nestedLoc, blendType, weight);
        resizedDims.push_back(d);
        weights.push_back(weight);
        lower.push_back(c.clampedIndex(floor, axis.inSize));
        upper.push_back(c.clampedIndex(
            arith::AddFOp::create(b, nestedLoc, floor, c.constant(1)),
            axis.inSize));
      }
      // Corner m takes the upper pixel in resized dimension k when bit
      // (n - 1 - k) of m is set, so corners 2j and 2j + 1 differ only in
      // the innermost resized dimension.
      size_t n = resizedDims.size();
      SmallVector<Value> corners;
      for (uint64_t m = 0; m < (uint64_t{1} << n); ++m) {
        for (size_t k = 0; k < n; ++k)
          coords[resizedDims[k]] = (m >> (n - 1 - k)) & 1 ? upper[k] : lower[k];
        Value v = tensor::ExtractOp::create(b, nestedLoc, input, coords);
        if (elementType != blendType)
          v = arith::ExtFOp::create(b, nestedLoc, blendType, v);
        corners.push_back(v);
      }
      // (1 - t) a + t b, innermost resized dimension first.
      Value one = scalarConstant(b, nestedLoc, blendType, 1);
      for (size_t k = n; k-- > 0;) {
        Value t = weights[k];
        Value oneMinusT = arith::SubFOp::create(b, nestedLoc, one, t);
        SmallVector<Value> blended;
        for (size_t j = 0; j < corners.size(); j += 2) {
          Value lo = arith::MulFOp::create(b, nestedLoc, corners[j], oneMinusT);
          Value hi = arith::MulFOp::create(b, nestedLoc, corners[j + 1], t);
          blended.push_back(arith::AddFOp::create(b, nestedLoc, lo, hi));
        }
        corners = std::move(blended);
      }
      Value v = corners.front();
      if (elementType != blendType)
        v = arith::TruncFOp::create(b, nestedLoc, elementType, v);
      return v;
    };
    Value result = indexedGeneric(
        rewriter, loc, outType, {}, {},
        [&](OpBuilder &b, Location nestedLoc, ValueRange,
            ValueRange indices) -> Value {
          CoordinateBuilder c{b,
                              nestedLoc,
                              coordinateMode,
                              op.getRuntimeScales(),
                              op.getRuntimeRoi(),
                              static_cast<int64_t>(valueAxes.size())};
          Value v = interpolate(b, nestedLoc, c, indices);
          if (!c.outside)
            return v;
          return arith::SelectOp::create(
              b, nestedLoc, c.outside,
              scalarConstant(b, nestedLoc, elementType, extrapolation), v);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kiln::populateResizeToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<ResizeToGeneric>(patterns.getContext());
}
