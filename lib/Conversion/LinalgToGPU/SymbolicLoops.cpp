//===- SymbolicLoops.cpp - Which kernels' work follows a symbolic dim -----===//
//
// See SymbolicLoops.h. Buffers are tracked by their base (an argument, an
// allocation, a global); reads may go through collapse_shape and
// expand_shape views, writes must go to a base. A buffer's state is the
// symbol (and factor) of each dim, or unknown.
//
//===----------------------------------------------------------------------===//

#include "SymbolicLoops.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

using namespace mlir;

namespace kiln::mapping {
namespace {

struct DimSymbol {
  StringAttr symbol;
  int64_t factor = 1;
  bool operator==(const DimSymbol &o) const {
    return symbol == o.symbol && factor == o.factor;
  }
};
/// Per dim; nullopt for a dim that holds data at every index.
using Dims = SmallVector<std::optional<DimSymbol>>;

class Analysis {
public:
  Analysis(func::FuncOp func, SymbolicLoops &result)
      : func(func), result(result) {}
  void run();

private:
  /// The dims of `value` as read; nullopt when unknown.
  std::optional<Dims> read(Value value);
  /// The base buffer `value` writes, or null for a view.
  Value base(Value value) {
    return isa<BlockArgument>(value) ||
                   isa_and_nonnull<memref::AllocOp, memref::GetGlobalOp>(
                       value.getDefiningOp())
               ? value
               : Value();
  }
  void setUnknown(Value value) {
    if (Value b = base(value))
      state[b] = std::nullopt;
    else if (Operation *def = value.getDefiningOp();
             def && def->getNumOperands() > 0 &&
             isa<MemRefType>(def->getOperand(0).getType()))
      setUnknown(def->getOperand(0)); // a view: its source
  }
  void visitGeneric(linalg::GenericOp op);
  void visitCall(kiln::CallKernelOp op);
  bool dataDependent(Value value, Operation *generic);

  func::FuncOp func;
  SymbolicLoops &result;
  llvm::StringMap<int64_t> maxima;
  /// Base buffer -> its dims (nullopt: unknown). Absent: never written
  /// (reading it is unknown).
  llvm::DenseMap<Value, std::optional<Dims>> state;
  bool gathers = false;
};

std::optional<Dims> Analysis::read(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  if (Value b = base(value)) {
    auto it = state.find(b);
    if (it == state.end())
      return std::nullopt;
    return it->second;
  }
  Operation *def = value.getDefiningOp();
  if (auto collapse = dyn_cast_or_null<memref::CollapseShapeOp>(def)) {
    std::optional<Dims> src = read(collapse.getSrc());
    if (!src)
      return std::nullopt;
    ArrayRef<int64_t> shape = collapse.getSrcType().getShape();
    Dims dims;
    for (const ReassociationIndices &group :
         collapse.getReassociationIndices()) {
      std::optional<DimSymbol> merged = (*src)[group.front()];
      for (int64_t d : ArrayRef(group).drop_front()) {
        if ((*src)[d])
          return std::nullopt; // a symbol inside a merged dim
        if (merged)
          merged->factor *= shape[d];
      }
      dims.push_back(merged);
    }
    return dims;
  }
  if (auto expand = dyn_cast_or_null<memref::ExpandShapeOp>(def)) {
    std::optional<Dims> src = read(expand.getSrc());
    if (!src)
      return std::nullopt;
    ArrayRef<int64_t> shape = expand.getResultType().getShape();
    Dims dims(shape.size());
    for (auto [d, group] : llvm::enumerate(expand.getReassociationIndices())) {
      std::optional<DimSymbol> source = (*src)[d];
      if (!source)
        continue;
      int64_t inner = 1;
      for (int64_t e : ArrayRef(group).drop_front())
        inner *= shape[e];
      if (source->factor % inner != 0)
        return std::nullopt;
      dims[group.front()] = DimSymbol{source->symbol, source->factor / inner};
    }
    return dims;
  }
  return std::nullopt;
}

/// Whether an index depends on loaded data (a gather) or on anything but
/// loop coordinates, induction variables and constants.
bool Analysis::dataDependent(Value value, Operation *generic) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
    return !loop || arg != loop.getInductionVar();
  }
  Operation *def = value.getDefiningOp();
  if (isa<linalg::IndexOp, arith::ConstantOp>(def))
    return false;
  if (!generic->isAncestor(def))
    return !isa<IndexType, IntegerType>(value.getType());
  if (def->getNumRegions() != 0 || def->getNumOperands() == 0 ||
      isa<memref::LoadOp>(def))
    return true;
  return llvm::any_of(def->getOperands(),
                      [&](Value v) { return dataDependent(v, generic); });
}

void Analysis::visitGeneric(linalg::GenericOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<std::optional<DimSymbol>> loops(ranges.size());
  bool ok = true, symbolic = false;
  auto unify = [&](unsigned loop, const DimSymbol &sym) {
    auto it = maxima.find(sym.symbol.getValue());
    if (it == maxima.end() || ranges[loop] != it->second * sym.factor ||
        (loops[loop] && !(*loops[loop] == sym))) {
      ok = false;
      return;
    }
    loops[loop] = sym;
  };
  // Operands read through indexing maps: inputs, and outputs whose value
  // the body uses.
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (op.isDpsInit(&operand) &&
        op.getMatchingBlockArgument(&operand).use_empty())
      continue;
    std::optional<Dims> dims = read(operand.get());
    if (!dims) {
      ok = false;
      symbolic = true;
      continue;
    }
    AffineMap map = op.getMatchingIndexingMap(&operand);
    for (auto [d, sym] : llvm::enumerate(*dims)) {
      if (!sym)
        continue;
      symbolic = true;
      auto dim = dyn_cast<AffineDimExpr>(map.getResult(d));
      if (!dim) {
        ok = false;
        continue;
      }
      unify(dim.getPosition(), *sym);
    }
  }
  // Loads in the body: a symbolic dim must be indexed by a loop coordinate.
  op.getRegion().walk([&](Operation *inner) {
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      for (Value index : load.getIndices())
        if (dataDependent(index, op))
          gathers = true;
      if (op->isAncestor(load.getMemRef().getParentBlock()->getParentOp()))
        return;
      std::optional<Dims> dims = read(load.getMemRef());
      if (!dims) {
        ok = false;
        symbolic = true;
        return;
      }
      for (auto [d, sym] : llvm::enumerate(*dims)) {
        if (!sym)
          continue;
        symbolic = true;
        auto index = load.getIndices()[d].getDefiningOp<linalg::IndexOp>();
        if (!index || !op->isAncestor(index)) {
          ok = false;
          continue;
        }
        unify(index.getDim(), *sym);
      }
      return;
    }
    for (Value operand : inner->getOperands())
      if (isa<MemRefType>(operand.getType())) {
        ok = false; // a store, a view, a call: not followed
        symbolic = true; // and what it reads is unknown
      }
  });
  auto iterators = op.getIteratorTypesArray();
  for (auto [l, sym] : llvm::enumerate(loops))
    if (sym && iterators[l] != utils::IteratorType::parallel)
      ok = false; // a reduction over the symbol
  // The outputs: their dims follow the loops through pure dim maps.
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Value b = base(init.get());
    if (!b || !ok) {
      ok = false;
      if (symbolic)
        setUnknown(init.get());
      else if (b)
        state[b] = Dims(cast<MemRefType>(b.getType()).getRank());
      else
        setUnknown(init.get());
      continue;
    }
    AffineMap map = op.getMatchingIndexingMap(&init);
    Dims dims(map.getNumResults());
    llvm::SmallDenseSet<unsigned> seen;
    for (auto [d, expr] : llvm::enumerate(map.getResults())) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
        dims[d] = loops[dim.getPosition()];
        seen.insert(dim.getPosition());
      }
    }
    for (auto [l, sym] : llvm::enumerate(loops))
      if (sym && !seen.contains(l))
        ok = false;
    if (!ok) {
      state[b] = std::nullopt;
      continue;
    }
    state[b] = dims;
  }
  if (!ok)
    return;
  // Scales when loop 0 alone follows a symbol.
  for (auto [l, sym] : llvm::enumerate(loops))
    if (sym && l != 0)
      return;
  if (!loops.empty() && loops[0])
    result.generics[op] =
        SymbolicLoop{loops[0]->symbol,
                     maxima.lookup(loops[0]->symbol.getValue()),
                     loops[0]->factor};
}

void Analysis::visitCall(kiln::CallKernelOp op) {
  SmallVector<std::optional<Dims>> inputs;
  bool symbolic = false, known = true;
  for (Value input : op.getInputs()) {
    inputs.push_back(read(input));
    if (!inputs.back())
      known = false;
    else
      symbolic |= llvm::any_of(*inputs.back(),
                               [](const auto &sym) { return sym.has_value(); });
  }
  auto outputsUnknown = [&] {
    for (Value output : op.getOutputs())
      setUnknown(output);
  };
  if (!known)
    return outputsUnknown();
  if (!symbolic) {
    for (Value output : op.getOutputs()) {
      if (Value b = base(output))
        state[b] = Dims(cast<MemRefType>(b.getType()).getRank());
      else
        setUnknown(output);
    }
    return;
  }
  auto rows = dyn_cast_or_null<GridRowsAttr>(
      op->getAttr(KilnDialect::GridRowsAttrHelper::getNameStr()));
  auto config = op->getAttr(KilnDialect::KernelAttrHelper::getNameStr());
  ArrayRef<int32_t> grid = op.getGrid();
  if (!rows || !isa_and_nonnull<GemmConfigAttr>(config) ||
      rows.getA() >= static_cast<int64_t>(inputs.size()))
    return outputsUnknown();
  int64_t m = rows.getRows(), tile = rows.getTile(), a = rows.getA();
  // A's dim 0 alone follows the symbol; any other symbolic input has it
  // on its dim 0 only (a residual read row by row).
  const Dims &aDims = *inputs[a];
  if (aDims.empty() || !aDims[0])
    return outputsUnknown();
  DimSymbol sym = *aDims[0];
  int64_t maximum = maxima.lookup(sym.symbol.getValue());
  auto cType = cast<MemRefType>(op.getOutputs().front().getType());
  for (auto [i, dims] : llvm::enumerate(inputs)) {
    bool any = false;
    for (auto [d, s] : llvm::enumerate(*dims)) {
      if (s && (d != 0 || s->symbol != sym.symbol))
        return outputsUnknown();
      any |= s.has_value();
    }
    // Besides A, only an input laid out as C (a residual the epilogue
    // reads at C's rows) may follow the symbol.
    if (any && static_cast<int64_t>(i) != a &&
        cast<MemRefType>(op.getInputs()[i].getType()).getShape() !=
            cType.getShape())
      return outputsUnknown();
  }
  if (maximum <= 0 || m % maximum != 0)
    return outputsUnknown();
  int64_t perUnit = m / maximum;
  if ((maximum * perUnit + tile - 1) / tile != grid[0])
    return outputsUnknown();
  // Outputs shaped like C, packed (a base buffer of M x cols elements):
  // their dim 0 follows the symbol. Others (the split-K workspace) are
  // only the call's.
  for (Value output : op.getOutputs()) {
    Value b = base(output);
    auto type = cast<MemRefType>(output.getType());
    if (!b)
      return outputsUnknown();
    if (type.getShape() != cType.getShape()) {
      state[b] = std::nullopt;
      continue;
    }
    if (type.getRank() == 0 || type.getNumElements() % m != 0 ||
        type.getShape()[0] % maximum != 0)
      return outputsUnknown();
    Dims dims(type.getRank());
    dims[0] = DimSymbol{sym.symbol, type.getShape()[0] / maximum};
    state[b] = dims;
  }
  result.calls[op] =
      GridScaleAttr::get(op->getContext(), sym.symbol, 0, perUnit, tile);
}

void Analysis::run() {
  auto module = func->getParentOfType<ModuleOp>();
  auto ranges = module ? module->getAttrOfType<DictionaryAttr>(
                             KilnDialect::DimRangesAttrHelper::getNameStr())
                       : DictionaryAttr();
  if (!ranges || func.getBody().getBlocks().size() != 1)
    return;
  for (NamedAttribute entry : ranges)
    if (auto range = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
        range && range.size() == 3)
      maxima[entry.getName()] = range[1];
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type)
      continue;
    if (func.getArgAttr(arg.getArgNumber(), "bufferize.result"))
      continue; // an output: written before it is read
    Dims dims(type.getRank());
    if (auto symbols = func.getArgAttrOfType<ArrayAttr>(
            arg.getArgNumber(),
            KilnDialect::SymbolicDimsAttrHelper::getNameStr())) {
      if (symbols.size() != dims.size())
        continue;
      for (auto [d, attr] : llvm::enumerate(symbols)) {
        auto name = dyn_cast<StringAttr>(attr);
        if (!name) {
          dims.clear();
          break;
        }
        if (!name.getValue().empty())
          dims[d] = DimSymbol{name, 1};
      }
      if (dims.empty())
        continue;
    }
    state[arg] = dims;
  }
  for (Operation &op : func.getBody().front()) {
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      visitGeneric(generic);
    } else if (auto call = dyn_cast<kiln::CallKernelOp>(op)) {
      visitCall(call);
    } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
      state[global.getResult()] = Dims(global.getType().getRank());
    } else if (isa<memref::AllocOp, memref::DeallocOp, func::ReturnOp,
                   memref::CollapseShapeOp, memref::ExpandShapeOp>(op) ||
               (op.getNumRegions() == 0 &&
                llvm::none_of(op.getOperandTypes(), [](Type t) {
                  return isa<MemRefType>(t);
                }))) {
      continue;
    } else {
      // Anything else that touches a buffer (a subview, a cast, an op
      // with a region): what it reaches is unknown.
      for (Value operand : op.getOperands())
        if (isa<MemRefType>(operand.getType()))
          setUnknown(operand);
      for (Value res : op.getResults())
        if (Value b = base(res))
          state[b] = std::nullopt;
    }
  }
  if (gathers) {
    result.generics.clear();
    result.calls.clear();
  }
}

} // namespace

SymbolicLoops analyzeSymbolicLoops(func::FuncOp func) {
  SymbolicLoops result;
  Analysis(func, result).run();
  return result;
}

GridScaleAttr gridScaleFor(MLIRContext *ctx, const SymbolicLoop &loop,
                           int64_t points, int64_t perBlock, int64_t grid) {
  if (loop.maximum <= 0 || perBlock <= 0 || points % loop.maximum != 0)
    return nullptr;
  int64_t perUnit = points / loop.maximum;
  if ((loop.maximum * perUnit + perBlock - 1) / perBlock != grid)
    return nullptr;
  return GridScaleAttr::get(ctx, loop.symbol, 0, perUnit, perBlock);
}

} // namespace kiln::mapping
