//===- AssignLayout.cpp - kiln-assign-layout ------------------------------===//
//
// Chooses channels-first (NCHW) or channels-last (NHWC) activations and
// makes every layout change an explicit kiln.transpose. The rules are in the
// pass description (Passes.td); this file applies them in fixed steps:
//
//   1. convert: each conv, conv_transpose and pool on 2-D or 3-D images
//      that is not in the target layout gets it, between a transpose of its
//      input (and filter) into the target layout and one of its result back;
//   2. propagate: back transposes sink below layout-agnostic ops until they
//      meet an inverse transpose and cancel (LayoutPropagation.cpp);
//   3. pad channels: a channels-last convolution whose input channel count
//      is not a multiple of `channel-multiple` reads its input and filter
//      padded with zero channels (not a quantized chain with `int8-convs`:
//      the int8 kernel pads its filter itself);
//   4. fold weights: transposes and pads of compile-time values (constants,
//      immutable globals) become new globals holding the moved data.
//
// The pass works on the module because step 4 adds ml_program.globals.
//
//===----------------------------------------------------------------------===//

#include "LayoutPropagation.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/QuantizedChains.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <cctype>
#include <cmath>
#include <cstring>

namespace kiln {
#define GEN_PASS_DEF_ASSIGNLAYOUTPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::layout;

namespace {

//===----------------------------------------------------------------------===//
// Step 1: convert layout-sensitive ops
//===----------------------------------------------------------------------===//

/// The activation operands of `op` that live in its data format: input and,
/// for convolutions, the filter (whose dims the same permutation reorders:
/// [O, C, k...] <-> [O, k..., C], and [C, O, k...] <-> [C, k..., O] for
/// conv_transpose).
SmallVector<unsigned> formattedOperands(Operation *op) {
  if (isa<ConvOp, ConvTransposeOp>(op))
    return {0, 1};
  return {0};
}

void convertOp(Operation *op, DataFormat target) {
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = resultType.getRank();
  Permutation to = permutationTo(target, rank);
  Permutation back = permutationTo(otherFormat(target), rank);
  OpBuilder b(op);
  Location loc = op->getLoc();
  for (unsigned index : formattedOperands(op))
    op->setOperand(index, TransposeOp::create(b, loc, op->getOperand(index),
                                              b.getDenseI64ArrayAttr(to)));
  op->setAttr("data_format", DataFormatAttr::get(op->getContext(), target));
  Value result = op->getResult(0);
  result.setType(permuteType(resultType, to));
  b.setInsertionPointAfter(op);
  auto restored =
      TransposeOp::create(b, loc, result, b.getDenseI64ArrayAttr(back));
  result.replaceAllUsesExcept(restored, restored);
}

void convertLayoutSensitiveOps(func::FuncOp func, DataFormat target) {
  SmallVector<Operation *> ops;
  // Only ops directly in the function: kiln.fusion regions (fusion runs
  // after this pass) keep what they hold.
  func.getBody().walk([&](Operation *op) {
    if (op->getParentOp() != func.getOperation())
      return;
    DataFormat format;
    if (auto conv = dyn_cast<ConvOp>(op))
      format = conv.getDataFormat();
    else if (auto convTranspose = dyn_cast<ConvTransposeOp>(op))
      format = convTranspose.getDataFormat();
    else if (auto pool = dyn_cast<PoolOp>(op))
      format = pool.getDataFormat();
    else
      return;
    if (format != target &&
        isLayoutRank(
            cast<RankedTensorType>(op->getResult(0).getType()).getRank()))
      ops.push_back(op);
  });
  for (Operation *op : ops)
    convertOp(op, target);
}

//===----------------------------------------------------------------------===//
// Step 3: pad channels
//===----------------------------------------------------------------------===//

Value padLastDim(OpBuilder &b, Location loc, Value value, int64_t extra) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  high.back() = extra;
  return PadOp::create(b, loc,
                       PadModeAttr::get(b.getContext(), PadMode::Constant),
                       value, b.getDenseI64ArrayAttr(low),
                       b.getDenseI64ArrayAttr(high), b.getF64FloatAttr(0.0));
}

/// Whether `conv` is a quantized chain's the int8 kernel takes
/// (QuantizedChains.h): its operands must stay the chain's.
bool isInt8Conv(ConvOp conv) {
  std::string why;
  return matchQuantizedChain(conv, why).has_value();
}

/// Zero channels add nothing to a convolution's sums, so padding the input
/// and the filter alike leaves the result as it was. The convolutions in
/// `unpadded` (quantized chains, with `int8-convs`, recognised before the
/// layout change) are left as they are: the int8 kernel pads the filter to
/// its own 16-channel chunk, and a pad would hide the chain.
void padInputChannels(func::FuncOp func, int64_t multiple,
                      const llvm::DenseSet<Operation *> &unpadded) {
  for (auto conv :
       llvm::make_early_inc_range(func.getBody().getOps<ConvOp>())) {
    if (conv.getDataFormat() != DataFormat::ChannelsLast ||
        conv.getGroups() != 1 || unpadded.contains(conv))
      continue;
    RankedTensorType inputType = conv.getInput().getType();
    int64_t channels = inputType.getDimSize(inputType.getRank() - 1);
    if (ShapedType::isDynamic(channels) || channels % multiple == 0)
      continue;
    int64_t extra = llvm::alignTo(channels, multiple) - channels;
    OpBuilder b(conv);
    conv.getInputMutable().assign(
        padLastDim(b, conv.getLoc(), conv.getInput(), extra));
    conv.getFilterMutable().assign(
        padLastDim(b, conv.getLoc(), conv.getFilter(), extra));
  }
}

//===----------------------------------------------------------------------===//
// Step 4: fold weights
//===----------------------------------------------------------------------===//

/// The row-major bytes of a value known at compile time, with what made it.
struct WeightData {
  RankedTensorType type;
  std::vector<char> bytes;
  /// The global it comes from (null when it is built from constants only),
  /// and a suffix naming what was done to it.
  ml_program::GlobalOp root;
  std::string suffix;
  /// The initializer and the steps that made it (WeightOrigins.h); empty
  /// when unknown.
  std::string origin;
};

/// Bytes per element, or 0 for element types this does not move (i1 and
/// sub-byte types are packed, complex ones are not expected).
int64_t elementBytes(Type type) {
  if (!isa<FloatType, IntegerType>(type))
    return 0;
  unsigned bits = type.getIntOrFloatBitWidth();
  return bits % 8 == 0 ? bits / 8 : 0;
}

std::optional<std::vector<char>> bytesOf(Attribute value,
                                         RankedTensorType type) {
  int64_t width = elementBytes(type.getElementType());
  if (width == 0 || !type.hasStaticShape())
    return std::nullopt;
  size_t size = type.getNumElements() * width;
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != size)
      return std::nullopt; // elided or malformed: nothing to fold
    return std::vector<char>(blob->getData().begin(), blob->getData().end());
  }
  auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!dense)
    return std::nullopt;
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    if (raw.size() != static_cast<size_t>(width))
      return std::nullopt;
    std::vector<char> bytes(size);
    for (size_t i = 0; i < size; i += width)
      std::memcpy(bytes.data() + i, raw.data(), width);
    return bytes;
  }
  if (raw.size() != size)
    return std::nullopt;
  return std::vector<char>(raw.begin(), raw.end());
}

/// The bytes of one element of `type` holding `value`.
std::optional<std::vector<char>> elementOf(double value, Type type) {
  int64_t width = elementBytes(type);
  std::vector<char> bytes(width);
  APInt bits;
  if (auto floatType = dyn_cast<FloatType>(type)) {
    APFloat converted(value);
    bool lost;
    converted.convert(floatType.getFloatSemantics(),
                      APFloat::rmNearestTiesToEven, &lost);
    bits = converted.bitcastToAPInt();
  } else {
    bits = APInt(width * 8, static_cast<int64_t>(value), /*isSigned=*/true);
  }
  for (int64_t i = 0; i < width; ++i)
    bytes[i] = static_cast<char>(bits.extractBitsAsZExtValue(8, 8 * i));
  return bytes;
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Calls `fn(target, source)` with the linear element index in `outShape`
/// and the linear element index it reads (or -1) for each element.
void forEachElement(ArrayRef<int64_t> outShape,
                    llvm::function_ref<int64_t(ArrayRef<int64_t>)> sourceOf,
                    llvm::function_ref<void(int64_t, int64_t)> fn) {
  int64_t count = 1;
  for (int64_t d : outShape)
    count *= d;
  SmallVector<int64_t> coords(outShape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    fn(i, sourceOf(coords));
    for (int64_t d = static_cast<int64_t>(outShape.size()) - 1; d >= 0; --d) {
      if (++coords[d] < outShape[d])
        break;
      coords[d] = 0;
    }
  }
}

std::optional<WeightData> evaluate(Value value, SymbolTable &symbols) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto type = cast<RankedTensorType>(value.getType());
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    std::optional<std::vector<char>> bytes = bytesOf(constant.getValue(), type);
    if (!bytes)
      return std::nullopt;
    return WeightData{type, std::move(*bytes), nullptr, ""};
  }
  if (auto load = dyn_cast<ml_program::GlobalLoadConstOp>(op)) {
    auto global = symbols.lookup<ml_program::GlobalOp>(
        load.getGlobal().getRootReference());
    if (!global || global.getIsMutable() || global.getType() != type)
      return std::nullopt;
    std::optional<std::vector<char>> bytes =
        bytesOf(global.getValueAttr(), type);
    if (!bytes)
      return std::nullopt;
    return WeightData{type, std::move(*bytes), global, "",
                      getWeightOrigin(global)};
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    std::optional<WeightData> input = evaluate(reshape.getInput(), symbols);
    if (!input)
      return std::nullopt;
    input->type = type;
    input->origin = appendOriginStep(input->origin, "reshape", type.getShape());
    return input;
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    std::optional<WeightData> input = evaluate(transpose.getInput(), symbols);
    if (!input)
      return std::nullopt;
    ArrayRef<int64_t> perm = transpose.getPermutation();
    int64_t width = elementBytes(type.getElementType());
    SmallVector<int64_t> inStrides = rowMajorStrides(input->type.getShape());
    std::vector<char> bytes(input->bytes.size());
    forEachElement(
        type.getShape(),
        [&](ArrayRef<int64_t> coords) {
          int64_t source = 0;
          for (auto [d, c] : llvm::enumerate(coords))
            source += c * inStrides[perm[d]];
          return source;
        },
        [&](int64_t target, int64_t source) {
          std::memcpy(bytes.data() + target * width,
                      input->bytes.data() + source * width, width);
        });
    int64_t rank = type.getRank();
    std::string suffix =
        perm == ArrayRef<int64_t>(permutationTo(DataFormat::ChannelsLast, rank))
            ? "_nhwc"
        : perm == ArrayRef<int64_t>(
                      permutationTo(DataFormat::ChannelsFirst, rank))
            ? "_nchw"
            : "_t";
    return WeightData{type, std::move(bytes), input->root,
                      input->suffix + suffix,
                      appendOriginStep(input->origin, "transpose", perm)};
  }
  if (auto pad = dyn_cast<PadOp>(op)) {
    if (pad.getMode() != PadMode::Constant)
      return std::nullopt;
    std::optional<WeightData> input = evaluate(pad.getInput(), symbols);
    if (!input)
      return std::nullopt;
    std::optional<std::vector<char>> fill =
        elementOf(pad.getValue().convertToDouble(), type.getElementType());
    if (!fill)
      return std::nullopt;
    int64_t width = fill->size();
    ArrayRef<int64_t> inShape = input->type.getShape();
    ArrayRef<int64_t> low = pad.getLow();
    SmallVector<int64_t> inStrides = rowMajorStrides(inShape);
    std::vector<char> bytes(type.getNumElements() * width);
    forEachElement(
        type.getShape(),
        [&](ArrayRef<int64_t> coords) -> int64_t {
          int64_t source = 0;
          for (auto [d, c] : llvm::enumerate(coords)) {
            int64_t in = c - low[d];
            if (in < 0 || in >= inShape[d])
              return -1;
            source += in * inStrides[d];
          }
          return source;
        },
        [&](int64_t target, int64_t source) {
          std::memcpy(bytes.data() + target * width,
                      source < 0 ? fill->data()
                                 : input->bytes.data() + source * width,
                      width);
        });
    // The runtime replays zero padding only (all-zero bytes in every type).
    double value = pad.getValue().convertToDouble();
    bool zeroFill = value == 0.0 && !std::signbit(value);
    return WeightData{
        type, std::move(bytes), input->root, input->suffix + "_pad",
        zeroFill ? appendOriginStep(input->origin, "pad", low, pad.getHigh())
                 : std::string()};
  }
  return std::nullopt;
}

/// A resource blob key: like the importer's, letters, digits and '_' only.
std::string blobKey(StringRef name) {
  std::string key = name.str();
  for (char &c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  return key;
}

/// Replaces transposes and pads of compile-time values by loads of new
/// immutable globals (or by kiln.constants, when every source is an inline
/// constant and the result is small) holding the moved data, so no kernel
/// moves weights at run time. Sources left unread are erased.
class WeightFolder {
public:
  explicit WeightFolder(ModuleOp module) : module(module), symbols(module) {}

  void run() {
    SmallVector<Operation *> candidates;
    module.walk([&](Operation *op) {
      if (isa<TransposeOp, PadOp>(op) && isa<func::FuncOp>(op->getParentOp()) &&
          isCompileTimeValue(op->getResult(0)))
        candidates.push_back(op);
    });
    // Program order: an inner transpose is folded before the pad that reads
    // it, which then reads the new global.
    for (Operation *op : candidates)
      fold(op);
    eraseDeadCode();
  }

private:
  void fold(Operation *op) {
    std::optional<WeightData> data = evaluate(op->getResult(0), symbols);
    if (!data)
      return;
    OpBuilder b(op);
    Value replacement;
    if (!data->root && data->type.getNumElements() <= kInlineElements) {
      replacement = ConstantOp::create(
          b, op->getLoc(),
          DenseElementsAttr::getFromRawBuffer(data->type, data->bytes));
    } else {
      ml_program::GlobalOp global = globalFor(*data, op->getLoc());
      replacement = ml_program::GlobalLoadConstOp::create(
          b, op->getLoc(), data->type,
          FlatSymbolRefAttr::get(global.getSymNameAttr()));
      if (data->root)
        sources.push_back(data->root);
    }
    op->getResult(0).replaceAllUsesWith(replacement);
  }

  ml_program::GlobalOp globalFor(WeightData &data, Location loc) {
    std::string name = ((data.root ? data.root.getSymName()
                                   : StringRef("kiln_layout_weight")) +
                        data.suffix)
                           .str();
    // One global per source weight, steps and type; a weight computed from
    // constants alone has no source, so its bytes tell it apart (two such
    // filters of one shape shared a global: the second conv read the
    // first's weights, found by the fusion fuzzer).
    std::string key;
    llvm::raw_string_ostream(key) << name << ' ' << data.type;
    if (!data.root)
      key.append(data.bytes.begin(), data.bytes.end());
    ml_program::GlobalOp &global = made[key];
    if (global)
      return global;
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(data.bytes.data(), data.bytes.size()),
        alignof(uint64_t));
    auto value = DenseResourceElementsAttr::get(data.type, blobKey(name),
                                                std::move(blob));
    OpBuilder b(module.getBodyRegion());
    if (data.root)
      b.setInsertionPointAfter(data.root);
    else
      b.setInsertionPointToStart(module.getBody());
    global = ml_program::GlobalOp::create(
        b, data.root ? data.root.getLoc() : loc, name, data.type,
        /*is_mutable=*/false, value, b.getStringAttr("private"));
    setWeightOrigin(global, data.origin);
    symbols.insert(global); // renames on a clash
    return global;
  }

  void eraseDeadCode() {
    bool changed = true;
    while (changed) {
      SmallVector<Operation *> dead;
      module.walk([&](Operation *op) {
        if (isa<TransposeOp, PadOp, ReshapeOp, ConstantOp,
                ml_program::GlobalLoadConstOp>(op) &&
            isa<func::FuncOp>(op->getParentOp()) && op->use_empty())
          dead.push_back(op);
      });
      for (Operation *op : dead)
        op->erase();
      changed = !dead.empty();
    }
    // Globals this folded from, and intermediate ones it made, that nothing
    // reads any more.
    SmallVector<ml_program::GlobalOp> globals(sources);
    for (auto &entry : made)
      globals.push_back(entry.second);
    llvm::SmallPtrSet<Operation *, 16> erased;
    for (ml_program::GlobalOp global : globals)
      if (!erased.contains(global) &&
          SymbolTable::symbolKnownUseEmpty(global, module)) {
        erased.insert(global);
        symbols.erase(global);
      }
  }

  static constexpr int64_t kInlineElements = 64;

  ModuleOp module;
  SymbolTable symbols;
  llvm::StringMap<ml_program::GlobalOp> made;
  SmallVector<ml_program::GlobalOp> sources;
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct AssignLayoutPass : kiln::impl::AssignLayoutPassBase<AssignLayoutPass> {
  using Base::Base;

  /// Whether a function holds a convolution the int8 kernel takes: an
  /// int8 model is a tensor-core model whatever its float precision.
  static bool hasInt8Conv(ModuleOp module) {
    bool found = false;
    module.walk([&](ConvOp conv) {
      if (!conv->getParentOfType<FusionOp>() && isInt8Conv(conv)) {
        found = true;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return found;
  }

  /// Rounds of propagation before the pass gives up (a few are needed).
  static constexpr int kMaxRounds = 32;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<bool> tensorCores =
        llvm::StringSwitch<std::optional<bool>>(precision)
            .Case("fp32", false)
            .Cases("tf32", "bf16", "fp16", true)
            .Default(std::nullopt);
    if (!tensorCores) {
      module.emitError() << "kiln-assign-layout: precision '" << precision
                         << "' is not one of fp32, tf32, bf16, fp16";
      return signalPassFailure();
    }
    std::optional<DataFormat> target =
        llvm::StringSwitch<std::optional<DataFormat>>(layout)
            .Case("nchw", DataFormat::ChannelsFirst)
            .Case("nhwc", DataFormat::ChannelsLast)
            .Case("auto", (*tensorCores && tensorCoreConvs) ||
                                  (int8Convs && hasInt8Conv(module))
                              ? DataFormat::ChannelsLast
                              : DataFormat::ChannelsFirst)
            .Default(std::nullopt);
    if (!target) {
      module.emitError() << "kiln-assign-layout: layout '" << layout
                         << "' is not one of nchw, nhwc, auto";
      return signalPassFailure();
    }
    if (channelMultiple < 1) {
      module.emitError() << "kiln-assign-layout: channel-multiple "
                         << static_cast<int64_t>(channelMultiple)
                         << " is not positive";
      return signalPassFailure();
    }

    RewritePatternSet patterns(&getContext());
    populateLayoutPropagationPatterns(patterns, *target);
    FrozenRewritePatternSet frozen(std::move(patterns));
    // The patterns fold transposes and reshapes themselves; generic folding
    // would also rewrite ops this pass has no business with (and the
    // contents of kiln.fusion regions), so it is off, and only the
    // function's top-level ops (and the ops the patterns create) are visited.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled)
        .enableFolding(false)
        .enableConstantCSE(false)
        .setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // Converted in place: the same ops after the layout change.
      llvm::DenseSet<Operation *> int8ConvOps;
      if (int8Convs)
        for (auto conv : func.getBody().getOps<ConvOp>())
          if (isInt8Conv(conv))
            int8ConvOps.insert(conv);
      convertLayoutSensitiveOps(func, *target);
      // One driver run visits the top-level ops once each; rounds repeat
      // until nothing changes (a hoisted transpose is a new top-level op).
      bool changed = true;
      for (int round = 0; changed; ++round) {
        SmallVector<Operation *> ops;
        for (Operation &op : func.getBody().getOps())
          ops.push_back(&op);
        if (round == kMaxRounds ||
            failed(applyOpPatternsGreedily(ops, frozen, config, &changed))) {
          func.emitError("kiln-assign-layout: layout propagation did not "
                         "converge");
          return signalPassFailure();
        }
      }
      if (*target == DataFormat::ChannelsLast && channelMultiple > 1)
        padInputChannels(func, channelMultiple, int8ConvOps);
    }
    WeightFolder(module).run();
  }
};

} // namespace
