//===- ElementwiseHandlers.cpp - ONNX Elementwise op handlers -------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {

void registerElementwiseHandlers(SmallVectorImpl<Handler> &handlers) {}

} // namespace kiln::onnx_frontend
