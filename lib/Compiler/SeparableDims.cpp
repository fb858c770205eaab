//===- SeparableDims.cpp - Which symbolic dims the runtime may pad --------===//
//
// One forward walk over @main per symbol. A value *carries* the symbol on
// one of its dims, with a factor: index i of that dim belongs to slice
// i / factor of the symbol (factor 1 on inputs; a reshape that merges the
// symbol's dim with the dims after it, [N, S, H] -> [N*S, H], gives S).
// Each op either says where its results carry the symbol, or why the
// slices stop being independent. Rules are by op family; an op with no
// rule that sees the symbol is non-separable, which is always safe.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/SeparableDims.h"

#include "SymbolRules.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <optional>

using namespace mlir;

namespace kiln {

using symbols::Carried;
using symbols::Propagation;

namespace {

/// "node 'Foo_3' (kiln.reduce)", from the importer's NameLoc.
std::string describeNode(Operation *op) {
  std::string name;
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto named = dyn_cast<NameLoc>(loc))
    name = named.getName().str();
  std::string opName = op->getName().getStringRef().str();
  return name.empty() ? "an op " + opName
                      : "node '" + name + "' (" + opName + ")";
}

/// Where a value carries the symbol, and what its padded slices hold once
/// the runtime has padded the inputs with zeros.
struct Track {
  Carried at;
  /// Every padded slice along `at` is exactly zero.
  bool zero = false;
  /// Every padded slice along `at` is finite, so that zero times it is
  /// zero and a mask of -inf added to it is -inf.
  bool finite = true;
};

/// How one op may read padded slices and stay correct (masked walks only).
enum class Through { No, ValidOnly, Padding };

/// Ops that map a zero padded slice to a zero one (the rules already keep
/// the slice where it is).
bool keepsZeros(Operation *op) {
  return isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, PadOp, TileOp,
             CastOp, NegOp, ReluOp, MulOp>(op);
}

/// What is known of the sign of a value's padded elements (masked walks),
/// so that a normalisation's `rsqrt(variance + eps)` keeps them finite.
enum class Sign { Any, NonNegative, Positive };

Sign weaker(Sign a, Sign b) { return a < b ? a : b; }

/// Ops that can make a finite padded slice infinite or NaN (a zero slice
/// divided by, or its logarithm), unless the operand is known positive
/// there (a variance plus epsilon; finite derivatives too, which training
/// differentiates).
bool keepsFinite(Operation *op, unsigned operand, Sign sign) {
  if (isa<PowOp, ModOp, AcoshOp, AtanhOp, AsinOp, AcosOp>(op))
    return false;
  if (isa<LogOp, SqrtOp, RsqrtOp, ReciprocalOp>(op))
    return sign == Sign::Positive;
  return !(isa<DivOp>(op) && operand == 1) || sign == Sign::Positive;
}

/// Follows one symbol from the arguments to the results. A strict walk
/// proves the slices along it independent (the inputs may be padded with
/// anything). A masked walk, tried when the strict one fails, also lets a
/// valid slice read padded ones where that is still exact once the runtime
/// pads with zeros: a softmax along the symbol, given a mask of -inf on the
/// padded positions (recorded in `maskSites`, inserted by
/// insertSizeMasks); a contraction or a sum over it where one side's padded
/// slices are zero; a Slice or Gather along it that reads valid slices
/// only. In a masked walk a value may carry the symbol on several dims
/// (attention's scores carry the sequence twice).
class SymbolWalker {
public:
  SymbolWalker(func::FuncOp func, const runtime::SymbolicDim &symbol,
               bool masking)
      : func(func), symbol(symbol), masking(masking) {}

  /// Returns the reason the symbol cannot be padded, or "" and fills
  /// `outputs`.
  std::string run(llvm::StringMap<std::vector<runtime::SymbolicAxis>> &outputs,
                  uint32_t symbolIndex) {
    for (BlockArgument arg : func.getArguments()) {
      auto dims = func.getArgAttrOfType<ArrayAttr>(
          arg.getArgNumber(),
          KilnDialect::SymbolicDimsAttrHelper::getNameStr());
      if (!dims)
        continue;
      std::optional<int64_t> found;
      for (auto [i, attr] : llvm::enumerate(dims)) {
        auto spelled = dyn_cast<StringAttr>(attr);
        if (!spelled || spelled.getValue() != symbol.name)
          continue;
        if (found)
          return "input '" + argName(arg.getArgNumber()) + "' has it on dims " +
                 std::to_string(*found) + " and " + std::to_string(i);
        found = static_cast<int64_t>(i);
      }
      // The runtime pads inputs with zeros.
      if (found) {
        tracks[arg] = {Track{Carried{*found, 1}, true, true}};
        signs[arg] = Sign::NonNegative;
      }
    }
    for (Operation &op : func.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
          auto it = tracks.find(value);
          if (it == tracks.end())
            continue;
          std::string name = resultName(i);
          if (it->second.size() > 1)
            return "output '" + name + "' has it on dims " +
                   std::to_string(it->second[0].at.dim) + " and " +
                   std::to_string(it->second[1].at.dim);
          const Carried &at = it->second.front().at;
          outputs[name].push_back({static_cast<uint32_t>(at.dim), symbolIndex,
                                   static_cast<uint64_t>(at.factor)});
        }
        continue;
      }
      if (llvm::none_of(op.getOperands(),
                        [&](Value v) { return tracks.count(v) != 0; }))
        continue;
      if (op.getNumRegions() != 0)
        return describeNode(&op) + " has regions the analysis does not "
                                   "enter";
      std::string why = masking ? stepMasked(&op) : stepStrict(&op);
      if (!why.empty())
        return describeNode(&op) + " " + why;
    }
    return "";
  }

  /// Whether a valid slice reads padded ones somewhere (then the padded
  /// slices must be computed: no launch scaling).
  bool readsPadding = false;
  /// Where insertSizeMasks puts a mask or a scale (symbol and node filled
  /// in by analyzeSeparableDims).
  std::vector<SeparableDims::MaskSite> sites;

private:
  /// Why `op`, reached along dim `dim` of the symbol, cannot follow it: the
  /// importer resolved something ONNX resolves per run at the compiled
  /// sizes (a Slice bound counted from the end of this dim; a Squeeze
  /// without axes, which at size 1 drops the dim too); or "".
  std::string resolvedAtMaximum(Operation *op, int64_t dim) {
    if (auto fromEnd = op->getAttrOfType<DenseI64ArrayAttr>(
            KilnDialect::SliceFromEndAttrHelper::getNameStr());
        fromEnd && llvm::is_contained(fromEnd.asArrayRef(), dim))
      return "counts a slice bound from the end of dim " + std::to_string(dim) +
             " (resolved at the maximum)";
    if (op->hasAttr(KilnDialect::SqueezeAllAttrHelper::getNameStr()) &&
        symbol.min <= 1)
      return "is a Squeeze without axes (at size 1 it drops the dim too)";
    return "";
  }

  std::string stepStrict(Operation *op) {
    SmallVector<std::optional<Carried>> operands;
    for (Value operand : op->getOperands()) {
      auto it = tracks.find(operand);
      if (it != tracks.end())
        if (std::string why = resolvedAtMaximum(op, it->second.front().at.dim);
            !why.empty())
          return why;
      operands.push_back(it == tracks.end()
                             ? std::nullopt
                             : std::optional<Carried>(it->second.front().at));
    }
    Propagation result = symbols::propagate(op, operands);
    if (result.failed())
      return result.reason;
    for (auto [value, where] : llvm::zip(op->getResults(), result.results))
      if (where)
        tracks[value] = {Track{*where}};
    return "";
  }

  /// Each operand's each track on its own: the rule, else the ways a valid
  /// slice may read padded ones.
  std::string stepMasked(Operation *op) {
    SmallVector<SmallVector<Track, 2>> results(op->getNumResults());
    std::string twice;
    auto add = [&](unsigned r, Track t) {
      for (Track &old : results[r]) {
        if (old.at.dim != t.at.dim)
          continue;
        if (!(old.at == t.at)) {
          twice = "puts it on dim " + std::to_string(t.at.dim) +
                  " with two factors";
          return;
        }
        // Two operands meet on the dim: a product is zero where either
        // side is zero and the other finite; anything else where both are.
        bool product = isa<MulOp>(op);
        old.zero = product ? (old.zero && t.finite) || (t.zero && old.finite)
                           : old.zero && t.zero;
        old.finite = old.finite && t.finite;
        return;
      }
      results[r].push_back(t);
    };
    for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
      auto it = tracks.find(operand);
      if (it == tracks.end())
        continue;
      for (const Track &t : SmallVector<Track, 2>(it->second)) {
        if (std::string why = resolvedAtMaximum(op, t.at.dim); !why.empty())
          return why;
        SmallVector<std::optional<Carried>> single(op->getNumOperands());
        single[i] = t.at;
        Propagation p = symbols::propagate(op, single);
        if (!p.failed()) {
          for (auto [r, where] : llvm::enumerate(p.results))
            if (where)
              add(r, Track{*where, t.zero && keepsZeros(op),
                           t.finite && keepsFinite(op, i, signOf(operand))});
          continue;
        }
        Through through = throughPadding(op, i, t, add);
        if (through == Through::No)
          return p.reason;
        readsPadding |= through == Through::Padding;
      }
    }
    if (!twice.empty())
      return twice;
    for (auto [value, found] : llvm::zip(op->getResults(), results))
      if (!found.empty()) {
        tracks[value] = found;
        signs[value] = resultSign(op);
      }
    return "";
  }

  /// The sign of `value`'s padded elements: a tracked value's, or for one
  /// that does not carry the symbol (the same at every position) a splat
  /// constant's.
  Sign signOf(Value value) {
    if (auto it = signs.find(value); it != signs.end())
      return it->second;
    if (tracks.count(value))
      return Sign::Any;
    DenseFPElementsAttr constant;
    if (!matchPattern(value, m_Constant(&constant)) || !constant.isSplat())
      return Sign::Any;
    double v = constant.getSplatValue<APFloat>().convertToDouble();
    return v > 0 ? Sign::Positive : v == 0 ? Sign::NonNegative : Sign::Any;
  }

  /// The sign of an op's result's padded elements, from its operands'.
  Sign resultSign(Operation *op) {
    auto operandSign = [&](unsigned i) { return signOf(op->getOperand(i)); };
    if (isa<ExpOp, SigmoidOp>(op))
      return Sign::Positive;
    if (isa<AbsOp, ReluOp, SoftmaxOp>(op))
      return Sign::NonNegative;
    if (isa<MulOp>(op) && op->getOperand(0) == op->getOperand(1))
      return Sign::NonNegative; // a square
    if (isa<MulOp, DivOp>(op))
      return weaker(operandSign(0), operandSign(1));
    if (isa<AddOp>(op)) {
      Sign a = operandSign(0), b = operandSign(1);
      if (a == Sign::Any || b == Sign::Any)
        return Sign::Any;
      return a == Sign::Positive || b == Sign::Positive ? Sign::Positive
                                                        : Sign::NonNegative;
    }
    if (isa<SqrtOp, RsqrtOp, ReciprocalOp>(op))
      return operandSign(0) == Sign::Positive ? Sign::Positive : Sign::Any;
    if (isa<ReduceOp, ReshapeOp, TransposeOp, BroadcastOp, SliceOp>(op))
      return operandSign(0);
    return Sign::Any;
  }

  /// The track of `value` on `dim`, if any.
  const Track *trackAt(Value value, int64_t dim) {
    auto it = tracks.find(value);
    if (it == tracks.end())
      return nullptr;
    for (const Track &t : it->second)
      if (t.at.dim == dim)
        return &t;
    return nullptr;
  }

  /// The extent of the slices every run computes, along a dim carrying the
  /// symbol with `factor`.
  int64_t validExtent(int64_t factor) const { return symbol.min * factor; }

  void addSite(Operation *op, runtime::SizeMaskKind kind, unsigned operand,
               const Track &t, bool subtract = false) {
    SeparableDims::MaskSite site;
    site.op = op;
    site.kind = kind;
    site.subtract = subtract;
    site.operand = operand;
    site.dim = t.at.dim;
    site.factor = kind == runtime::SizeMaskKind::MeanScale ? 1 : t.at.factor;
    sites.push_back(site);
  }

  template <typename Add>
  Through throughPadding(Operation *op, unsigned operand, const Track &t,
                         Add &&add) {
    int64_t d = t.at.dim;
    if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      int64_t axis = symbols::normalizeAxis(softmax.getAxisAttr().getInt(),
                                            symbols::rankOf(op->getResult(0)));
      if (operand != 0 || d != axis || !t.finite)
        return Through::No;
      // -inf added at the padded positions: their probabilities are 0.
      addSite(op, runtime::SizeMaskKind::AdditiveMask, 0, t);
      add(0, Track{t.at, true, true});
      return Through::Padding;
    }
    if (auto matmul = dyn_cast<MatmulOp>(op)) {
      int64_t lr = symbols::rankOf(matmul.getLhs());
      int64_t rr = symbols::rankOf(matmul.getRhs());
      int64_t k[2] = {lr - 1, rr == 1 ? 0 : rr - 2};
      if (d != k[operand])
        return Through::No;
      const Track *other = trackAt(op->getOperand(1 - operand), k[1 - operand]);
      bool exact = (t.zero && (!other || other->finite)) ||
                   (other && other->zero && other->at.factor == t.at.factor &&
                    t.finite);
      if (exact)
        return Through::Padding;
      // Neither side is zero there: multiply this side by a keep mask (1
      // on the valid positions, 0 on the padded ones) when both are
      // finite, and only once per operand and dim.
      if (!t.finite || (other && !other->finite))
        return Through::No;
      if (operand == 0 || !other)
        addSite(op, runtime::SizeMaskKind::KeepMask, operand, t);
      return Through::Padding;
    }
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      // A max (min) over finite padding plus (minus) a mask of -inf there:
      // a padded element is never the extreme, and every run has a valid
      // one (the minimum size is at least 1).
      ReduceKind kind = reduce.getKind();
      bool floating =
          isa<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType()));
      if (kind == ReduceKind::Max || kind == ReduceKind::Min) {
        if (!t.finite || !floating) // the mask is a float
          return Through::No;
        addSite(op, runtime::SizeMaskKind::AdditiveMask, 0, t,
                kind == ReduceKind::Min);
        return Through::Padding;
      }
      // A sum over zero padding is the sum over the valid slices (a keep
      // mask zeroes finite padding first); a mean is that sum over the
      // maximum's count, which a scale of max / n makes the valid slices'
      // mean.
      bool mean = reduce.getKind() == ReduceKind::Mean;
      if ((reduce.getKind() != ReduceKind::Sum && !mean) || !t.finite)
        return Through::No;
      if (!t.zero)
        addSite(op, runtime::SizeMaskKind::KeepMask, 0, t);
      if (mean)
        addSite(op, runtime::SizeMaskKind::MeanScale, 0, t);
      return Through::Padding;
    }
    if (isa<ArgMaxOp, ArgMinOp>(op)) {
      // As for a max or min: the index of a valid element. Ties go to the
      // first occurrence, which is valid; with select_last_index an
      // all -inf row could pick a padded one.
      int64_t axis = symbols::normalizeAxis(
          op->getAttrOfType<IntegerAttr>("axis").getInt(),
          symbols::rankOf(op->getOperand(0)));
      if (operand != 0 || d != axis || !t.finite ||
          op->hasAttr("select_last_index") ||
          !isa<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType())))
        return Through::No;
      addSite(op, runtime::SizeMaskKind::AdditiveMask, 0, t, isa<ArgMinOp>(op));
      return Through::Padding;
    }
    if (auto slice = dyn_cast<SliceOp>(op)) {
      if (slice.getStarts()[d] < 0 || slice.getSteps()[d] < 1 ||
          slice.getLimits()[d] > validExtent(t.at.factor))
        return Through::No;
      return Through::ValidOnly;
    }
    if (auto gather = dyn_cast<GatherOp>(op)) {
      DenseIntElementsAttr indices;
      int64_t axis = symbols::normalizeAxis(gather.getAxisAttr().getInt(),
                                            symbols::rankOf(gather.getInput()));
      if (operand != 0 || d != axis ||
          !matchPattern(gather.getIndices(), m_Constant(&indices)))
        return Through::No;
      for (const APInt &index : indices.getValues<APInt>())
        if (index.isNegative() ||
            index.getSExtValue() >= validExtent(t.at.factor))
          return Through::No;
      return Through::ValidOnly;
    }
    return Through::No;
  }

  std::string argName(unsigned i) {
    if (auto name = func.getArgAttrOfType<StringAttr>(
            i, KilnDialect::NameAttrHelper::getNameStr()))
      return name.getValue().str();
    return "#" + std::to_string(i);
  }
  std::string resultName(unsigned i) {
    if (auto name = func.getResultAttrOfType<StringAttr>(
            i, KilnDialect::NameAttrHelper::getNameStr()))
      return name.getValue().str();
    return "#" + std::to_string(i);
  }

  func::FuncOp func;
  const runtime::SymbolicDim &symbol;
  bool masking;
  llvm::DenseMap<Value, SmallVector<Track, 2>> tracks;
  /// Masked walks: the sign of each tracked value's padded elements.
  llvm::DenseMap<Value, Sign> signs;
};

} // namespace

std::string describeMaskSite(const SeparableDims::MaskSite &site) {
  return site.node + (site.kind == runtime::SizeMaskKind::AdditiveMask
                          ? (site.subtract ? " (+inf)" : " (-inf)")
                      : site.kind == runtime::SizeMaskKind::KeepMask
                          ? " (zeroed)"
                          : " (mean times max / n)");
}

SeparableDims analyzeSeparableDims(ModuleOp module, StringRef function) {
  SeparableDims result;
  auto ranges = module->getAttrOfType<DictionaryAttr>(
      KilnDialect::DimRangesAttrHelper::getNameStr());
  auto func = dyn_cast_or_null<func::FuncOp>(
      SymbolTable::lookupSymbolIn(module, function));
  if (!ranges || !func || func.getBody().getBlocks().size() != 1)
    return result;
  for (NamedAttribute entry : ranges) {
    auto range = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
    if (!range || range.size() != 3)
      continue;
    runtime::SymbolicDim symbol;
    symbol.name = entry.getName().str();
    symbol.min = range[0];
    symbol.max = range[1];
    symbol.opt = range[2];
    auto index = static_cast<uint32_t>(result.symbols.size());
    llvm::StringMap<std::vector<runtime::SymbolicAxis>> outputs;
    symbol.reason = SymbolWalker(func, symbol, false).run(outputs, index);
    bool readsPadding = false;
    if (!symbol.reason.empty()) {
      // Not separable as it stands: maybe with zero padding and masks.
      outputs.clear();
      SymbolWalker masked(func, symbol, true);
      symbol.reason = masked.run(outputs, index);
      if (symbol.reason.empty()) {
        readsPadding = masked.readsPadding;
        for (SeparableDims::MaskSite site : masked.sites) {
          site.symbol = index;
          site.node = describeNode(site.op);
          result.maskSites.push_back(site);
        }
      }
    }
    symbol.separable = symbol.reason.empty();
    result.symbols.push_back(symbol);
    result.readsPadding.push_back(readsPadding);
    // Inputs: straight from the importer's attribute.
    for (BlockArgument arg : func.getArguments()) {
      auto dims = func.getArgAttrOfType<ArrayAttr>(
          arg.getArgNumber(),
          KilnDialect::SymbolicDimsAttrHelper::getNameStr());
      auto name = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), KilnDialect::NameAttrHelper::getNameStr());
      if (!dims || !name)
        continue;
      for (auto [i, attr] : llvm::enumerate(dims))
        if (auto spelled = dyn_cast<StringAttr>(attr);
            spelled && spelled.getValue() == symbol.name) {
          result.inputs[name.getValue()].push_back(
              {static_cast<uint32_t>(i), index, 1});
          break; // a second dim made the symbol non-separable above
        }
    }
    // A symbol that is not separable runs at its maximum: its outputs keep
    // the compiled shape.
    if (symbol.separable)
      for (auto &entry : outputs)
        for (const runtime::SymbolicAxis &axis : entry.getValue())
          result.outputs[entry.getKey()].push_back(axis);
  }
  return result;
}

void attachSymbolicDims(const SeparableDims &dims,
                        runtime::Artifact &artifact) {
  if (dims.empty())
    return;
  artifact.symbolicDims = dims.symbols;
  auto attach =
      [&](std::vector<runtime::TensorSignature> &tensors,
          const llvm::StringMap<std::vector<runtime::SymbolicAxis>> &byName) {
        for (runtime::TensorSignature &tensor : tensors) {
          auto it = byName.find(tensor.name);
          if (it == byName.end())
            continue;
          for (const runtime::SymbolicAxis &axis : it->getValue()) {
            runtime::SymbolicDim &symbol = artifact.symbolicDims[axis.symbol];
            bool matches = axis.dim < tensor.shape.size() &&
                           tensor.shape[axis.dim] ==
                               symbol.max * static_cast<int64_t>(axis.factor);
            if (!matches) {
              // The compiled signature does not show the symbol where the
              // analysis put it: run the compiled size only.
              if (symbol.separable) {
                symbol.separable = false;
                symbol.reason = "the compiled signature of '" + tensor.name +
                                "' does not show it at dim " +
                                std::to_string(axis.dim);
              }
              continue;
            }
            tensor.symbolicAxes.push_back(axis);
          }
          std::sort(
              tensor.symbolicAxes.begin(), tensor.symbolicAxes.end(),
              [](const runtime::SymbolicAxis &a,
                 const runtime::SymbolicAxis &b) { return a.dim < b.dim; });
        }
      };
  attach(artifact.inputs, dims.inputs);
  attach(artifact.outputs, dims.outputs);
  // Launch scaling needs the padding scheme: only separable symbols scale,
  // and only those whose padded slices no valid one reads (a scaled launch
  // leaves them uncomputed).
  llvm::erase_if(artifact.launchScales,
                 [&](const runtime::LaunchScale &scale) {
                   return scale.symbol >= artifact.symbolicDims.size() ||
                          !artifact.symbolicDims[scale.symbol].separable ||
                          dims.readsPadding[scale.symbol];
                 });
  // Size buckets pay only where their launches scale. For a symbol with a
  // guarded launch that does not (the symbol is not separable, its padding
  // is read, or kiln-map-to-gpu kept the grid), every size runs the
  // region's own config (the bucket that holds the maximum) and the smaller
  // buckets' launches never run (their sizes lie past the range).
  for (uint32_t s = 0; s < artifact.symbolicDims.size(); ++s) {
    bool scales = true;
    for (const runtime::LaunchGuard &guard : artifact.launchGuards)
      if (guard.symbol == s)
        scales &= llvm::any_of(artifact.launchScales,
                               [&](const runtime::LaunchScale &scale) {
                                 return scale.launch == guard.launch;
                               });
    if (scales)
      continue;
    const runtime::SymbolicDim &symbol = artifact.symbolicDims[s];
    for (runtime::LaunchGuard &guard : artifact.launchGuards) {
      if (guard.symbol != s)
        continue;
      if (guard.max >= symbol.max)
        guard.min = symbol.min;
      else
        guard.min = guard.max = symbol.max + 1;
    }
  }
  for (const SeparableDims::MaskInput &mask : dims.maskInputs) {
    for (size_t i = 0; i < artifact.inputs.size(); ++i)
      if (artifact.inputs[i].name == mask.name)
        artifact.sizeMasks.push_back({static_cast<uint32_t>(i), mask.symbol,
                                      mask.kind,
                                      static_cast<uint64_t>(mask.factor)});
  }
}

/// `kiln.size_mask.S`, `kiln.size_keep.S` or `kiln.size_scale.S`, with
/// `.xF` for a factor F and `.TYPE` for an element type other than f32.
static std::string sizeMaskName(runtime::SizeMaskKind kind, StringRef symbol,
                         int64_t factor, Type element) {
  StringRef stem = kind == runtime::SizeMaskKind::AdditiveMask ? "size_mask"
                   : kind == runtime::SizeMaskKind::KeepMask   ? "size_keep"
                                                               : "size_scale";
  std::string name = ("kiln." + stem + "." + symbol).str();
  if (factor != 1)
    name += ".x" + std::to_string(factor);
  if (!element.isF32()) {
    std::string type;
    llvm::raw_string_ostream os(type);
    element.print(os);
    name += "." + type;
  }
  return name;
}

void insertSizeMasks(ModuleOp module, SeparableDims &dims,
                     StringRef function) {
  auto func = dyn_cast_or_null<func::FuncOp>(
      SymbolTable::lookupSymbolIn(module, function));
  if (!func || dims.maskSites.empty())
    return;
  Builder attrs(module.getContext());
  llvm::StringMap<Value> made;
  // The argument for a kind, symbol and factor, made on first use.
  auto argument = [&](runtime::SizeMaskKind kind, uint32_t symbol,
                      int64_t factor, Type element) {
    bool scale = kind == runtime::SizeMaskKind::MeanScale;
    const runtime::SymbolicDim &dim = dims.symbols[symbol];
    std::string name = sizeMaskName(kind, dim.name, factor, element);
    Value &value = made[name];
    if (value)
      return value;
    auto type = scale ? RankedTensorType::get({}, element)
                      : RankedTensorType::get({dim.max * factor}, element);
    unsigned index = func.getNumArguments();
    (void)func.insertArgument(
        index, type,
        attrs.getDictionaryAttr(
            attrs.getNamedAttr(KilnDialect::NameAttrHelper::getNameStr(),
                               attrs.getStringAttr(name))),
        func.getLoc());
    dims.maskInputs.push_back({name, symbol, factor, kind});
    value = func.getArgument(index);
    return value;
  };
  for (const SeparableDims::MaskSite &site : dims.maskSites) {
    ImplicitLocOpBuilder b(site.op->getLoc(), site.op);
    if (site.kind == runtime::SizeMaskKind::MeanScale) {
      // mean * (max / n), after the reduction.
      Value mean = site.op->getResult(0);
      auto type = cast<RankedTensorType>(mean.getType());
      Value scale = argument(site.kind, site.symbol, 1,
                             Float32Type::get(module.getContext()));
      b.setInsertionPointAfter(site.op);
      if (!type.getElementType().isF32())
        scale = CastOp::create(
            b, RankedTensorType::get({}, type.getElementType()), scale);
      auto scaled = MulOp::create(b, type, mean, scale);
      mean.replaceAllUsesExcept(scaled, scaled);
      continue;
    }
    // The operand plus (AdditiveMask) or times (KeepMask) the mask,
    // broadcast along the dim.
    Value operand = site.op->getOperand(site.operand);
    auto type = cast<RankedTensorType>(operand.getType());
    Value mask =
        argument(site.kind, site.symbol, site.factor, type.getElementType());
    SmallVector<int64_t> shape(type.getRank(), 1);
    shape[site.dim] = type.getDimSize(site.dim);
    Value shaped = ReshapeOp::create(
        b, RankedTensorType::get(shape, type.getElementType()), mask);
    // A min subtracts the mask: +inf at the padded positions.
    Value masked = site.kind != runtime::SizeMaskKind::AdditiveMask
                       ? MulOp::create(b, type, operand, shaped).getResult()
                   : site.subtract
                       ? SubOp::create(b, type, operand, shaped).getResult()
                       : AddOp::create(b, type, operand, shaped).getResult();
    site.op->setOperand(site.operand, masked);
  }
}

} // namespace kiln
