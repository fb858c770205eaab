//===- TextHandlers.cpp - ONNX text featurisation -------------------------===//
//
// TfIdfVectorizer over integer tokens, as kiln comparisons and sums: for
// each n-gram length and skip distance, n shifted slices of the token rows
// are compared with the pool's n-grams ([batch, positions, n-grams]), the
// matches counted along the positions, and a constant 0/1 matrix sums the
// counts into the output slots ngram_indexes names. The pool is compile-time
// data, so the whole plan is fixed at import.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "WindowAttrs.h"

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

LogicalResult importTfIdfVectorizer(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)) ||
      failed(n.requireStringAttrIn("mode", "TF", {"TF", "IDF", "TFIDF"})))
    return failure();
  if (!n.stringsAttr("pool_strings").empty())
    return n.fail("pool_strings (string tokens) is not supported; integer "
                  "tokens (pool_int64s) are");
  RankedTensorType type = n.inputType(0);
  if (!isa<IntegerType>(type.getElementType()) || type.getRank() > 2)
    return n.fail("expects integer tokens [C] or [N, C]");
  int64_t minGram = n.intAttr("min_gram_length", 1);
  int64_t maxGram = n.intAttr("max_gram_length", 1);
  int64_t maxSkip = n.intAttr("max_skip_count", 0);
  SmallVector<int64_t> counts = n.intsAttr("ngram_counts");
  SmallVector<int64_t> indexes = n.intsAttr("ngram_indexes");
  SmallVector<int64_t> pool = n.intsAttr("pool_int64s");
  SmallVector<float> weights = n.floatsAttr("weights");
  if (minGram < 1 || maxGram < minGram || maxSkip < 0 || indexes.empty())
    return n.fail("expects 1 <= min_gram_length <= max_gram_length, "
                  "max_skip_count >= 0 and ngram_indexes");
  int64_t outputSize = *llvm::max_element(indexes) + 1;
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < outputSize)
    return n.fail("weights has " + Twine(weights.size()) +
                  " entries for an output of " + Twine(outputSize));

  // The pool's n-grams by length: (first pool item, count, first id).
  struct Level {
    int64_t length, start, grams, firstId;
  };
  SmallVector<Level> levels;
  int64_t id = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t start = counts[i];
    int64_t end = i + 1 < counts.size() ? counts[i + 1]
                                        : static_cast<int64_t>(pool.size());
    int64_t length = i + 1;
    if (start < 0 || end < start || end > static_cast<int64_t>(pool.size()) ||
        (end - start) % length)
      return n.fail("ngram_counts " + formatInts(counts) +
                    " does not split pool_int64s into whole n-grams");
    int64_t grams = (end - start) / length;
    levels.push_back({length, start, grams, id});
    id += grams;
  }
  if (id != static_cast<int64_t>(indexes.size()))
    return n.fail("ngram_indexes has " + Twine(indexes.size()) +
                  " entries for " + Twine(id) + " n-grams");

  Composer c(n);
  Type i64 = n.builder().getI64Type();
  Type f32 = n.builder().getF32Type();
  bool flat = type.getRank() <= 1;
  int64_t length = type.getRank() == 0 ? 1 : type.getShape().back();
  int64_t batch = type.getRank() == 2 ? type.getDimSize(0) : 1;
  Value tokens = c.reshape(c.cast(n.input(0), i64), {batch, length});
  // [batch, total n-grams] counts, one block per length.
  SmallVector<Value> blocks;
  for (const Level &level : levels) {
    if (level.grams == 0)
      continue;
    auto zeros = [&] {
      return c.constant(RankedTensorType::get({batch, level.grams}, f32),
                        {0.0});
    };
    if (level.length < minGram || level.length > maxGram) {
      blocks.push_back(zeros());
      continue;
    }
    Value sum;
    // Unigrams are counted once; longer n-grams once per skip distance.
    int64_t distances = level.length == 1 ? 1 : maxSkip + 1;
    for (int64_t d = 1; d <= distances; ++d) {
      int64_t positions = length - (level.length - 1) * d;
      if (positions <= 0)
        continue;
      Value match;
      for (int64_t k = 0; k < level.length; ++k) {
        Value shifted = c.reshape(
            c.sliceAxis(tokens, 1, k * d, k * d + positions),
            {batch, positions, 1});
        SmallVector<double> column;
        for (int64_t g = 0; g < level.grams; ++g)
          column.push_back(
              static_cast<double>(pool[level.start + g * level.length + k]));
        Value gram = c.constant(
            RankedTensorType::get({1, 1, level.grams}, i64), column);
        Value same = c.make<EqualOp>({shifted, gram});
        match = match ? c.make<AndOp>({match, same}) : same;
      }
      Value found = c.reduce(ReduceKind::Sum, c.cast(match, f32), {1},
                             /*keepdims=*/false);
      sum = sum ? c.make<AddOp>({sum, found}) : found;
    }
    blocks.push_back(sum ? sum : zeros());
  }
  Value frequencies = c.concat(blocks, 1); // [batch, n-grams]
  SmallVector<double> scatter(indexes.size() * outputSize, 0.0);
  for (auto [g, slot] : llvm::enumerate(indexes)) {
    if (slot < 0)
      return n.fail("ngram_indexes " + formatInts(indexes) +
                    " has a negative entry");
    scatter[g * outputSize + slot] = 1.0;
  }
  Value slots = c.make<MatmulOp>(
      {frequencies,
       c.constant(RankedTensorType::get(
                      {static_cast<int64_t>(indexes.size()), outputSize}, f32),
                  scatter)});
  std::string mode = n.stringAttr("mode", "TF");
  Value y = slots;
  if (mode != "TF") {
    SmallVector<double> w(outputSize, 1.0);
    for (int64_t i = 0; i < outputSize && !weights.empty(); ++i)
      w[i] = weights[i];
    Value weight =
        c.constant(RankedTensorType::get({outputSize}, f32), w);
    if (mode == "IDF")
      y = c.make<SelectOp>(
          {c.make<GreaterOp>({slots, c.scalar(f32, 0.0)}),
           c.broadcast(weight, {batch, outputSize}), c.scalar(f32, 0.0)});
    else
      y = c.make<MulOp>({slots, weight});
  }
  if (flat)
    y = c.reshape(y, {outputSize});
  return bindComposed(c, y);
}

} // namespace

void registerTextHandlers(SmallVectorImpl<Handler> &handlers) {
  handlers.append({
      {"TfIdfVectorizer", 9, importTfIdfVectorizer,
       "integer tokens only (no pool_strings)"},
  });
}

} // namespace kiln::onnx_frontend
