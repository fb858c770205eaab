//===- RandomHandlers.cpp - ONNX random number generators -----------------===//
//
// RandomUniform[Like], RandomNormal[Like] and Bernoulli draw from Kiln's
// Philox-4x32-10 (kiln.philox, the generator training's dropout uses):
// the node's `seed` gives the key, the counter starts at 0, and each node
// gets its own stream (FNV-1a of its first output's name), so two random
// nodes of one model draw independent numbers. An inference artifact has no
// run-time RNG state, so a node draws the same numbers on every run; a node
// without a seed uses seed 0. The draws cannot match another generator's
// (the ONNX node tests' expected outputs come from numpy's), so they are
// tested statistically (test/e2e/random_ops.py).
//
// uniform: the top 24 bits of a Philox word, u = bits * 2^-24 in [0, 1).
// normal: Box-Muller, sqrt(-2 ln(1 - u1)) * cos(2 pi u2), u1 and u2 from
// two streams.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"

#include <cmath>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

/// The Philox key of a node's `seed` attribute (a float in ONNX): the
/// integer part's low and high 32-bit words.
std::array<int64_t, 2> seedKey(NodeImporter &n) {
  double seed = n.floatAttr("seed", 0.0f);
  auto bits = static_cast<uint64_t>(static_cast<int64_t>(seed));
  return {static_cast<int32_t>(bits & 0xffffffffu),
          static_cast<int32_t>(bits >> 32)};
}

/// The node's stream (Composer::philoxStream of its first output's name).
int64_t streamOf(NodeImporter &n) {
  return Composer::philoxStream(n.node().output_size() ? n.node().output(0)
                                                        : "");
}

/// Uniform [0, 1) numbers of `type` from Philox stream `stream`.
Value uniform(Composer &c, RankedTensorType type, int64_t stream) {
  NodeImporter &n = c.importer();
  Type i32 = n.builder().getI32Type();
  std::array<int64_t, 2> key = seedKey(n);
  Value keyValue = c.constant(RankedTensorType::get({2}, i32),
                              {static_cast<double>(key[0]),
                               static_cast<double>(key[1])});
  Value counter = c.constant(RankedTensorType::get({4}, i32), {0.0});
  Value bits = c.makeTyped<PhiloxOp>(
      RankedTensorType::get(type.getShape(), i32), {keyValue, counter},
      {n.namedI64("stream", stream)});
  // bits >> 8 is arithmetic on i32: mask the sign's copies away.
  Value top = c.make<BitwiseAndOp>(
      {c.make<ShiftRightOp>({bits, c.scalar(i32, 8)}),
       c.scalar(i32, 0xffffff)});
  Value asFloat = c.cast(top, type.getElementType());
  return c.make<MulOp>(
      {asFloat, c.scalar(type.getElementType(), std::ldexp(1.0, -24))});
}

Value normal(Composer &c, RankedTensorType type, int64_t stream) {
  Type t = type.getElementType();
  Value u1 = uniform(c, type, stream);
  Value u2 = uniform(c, type, stream + 1);
  Value radius = c.make<SqrtOp>(c.make<MulOp>(
      {c.make<LogOp>(c.make<SubOp>({c.scalar(t, 1.0), u1})),
       c.scalar(t, -2.0)}));
  Value angle = c.make<CosOp>(c.make<MulOp>({u2, c.scalar(t, 2 * M_PI)}));
  return c.make<MulOp>({radius, angle});
}

/// The output type of a random node: `dtype` (default FLOAT, or the `like`
/// input's type) and `shape`.
FailureOr<RankedTensorType> randomType(NodeImporter &n,
                                       ArrayRef<int64_t> shape,
                                       Type fallback) {
  Type elementType = fallback;
  if (n.hasAttr("dtype")) {
    int64_t code = n.intAttr("dtype", 1);
    elementType = convertElementType(static_cast<int32_t>(code), n.context());
    if (!elementType)
      return n.fail("dtype " + onnxTypeName(static_cast<int32_t>(code)) +
                    " is not a supported element type");
  }
  if (!isa<FloatType>(elementType)) {
    std::string name;
    llvm::raw_string_ostream os(name);
    os << elementType;
    return n.fail("random numbers of element type " + name +
                  " are not supported (float types only)");
  }
  return RankedTensorType::get(shape, elementType);
}

/// RandomUniform and RandomNormal (`shape` attribute) and their -Like
/// versions (the input's shape and, by default, type).
template <bool isNormal, bool isLike>
LogicalResult importRandom(NodeImporter &n) {
  if (failed(n.checkArity(isLike ? 1 : 0, isLike ? 1 : 0)))
    return failure();
  SmallVector<int64_t> shape;
  Type fallback = n.builder().getF32Type();
  if (isLike) {
    shape.assign(n.inputType(0).getShape().begin(),
                 n.inputType(0).getShape().end());
    if (isa<FloatType>(n.inputType(0).getElementType()))
      fallback = n.inputType(0).getElementType();
  } else {
    if (!n.hasAttr("shape"))
      return n.fail("missing attribute 'shape'");
    shape = n.intsAttr("shape");
  }
  FailureOr<RankedTensorType> type = randomType(n, shape, fallback);
  if (failed(type))
    return failure();
  Composer c(n);
  Type t = type->getElementType();
  Value y;
  if (isNormal) {
    double mean = n.floatAttr("mean", 0.0f), scale = n.floatAttr("scale", 1.0f);
    y = c.make<AddOp>({c.make<MulOp>({normal(c, *type, streamOf(n)),
                                      c.scalar(t, scale)}),
                       c.scalar(t, mean)});
  } else {
    double low = n.floatAttr("low", 0.0f), high = n.floatAttr("high", 1.0f);
    y = c.make<AddOp>({c.make<MulOp>({uniform(c, *type, streamOf(n)),
                                      c.scalar(t, high - low)}),
                       c.scalar(t, low)});
  }
  return bindComposed(c, y);
}

/// y = (uniform < p): 1 with probability p.
LogicalResult importBernoulli(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  RankedTensorType inType = n.inputType(0);
  if (!isa<FloatType>(inType.getElementType()))
    return n.fail("expects floating-point probabilities");
  Type outType = inType.getElementType();
  if (n.hasAttr("dtype")) {
    int64_t code = n.intAttr("dtype", 1);
    outType = convertElementType(static_cast<int32_t>(code), n.context());
    if (!outType)
      return n.fail("dtype " + onnxTypeName(static_cast<int32_t>(code)) +
                    " is not a supported element type");
  }
  Composer c(n);
  Value u = uniform(c, inType, streamOf(n));
  Value hit = c.make<LessOp>({u, n.input(0)});
  return bindComposed(c, c.cast(hit, outType));
}

} // namespace

void registerRandomHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *limits =
      "Philox draws, the same on every run (statistically tested, not "
      "bit-compatible with other generators)";
  handlers.append({
      {"RandomUniform", 1, importRandom<false, false>, limits},
      {"RandomNormal", 1, importRandom<true, false>, limits},
      {"RandomUniformLike", 1, importRandom<false, true>, limits},
      {"RandomNormalLike", 1, importRandom<true, true>, limits},
      {"Bernoulli", 15, importBernoulli, limits},
  });
}

} // namespace kiln::onnx_frontend
