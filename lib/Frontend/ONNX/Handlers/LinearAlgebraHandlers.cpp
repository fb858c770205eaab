//===- LinearAlgebraHandlers.cpp - ONNX Einsum and Det --------------------===//
//
// Einsum is planned at import into kiln ops: diagonals (a label repeated in
// one operand) become a strided slice of the flattened pair of dimensions,
// labels no one else needs are summed out with kiln.reduce, and each pair of
// operands is one kiln.matmul over [batch, kept, contracted] x [batch,
// contracted, kept] layouts made with kiln.transpose and kiln.reshape, so
// contractions reach the tensor-core templates. Det expands small matrices
// by the Leibniz formula.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "WindowAttrs.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

/// A label: a letter's character code, or kEllipsisBase + j for the j-th
/// dimension covered by "..." (right-aligned across operands, as numpy
/// broadcasts them).
using Label = int;
constexpr Label kEllipsisBase = 256;

/// One operand during planning: its value and the label of each dimension.
struct Term {
  Value value;
  SmallVector<Label> labels;
};

/// Parses one side of the equation ("ij", "...ii", "b...j") for an operand
/// of `rank` (or, for the output, rank -1: the ellipsis covers
/// `ellipsisRank` labels). Fails with a message in `error`.
FailureOr<SmallVector<Label>> parseTerm(StringRef text, int64_t rank,
                                        int64_t ellipsisRank,
                                        std::string &error) {
  SmallVector<Label> labels;
  int64_t letters = 0;
  bool ellipsis = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (ellipsis || !text.substr(i).starts_with("...")) {
        error = "term '" + text.str() + "' has a malformed or second '...'";
        return failure();
      }
      ellipsis = true;
      i += 2;
      continue;
    }
    if (!llvm::isAlpha(c)) {
      error = "term '" + text.str() + "' has character '" + std::string(1, c) +
              "' (only letters and '...' are allowed)";
      return failure();
    }
    ++letters;
  }
  int64_t covered = rank < 0 ? ellipsisRank : rank - letters;
  if (rank >= 0 && (covered < 0 || (!ellipsis && covered != 0))) {
    error = "term '" + text.str() + "' has " + std::to_string(letters) +
            " labels for an operand of rank " + std::to_string(rank);
    return failure();
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.') {
      for (int64_t j = ellipsisRank - covered; j < ellipsisRank; ++j)
        labels.push_back(kEllipsisBase + j);
      i += 2;
      continue;
    }
    labels.push_back(static_cast<unsigned char>(text[i]));
  }
  return labels;
}

class EinsumPlanner {
public:
  EinsumPlanner(NodeImporter &n) : n(n), c(n) {}

  LogicalResult run() {
    std::string equation = n.stringAttr("equation", "");
    equation.erase(llvm::remove_if(equation, llvm::isSpace), equation.end());
    if (equation.empty())
      return n.fail("missing attribute 'equation'");
    StringRef lhs = equation, rhs;
    bool explicitOutput = false;
    if (size_t arrow = equation.find("->"); arrow != std::string::npos) {
      lhs = StringRef(equation).take_front(arrow);
      rhs = StringRef(equation).drop_front(arrow + 2);
      explicitOutput = true;
    }
    SmallVector<StringRef> inputTerms;
    lhs.split(inputTerms, ',');
    if (inputTerms.size() != n.numInputs())
      return n.fail("equation '" + equation + "' names " +
                    Twine(inputTerms.size()) + " operands, the node has " +
                    Twine(n.numInputs()));

    // Ellipsis rank: the most dimensions any operand's "..." covers.
    int64_t ellipsisRank = 0;
    for (auto [i, text] : llvm::enumerate(inputTerms)) {
      int64_t letters = llvm::count_if(text, llvm::isAlpha);
      if (text.contains("..."))
        ellipsisRank =
            std::max(ellipsisRank, n.inputType(i).getRank() - letters);
    }
    std::string error;
    for (auto [i, text] : llvm::enumerate(inputTerms)) {
      if (!n.hasInput(i))
        return n.fail("input " + Twine(i) + " is missing");
      FailureOr<SmallVector<Label>> labels =
          parseTerm(text, n.inputType(i).getRank(), ellipsisRank, error);
      if (failed(labels))
        return n.fail(error);
      terms.push_back({n.input(i), *labels});
    }
    if (explicitOutput) {
      FailureOr<SmallVector<Label>> labels =
          parseTerm(rhs, -1, ellipsisRank, error);
      if (failed(labels))
        return n.fail(error);
      output = *labels;
      llvm::SmallSet<Label, 8> seen;
      for (Label l : output)
        if (!seen.insert(l).second)
          return n.fail("output term '" + rhs.str() + "' repeats a label");
    } else {
      // Implicit output: the ellipsis, then the letters used once, sorted.
      std::map<Label, int> uses;
      for (const Term &t : terms)
        for (Label l : t.labels)
          ++uses[l];
      for (int64_t j = 0; j < ellipsisRank; ++j)
        output.push_back(kEllipsisBase + j);
      for (auto [l, count] : uses)
        if (l < kEllipsisBase && count == 1)
          output.push_back(l);
    }
    if (failed(collectSizes()))
      return failure();
    for (Label l : output)
      if (!sizes.count(l))
        return n.fail("output label '" + labelName(l) +
                      "' appears in no input");

    for (Term &t : terms)
      takeDiagonals(t);
    Term acc = terms.front();
    for (size_t i = 1; i < terms.size(); ++i) {
      sumUnneeded(acc, i);
      Term next = terms[i];
      sumUnneeded(next, i + 1, &acc);
      acc = contract(acc, next, i + 1);
    }
    sumUnneeded(acc, terms.size());
    Value result = arrangeAsOutput(acc);
    return bindComposed(c, result);
  }

private:
  static std::string labelName(Label l) {
    return l < kEllipsisBase ? std::string(1, static_cast<char>(l))
                             : "...[" + std::to_string(l - kEllipsisBase) + "]";
  }

  /// Each label's extent; operands may disagree only where one has 1.
  LogicalResult collectSizes() {
    for (const Term &t : terms) {
      ArrayRef<int64_t> shape = typeOf(t.value).getShape();
      for (auto [d, l] : llvm::enumerate(t.labels)) {
        int64_t &size = sizes[l];
        if (size == 0 || size == 1)
          size = std::max<int64_t>(size, shape[d]);
        else if (shape[d] != size && shape[d] != 1)
          return n.fail("label '" + labelName(l) + "' has extents " +
                        Twine(size) + " and " + Twine(shape[d]));
      }
    }
    return success();
  }

  /// Whether `l` is needed after the operands before `from` are combined:
  /// by the output or an operand at index >= from.
  bool neededFrom(Label l, size_t from) const {
    if (llvm::is_contained(output, l))
      return true;
    for (size_t i = from; i < terms.size(); ++i)
      if (llvm::is_contained(terms[i].labels, l))
        return true;
    return false;
  }

  /// A label repeated in one operand keeps only the diagonal: the two
  /// dimensions go last, merge into one of n*n, and a slice with step n+1
  /// picks the diagonal.
  void takeDiagonals(Term &t) {
    for (size_t i = 0; i < t.labels.size(); ++i) {
      for (size_t j = i + 1; j < t.labels.size(); ++j) {
        if (t.labels[i] != t.labels[j])
          continue;
        SmallVector<int64_t> perm;
        SmallVector<Label> labels;
        for (size_t d = 0; d < t.labels.size(); ++d)
          if (d != i && d != j) {
            perm.push_back(d);
            labels.push_back(t.labels[d]);
          }
        perm.push_back(i);
        perm.push_back(j);
        Value moved = c.transpose(t.value, perm);
        if (!moved)
          return;
        SmallVector<int64_t> shape(typeOf(moved).getShape());
        int64_t a = shape[shape.size() - 2], b = shape.back();
        if (a != b) {
          c.fail("label '" + labelName(t.labels[i]) +
                 "' repeated in one operand has extents " + Twine(a) +
                 " and " + Twine(b));
          return;
        }
        shape.pop_back();
        shape.back() = a * a;
        Value flat = c.reshape(moved, shape);
        t.value = c.sliceAxis(flat, shape.size() - 1, 0, a * a, a + 1);
        labels.push_back(t.labels[i]);
        t.labels = labels;
        takeDiagonals(t);
        return;
      }
    }
  }

  /// Sums out the labels of `t` needed neither from operand `from` on nor
  /// by `other` (the operand it is about to be combined with).
  void sumUnneeded(Term &t, size_t from, const Term *other = nullptr) {
    SmallVector<int64_t> axes;
    SmallVector<Label> kept;
    for (auto [d, l] : llvm::enumerate(t.labels)) {
      bool needed = neededFrom(l, from) ||
                    (other && llvm::is_contained(other->labels, l));
      if (needed)
        kept.push_back(l);
      else
        axes.push_back(d);
    }
    if (axes.empty())
      return;
    t.value = c.reduce(ReduceKind::Sum, t.value, axes, /*keepdims=*/false);
    t.labels = kept;
  }

  /// `t` with its dimensions ordered as `labels` and every label at its full
  /// extent (a size-1 dimension broadcast where the other operand is wider).
  Value arrange(const Term &t, ArrayRef<Label> labels) {
    SmallVector<int64_t> perm;
    for (Label l : labels)
      perm.push_back(llvm::find(t.labels, l) - t.labels.begin());
    Value moved = c.transpose(t.value, perm);
    SmallVector<int64_t> full;
    for (Label l : labels)
      full.push_back(sizes.lookup(l));
    return c.broadcast(moved, full);
  }

  /// a and b become one operand: batch labels (in both, still needed) stay,
  /// contracted labels (in both, not needed) are summed by a matmul.
  Term contract(const Term &a, const Term &b, size_t from) {
    SmallVector<Label> batch, contracted, aOnly, bOnly;
    for (Label l : a.labels) {
      if (!llvm::is_contained(b.labels, l))
        aOnly.push_back(l);
      else if (neededFrom(l, from))
        batch.push_back(l);
      else
        contracted.push_back(l);
    }
    for (Label l : b.labels)
      if (!llvm::is_contained(a.labels, l))
        bOnly.push_back(l);
    auto extent = [&](ArrayRef<Label> labels) {
      int64_t p = 1;
      for (Label l : labels)
        p *= sizes.lookup(l);
      return p;
    };
    SmallVector<Label> aOrder(batch), bOrder(batch);
    llvm::append_range(aOrder, aOnly);
    llvm::append_range(aOrder, contracted);
    llvm::append_range(bOrder, contracted);
    llvm::append_range(bOrder, bOnly);
    int64_t bs = extent(batch), m = extent(aOnly), k = extent(contracted),
            nn = extent(bOnly);
    Value lhs = c.reshape(arrange(a, aOrder), {bs, m, k});
    Value rhs = c.reshape(arrange(b, bOrder), {bs, k, nn});
    Value product = c.make<MatmulOp>({lhs, rhs});
    Term result;
    result.labels = batch;
    llvm::append_range(result.labels, aOnly);
    llvm::append_range(result.labels, bOnly);
    SmallVector<int64_t> shape;
    for (Label l : result.labels)
      shape.push_back(sizes.lookup(l));
    result.value = c.reshape(product, shape);
    return result;
  }

  Value arrangeAsOutput(const Term &t) {
    if (!t.value)
      return {};
    return arrange(t, output);
  }

  NodeImporter &n;
  Composer c;
  SmallVector<Term> terms;
  SmallVector<Label> output;
  llvm::DenseMap<Label, int64_t> sizes;
};

LogicalResult importEinsum(NodeImporter &n) {
  if (n.numInputs() < 1)
    return n.fail("expects at least one input");
  return EinsumPlanner(n).run();
}

//===----------------------------------------------------------------------===//
// Det
//===----------------------------------------------------------------------===//

/// Matrices up to this size expand by the Leibniz formula (n! products of n
/// elements: 24 for 4x4).
constexpr int64_t kMaxLeibnizSize = 4;

/// det of [..., n, n]: the sum over permutations s of sign(s) * prod_i
/// a[i, s(i)], each element a slice of the input, so the whole expansion is
/// elementwise work over the batch.
LogicalResult importDet(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 2 || type.getDimSize(rank - 1) != type.getDimSize(rank - 2))
    return n.fail("expects [..., n, n] matrices, got shape " +
                  formatInts(type.getShape()));
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("expects floating-point matrices");
  int64_t size = type.getDimSize(rank - 1);
  if (size > kMaxLeibnizSize)
    return n.fail(Twine(size) + "x" + Twine(size) +
                  " matrices are not supported (at most " +
                  Twine(kMaxLeibnizSize) + "x" + Twine(kMaxLeibnizSize) + ")");
  Composer c(n);
  Type elementType = type.getElementType();
  SmallVector<int64_t> batch(type.getShape().drop_back(2));
  if (size == 0)
    return bindComposed(c, c.broadcast(c.scalar(elementType, 1.0), batch));
  // element(i, j) = x[..., i, j] with the two matrix dims dropped.
  auto element = [&](int64_t i, int64_t j) {
    SmallVector<int64_t> starts(rank, 0), limits(type.getShape());
    starts[rank - 2] = i;
    limits[rank - 2] = i + 1;
    starts[rank - 1] = j;
    limits[rank - 1] = j + 1;
    return c.reshape(c.slice(n.input(0), starts, limits), batch);
  };
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, size));
  Value sum;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = i + 1; j < size; ++j)
        inversions += perm[i] > perm[j];
    Value term = element(0, perm[0]);
    for (int64_t i = 1; i < size; ++i)
      term = c.make<MulOp>({term, element(i, perm[i])});
    if (!sum)
      sum = inversions % 2 ? c.make<NegOp>(term) : term;
    else
      sum = inversions % 2 ? c.make<SubOp>({sum, term})
                           : c.make<AddOp>({sum, term});
  } while (std::next_permutation(perm.begin(), perm.end()));
  return bindComposed(c, sum);
}

} // namespace

void registerLinearAlgebraHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"Einsum", 12, importEinsum, ""},
      {"Det", 11, importDet, "matrices up to 4x4 (Leibniz expansion)"},
  });
}

} // namespace kiln::onnx_frontend
