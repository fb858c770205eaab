//===- FuseSiblingContractions.cpp - One GEMM for matmuls sharing an input ===//
//
// kiln-fuse-sibling-contractions (horizontal fusion, issue 23): matmuls that
// read the same left operand with constant [K][N_i] weights (Q, K and V
// projections) become one matmul against the weights concatenated along N,
// with their bias adds (when every sibling has one) concatenated the same
// way; each sibling's value is then a `kiln.slice` of the fused result along
// its last dimension. Only siblings whose slices every reader can index
// through are merged (readsFreely). kiln-fuse copies slices into their consumers as index
// arithmetic and the attention kernel reads through them at an offset, so
// one launch replaces one per sibling and nothing is copied.
//
// The concatenated weights are new globals whose origin stacks the
// siblings' origins and ends in `concat AXIS` (WeightOrigins.h), so
// `--strip-weights` and `kiln-run --weights` rebuild them from the ONNX
// initializers.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <cstring>

namespace kiln {
#define GEN_PASS_DEF_FUSESIBLINGCONTRACTIONSPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// A constant weight: its global and row-major bytes.
struct ConstantWeight {
  ml_program::GlobalOp global;
  RankedTensorType type;
  std::vector<char> bytes;
};

std::optional<ConstantWeight> constantWeight(Value v, SymbolTable &symbols) {
  auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>();
  if (!load)
    return std::nullopt;
  auto global = symbols.lookup<ml_program::GlobalOp>(
      load.getGlobal().getRootReference());
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!global || global.getIsMutable() || !type || !type.hasStaticShape() ||
      global.getType() != type ||
      type.getElementType().getIntOrFloatBitWidth() % 8)
    return std::nullopt;
  size_t size = type.getNumElements() *
                (type.getElementType().getIntOrFloatBitWidth() / 8);
  ArrayRef<char> raw;
  if (auto resource =
          dyn_cast_or_null<DenseResourceElementsAttr>(global.getValueAttr())) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    raw = blob->getData();
  } else if (auto dense =
                 dyn_cast_or_null<DenseElementsAttr>(global.getValueAttr())) {
    if (dense.isSplat())
      return std::nullopt; // a splat weight is a constant, not worth it
    raw = dense.getRawData();
  }
  if (raw.size() != size)
    return std::nullopt;
  return ConstantWeight{global, type, std::vector<char>(raw.begin(), raw.end())};
}

/// One sibling: the matmul, its bias add (if any) and the value its users
/// read.
struct Sibling {
  MatmulOp matmul;
  AddOp bias;
  ConstantWeight weight;
  std::optional<ConstantWeight> biasWeight;
  Value result() { return bias ? bias.getResult() : matmul.getResult(); }
};

/// Whether the sibling's value `v` can become a slice that costs nothing:
/// every reader indexes through it. Data movement is followed to its
/// readers (kiln-fuse copies it into them as indexing); a concat is a
/// kernel of its own that reads through indexing. Not free: a direct
/// elementwise user (it would be the GEMM's epilogue, and the fused GEMM
/// has one epilogue for all columns), a function result (the output needs
/// a copy) and a matmul against a constant weight (a GEMM kernel takes its
/// operand as a whole buffer, so a slice would be copied first; an
/// activation x activation matmul, attention's, reads through views).
bool readsFreely(Value v, bool direct) {
  for (Operation *user : v.getUsers()) {
    if (isa<func::ReturnOp>(user))
      return false;
    if (isa<ConcatOp>(user))
      continue;
    if (isa<ReshapeOp, TransposeOp, SliceOp, BroadcastOp>(user)) {
      if (!readsFreely(user->getResult(0), /*direct=*/false))
        return false;
      continue;
    }
    if (auto matmul = dyn_cast<MatmulOp>(user)) {
      Value other = matmul.getLhs() == v ? matmul.getRhs() : matmul.getLhs();
      if (other.getDefiningOp<ml_program::GlobalLoadConstOp>() ||
          other.getDefiningOp<ConstantOp>())
        return false;
      continue;
    }
    if (direct)
      return false;
  }
  return true;
}

std::optional<Sibling> asSibling(MatmulOp matmul, SymbolTable &symbols) {
  auto lhsType = dyn_cast<RankedTensorType>(matmul.getLhs().getType());
  auto resultType = dyn_cast<RankedTensorType>(matmul.getType());
  if (!lhsType || !resultType || lhsType.getRank() < 2 ||
      !resultType.hasStaticShape() || !lhsType.hasStaticShape())
    return std::nullopt;
  std::optional<ConstantWeight> weight =
      constantWeight(matmul.getRhs(), symbols);
  if (!weight || weight->type.getRank() != 2 ||
      weight->type.getElementType() != lhsType.getElementType() ||
      resultType.getShape().back() != weight->type.getShape()[1])
    return std::nullopt;
  Sibling s{matmul, AddOp(), std::move(*weight), std::nullopt};
  if (matmul->hasOneUse())
    if (auto add = dyn_cast<AddOp>(*matmul->user_begin())) {
      Value other = add.getLhs() == matmul.getResult() ? add.getRhs()
                                                       : add.getLhs();
      std::optional<ConstantWeight> bias = constantWeight(other, symbols);
      if (bias && add.getType() == resultType &&
          add.getLhs() == matmul.getResult() && bias->type.getRank() == 1 &&
          bias->type.getShape()[0] == resultType.getShape().back() &&
          bias->type.getElementType() == resultType.getElementType()) {
        s.bias = add;
        s.biasWeight = std::move(bias);
      }
    }
  if (!readsFreely(s.result(), /*direct=*/true))
    return std::nullopt;
  return s;
}

/// A new constant global holding `parts` concatenated along `axis` (0 or
/// 1 of a 1-D or 2-D type), its origin the parts' origins stacked and
/// concatenated (none when a part has none).
ml_program::GlobalOp concatGlobal(SymbolTable &symbols,
                                  ArrayRef<ConstantWeight *> parts,
                                  int64_t axis) {
  RankedTensorType first = parts.front()->type;
  int64_t total = 0;
  for (ConstantWeight *p : parts)
    total += p->type.getShape()[axis];
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = total;
  auto type = RankedTensorType::get(shape, first.getElementType());
  size_t width = first.getElementType().getIntOrFloatBitWidth() / 8;
  int64_t rows = axis == 0 ? 1 : shape[0];
  std::vector<char> data;
  data.reserve(type.getNumElements() * width);
  for (int64_t r = 0; r < rows; ++r)
    for (ConstantWeight *p : parts) {
      size_t rowBytes = p->type.getShape().back() * width;
      if (axis == 0)
        rowBytes = p->bytes.size();
      const char *src = p->bytes.data() + r * rowBytes;
      data.insert(data.end(), src, src + rowBytes);
    }
  std::string name = (parts.front()->global.getSymName() + "_siblings").str();
  std::string blobKey = name;
  for (char &c : blobKey)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
      ArrayRef<char>(data.data(), data.size()), alignof(uint64_t));
  auto value = DenseResourceElementsAttr::get(type, blobKey, std::move(blob));
  OpBuilder b(type.getContext()); // detached: the symbol table inserts it
  auto global = ml_program::GlobalOp::create(
      b, parts.front()->global.getLoc(), name, type, /*is_mutable=*/false,
      value, b.getStringAttr("private"));
  std::string origin;
  for (ConstantWeight *p : parts) {
    std::string part = getWeightOrigin(p->global);
    if (part.empty()) {
      origin.clear();
      break;
    }
    origin += (origin.empty() ? "" : "\n") + part;
  }
  setWeightOrigin(global, appendOriginStep(origin, "concat", {axis}));
  // Renames on a clash (another group's fused weight of the same name).
  symbols.insert(global, std::next(Block::iterator(parts.back()->global)));
  return global;
}

void fuseSiblings(SymbolTable &symbols, MutableArrayRef<Sibling> siblings) {
  SmallVector<ConstantWeight *> weights, biases;
  for (Sibling &s : siblings) {
    weights.push_back(&s.weight);
    if (s.biasWeight)
      biases.push_back(&*s.biasWeight);
  }
  ml_program::GlobalOp weight = concatGlobal(symbols, weights, 1);
  ml_program::GlobalOp bias =
      biases.empty() ? nullptr : concatGlobal(symbols, biases, 0);

  MatmulOp first = siblings.front().matmul;
  auto resultType = cast<RankedTensorType>(first.getType());
  SmallVector<int64_t> shape(resultType.getShape());
  shape.back() = cast<RankedTensorType>(weight.getType()).getShape()[1];
  auto fusedType = RankedTensorType::get(shape, resultType.getElementType());
  OpBuilder b(first);
  Location loc = first.getLoc();
  Value weightValue = ml_program::GlobalLoadConstOp::create(
      b, loc, weight.getType(), FlatSymbolRefAttr::get(weight.getSymNameAttr()));
  Value fused =
      MatmulOp::create(b, loc, fusedType, first.getLhs(), weightValue);
  if (bias) {
    Value biasValue = ml_program::GlobalLoadConstOp::create(
        b, loc, bias.getType(), FlatSymbolRefAttr::get(bias.getSymNameAttr()));
    fused = AddOp::create(b, loc, fusedType, fused, biasValue);
  }
  // Every slice first, then the siblings go: the builder inserts before
  // the op that follows the fused value, which is a sibling.
  b.setInsertionPointAfterValue(fused);
  int64_t rank = fusedType.getRank(), offset = 0;
  SmallVector<Value> slices;
  for (Sibling &s : siblings) {
    int64_t width = s.weight.type.getShape()[1];
    SmallVector<int64_t> starts(rank, 0), limits(fusedType.getShape()),
        steps(rank, 1);
    starts.back() = offset;
    limits.back() = offset + width;
    offset += width;
    slices.push_back(SliceOp::create(b, s.matmul.getLoc(),
                                     s.result().getType(), fused,
                                     b.getDenseI64ArrayAttr(starts),
                                     b.getDenseI64ArrayAttr(limits),
                                     b.getDenseI64ArrayAttr(steps)));
  }
  for (auto [s, slice] : llvm::zip_equal(siblings, slices)) {
    s.result().replaceAllUsesWith(slice);
    Value rhs = s.matmul.getRhs(), biasIn;
    if (s.bias) {
      biasIn = s.bias.getRhs();
      s.bias.erase();
    }
    s.matmul.erase();
    for (Value dead : {rhs, biasIn})
      if (dead && dead.use_empty())
        dead.getDefiningOp()->erase();
  }
}

struct FuseSiblingContractionsPass
    : kiln::impl::FuseSiblingContractionsPassBase<
          FuseSiblingContractionsPass> {
  using Base::Base;
  void runOnOperation() override;
};

void FuseSiblingContractionsPass::runOnOperation() {
  ModuleOp module = getOperation();
  SymbolTable symbols(module);
  llvm::SetVector<ml_program::GlobalOp> touched;
  for (auto func : module.getOps<func::FuncOp>()) {
    // Siblings: in one block, the same left operand, weight and result
    // element types and K, and all with a bias or none.
    using Key = std::tuple<Block *, Value, Type, int64_t, int64_t>;
    llvm::MapVector<Key, SmallVector<Sibling>> groups;
    func.walk([&](MatmulOp matmul) {
      if (matmul->getParentOfType<FusionOp>())
        return;
      std::optional<Sibling> s = asSibling(matmul, symbols);
      if (!s)
        return;
      Key key{matmul->getBlock(), matmul.getLhs(),
              s->weight.type.getElementType(), s->weight.type.getShape()[0],
              s->bias ? int64_t(1) : int64_t(0)};
      groups[key].push_back(std::move(*s));
    });
    for (auto &[key, siblings] : groups) {
      if (siblings.size() < 2)
        continue;
      for (Sibling &s : siblings) {
        touched.insert(s.weight.global);
        if (s.biasWeight)
          touched.insert(s.biasWeight->global);
      }
      fuseSiblings(symbols, siblings);
    }
  }
  // Globals nothing loads any more would still be written as weights.
  for (ml_program::GlobalOp global : touched)
    if (global && SymbolTable::symbolKnownUseEmpty(global, module))
      symbols.erase(global);
}

} // namespace
