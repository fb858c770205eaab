//===- DataMovementHandlers.cpp - ONNX DataMovement op handlers -------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {

void registerDataMovementHandlers(SmallVectorImpl<Handler> &handlers) {}

} // namespace kiln::onnx_frontend
