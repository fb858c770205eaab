//===- RandomToLinalg.cpp - Philox ops to linalg.generic ------------------===//
//
// kiln.philox and kiln.dropout_mask become one linalg.generic each whose
// body runs Philox-4x32-10 on the element's counter (its linear index from
// linalg.index) in 32-bit integer arithmetic: ten rounds of two 32x32->64
// multiplies (arith.mului_extended) and xors, the key bumped between rounds.
// The key and counter words are read with constant indexing maps, so every
// element sees the same six words. Being a plain generic, it fuses into
// the kernel that reads it (the backward's recomputed mask included).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

namespace {

// The Philox-4x32 constants of Salmon et al. (Random123's philox.h).
constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

Value i32Constant(OpBuilder &b, Location loc, uint32_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                      static_cast<int32_t>(v));
}

/// Philox-4x32-10 of `counter` under `key`, in i32 arithmetic.
std::array<Value, 4> philox4x32x10(OpBuilder &b, Location loc,
                                   std::array<Value, 4> ctr,
                                   std::array<Value, 2> key) {
  Value m0 = i32Constant(b, loc, kMultiplier0);
  Value m1 = i32Constant(b, loc, kMultiplier1);
  Value w0 = i32Constant(b, loc, kWeyl0), w1 = i32Constant(b, loc, kWeyl1);
  auto xorOf = [&](Value x, Value y) {
    return Value(arith::XOrIOp::create(b, loc, x, y));
  };
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] = arith::AddIOp::create(b, loc, key[0], w0);
      key[1] = arith::AddIOp::create(b, loc, key[1], w1);
    }
    auto p0 = arith::MulUIExtendedOp::create(b, loc, m0, ctr[0]);
    auto p1 = arith::MulUIExtendedOp::create(b, loc, m1, ctr[2]);
    ctr = {xorOf(xorOf(p1.getHigh(), ctr[1]), key[0]), p1.getLow(),
           xorOf(xorOf(p0.getHigh(), ctr[3]), key[1]), p0.getLow()};
  }
  return ctr;
}

/// A generic over `resultType` whose body gets the element's Philox word
/// (as documented on kiln.philox) and turns it into the result element.
Value philoxGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                    Value key, Value counter, int64_t stream,
                    llvm::function_ref<Value(OpBuilder &, Location, Value)>
                        fromBits) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = resultType.getRank();
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (int64_t w = 0; w < 2; ++w) {
    inputs.push_back(key);
    maps.push_back(AffineMap::get(rank, 0, getAffineConstantExpr(w, ctx)));
  }
  for (int64_t w = 0; w < 4; ++w) {
    inputs.push_back(counter);
    maps.push_back(AffineMap::get(rank, 0, getAffineConstantExpr(w, ctx)));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, inputs, emptyTensor(b, loc, resultType), maps,
      iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        // The row-major linear index, modulo 2^32.
        Value linear = arith::ConstantIndexOp::create(nb, nloc, 0);
        for (int64_t d = 0; d < rank; ++d) {
          Value size = arith::ConstantIndexOp::create(
              nb, nloc, resultType.getDimSize(d));
          linear = arith::AddIOp::create(
              nb, nloc, arith::MulIOp::create(nb, nloc, linear, size),
              linalg::IndexOp::create(nb, nloc, d));
        }
        Value index =
            arith::IndexCastUIOp::create(nb, nloc, nb.getI32Type(), linear);
        Value block = arith::ShRUIOp::create(nb, nloc, index,
                                             i32Constant(nb, nloc, 2));
        Value word =
            arith::AndIOp::create(nb, nloc, index, i32Constant(nb, nloc, 3));
        std::array<Value, 4> ctr = {
            arith::AddIOp::create(nb, nloc, args[2], block),
            arith::AddIOp::create(nb, nloc, args[3],
                                  i32Constant(nb, nloc, uint32_t(stream))),
            args[4], args[5]};
        std::array<Value, 4> out =
            philox4x32x10(nb, nloc, ctr, {args[0], args[1]});
        auto is = [&](uint32_t w) {
          return arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                       word, i32Constant(nb, nloc, w));
        };
        Value bits = arith::SelectOp::create(
            nb, nloc, is(0), out[0],
            arith::SelectOp::create(
                nb, nloc, is(1), out[1],
                arith::SelectOp::create(nb, nloc, is(2), out[2], out[3])));
        linalg::YieldOp::create(nb, nloc, fromBits(nb, nloc, bits));
      });
  return generic.getResult(0);
}

struct PhiloxToGeneric : OpRewritePattern<PhiloxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PhiloxOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, philoxGeneric(rewriter, op.getLoc(), op.getType(), op.getKey(),
                          op.getCounter(), op.getStream(),
                          [](OpBuilder &, Location, Value bits) { return bits; }));
    return success();
  }
};

struct DropoutMaskToGeneric : OpRewritePattern<DropoutMaskOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutMaskOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    double keep = 1.0 - op.getRatio().convertToDouble();
    if (keep >= 1.0) {
      rewriter.replaceOp(op, filledTensor(rewriter, op.getLoc(), type, 1.0));
      return success();
    }
    // keep * 2^32 rounded: the element is kept when its word is below it.
    auto threshold =
        static_cast<uint32_t>(std::min(std::llround(std::ldexp(keep, 32)),
                                       static_cast<long long>(0xffffffffLL)));
    Type element = type.getElementType();
    Value mask = philoxGeneric(
        rewriter, op.getLoc(), type, op.getKey(), op.getCounter(),
        op.getStream(), [&](OpBuilder &b, Location loc, Value bits) -> Value {
          Value kept =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, bits,
                                    i32Constant(b, loc, threshold));
          return arith::SelectOp::create(b, loc, kept,
                                         scalarConstant(b, loc, element,
                                                        1.0 / keep),
                                         scalarConstant(b, loc, element, 0.0));
        });
    rewriter.replaceOp(op, mask);
    return success();
  }
};

} // namespace

void kiln::populateRandomToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<PhiloxToGeneric, DropoutMaskToGeneric>(
      patterns.getContext());
}
