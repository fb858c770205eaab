//===- ReductionHandlers.cpp - ONNX Reduction op handlers -------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {

void registerReductionHandlers(SmallVectorImpl<Handler> &handlers) {}

} // namespace kiln::onnx_frontend
