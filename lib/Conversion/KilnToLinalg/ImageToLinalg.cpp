//===- ImageToLinalg.cpp - Image sampling ops to linalg -------------------===//
//
// kiln.grid_sample, kiln.roi_align and kiln.deform_sample read their image at
// coordinates computed from another tensor, so each is one generic over its
// result whose body computes the coordinates from the coordinate tensor
// (read with tensor.extract) and reads the few image elements it needs with
// tensor.extract at clamped positions, zeroing the weight of positions
// outside the image. The arithmetic follows ONNX's reference
// implementations step by step (same rounding points, same border rules).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

/// Scalar arithmetic in one float type, and the index conversions around it.
struct Fp {
  OpBuilder &b;
  Location loc;
  Type type;

  Value c(double v) const { return scalarConstant(b, loc, type, v); }
  Value add(Value x, Value y) const { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) const { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) const { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) const { return arith::DivFOp::create(b, loc, x, y); }
  Value max(Value x, Value y) const {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) const {
    return arith::MinimumFOp::create(b, loc, x, y);
  }
  Value abs(Value x) const { return math::AbsFOp::create(b, loc, x); }
  Value floor(Value x) const { return math::FloorOp::create(b, loc, x); }
  Value ceil(Value x) const { return math::CeilOp::create(b, loc, x); }
  Value lt(Value x, Value y) const {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, y);
  }
  Value gt(Value x, Value y) const {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  }
  Value select(Value cond, Value x, Value y) const {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value andI(Value x, Value y) const {
    return arith::AndIOp::create(b, loc, x, y);
  }
  Value orI(Value x, Value y) const { return arith::OrIOp::create(b, loc, x, y); }
  /// A float holding an integer value to an index (truncating).
  Value toIndex(Value x) const {
    Value i = arith::FPToSIOp::create(b, loc, b.getI64Type(), x);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  }
  Value fromIndex(Value i) const {
    Value v = arith::IndexCastOp::create(b, loc, b.getI64Type(), i);
    return arith::SIToFPOp::create(b, loc, type, v);
  }
  /// Whether the integer-valued float x lies in [0, size).
  Value inside(Value x, int64_t size) const {
    return andI(arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x,
                                      c(0)),
                lt(x, c(static_cast<double>(size))));
  }
  /// x clamped into [0, size - 1], as an index.
  Value clampedIndex(Value x, int64_t size) const {
    return toIndex(min(max(x, c(0)), c(static_cast<double>(size - 1))));
  }
};

//===----------------------------------------------------------------------===//
// grid_sample
//===----------------------------------------------------------------------===//

/// Keys' cubic kernel weights (a = -0.75) of the four taps x0 - 1 .. x0 + 2
/// at fraction t = x - x0, as ONNX's reference writes them.
std::array<Value, 4> cubicWeights(const Fp &f, Value t) {
  double a = -0.75;
  Value one = f.c(1);
  auto far = [&](Value x) { // 1 < |x| < 2
    return f.sub(
        f.mul(f.add(f.mul(f.sub(f.mul(f.c(a), x), f.c(5 * a)), x), f.c(8 * a)),
              x),
        f.c(4 * a));
  };
  auto near = [&](Value x) { // |x| <= 1
    return f.add(f.mul(f.mul(f.sub(f.mul(f.c(a + 2), x), f.c(a + 3)), x), x),
                 one);
  };
  Value u = f.sub(one, t);
  return {far(f.add(t, one)), near(t), near(u), far(f.add(u, one))};
}

/// ONNX's reflection of x into [lo, hi]: folds back and forth by the
/// range until inside.
Value reflect(const Fp &f, Value x, double lo, double hi) {
  OpBuilder &b = f.b;
  Location loc = f.loc;
  double range = hi - lo;
  auto fold = [&](Value dx, double start, double otherEnd, bool up) {
    Value n = f.floor(f.div(dx, f.c(range)));
    Value r = f.sub(dx, f.mul(n, f.c(range)));
    Value nInt = arith::FPToSIOp::create(b, loc, b.getI64Type(), n);
    Value odd = arith::TruncIOp::create(b, loc, b.getI1Type(), nInt);
    Value fromStart = up ? f.add(f.c(start), r) : f.sub(f.c(start), r);
    Value fromOther = up ? f.sub(f.c(otherEnd), r) : f.add(f.c(otherEnd), r);
    return f.select(odd, fromOther, fromStart);
  };
  Value below = f.lt(x, f.c(lo)), above = f.gt(x, f.c(hi));
  Value low = fold(f.sub(f.c(lo), x), lo, hi, /*up=*/true);
  Value high = fold(f.sub(x, f.c(hi)), hi, lo, /*up=*/false);
  return f.select(below, low, f.select(above, high, x));
}

struct GridSampleToGeneric : OpRewritePattern<GridSampleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GridSampleOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    int64_t spatial = inType.getRank() - 2;
    SmallVector<int64_t> dims(inType.getShape().drop_front(2));
    bool align = op.getAlignCorners();
    ResizeMode mode = op.getMode();
    GridPadding padding = op.getPadding();
    Value input = op.getInput(), grid = op.getGrid();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), op.getType(), ValueRange(), {},
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange idx) {
          Fp f{b, loc, inType.getElementType()};
          // Grid entry k is the coordinate of image dim spatial - 1 - k.
          SmallVector<Value> x(spatial);
          SmallVector<Value> gridIdx{idx[0]};
          llvm::append_range(gridIdx, idx.drop_front(2));
          gridIdx.push_back(Value());
          for (int64_t k = 0; k < spatial; ++k) {
            gridIdx.back() = indexConstant(b, loc, k);
            Value g = tensor::ExtractOp::create(b, loc, grid, gridIdx);
            int64_t d = spatial - 1 - k;
            double len = dims[d];
            // Denormalise: [-1, 1] spans the pixel centres or the edges.
            Value v = align ? f.mul(f.div(f.add(g, f.c(1)), f.c(2)),
                                    f.c(len - 1))
                            : f.div(f.sub(f.mul(f.add(g, f.c(1)), f.c(len)),
                                          f.c(1)),
                                    f.c(2));
            if (mode == ResizeMode::Nearest)
              v = math::RoundEvenOp::create(b, loc, v);
            double lo = align ? 0 : -0.5, hi = align ? len - 1 : len - 0.5;
            if (padding == GridPadding::Border)
              v = f.select(f.orI(f.lt(v, f.c(lo)), f.gt(v, f.c(hi))),
                           f.min(f.max(v, f.c(0)), f.c(len - 1)), v);
            else if (padding == GridPadding::Reflection)
              v = reflect(f, v, lo, hi);
            x[d] = v;
          }
          // The pixel at integer-valued float coordinates `at` (after the
          // padding rule), and its weight multiplier (0 outside for zeros).
          auto pixel = [&](ArrayRef<Value> at) -> std::pair<Value, Value> {
            SmallVector<Value> coords{idx[0], idx[1]};
            Value valid;
            for (int64_t d = 0; d < spatial; ++d) {
              Value v = at[d];
              if (padding == GridPadding::Reflection) {
                double lo = align ? 0 : -0.5;
                double hi = align ? dims[d] - 1.0 : dims[d] - 0.5;
                v = f.floor(reflect(f, v, lo, hi));
                // int() truncation of a non-negative value is floor.
              }
              if (padding == GridPadding::Zeros) {
                Value in = f.inside(v, dims[d]);
                valid = valid ? f.andI(valid, in) : in;
              }
              coords.push_back(f.clampedIndex(v, dims[d]));
            }
            Value value = tensor::ExtractOp::create(b, loc, input, coords);
            if (valid)
              value = f.select(valid, value, f.c(0));
            return {value, Value()};
          };
          if (mode == ResizeMode::Nearest) {
            // astype(int32): truncation toward zero.
            SmallVector<Value> at;
            for (Value v : x)
              at.push_back(f.select(f.lt(v, f.c(0)), f.ceil(v), f.floor(v)));
            return pixel(at).first;
          }
          // Linear: 2 taps per dim; cubic: 4. Weights per dim, then every
          // combination of taps.
          int64_t taps = mode == ResizeMode::Linear ? 2 : 4;
          SmallVector<SmallVector<Value>> positions(spatial),
              weights(spatial);
          for (int64_t d = 0; d < spatial; ++d) {
            Value x0 = f.floor(x[d]);
            Value t = f.sub(x[d], x0);
            if (mode == ResizeMode::Linear) {
              positions[d] = {x0, f.add(x0, f.c(1))};
              weights[d] = {f.sub(f.c(1), t), t};
            } else {
              std::array<Value, 4> w = cubicWeights(f, t);
              weights[d].assign(w.begin(), w.end());
              for (int k = -1; k <= 2; ++k)
                positions[d].push_back(f.add(x0, f.c(k)));
            }
          }
          // The reference interpolates the innermost dim first and outward;
          // summing weight products in that nesting keeps its grouping.
          std::function<Value(int64_t, SmallVector<Value> &)> interpolate =
              [&](int64_t d, SmallVector<Value> &at) -> Value {
            Value sum;
            for (int64_t k = 0; k < taps; ++k) {
              at[d] = positions[d][k];
              Value v = d + 1 == spatial ? pixel(at).first
                                         : interpolate(d + 1, at);
              Value term = f.mul(weights[d][k], v);
              sum = sum ? f.add(sum, term) : term;
            }
            return sum;
          };
          SmallVector<Value> at(spatial);
          return interpolate(0, at);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// roi_align
//===----------------------------------------------------------------------===//

/// One generic over [R, C, oh, ow]; the body reads its region, then loops
/// (scf.for: with sampling_ratio 0 the count depends on the region) over
/// the bin's samples.
struct RoiAlignToGeneric : OpRewritePattern<RoiAlignOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RoiAlignOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    int64_t height = inType.getDimSize(2), width = inType.getDimSize(3);
    int64_t outH = op.getOutputHeight(), outW = op.getOutputWidth();
    int64_t ratio = op.getSamplingRatio();
    double scale = op.getSpatialScale().convertToDouble();
    bool halfPixel = op.getHalfPixel();
    bool isMax = op.getKind() == PoolKind::Max;
    Value input = op.getInput(), rois = op.getRois(),
          batch = op.getBatchIndices();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), op.getType(), ValueRange(), {},
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange idx) {
          Fp f{b, loc, inType.getElementType()};
          Value r = idx[0], ch = idx[1], ph = idx[2], pw = idx[3];
          auto roi = [&](int64_t k) {
            return tensor::ExtractOp::create(b, loc, rois,
                                             ValueRange{r, indexConstant(b, loc, k)})
                .getResult();
          };
          Value offset = f.c(halfPixel ? 0.5 : 0.0);
          Value startW = f.sub(f.mul(roi(0), f.c(scale)), offset);
          Value startH = f.sub(f.mul(roi(1), f.c(scale)), offset);
          Value roiW = f.sub(f.sub(f.mul(roi(2), f.c(scale)), offset), startW);
          Value roiH = f.sub(f.sub(f.mul(roi(3), f.c(scale)), offset), startH);
          if (!halfPixel) {
            roiW = f.max(roiW, f.c(1));
            roiH = f.max(roiH, f.c(1));
          }
          Value binH = f.div(roiH, f.c(outH)), binW = f.div(roiW, f.c(outW));
          Value gridH = ratio > 0 ? f.c(ratio) : f.ceil(binH);
          Value gridW = ratio > 0 ? f.c(ratio) : f.ceil(binW);
          Value count = f.max(f.mul(gridH, gridW), f.c(1));
          Value image = normalizedIndex(
              b, loc, tensor::ExtractOp::create(b, loc, batch, r),
              inType.getDimSize(0), /*clamp=*/true);
          Value zero = indexConstant(b, loc, 0), one = indexConstant(b, loc, 1);
          Value baseY = f.add(startH, f.mul(f.fromIndex(ph), binH));
          Value baseX = f.add(startW, f.mul(f.fromIndex(pw), binW));
          Value init = f.c(0);
          auto outer = scf::ForOp::create(
              b, loc, zero, f.toIndex(gridH), one, ValueRange{init, f.c(0)},
              [&](OpBuilder &ob, Location oloc, Value iy, ValueRange outerAcc) {
                Fp g{ob, oloc, f.type};
                Value yy = g.add(baseY,
                                 g.div(g.mul(g.add(g.fromIndex(iy), g.c(0.5)),
                                             binH),
                                       gridH));
                auto inner = scf::ForOp::create(
                    ob, oloc, zero, g.toIndex(gridW), one, outerAcc,
                    [&](OpBuilder &ib, Location iloc, Value ix,
                        ValueRange acc) {
                      Fp h{ib, iloc, f.type};
                      Value xx = h.add(
                          baseX, h.div(h.mul(h.add(h.fromIndex(ix), h.c(0.5)),
                                             binW),
                                       gridW));
                      // Samples more than a pixel outside weigh nothing.
                      Value out = h.orI(
                          h.orI(h.lt(yy, h.c(-1)), h.gt(yy, h.c(height))),
                          h.orI(h.lt(xx, h.c(-1)), h.gt(xx, h.c(width))));
                      Value y = h.max(yy, h.c(0)), x = h.max(xx, h.c(0));
                      Value yLow = h.floor(y), xLow = h.floor(x);
                      Value yEdge = arith::CmpFOp::create(
                          ib, iloc, arith::CmpFPredicate::OGE, yLow,
                          h.c(height - 1));
                      Value xEdge = arith::CmpFOp::create(
                          ib, iloc, arith::CmpFPredicate::OGE, xLow,
                          h.c(width - 1));
                      yLow = h.select(yEdge, h.c(height - 1), yLow);
                      xLow = h.select(xEdge, h.c(width - 1), xLow);
                      Value yHigh = h.select(yEdge, yLow, h.add(yLow, h.c(1)));
                      Value xHigh = h.select(xEdge, xLow, h.add(xLow, h.c(1)));
                      y = h.select(yEdge, yLow, y);
                      x = h.select(xEdge, xLow, x);
                      Value ly = h.sub(y, yLow), lx = h.sub(x, xLow);
                      Value hy = h.sub(h.c(1), ly), hx = h.sub(h.c(1), lx);
                      auto at = [&](Value py, Value px) {
                        return tensor::ExtractOp::create(
                                   ib, iloc, input,
                                   ValueRange{image, ch,
                                              h.clampedIndex(py, height),
                                              h.clampedIndex(px, width)})
                            .getResult();
                      };
                      Value zeroW = h.c(0);
                      Value w1 = h.select(out, zeroW, h.mul(hy, hx));
                      Value w2 = h.select(out, zeroW, h.mul(hy, lx));
                      Value w3 = h.select(out, zeroW, h.mul(ly, hx));
                      Value w4 = h.select(out, zeroW, h.mul(ly, lx));
                      Value t1 = h.mul(w1, at(yLow, xLow));
                      Value t2 = h.mul(w2, at(yLow, xHigh));
                      Value t3 = h.mul(w3, at(yHigh, xLow));
                      Value t4 = h.mul(w4, at(yHigh, xHigh));
                      Value next;
                      Value seen = acc[1];
                      if (isMax) {
                        Value v = h.max(h.max(t1, t2), h.max(t3, t4));
                        Value first = arith::CmpFOp::create(
                            ib, iloc, arith::CmpFPredicate::OEQ, seen, h.c(0));
                        next = h.select(first, v, h.max(acc[0], v));
                      } else {
                        next = h.add(acc[0], h.add(h.add(h.add(t1, t2), t3), t4));
                      }
                      scf::YieldOp::create(ib, iloc,
                                           ValueRange{next, h.c(1)});
                    });
                scf::YieldOp::create(ob, oloc, inner.getResults());
              });
          Value total = outer.getResult(0);
          return isMax ? total : f.div(total, count);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// deform_sample
//===----------------------------------------------------------------------===//

/// result[n, c, i, j, y, x] = mask * bilinear(input[n, c], py, px), zeros
/// outside the image (GridSample's linear, zeros, align_corners=1).
struct DeformSampleToGeneric : OpRewritePattern<DeformSampleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DeformSampleOp op,
                                PatternRewriter &rewriter) const override {
    if (failed(checkTypes(op, rewriter, /*computesOnElements=*/true)))
      return failure();
    RankedTensorType inType = op.getInput().getType();
    int64_t channels = inType.getDimSize(1);
    int64_t height = inType.getDimSize(2), width = inType.getDimSize(3);
    ArrayRef<int64_t> kernel = op.getKernel(), strides = op.getStrides(),
                      dilations = op.getDilations(), padding = op.getPadding();
    int64_t perGroup = channels / op.getOffsetGroups();
    Value input = op.getInput(), offset = op.getOffset(), mask = op.getMask();
    Value result = indexedGeneric(
        rewriter, op.getLoc(), op.getType(), ValueRange(), {},
        [&](OpBuilder &b, Location loc, ValueRange, ValueRange idx) {
          Fp f{b, loc, inType.getElementType()};
          Value n = idx[0], c = idx[1], i = idx[2], j = idx[3], y = idx[4],
                x = idx[5];
          auto ic = [&](int64_t v) { return indexConstant(b, loc, v); };
          Value g = arith::DivUIOp::create(b, loc, c, ic(perGroup));
          // tap = (g * kh + i) * kw + j
          Value tap = arith::AddIOp::create(
              b, loc,
              arith::MulIOp::create(
                  b, loc,
                  arith::AddIOp::create(
                      b, loc, arith::MulIOp::create(b, loc, g, ic(kernel[0])),
                      i),
                  ic(kernel[1])),
              j);
          Value twice = arith::MulIOp::create(b, loc, tap, ic(2));
          Value dy = tensor::ExtractOp::create(b, loc, offset,
                                               ValueRange{n, twice, y, x});
          Value dx = tensor::ExtractOp::create(
              b, loc, offset,
              ValueRange{n, arith::AddIOp::create(b, loc, twice, ic(1)), y, x});
          Value m = tensor::ExtractOp::create(b, loc, mask,
                                              ValueRange{n, tap, y, x});
          auto position = [&](Value out, Value k, int64_t d) {
            // out * stride - pad + k * dilation
            Value base = f.sub(f.mul(f.fromIndex(out), f.c(strides[d])),
                               f.c(padding[d]));
            return f.add(base, f.mul(f.fromIndex(k), f.c(dilations[d])));
          };
          Value py = f.add(position(y, i, 0), dy);
          Value px = f.add(position(x, j, 1), dx);
          Value y0 = f.floor(py), x0 = f.floor(px);
          Value ty = f.sub(py, y0), tx = f.sub(px, x0);
          Value sum;
          for (int a = 0; a < 2; ++a) {
            for (int e = 0; e < 2; ++e) {
              Value yy = a ? f.add(y0, f.c(1)) : y0;
              Value xx = e ? f.add(x0, f.c(1)) : x0;
              Value w = f.mul(a ? ty : f.sub(f.c(1), ty),
                              e ? tx : f.sub(f.c(1), tx));
              Value v = tensor::ExtractOp::create(
                  b, loc, input,
                  ValueRange{n, c, f.clampedIndex(yy, height),
                             f.clampedIndex(xx, width)});
              Value in = f.andI(f.inside(yy, height), f.inside(xx, width));
              Value term = f.select(in, f.mul(w, v), f.c(0));
              sum = sum ? f.add(sum, term) : term;
            }
          }
          return f.mul(sum, m);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kiln::populateImageToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<GridSampleToGeneric, RoiAlignToGeneric, DeformSampleToGeneric>(
      patterns.getContext());
}
