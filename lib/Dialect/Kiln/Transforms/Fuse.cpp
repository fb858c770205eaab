//===- Fuse.cpp - kiln-fuse: group ops into kiln.fusion regions -----------===//
//
// The fusion policy, in one place (docs/passes.md shows it with IR):
//
//   1. Epilogues. An elementwise op joins the group of one of its operands'
//      producers when its result has that group's shape (the kernel's
//      iteration space) and no other operand depends on the group (regions
//      stay acyclic). Contractions, reductions and pooling thus absorb their
//      bias, activation, residual add, scale and cast. A lossless widening
//      cast (bf16 -> f32) does not: it is a prologue of its consumers
//      (rule 3), so the producer stores the narrow value only.
//   2. Short contractions into softmax. A softmax whose input is a matmul
//      with a reduction of at most 64 (attention scores) absorbs it: the row
//      kernel recomputes each score in its passes over the row, which costs
//      less than writing and re-reading the scores.
//   3. Prologues. Data movement (transpose, reshape, broadcast, slice, pad,
//      concat, gather, gather_elements, tile) is cloned into each consumer
//      group, where it becomes indexing; cheap elementwise producers are cloned into elementwise and
//      reduction groups, and into a contraction's group only when that group
//      is their only user (never duplicated into a contraction's inner loop;
//      likewise into a pure data-movement group, which is cloned itself).
//      A cheap group whose every user cloned it is not materialized.
//   4. Side by side. Matmul groups with one shape that read the same input
//      and do not depend on each other become one region with one result
//      each (Q, K and V projections).
//   5. Attention (option `attention`, applied before rule 2). A matmul whose
//      left operand is a last-axis softmax (and elementwise ops after it),
//      whose input is a matmul and elementwise ops (scale, masks), becomes
//      one region of kind "attention" when no intermediate value has another
//      user: kiln-match-contractions makes it one flash-attention kernel.
//
// Bounds: a region holds at most kMaxOps ops, so that a kernel's registers
// stay bounded; expensive producers (contractions, reductions) are never
// duplicated except under rule 2.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

#include <deque>
#include <queue>

namespace kiln {
#define GEN_PASS_DEF_FUSEPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Reorders `body` so that every op comes after the ops whose results it
/// (or an op nested in it) reads, each op as early as that allows: of the
/// ops ready to go, the one that came first goes next. A region is built
/// where its last member was, which can be before a producer of another
/// member; an op so placed moves to just after that producer, not (as
/// mlir::sortTopologically's sweeps would move it) after every op that
/// was ready in the same sweep. Launch order follows this order, and a
/// gradient bucket's all-reduce waits for the launch that completes it
/// (kiln-optimizer bucket-elements), so this keeps work where the graph
/// put it. An order that is already valid is left as it is.
void sortKeepingOrder(Block &body) {
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, unsigned> index;
  for (Operation &op : body.without_terminator()) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  std::vector<SmallVector<unsigned>> users(ops.size());
  std::vector<unsigned> waiting(ops.size(), 0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    llvm::SmallDenseSet<unsigned> producers;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (Operation *top = body.findAncestorOpInBlock(*def))
            if (auto it = index.find(top); it != index.end() && top != op)
              producers.insert(it->second);
    });
    for (unsigned p : producers)
      users[p].push_back(i);
    waiting[i] = producers.size();
  }
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<>> ready;
  for (unsigned i = 0; i < ops.size(); ++i)
    if (waiting[i] == 0)
      ready.push(i);
  Operation *terminator =
      body.mightHaveTerminator() ? body.getTerminator() : nullptr;
  while (!ready.empty()) {
    unsigned i = ready.top();
    ready.pop();
    if (terminator)
      ops[i]->moveBefore(terminator);
    else
      ops[i]->moveBefore(&body, body.end());
    for (unsigned u : users[i])
      if (--waiting[u] == 0)
        ready.push(u);
  }
}

/// Ops per region, pulled-in copies included.
constexpr unsigned kMaxOps = 48;
/// Longest matmul reduction a softmax may recompute (rule 2).
constexpr int64_t kMaxRecomputedReduction = 64;

enum class Role { Elementwise, DataMovement, Contraction, Row, Other };

Role roleOf(Operation *op) {
  if (isBroadcastingElementwise(op) ||
      isa<SelectOp, BatchNormOp, PhiloxOp, DropoutMaskOp>(op))
    return Role::Elementwise;
  if (isa<TransposeOp, ReshapeOp, BroadcastOp, SliceOp, ConcatOp, GatherOp,
          GatherElementsOp, TileOp>(op))
    return Role::DataMovement;
  if (auto pad = dyn_cast<PadOp>(op))
    return pad.getMode() == PadMode::Constant ? Role::DataMovement
                                              : Role::Other;
  if (isa<MatmulOp, ConvOp>(op))
    return Role::Contraction;
  if (isa<ReduceOp, ArgMaxOp, ArgMinOp, SoftmaxOp, LogSoftmaxOp, LayerNormOp,
          InstanceNormOp, PoolOp, GlobalPoolOp>(op))
    return Role::Row;
  return Role::Other;
}

bool isCheap(Role role) {
  return role == Role::Elementwise || role == Role::DataMovement;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

struct Group {
  SmallVector<Operation *> ops; // In block order.
  Operation *anchor = nullptr;  // The first contraction or row op, if any.
  bool alive = true;
  /// Producers cloned into this group (rule 3).
  llvm::SetVector<Operation *> pulled;
  /// Formed by rule 5.
  bool attention = false;

  Operation *root() const { return ops.back(); }
  ArrayRef<int64_t> domain() const { return shapeOf(root()->getResult(0)); }
  bool isCheapOnly() const { return anchor == nullptr; }
  size_t size() const { return ops.size() + pulled.size(); }
};

class FusionPlanner {
public:
  FusionPlanner(func::FuncOp func, bool attention)
      : func(func), fuseAttentionPatterns(attention) {}

  void run() {
    Block &body = func.getBody().front();
    unsigned i = 0;
    for (Operation &op : body.without_terminator())
      order[&op] = i++;
    for (Operation &op : body.without_terminator())
      if (roleOf(&op) != Role::Other)
        place(&op);
    if (fuseAttentionPatterns)
      fuseAttention();
    absorbShortContractions();
    for (Group &g : groups)
      if (g.alive)
        for (Operation *op : g.ops)
          for (Value operand : op->getOperands())
            pull(g, operand);
    mergeSideBySide();
    materialize();
    eraseDeadCheapOps();
    sortKeepingOrder(body);
  }

private:
  /// A bf16/f16 -> f32 cast is free where its result is read, so it runs
  /// in its consumers (rule 3) and the producer stores the narrow value, not
  /// both. (tf32 -> f32, the second half of a rounding pair, is not one: it
  /// stays with its producer.)
  static bool isLosslessWidening(Operation *op) {
    auto cast = dyn_cast<CastOp>(op);
    return cast && cast.isStorageWidening();
  }

  /// Step 1: each op starts a group or joins one as an epilogue.
  void place(Operation *op) {
    Role role = roleOf(op);
    if (role == Role::Elementwise && op->getNumResults() == 1 &&
        !isLosslessWidening(op)) {
      for (Value operand : op->getOperands()) {
        Group *g = groupOfValue(operand);
        if (!g || g->size() >= kMaxOps ||
            g->domain() != shapeOf(op->getResult(0)))
          continue;
        bool cyclic = llvm::any_of(op->getOperands(), [&](Value other) {
          return groupOfValue(other) != g && dependsOn(other, *g);
        });
        if (cyclic)
          continue;
        add(*g, op);
        return;
      }
    }
    Group &g = groups.emplace_back();
    add(g, op);
  }

  void add(Group &g, Operation *op) {
    g.ops.push_back(op);
    groupOf[op] = &g;
    if (!g.anchor && !isCheap(roleOf(op)))
      g.anchor = op;
  }

  Group *groupOfValue(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return nullptr;
    auto it = groupOf.find(def);
    return it == groupOf.end() || !it->second->alive ? nullptr : it->second;
  }

  /// Whether `v` is computed from a value of `g` (so `g` cannot absorb its
  /// user without a cycle). Ops placed before all of `g` cannot depend on it.
  bool dependsOn(Value v, const Group &g) {
    unsigned first = order.lookup(g.ops.front());
    SmallVector<Value> worklist{v};
    DenseSet<Operation *> seen;
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !order.count(def) || order.lookup(def) < first ||
          !seen.insert(def).second)
        continue;
      if (llvm::is_contained(g.ops, def))
        return true;
      llvm::append_range(worklist, def->getOperands());
      // A region formed earlier (kiln-fuse-quantized's) has no operands:
      // its body reads the values it depends on from above.
      if (def->getNumRegions()) {
        llvm::SetVector<Value> captured;
        mlir::getUsedValuesDefinedAbove(def->getRegions(), captured);
        llvm::append_range(worklist, captured);
      }
    }
    return false;
  }

  bool dependsOnGroup(const Group &a, const Group &b) {
    for (Operation *op : a.ops)
      for (Value operand : op->getOperands())
        if (groupOfValue(operand) != &a && dependsOn(operand, b))
          return true;
    return false;
  }

  /// Values of `g` used by ops outside it.
  SmallVector<Value> escaping(const Group &g) {
    SmallVector<Value> out;
    for (Operation *op : g.ops)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return groupOf.lookup(user) != &g;
            }))
          out.push_back(result);
    return out;
  }

  void mergeInto(Group &dst, Group &src) {
    for (Operation *op : src.ops)
      groupOf[op] = &dst;
    dst.ops.append(src.ops.begin(), src.ops.end());
    llvm::sort(dst.ops, [&](Operation *a, Operation *b) {
      return order.lookup(a) < order.lookup(b);
    });
    if (!dst.anchor || (src.anchor && order.lookup(src.anchor) <
                                          order.lookup(dst.anchor)))
      dst.anchor = src.anchor ? src.anchor : dst.anchor;
    src.alive = false;
    src.ops.clear();
  }

  /// Whether every op of `g` but `anchor` is elementwise.
  static bool onlyElementwiseBesides(const Group &g, Operation *anchor) {
    return llvm::all_of(g.ops, [&](Operation *op) {
      return op == anchor || roleOf(op) == Role::Elementwise;
    });
  }

  /// Whether every value of `g` used outside it is used only by `next`.
  bool onlyFeeds(const Group &g, const Group &next) {
    return llvm::all_of(escaping(g), [&](Value v) {
      return llvm::all_of(v.getUsers(), [&](Operation *user) {
        return groupOf.lookup(user) == &next;
      });
    });
  }

  /// Step 5: matmul -> elementwise -> softmax -> elementwise -> matmul.
  void fuseAttention() {
    for (Group &pv : groups) {
      auto second = dyn_cast_or_null<MatmulOp>(pv.anchor);
      if (!pv.alive || !second || !onlyElementwiseBesides(pv, second))
        continue;
      Group *row = groupOfValue(second.getLhs());
      auto softmax = row ? dyn_cast_or_null<SoftmaxOp>(row->anchor) : nullptr;
      if (!softmax || row == &pv || !onlyElementwiseBesides(*row, softmax))
        continue;
      int64_t rank = shapeOf(softmax.getResult()).size();
      int64_t axis = static_cast<int64_t>(softmax.getAxis());
      if (axis != rank - 1 && axis != -1)
        continue;
      Group *scores = groupOfValue(softmax.getInput());
      auto first = scores ? dyn_cast_or_null<MatmulOp>(scores->anchor)
                          : nullptr;
      if (!first || scores == row || scores == &pv ||
          !onlyElementwiseBesides(*scores, first))
        continue;
      if (!onlyFeeds(*scores, *row) || !onlyFeeds(*row, pv) ||
          scores->size() + row->size() + pv.size() > kMaxOps ||
          dependsOn(second.getRhs(), *row) ||
          dependsOn(second.getRhs(), *scores))
        continue;
      mergeInto(pv, *scores);
      mergeInto(pv, *row);
      pv.attention = true;
    }
  }

  /// Step 2: softmax absorbs a short matmul feeding only it.
  void absorbShortContractions() {
    for (Group &row : groups) {
      if (!row.alive || !row.anchor ||
          !isa<SoftmaxOp, LogSoftmaxOp>(row.anchor))
        continue;
      Group *producer = groupOfValue(row.anchor->getOperand(0));
      if (!producer || producer == &row || !producer->anchor)
        continue;
      auto matmul = dyn_cast<MatmulOp>(producer->anchor);
      if (!matmul || shapeOf(matmul.getLhs()).back() > kMaxRecomputedReduction ||
          producer->size() + row.size() > kMaxOps)
        continue;
      bool onlyFeedsRow = llvm::all_of(escaping(*producer), [&](Value v) {
        return llvm::all_of(v.getUsers(), [&](Operation *user) {
          return groupOf.lookup(user) == &row;
        });
      });
      if (onlyFeedsRow)
        mergeInto(row, *producer);
    }
  }

  /// Step 3: pull the cheap producers of `v` into `g`, whole or not at all.
  void pull(Group &g, Value v) {
    llvm::SetVector<Operation *> cone;
    if (!collectCone(g, v, cone) || cone.empty() ||
        g.size() + cone.size() > kMaxOps)
      return;
    for (Operation *op : cone)
      g.pulled.insert(op);
  }

  /// The cheap producers of `v` that `g` can pull, depth first from `v`
  /// (operands in order). Iterative: a chain of 100,000 elementwise ops
  /// overflowed the stack when this recursed (docs/reliability.md
  /// "Limits"). False once the cone outgrows kMaxOps: pull() would drop it.
  bool collectCone(Group &g, Value root, llvm::SetVector<Operation *> &cone) {
    // Operands are pushed in reverse, so they pop in the order the
    // recursive walk visited them.
    SmallVector<Value> stack = {root};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      if (Operation *def = visitCone(g, v, cone)) {
        if (g.size() + cone.size() > kMaxOps)
          return false;
        for (Value operand : llvm::reverse(def->getOperands()))
          stack.push_back(operand);
      }
    }
    return true;
  }

  /// collectCone's step: adds v's producer to the cone and returns it, or
  /// null when the cone stops at v.
  Operation *visitCone(Group &g, Value v, llvm::SetVector<Operation *> &cone) {
    Operation *def = v.getDefiningOp();
    Group *source = groupOfValue(v);
    if (!def || !source || source == &g || !source->isCheapOnly() ||
        g.pulled.contains(def) || cone.contains(def))
      return nullptr;
    bool intoContraction = g.anchor && roleOf(g.anchor) == Role::Contraction;
    // A pure data-movement group is itself cloned into each of its
    // consumers: a shared elementwise producer pulled into it would be
    // computed once per consumer (a training step's bf16 copy of the flat
    // params, once per weight), so it stays one kernel instead.
    bool intoDataMovement =
        llvm::all_of(g.ops, [&](Operation *op) {
          return roleOf(op) == Role::DataMovement;
        });
    if (roleOf(def) == Role::Elementwise &&
        (intoContraction || intoDataMovement)) {
      // Only when nothing else needs the value.
      bool onlyUser = llvm::all_of(v.getUsers(), [&](Operation *user) {
        return groupOf.lookup(user) == &g || g.pulled.contains(user) ||
               cone.contains(user);
      });
      if (!onlyUser)
        return nullptr;
    }
    cone.insert(def);
    return def;
  }

  /// Makes the pulled producers members: a copy each, used by the group.
  void clonePulled(Group &g) {
    SmallVector<Operation *> pulled(g.pulled.begin(), g.pulled.end());
    llvm::sort(pulled, [&](Operation *x, Operation *y) {
      return order.lookup(x) < order.lookup(y);
    });
    // Earlier groups may have rewired these ops to their own copies: map
    // those copies too, so this group's copies only read each other.
    IRMapping mapping;
    for (Operation *op : pulled) {
      OpBuilder b(op->getContext());
      b.setInsertionPointAfter(op);
      Operation *copy = b.clone(*op, mapping);
      mapping.map(op->getResults(), copy->getResults());
      for (Operation *other : copiesOf[op])
        mapping.map(other->getResults(), copy->getResults());
      copiesOf[op].push_back(copy);
      order[copy] = order.lookup(op);
      groupOf[copy] = &g;
      g.ops.push_back(copy);
    }
    for (Operation *op : g.ops)
      for (OpOperand &operand : op->getOpOperands())
        if (Value copy = mapping.lookupOrNull(operand.get()))
          operand.set(copy);
    llvm::stable_sort(g.ops, [&](Operation *x, Operation *y) {
      return order.lookup(x) < order.lookup(y);
    });
    g.pulled.clear();
  }

  /// Step 4: matmuls of one shape reading one input run side by side.
  void mergeSideBySide() {
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      Group &a = *it;
      if (!a.alive || !a.anchor || !isa<MatmulOp>(a.anchor) || a.attention)
        continue;
      for (auto jt = std::next(it); jt != groups.end(); ++jt) {
        Group &b = *jt;
        if (!b.alive || !b.anchor || !isa<MatmulOp>(b.anchor) || b.attention ||
            a.size() + b.size() > kMaxOps ||
            a.root()->getResult(0).getType() !=
                b.root()->getResult(0).getType() ||
            a.anchor->getOperand(0) != b.anchor->getOperand(0) ||
            dependsOnGroup(a, b) || dependsOnGroup(b, a))
          continue;
        for (Operation *p : b.pulled)
          a.pulled.insert(p);
        mergeInto(a, b);
      }
    }
  }

  /// Builds the kiln.fusion ops.
  void materialize() {
    for (Group &g : groups)
      if (g.alive)
        clonePulled(g);
    // Members whose every user now reads a copy are dead: drop them before
    // they are moved into a region.
    for (bool changed = true; changed;) {
      changed = false;
      for (Group &g : groups)
        for (Operation *op : llvm::make_early_inc_range(llvm::reverse(g.ops)))
          if (op->use_empty() && isCheap(roleOf(op))) {
            llvm::erase(g.ops, op);
            groupOf.erase(op);
            op->erase();
            changed = true;
          }
    }
    for (Group &g : groups) {
      if (!g.alive || g.ops.empty())
        continue;
      // A cheap group every user cloned has no value left to store.
      SmallVector<Value> results = escaping(g);
      if (results.empty())
        continue;
      ArrayRef<int64_t> shape = shapeOf(results.front());
      if (llvm::any_of(results,
                       [&](Value v) { return shapeOf(v) != shape; })) {
        // Not formed by the rules above; keep the ops unfused.
        g.alive = false;
        continue;
      }
      build(g, results);
    }
  }

  void build(Group &g, ArrayRef<Value> results) {
    Operation *last = g.ops.back();
    OpBuilder b(last);
    auto fusion = FusionOp::create(b, last->getLoc(),
                                   ValueRange(results).getTypes(),
                                   b.getStringAttr(kindOf(g)));
    b.createBlock(&fusion.getBody());
    auto yield = YieldOp::create(b, last->getLoc(), results);

    for (Operation *op : g.ops)
      op->moveBefore(yield);
    for (auto [escaped, result] : llvm::zip(results, fusion.getResults()))
      Value(escaped).replaceUsesWithIf(result, [&](OpOperand &use) {
        return !fusion->isProperAncestor(use.getOwner());
      });
  }

  /// The region's kind: its contraction and row ops, in order, or what its
  /// cheap ops are.
  std::string kindOf(const Group &g) {
    if (g.attention)
      return "attention";
    SmallVector<StringRef> anchors;
    for (Operation *op : g.ops)
      if (!isCheap(roleOf(op)) &&
          !llvm::is_contained(anchors, op->getName().stripDialect()))
        anchors.push_back(op->getName().stripDialect());
    if (!anchors.empty())
      return llvm::join(anchors, "+");
    return llvm::any_of(g.ops,
                        [](Operation *op) {
                          return roleOf(op) == Role::Elementwise;
                        })
               ? "elementwise"
               : "data_movement";
  }

  /// Cheap ops every user cloned are left without uses.
  void eraseDeadCheapOps() {
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (op->use_empty() && isCheap(roleOf(op)))
        op->erase();
  }

  func::FuncOp func;
  bool fuseAttentionPatterns;
  DenseMap<Operation *, unsigned> order;
  DenseMap<Operation *, Group *> groupOf;
  DenseMap<Operation *, SmallVector<Operation *>> copiesOf;
  std::deque<Group> groups;
};

struct FusePass : kiln::impl::FusePassBase<FusePass> {
  using Base::Base;
  void runOnOperation() override {
    if (!getOperation().isExternal())
      FusionPlanner(getOperation(), attention).run();
  }
};
} // namespace
