//===- ContractionHandlers.cpp - ONNX Contraction op handlers -------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {

void registerContractionHandlers(SmallVectorImpl<Handler> &handlers) {}

} // namespace kiln::onnx_frontend
