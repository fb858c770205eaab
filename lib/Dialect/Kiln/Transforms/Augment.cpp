//===- Augment.cpp - On-device data augmentation of a training input ------===//
//
// kiln-augment: random crop with zero padding, random horizontal flip and
// per-channel normalisation of one image input, as kiln ops at the top of
// the training function (so they compile into the train_step kernels like
// everything else), with per-sample decisions drawn by kiln.philox from the
// same RNG arguments as dropout (rng.key, rng.counter: new each step). The
// evaluation function only normalises. The rules are in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace kiln {
#define GEN_PASS_DEF_AUGMENTPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

// Philox streams of the per-sample decisions; dropouts use 0, 1, ...
constexpr int64_t kStreamCropRow = int64_t(1) << 31;
constexpr int64_t kStreamCropColumn = kStreamCropRow + 1;
constexpr int64_t kStreamFlip = kStreamCropRow + 2;

struct AugmentSpec {
  bool flip = false;
  int64_t pad = 0; // crop: 0 is off
  SmallVector<double> mean, stddev;
  bool nhwc = false;
};

bool parseNumbers(StringRef text, SmallVectorImpl<double> &out) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  for (StringRef part : parts) {
    double v;
    if (part.trim().getAsDouble(v))
      return false;
    out.push_back(v);
  }
  return !out.empty();
}

/// Parses "flip,crop:PAD,normalize:M[,M...]/S[,S...],layout:nchw|nhwc";
/// numbers after normalize's own are its further channels.
FailureOr<AugmentSpec> parseSpec(StringRef spec, std::string &error) {
  AugmentSpec s;
  SmallVector<StringRef> raw;
  spec.split(raw, ',');
  SmallVector<std::string> tokens;
  for (StringRef token : raw) {
    bool continues = !tokens.empty() &&
                     StringRef(tokens.back()).starts_with("normalize:") &&
                     !token.empty() &&
                     (isdigit(token.front()) || token.front() == '-' ||
                      token.front() == '.');
    if (continues)
      tokens.back() += "," + token.str();
    else
      tokens.push_back(token.str());
  }
  auto bad = [&](const Twine &why) -> FailureOr<AugmentSpec> {
    error = ("'" + spec + "': " + why).str();
    return failure();
  };
  for (StringRef token : tokens) {
    auto [name, value] = token.split(':');
    if (name == "flip" && value.empty()) {
      s.flip = true;
    } else if (name == "crop") {
      if (value.getAsInteger(10, s.pad) || s.pad <= 0)
        return bad("crop takes a positive padding, crop:PAD, got '" + token +
                   "'");
    } else if (name == "normalize") {
      auto [mean, stddev] = value.split('/');
      s.mean.clear();
      s.stddev.clear();
      if (!parseNumbers(mean, s.mean) || !parseNumbers(stddev, s.stddev) ||
          s.mean.size() != s.stddev.size())
        return bad("normalize takes MEAN/STD, one number or one per channel "
                   "each (e.g. normalize:0.5,0.4/0.2,0.3), got '" +
                   token + "'");
      if (llvm::any_of(s.stddev, [](double v) { return !(v > 0); }))
        return bad("normalize: every STD must be positive");
    } else if (name == "layout" && (value == "nchw" || value == "nhwc")) {
      s.nhwc = value == "nhwc";
    } else {
      return bad("'" + token + "' is not flip, crop:PAD, normalize:MEAN/STD "
                 "or layout:nchw|nhwc");
    }
  }
  return s;
}

/// The function argument named `name` (kiln.name), if any.
std::optional<unsigned> argumentNamed(func::FuncOp func, StringRef name) {
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto attr = func.getArgAttrOfType<StringAttr>(
            i, KilnDialect::NameAttrHelper::getNameStr()))
      if (attr.getValue() == name)
        return i;
  return std::nullopt;
}

/// rng.key and rng.counter of `func`, added (as kiln-autodiff adds them for
/// dropout) when it has none.
std::pair<Value, Value> rngArguments(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  Builder attrs(ctx);
  auto i32 = IntegerType::get(ctx, 32);
  auto get = [&](StringRef name, int64_t words) {
    if (std::optional<unsigned> index = argumentNamed(func, name))
      return func.getArgument(*index);
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(index, RankedTensorType::get({words}, i32),
                              attrs.getDictionaryAttr(attrs.getNamedAttr(
                                  KilnDialect::NameAttrHelper::getNameStr(),
                                  attrs.getStringAttr(name))),
                              func.getLoc());
    return func.getArgument(index);
  };
  Value key = get("rng.key", 2);
  return {key, get("rng.counter", 4)};
}

struct AugmentPass : kiln::impl::AugmentPassBase<AugmentPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  Value build(ImplicitLocOpBuilder &b, Value x, const AugmentSpec &s,
              func::FuncOp train);
};

Value AugmentPass::build(ImplicitLocOpBuilder &b, Value x, const AugmentSpec &s,
                         func::FuncOp train) {
  auto type = cast<RankedTensorType>(x.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t n = shape[0];
  int64_t h = s.nhwc ? 1 : 2, w = h + 1, c = s.nhwc ? 3 : 1;
  auto i32 = b.getI32Type();
  auto i32Scalar = [&](int32_t v) {
    auto t = RankedTensorType::get({}, i32);
    return ConstantOp::create(b, t, DenseElementsAttr::get(t, APInt(32, v)))
        .getResult();
  };
  // One value per sample, shaped to broadcast against the image.
  auto perSample = [&](Value v) {
    SmallVector<int64_t> dims(4, 1);
    dims[0] = n;
    return ReshapeOp::create(
               b, RankedTensorType::get(dims, getElementTypeOrSelf(v)), v)
        .getResult();
  };
  if (train) {
    auto [key, counter] = rngArguments(train);
    auto draw = [&](int64_t stream) {
      return PhiloxOp::create(b, RankedTensorType::get({n}, i32), key, counter,
                              b.getI64IntegerAttr(stream))
          .getResult();
    };
    if (s.pad > 0) {
      // Zero-pad, then read the window at a per-sample offset in [0, 2 PAD]
      // (Python-style mod of the signed word: never negative).
      SmallVector<int64_t> low(4, 0);
      low[h] = low[w] = s.pad;
      Value padded = PadOp::create(b, PadModeAttr::get(b.getContext(),
                                                        PadMode::Constant),
                                   x, b.getDenseI64ArrayAttr(low),
                                   b.getDenseI64ArrayAttr(low),
                                   b.getF64FloatAttr(0.0));
      Value range = i32Scalar(int32_t(2 * s.pad + 1));
      Value current = padded;
      for (auto [axis, stream] :
           {std::pair(h, kStreamCropRow), std::pair(w, kStreamCropColumn)}) {
        Value offset = perSample(ModOp::create(b, draw(stream), range));
        SmallVector<int64_t> iotaDims(4, 1);
        iotaDims[axis] = shape[axis];
        Value iota = ReshapeOp::create(
            b, RankedTensorType::get(iotaDims, i32),
            IotaOp::create(b, RankedTensorType::get({shape[axis]}, i32),
                           b.getF64FloatAttr(0), b.getF64FloatAttr(1)));
        SmallVector<int64_t> out(
            cast<RankedTensorType>(current.getType()).getShape());
        out[axis] = shape[axis];
        Value index = BroadcastOp::create(
            b, RankedTensorType::get(out, i32), AddOp::create(b, offset, iota));
        current = GatherElementsOp::create(b, current, index,
                                           b.getI64IntegerAttr(axis));
      }
      x = current;
    }
    if (s.flip) {
      // The word's sign bit: probability 1/2.
      Value flipped = perSample(LessOp::create(b, draw(kStreamFlip), i32Scalar(0)));
      SmallVector<int64_t> starts(4, 0), limits(shape), steps(4, 1);
      starts[w] = shape[w] - 1;
      limits[w] = -1;
      steps[w] = -1;
      Value mirrored = SliceOp::create(b, x, b.getDenseI64ArrayAttr(starts),
                                       b.getDenseI64ArrayAttr(limits),
                                       b.getDenseI64ArrayAttr(steps));
      x = SelectOp::create(b, flipped, mirrored, x);
    }
  }
  if (!s.mean.empty()) {
    SmallVector<int64_t> dims(4, 1);
    dims[c] = s.mean.size() == 1 ? 1 : shape[c];
    Type element = type.getElementType();
    auto constant = [&](ArrayRef<double> values) {
      auto t = RankedTensorType::get(dims, element);
      SmallVector<Attribute> attrs;
      for (double v : values)
        attrs.push_back(FloatAttr::get(element, v));
      return ConstantOp::create(b, t, DenseElementsAttr::get(t, attrs))
          .getResult();
    };
    x = DivOp::create(b, SubOp::create(b, x, constant(s.mean)),
                      constant(s.stddev));
  }
  return x;
}

void AugmentPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    module.emitError() << "kiln-augment: " << message;
    signalPassFailure();
  };
  std::string error, inputName = input, trainName = trainFunction,
                    evalName = evalFunction;
  FailureOr<AugmentSpec> parsed = parseSpec(spec.getValue(), error);
  if (failed(parsed))
    return fail(error);
  auto train = module.lookupSymbol<func::FuncOp>(trainName);
  if (!train)
    return fail("the module has no @" + trainName);
  auto eval = evalName.empty() ? func::FuncOp()
                               : module.lookupSymbol<func::FuncOp>(evalName);
  for (auto [func, training] : {std::pair(train, true), std::pair(eval, false)}) {
    if (!func)
      continue;
    std::optional<unsigned> index = inputName.empty()
                                        ? std::optional<unsigned>(0)
                                        : argumentNamed(func, inputName);
    if (!index || *index >= func.getNumArguments())
      return fail("@" + func.getSymName() + " has no input '" + inputName +
                  "'");
    Value x = func.getArgument(*index);
    auto type = dyn_cast<RankedTensorType>(x.getType());
    auto name = func.getArgAttrOfType<StringAttr>(
        *index, KilnDialect::NameAttrHelper::getNameStr());
    std::string what = "input '" + (name ? name.getValue().str() : "?") + "'";
    if (!type || type.getRank() != 4 || !type.hasStaticShape() ||
        !isa<FloatType>(type.getElementType()))
      return fail(what + " is not a static 4-D float image batch (" +
                  (parsed->nhwc ? "NHWC" : "NCHW") + ")");
    int64_t channels = type.getDimSize(parsed->nhwc ? 3 : 1);
    if (parsed->mean.size() > 1 && int64_t(parsed->mean.size()) != channels)
      return fail(Twine(what) + " has " + Twine(channels) +
                  " channels, normalize gives " +
                  Twine(uint64_t(parsed->mean.size())));
    llvm::SmallPtrSet<Operation *, 16> original;
    for (Operation &op : func.front())
      original.insert(&op);
    ImplicitLocOpBuilder b(
        NameLoc::get(StringAttr::get(&getContext(), "augment")), &func.front(),
        func.front().begin());
    Value augmented = build(b, x, *parsed, training ? func : func::FuncOp());
    x.replaceUsesWithIf(augmented, [&](OpOperand &use) {
      return original.contains(use.getOwner());
    });
  }
}

} // namespace
