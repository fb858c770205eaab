//===- KernelStats.cpp - What the kernels of a module do ------------------===//
//
// kilnc --stats's counts, read from the module after the gpu phase: launches,
// the bytes each reads and writes, the FLOPs as written, the precision.
//
//===----------------------------------------------------------------------===//

#include "kiln/Pipelines/KernelStats.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;

namespace kiln {

namespace {
/// Whether a kernel reads and/or writes through `buffer` (or views of it).
void classifyAccess(Value buffer, bool &read, bool &written) {
  for (Operation *user : buffer.getUsers()) {
    if (isa<memref::LoadOp, vector::LoadOp>(user)) {
      read = true;
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      written |= store.getMemRef() == buffer;
    } else if (auto store = dyn_cast<vector::StoreOp>(user)) {
      written |= store.getBase() == buffer;
    } else if (isa<ViewLikeOpInterface>(user)) {
      for (Value view : user->getResults())
        classifyAccess(view, read, written);
    } else {
      read = written = true; // Unknown access: count both.
    }
  }
}
/// The constant part of a loop bound: the value itself, or c in x + c
/// (a thread-distributed loop starts at thread_id + c); 0 otherwise.
std::optional<int64_t> constantPart(Value value, bool requireConstant) {
  if (auto c = getConstantIntValue(value))
    return *c;
  if (requireConstant)
    return std::nullopt;
  if (auto add = value.getDefiningOp<arith::AddIOp>()) {
    if (auto c = getConstantIntValue(add.getRhs()))
      return *c;
    if (auto c = getConstantIntValue(add.getLhs()))
      return *c;
  }
  return 0;
}

/// Floating-point operations one thread executes in `block`, on average.
/// A loop runs (ub - lb) / step times; a lower bound that depends on the
/// thread (a block-strided loop) counts its constant part only, which gives
/// the block's total spread over its threads.
double flopsPerThread(Block &block) {
  double flops = 0;
  for (Operation &op : block) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> lb = constantPart(loop.getLowerBound(), false);
      std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
      std::optional<int64_t> step = getConstantIntValue(loop.getStep());
      double trips = 1;
      if (lb && ub && step && *step > 0)
        trips = std::max<double>(0, double(*ub - *lb) / double(*step));
      flops += trips * flopsPerThread(*loop.getBody());
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      double thenFlops = flopsPerThread(branch.getThenRegion().front());
      double elseFlops = branch.getElseRegion().empty()
                             ? 0
                             : flopsPerThread(branch.getElseRegion().front());
      flops += std::max(thenFlops, elseFlops);
      continue;
    }
    for (Region &region : op.getRegions())
      for (Block &nested : region)
        flops += flopsPerThread(nested);
    if (op.getNumResults() != 1 ||
        !isa<FloatType>(getElementTypeOrSelf(op.getResult(0).getType())))
      continue;
    if (isa<math::FmaOp>(op))
      flops += 2;
    else if (isa<gpu::AllReduceOp>(op))
      flops += 1; // block - 1 adds per block, about one per thread
    else if (isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) &&
             !isa<arith::ConstantOp, arith::ExtFOp, arith::TruncFOp,
                  arith::SIToFPOp, arith::UIToFPOp, arith::BitcastOp,
                  arith::SelectOp>(op))
      flops += 1;
  }
  return flops;
}

/// Threads the launch runs: its constant grid x block.
uint64_t threadsOf(gpu::LaunchFuncOp launch) {
  uint64_t threads = 1;
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  for (Value size : {grid.x, grid.y, grid.z, block.x, block.y, block.z}) {
    std::optional<int64_t> value = getConstantIntValue(size);
    if (!value || *value <= 0)
      return 0;
    threads *= uint64_t(*value);
  }
  return threads;
}

/// "bf16" for BF16Type etc. (the runtime's dtype names).
std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Appends `type` to `list` unless it is there.
void addType(SmallVectorImpl<std::string> &list, Type type) {
  std::string name = typeName(type);
  if (!llvm::is_contained(list, name))
    list.push_back(name);
}

/// KernelLaunchStats::precision from the float types read, written and
/// computed with (empty `computed`: a precompiled kernel).
std::string describePrecision(ArrayRef<std::string> read,
                              ArrayRef<std::string> written,
                              ArrayRef<std::string> computed) {
  if (read.empty() && written.empty() && computed.empty())
    return "int";
  std::string io = llvm::join(read, ",");
  if (!llvm::equal(read, written))
    io += "->" + llvm::join(written, ",");
  if (computed.empty() || llvm::equal(computed, read))
    return io;
  return io + " compute " + llvm::join(computed, ",");
}

/// The float types of a kernel body's arithmetic (arith/math results,
/// conversions excluded), in order of appearance.
void computeTypes(gpu::GPUFuncOp kernel, SmallVectorImpl<std::string> &types) {
  kernel.walk([&](Operation *op) {
    if (op->getNumResults() != 1 ||
        !isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        isa<arith::ConstantOp, arith::ExtFOp, arith::TruncFOp,
            arith::SIToFPOp, arith::UIToFPOp, arith::BitcastOp,
            arith::SelectOp>(op))
      return;
    Type type = getElementTypeOrSelf(op->getResult(0).getType());
    if (isa<FloatType>(type))
      addType(types, type);
  });
}

/// Whether a size-guarded launch (one size bucket's kernel, kilnc
/// --size-buckets) does not run at the compiled size, the range's maximum:
/// the static estimate is of the compiled size, so its bytes and FLOPs are
/// not added to the totals (each bucket computes the whole result); the
/// launch is still listed.
bool skippedAtCompiledSize(gpu::LaunchFuncOp launch) {
  auto guard = dyn_cast_or_null<SizeGuardAttr>(
      launch->getAttr(KilnDialect::SizeGuardAttrHelper::getNameStr()));
  auto module = launch->getParentOfType<ModuleOp>();
  auto ranges = module ? module->getAttrOfType<DictionaryAttr>(
                             KilnDialect::DimRangesAttrHelper::getNameStr())
                       : DictionaryAttr();
  if (!guard || !ranges)
    return false;
  auto range = dyn_cast_or_null<DenseI64ArrayAttr>(
      ranges.get(guard.getSymbol().getValue()));
  return range && range.size() >= 2 &&
         (range[1] < guard.getMin() || range[1] > guard.getMax());
}

} // namespace

KernelStats estimateKernelStats(ModuleOp module) {
  KernelStats stats;
  module.walk([&](gpu::LaunchFuncOp launch) {
    ++stats.kernels;
    std::string config;
    if (Attribute attr =
            launch->getAttr(KilnDialect::KernelAttrHelper::getNameStr()))
      llvm::raw_string_ostream(config) << attr;
    auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    if (!kernel) {
      // A precompiled kernel: kiln-lower-kernel-calls says which operands
      // it writes and how many FLOPs it does.
      KernelLaunchStats entry;
      entry.config = config;
      entry.kernel = launch.getKernelName().str();
      SmallVector<std::string> readTypes, writtenTypes;
      auto written = launch->getAttrOfType<DenseI32ArrayAttr>(
          KilnDialect::WrittenOperandsAttrHelper::getNameStr());
      for (auto [i, operand] : llvm::enumerate(launch.getKernelOperands())) {
        auto type = dyn_cast<MemRefType>(operand.getType());
        if (!type || !type.hasStaticShape())
          continue;
        uint64_t bytes = type.getNumElements() *
                         ((type.getElementTypeBitWidth() + 7) / 8);
        bool isWritten = written && llvm::is_contained(written.asArrayRef(),
                                                       static_cast<int32_t>(i));
        (isWritten ? entry.bytesWritten : entry.bytesRead) += bytes;
        if (isa<FloatType>(type.getElementType()))
          addType(isWritten ? writtenTypes : readTypes, type.getElementType());
      }
      entry.precision = describePrecision(readTypes, writtenTypes, {});
      if (auto flops = launch->getAttrOfType<IntegerAttr>(
              KilnDialect::FlopsAttrHelper::getNameStr()))
        entry.flops = flops.getValue().getZExtValue();
      entry.runsAtCompiledSize = !skippedAtCompiledSize(launch);
      if (entry.runsAtCompiledSize) {
        stats.bytesRead += entry.bytesRead;
        stats.bytesWritten += entry.bytesWritten;
        stats.flops += entry.flops;
      }
      stats.launches.push_back(std::move(entry));
      return;
    }
    KernelLaunchStats entry;
    entry.config = config;
    entry.kernel = kernel.getName().str();
    SmallVector<std::string> readTypes, writtenTypes;
    for (BlockArgument arg : kernel.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape())
        continue;
      uint64_t bytes = type.getNumElements() *
                       ((type.getElementTypeBitWidth() + 7) / 8);
      bool read = false, written = false;
      classifyAccess(arg, read, written);
      entry.bytesRead += read ? bytes : 0;
      entry.bytesWritten += written ? bytes : 0;
      if (isa<FloatType>(type.getElementType())) {
        if (read)
          addType(readTypes, type.getElementType());
        if (written)
          addType(writtenTypes, type.getElementType());
      }
    }
    SmallVector<std::string> computed;
    computeTypes(kernel, computed);
    entry.precision = describePrecision(readTypes, writtenTypes, computed);
    if (!kernel.getBody().empty())
      entry.flops = static_cast<uint64_t>(
          std::llround(flopsPerThread(kernel.getBody().front()) *
                       double(threadsOf(launch))));
    stats.bytesRead += entry.bytesRead;
    stats.bytesWritten += entry.bytesWritten;
    stats.flops += entry.flops;
    stats.launches.push_back(std::move(entry));
  });
  return stats;
}

} // namespace kiln
