//===- IndexingOps.cpp - Type inference of N-d gathers and scatters -------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

using namespace mlir;
using namespace kiln;

namespace {
/// Checks an index-tuple tensor against the input it addresses: rank >= 1,
/// a static tuple length `q` with `batchDims + q <= input rank`, and the
/// leading `batchDims` dimensions shared with the input. Returns `q`.
FailureOr<int64_t> checkIndexTuples(std::optional<Location> loc,
                                    RankedTensorType input,
                                    RankedTensorType indices,
                                    int64_t batchDims) {
  if (indices.getRank() < 1)
    return emitOptionalError(loc, "indices must have rank >= 1");
  if (batchDims < 0 || batchDims >= indices.getRank() ||
      batchDims >= input.getRank())
    return emitOptionalError(loc, "batch_dims ", batchDims,
                             " must be in [0, min(input rank, indices rank))");
  int64_t q = indices.getShape().back();
  if (ShapedType::isDynamic(q))
    return emitOptionalError(loc, "the last dimension of indices must be "
                                  "static");
  if (q < 1 || batchDims + q > input.getRank())
    return emitOptionalError(loc, "index tuples of length ", q,
                             " do not fit an input of rank ", input.getRank(),
                             " after ", batchDims, " batch dimensions");
  for (int64_t d = 0; d < batchDims; ++d)
    if (indices.getDimSize(d) != input.getDimSize(d))
      return emitOptionalError(loc, "batch dimension ", d, " of indices (",
                               indices.getDimSize(d), ") differs from the "
                               "input's (", input.getDimSize(d), ")");
  return q;
}
} // namespace

LogicalResult GatherNdOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  int64_t batchDims = adaptor.getBatchDims();
  FailureOr<int64_t> q = checkIndexTuples(loc, input, indices, batchDims);
  if (failed(q))
    return failure();
  SmallVector<int64_t> shape(indices.getShape().drop_back());
  llvm::append_range(shape, input.getShape().drop_front(batchDims + *q));
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ScatterNdOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto input = cast<RankedTensorType>(adaptor.getInput().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  auto updates = cast<RankedTensorType>(adaptor.getUpdates().getType());
  if (indices.getRank() < 1)
    return emitOptionalError(loc, "indices must have rank >= 1");
  int64_t q = indices.getShape().back();
  if (ShapedType::isDynamic(q) || q < 1 || q > input.getRank())
    return emitOptionalError(loc, "index tuples of length ", q,
                             " do not fit an input of rank ", input.getRank());
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, input.getShape().drop_front(q));
  if (updates.getShape() != ArrayRef<int64_t>(expected) ||
      updates.getElementType() != input.getElementType())
    return emitOptionalError(
        loc, "updates must have shape indices.shape[:-1] + input.shape[q:] (",
        RankedTensorType::get(expected, input.getElementType()),
        ") and the input's element type, got ", updates);
  types.push_back(input);
  return success();
}
