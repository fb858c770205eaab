//===- VectorizedElementwise.cpp - 128-bit vectorised elementwise kernels -===//
//
// An all-parallel generic (an elementwise op, a fused elementwise chain, a
// copy or a data-movement region) whose global accesses are contiguous
// becomes a kernel in which each thread owns groups of V consecutive points
// of the flattened iteration space (V = 16 bytes over the narrowest element
// accessed, at most 8), in a grid-stride loop over a grid sized to the GPU
// (SM count x resident blocks per SM; 1-byte elements are not vectorised
// yet). Per access the builder proves, from
// the access's address as an affine function of the loop coordinates (the
// indexing map or the body's index arithmetic) and the buffer's static
// strides and offset, one of:
//   - vector:  the group's V elements are consecutive in memory and the
//              first one sits at a multiple of min(16, V x element size)
//              bytes from a kernel argument (kernel arguments are 16-byte
//              aligned: arena offsets are 256-aligned, weights 64-aligned,
//              and kiln-align-kernel-args says so to LLVM) -> one
//              vector.load / vector.store (ld.global.v4 / st.global.v4);
//   - uniform: the group reads one element (a broadcast) -> one load;
//   - scalar:  otherwise (a view at an offset that is not a multiple of 16
//              bytes, a transpose, index arithmetic with div/rem) -> one
//              load or store per point.
// The points after the last whole group (the size modulo V) are a scalar
// tail done by the first threads. The body is cloned once per point of the
// group; LLVM folds the index arithmetic the points share.
//
//===----------------------------------------------------------------------===//

#include "KernelMapping.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

#include <cstdlib>

using namespace mlir;

namespace kiln::mapping {
namespace {

constexpr int64_t kVectorBytes = 16;
/// More points per group only unrolls the body further.
constexpr int64_t kMaxVectorWidth = 8;

/// An integer as constant + sum(coeffs[d] * d) over the loop coordinates.
struct LinearForm {
  int64_t constant = 0;
  SmallVector<int64_t> coeffs;
};

enum class Access { Vector, Uniform, Scalar };

class VectorizedBuilder {
public:
  VectorizedBuilder(linalg::GenericOp op, const TargetShape &target)
      : op(op), target(target), ranges(op.getStaticLoopRanges()) {}

  /// Whether the kernel applies with vectors of `given` points (0: the
  /// width its narrowest element gives): an all-parallel body without
  /// loops and at least one access proven contiguous and aligned. Sets the
  /// width and every access's kind; `why` says why not.
  bool analyze(int64_t given, std::string &why);
  /// The threads per block the selection gives it.
  int64_t defaultBlock() const;
  int64_t vectorWidth() const { return width; }
  /// Builds the kernel analyze accepted, `block` threads per block.
  void emit(OpBuilder &b, int64_t block);

private:
  unsigned rank() const { return ranges.size(); }
  std::optional<LinearForm> formOf(Value v);
  std::optional<LinearForm> formOf(AffineExpr e, ArrayRef<LinearForm> dims,
                                   ArrayRef<LinearForm> syms);
  /// The address (in elements from the buffer's base) of `memref[indices]`.
  std::optional<LinearForm> addressOf(Value memref,
                                      ArrayRef<std::optional<LinearForm>> idx);
  Access classify(const std::optional<LinearForm> &address, Type elementType,
                  bool isStore) const;
  Access classifyOperand(OpOperand &operand);
  Access classifyLoad(memref::LoadOp load);
  Block *body() { return &op.getRegion().front(); }

  /// Emits the points [base, base + lanes) (lanes == V with vector accesses,
  /// or 1 for the tail).
  void emitGroup(OpBuilder &b, Value base, int64_t lanes, bool vectors);
  Value captured(OpBuilder &b, Value buffer) {
    return rebuildInKernel(b, buffer, kernelValues);
  }

  linalg::GenericOp op;
  const TargetShape &target;
  SmallVector<int64_t> ranges;
  int64_t width = 1; // V
  int64_t firstVarying = 0;
  DenseMap<Value, std::optional<LinearForm>> forms;
  DenseMap<OpOperand *, Access> operandAccess;
  DenseMap<Operation *, Access> loadAccess;
  IRMapping kernelValues;
};

std::optional<LinearForm> VectorizedBuilder::formOf(AffineExpr e,
                                                    ArrayRef<LinearForm> dims,
                                                    ArrayRef<LinearForm> syms) {
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return dims[d.getPosition()];
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return syms[s.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    LinearForm f;
    f.coeffs.assign(rank(), 0);
    f.constant = c.getValue();
    return f;
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  std::optional<LinearForm> l = formOf(bin.getLHS(), dims, syms);
  std::optional<LinearForm> r = formOf(bin.getRHS(), dims, syms);
  if (!l || !r)
    return std::nullopt;
  auto isConstant = [](const LinearForm &f) {
    return llvm::all_of(f.coeffs, [](int64_t c) { return c == 0; });
  };
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    l->constant += r->constant;
    for (unsigned i = 0; i < rank(); ++i)
      l->coeffs[i] += r->coeffs[i];
    return l;
  case AffineExprKind::Mul: {
    if (!isConstant(*l) && !isConstant(*r))
      return std::nullopt;
    LinearForm &var = isConstant(*l) ? *r : *l;
    int64_t scale = isConstant(*l) ? l->constant : r->constant;
    var.constant *= scale;
    for (int64_t &c : var.coeffs)
      c *= scale;
    return var;
  }
  default:
    return std::nullopt;
  }
}

std::optional<LinearForm> VectorizedBuilder::formOf(Value v) {
  auto it = forms.find(v);
  if (it != forms.end())
    return it->second;
  std::optional<LinearForm> result;
  LinearForm zero;
  zero.coeffs.assign(rank(), 0);
  MLIRContext *ctx = op.getContext();
  Operation *def = v.getDefiningOp();
  APInt constant;
  if (def && matchPattern(v, m_ConstantInt(&constant))) {
    zero.constant = constant.getSExtValue();
    result = zero;
  } else if (auto index = dyn_cast_or_null<linalg::IndexOp>(def)) {
    zero.coeffs[index.getDim()] = 1;
    result = zero;
  } else if (def && isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(def) &&
             def->getBlock() == body()) {
    std::optional<LinearForm> l = formOf(def->getOperand(0));
    std::optional<LinearForm> r = formOf(def->getOperand(1));
    if (l && r) {
      AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
      AffineExpr e = isa<arith::AddIOp>(def)   ? d0 + d1
                     : isa<arith::SubIOp>(def) ? d0 - d1
                                               : d0 * d1;
      result = formOf(e, {*l, *r}, {});
    }
  } else if (auto apply = dyn_cast_or_null<affine::AffineApplyOp>(def);
             apply && def->getBlock() == body()) {
    AffineMap map = apply.getAffineMap();
    SmallVector<LinearForm> dims, syms;
    bool known = true;
    for (auto [i, operand] : llvm::enumerate(apply.getMapOperands())) {
      std::optional<LinearForm> f = formOf(operand);
      if (!f) {
        known = false;
        break;
      }
      (i < map.getNumDims() ? dims : syms).push_back(*f);
    }
    if (known)
      result = formOf(map.getResult(0), dims, syms);
  }
  forms[v] = result;
  return result;
}

/// Whether `memref` is a kernel argument or a view of one whose type's
/// offset counts from the argument's base: the chain of views that keep the
/// strided-layout meaning of the offset, down to a function argument, an
/// allocation or a global (each a whole buffer of the memory plan).
static bool isViewOfWholeBuffer(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (isa<memref::AllocOp, memref::GetGlobalOp>(def))
      return true;
    if (!isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
             memref::CastOp, memref::ReinterpretCastOp>(def))
      return false;
    memref = def->getOperand(0);
  }
  return isa<BlockArgument>(memref);
}

std::optional<LinearForm>
VectorizedBuilder::addressOf(Value memref,
                             ArrayRef<std::optional<LinearForm>> idx) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  if (!type || !isViewOfWholeBuffer(memref))
    return std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  // vector.load/store need a unit innermost stride, even on a dim of one
  // element (a stride-2 Slice of [4, 1]: reliability finding 24): such an
  // operand stays scalar.
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic) ||
      (!strides.empty() && strides.back() != 1))
    return std::nullopt;
  LinearForm address;
  address.coeffs.assign(rank(), 0);
  address.constant = offset;
  for (auto [stride, form] : llvm::zip_equal(strides, idx)) {
    if (!form)
      return std::nullopt;
    address.constant += stride * form->constant;
    for (unsigned d = 0; d < rank(); ++d)
      address.coeffs[d] += stride * form->coeffs[d];
  }
  return address;
}

/// Bytes per element of a type kept byte-addressed in memory (i1 and index
/// are not vectorised: LLVM packs i1 vectors into bits). Nor are 1-byte
/// types yet: the ONNX conformance tests of int8 Clip mismatched (3 of 60
/// elements off by 1-2) with 8-byte i8 vectors, not yet understood.
static std::optional<int64_t> elementBytes(Type type) {
  if (!type.isIntOrFloat() || type.getIntOrFloatBitWidth() % 8 != 0 ||
      type.getIntOrFloatBitWidth() == 8)
    return std::nullopt;
  int64_t bytes = type.getIntOrFloatBitWidth() / 8;
  return llvm::isPowerOf2_64(bytes) && bytes <= kVectorBytes
             ? std::optional<int64_t>(bytes)
             : std::nullopt;
}

Access VectorizedBuilder::classify(const std::optional<LinearForm> &address,
                                   Type elementType, bool isStore) const {
  std::optional<int64_t> bytes = elementBytes(elementType);
  if (!address || !bytes)
    return Access::Scalar;
  // A group's points differ in the coordinates from firstVarying on (the
  // group never crosses a multiple of their extents' product); coordinates
  // of extent 1 never vary.
  bool uniform = true;
  for (unsigned d = firstVarying; d < rank(); ++d)
    uniform &= ranges[d] == 1 || address->coeffs[d] == 0;
  if (uniform)
    return isStore ? Access::Scalar : Access::Uniform;
  // Contiguous: stepping the flattened index over those coordinates steps
  // the address by one element.
  int64_t expected = 1;
  for (int64_t d = rank() - 1; d >= firstVarying; --d) {
    if (ranges[d] == 1)
      continue;
    if (address->coeffs[d] != expected)
      return Access::Scalar;
    expected *= ranges[d];
  }
  // Aligned: the group's first element is at a multiple of the access size
  // from the (16-byte aligned) base for every value of the fixed
  // coordinates; its offset within the contiguous run is a multiple of V.
  int64_t align = std::min(kVectorBytes, width * *bytes);
  if (std::abs(address->constant * *bytes) % align != 0)
    return Access::Scalar;
  for (int64_t d = 0; d < firstVarying; ++d)
    if (ranges[d] != 1 && std::abs(address->coeffs[d] * *bytes) % align != 0)
      return Access::Scalar;
  return Access::Vector;
}

Access VectorizedBuilder::classifyOperand(OpOperand &operand) {
  auto type = dyn_cast<MemRefType>(operand.get().getType());
  if (!type)
    return Access::Uniform; // A scalar operand.
  AffineMap map = op.getMatchingIndexingMap(&operand);
  SmallVector<LinearForm> dims;
  for (unsigned d = 0; d < rank(); ++d) {
    LinearForm f;
    f.coeffs.assign(rank(), 0);
    f.coeffs[d] = 1;
    dims.push_back(f);
  }
  SmallVector<std::optional<LinearForm>> idx;
  for (AffineExpr e : map.getResults())
    idx.push_back(formOf(e, dims, {}));
  return classify(addressOf(operand.get(), idx), type.getElementType(),
                  op.isDpsInit(&operand));
}

Access VectorizedBuilder::classifyLoad(memref::LoadOp load) {
  SmallVector<std::optional<LinearForm>> idx;
  for (Value index : load.getIndices())
    idx.push_back(formOf(index));
  return classify(addressOf(load.getMemRef(), idx),
                  load.getMemRefType().getElementType(), /*isStore=*/false);
}

bool VectorizedBuilder::analyze(int64_t given, std::string &why) {
  if (llvm::any_of(op.getIteratorTypesArray(), [](utils::IteratorType t) {
        return t != utils::IteratorType::parallel;
      })) {
    why = "a reduction in the iteration space";
    return false;
  }
  // Loops in the body (a reduction per point) would run once per point of
  // the group in one thread: keep a thread per point for them.
  bool hasLoops = false;
  body()->walk([&](Operation *nested) {
    hasLoops |= isa<scf::ForOp, scf::WhileOp>(nested);
  });
  if (hasLoops || rank() == 0) {
    why = hasLoops ? "loops in the body" : "a 0-D iteration space";
    return false;
  }
  int64_t total = 1;
  for (int64_t r : ranges)
    total *= r;

  // V from the narrowest element the kernel moves.
  int64_t narrowest = kVectorBytes;
  auto note = [&](Type type) {
    if (std::optional<int64_t> bytes = elementBytes(type))
      narrowest = std::min(narrowest, *bytes);
  };
  for (OpOperand &operand : op->getOpOperands())
    if (auto type = dyn_cast<MemRefType>(operand.get().getType()))
      if (!op.getMatchingBlockArgument(&operand).use_empty() ||
          op.isDpsInit(&operand))
        note(type.getElementType());
  for (Operation &inner : body()->without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(inner))
      note(load.getMemRefType().getElementType());
  width = given ? given : std::min(kMaxVectorWidth, kVectorBytes / narrowest);
  if (width < 2 || total < width) {
    why = width < 2 ? "elements too wide for a vector of two"
                    : "fewer points than one vector";
    return false;
  }
  // The innermost coordinates a group of V spans.
  firstVarying = 0;
  int64_t inner = 1;
  for (int64_t d = rank() - 1; d > 0; --d) {
    inner *= ranges[d];
    if (inner % width == 0) {
      firstVarying = d;
      break;
    }
  }

  bool anyVector = false;
  for (OpOperand &operand : op->getOpOperands()) {
    bool used = !op.getMatchingBlockArgument(&operand).use_empty();
    if (!used && !op.isDpsInit(&operand))
      continue;
    Access access = classifyOperand(operand);
    operandAccess[&operand] = access;
    anyVector |= access == Access::Vector;
  }
  for (Operation &inner : body()->without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      Access access = classifyLoad(load);
      loadAccess[load] = access;
      anyVector |= access == Access::Vector;
    }
  if (!anyVector) {
    why = "no access proven contiguous and aligned for vectors of " +
          std::to_string(width);
    return false;
  }
  return true;
}

int64_t VectorizedBuilder::defaultBlock() const {
  int64_t total = 1;
  for (int64_t r : ranges)
    total *= r;
  int64_t groups = total / width, tail = total % width;
  return std::min(target.blockSize, std::max(groups, tail));
}

void VectorizedBuilder::emit(OpBuilder &b, int64_t block) {
  int64_t total = 1;
  for (int64_t r : ranges)
    total *= r;
  Location loc = op.getLoc();
  int64_t groups = total / width, tail = total % width;
  int64_t residentBlocks =
      target.smCount * std::max<int64_t>(1, target.maxThreadsPerSm / block);
  int64_t grid = std::max<int64_t>(
      1, std::min((groups + block - 1) / block, residentBlocks));
  Value one = indexConstant(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, indexConstant(b, loc, grid), one,
                                      one, indexConstant(b, loc, block), one,
                                      one);
  b.setInsertionPointToStart(&launch.getBody().front());
  // Every buffer view the kernel uses, rebuilt once at its top.
  auto capture = [&](Value operand) {
    if (isa<MemRefType>(operand.getType()) &&
        !op->isAncestor(operand.getParentBlock()->getParentOp()))
      captured(b, operand);
  };
  for (Value operand : op->getOperands())
    captured(b, operand); // Scalar operands too: the tail uses them.
  op.getRegion().walk([&](Operation *nested) {
    for (Value operand : nested->getOperands())
      capture(operand);
  });
  Value gid = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                            indexConstant(b, loc, block)),
      launch.getThreadIds().x);
  // Grid-stride over the whole groups.
  auto loop = scf::ForOp::create(b, loc, gid, indexConstant(b, loc, groups),
                                 indexConstant(b, loc, grid * block));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(loop.getBody());
    Value base = arith::MulIOp::create(b, loc, loop.getInductionVar(),
                                       indexConstant(b, loc, width));
    emitGroup(b, base, width, /*vectors=*/true);
  }
  if (tail > 0) {
    Value inTail = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, gid,
                                         indexConstant(b, loc, tail));
    auto guard = scf::IfOp::create(b, loc, inTail, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    Value point = arith::AddIOp::create(
        b, loc, gid, indexConstant(b, loc, groups * width));
    emitGroup(b, point, 1, /*vectors=*/false);
  }
  gpu::TerminatorOp::create(b, loc);
}

void VectorizedBuilder::emitGroup(OpBuilder &b, Value base, int64_t lanes,
                                  bool vectors) {
  Location loc = op.getLoc();
  SmallVector<IRMapping> values(lanes);
  SmallVector<SmallVector<Value>> ivs;
  for (int64_t j = 0; j < lanes; ++j) {
    Value point =
        j == 0 ? base
               : Value(arith::AddIOp::create(b, loc, base,
                                             indexConstant(b, loc, j)));
    ivs.push_back(delinearize(b, loc, point, ranges));
  }
  auto alignmentOf = [&](Type elementType) {
    return llvm::MaybeAlign(
        std::min(kVectorBytes, lanes * *elementBytes(elementType)));
  };
  // Loads `buffer` at `indexOf(j)` for each point: one vector, one scalar
  // for all points, or one scalar each.
  auto loadPoints = [&](Access access, Value buffer,
                        llvm::function_ref<SmallVector<Value>(int64_t)> indexOf)
      -> SmallVector<Value> {
    SmallVector<Value> result;
    Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
    if (vectors && access == Access::Vector) {
      auto vecType = VectorType::get({lanes}, elementType);
      Value vec =
          vector::LoadOp::create(b, loc, vecType, buffer, indexOf(0),
                                 /*nontemporal=*/false, alignmentOf(elementType));
      for (int64_t j = 0; j < lanes; ++j)
        result.push_back(vector::ExtractOp::create(b, loc, vec, j));
    } else if (vectors && access == Access::Uniform) {
      Value v = memref::LoadOp::create(b, loc, buffer, indexOf(0));
      result.assign(lanes, v);
    } else {
      for (int64_t j = 0; j < lanes; ++j)
        result.push_back(memref::LoadOp::create(b, loc, buffer, indexOf(j)));
    }
    return result;
  };

  // The generic's own operands (unfused ops read through indexing maps).
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if (arg.use_empty())
      continue;
    Value buffer = captured(b, operand.get());
    if (!isa<MemRefType>(buffer.getType())) {
      for (IRMapping &m : values)
        m.map(arg, buffer);
      continue;
    }
    AffineMap map = op.getMatchingIndexingMap(&operand);
    SmallVector<Value> loaded =
        loadPoints(operandAccess.lookup(&operand), buffer,
                   [&](int64_t j) { return applyMap(b, loc, map, ivs[j]); });
    for (int64_t j = 0; j < lanes; ++j)
      values[j].map(arg, loaded[j]);
  }

  // The body, once per point; classified top-level loads once per group.
  auto mapCapturedBuffers = [&](Operation &inner, IRMapping &m) {
    inner.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (isa<MemRefType>(operand.getType()) &&
            !op->isAncestor(operand.getParentBlock()->getParentOp()) &&
            !m.contains(operand))
          m.map(operand, captured(b, operand));
    });
  };
  for (Operation &inner : body()->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      for (int64_t j = 0; j < lanes; ++j)
        values[j].map(index.getResult(), ivs[j][index.getDim()]);
      continue;
    }
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      Access access = loadAccess.lookup(load);
      if (vectors && access != Access::Scalar) {
        mapCapturedBuffers(inner, values[0]);
        Value buffer = values[0].lookupOrDefault(load.getMemRef());
        SmallVector<Value> loaded =
            loadPoints(access, buffer, [&](int64_t j) {
              SmallVector<Value> idx;
              for (Value i : load.getIndices())
                idx.push_back(values[j].lookupOrDefault(i));
              return idx;
            });
        for (int64_t j = 0; j < lanes; ++j)
          values[j].map(load.getResult(), loaded[j]);
        continue;
      }
    }
    for (int64_t j = 0; j < lanes; ++j) {
      mapCapturedBuffers(inner, values[j]);
      b.clone(inner, values[j]);
    }
  }

  // The results: one vector store per output when contiguous and aligned.
  Operation *yield = body()->getTerminator();
  for (auto [k, out] : llvm::enumerate(op.getDpsInitsMutable())) {
    Value buffer = captured(b, out.get());
    AffineMap map = op.getMatchingIndexingMap(&out);
    Value yielded = yield->getOperand(k);
    if (vectors && operandAccess.lookup(&out) == Access::Vector) {
      SmallVector<Value> elements;
      for (int64_t j = 0; j < lanes; ++j)
        elements.push_back(values[j].lookupOrDefault(yielded));
      Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
      Value vec = vector::FromElementsOp::create(
          b, loc, VectorType::get({lanes}, elementType), elements);
      vector::StoreOp::create(b, loc, vec, buffer,
                              applyMap(b, loc, map, ivs[0]),
                              /*nontemporal=*/false, alignmentOf(elementType));
      continue;
    }
    for (int64_t j = 0; j < lanes; ++j)
      memref::StoreOp::create(b, loc, values[j].lookupOrDefault(yielded),
                              buffer, applyMap(b, loc, map, ivs[j]));
  }
}

} // namespace

std::optional<VectorizedShape>
planVectorizedElementwise(linalg::GenericOp op, const TargetShape &target) {
  VectorizedBuilder builder(op, target);
  std::string why;
  if (!builder.analyze(/*given=*/0, why))
    return std::nullopt;
  return VectorizedShape{builder.vectorWidth(), builder.defaultBlock()};
}

LogicalResult buildVectorizedElementwise(OpBuilder &b, linalg::GenericOp op,
                                         const TargetShape &target,
                                         const VectorizedShape &shape,
                                         std::string &why) {
  VectorizedBuilder builder(op, target);
  if (!builder.analyze(shape.width, why))
    return failure();
  builder.emit(b, shape.block);
  return success();
}

} // namespace kiln::mapping
