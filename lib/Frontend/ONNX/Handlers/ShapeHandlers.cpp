//===- ShapeHandlers.cpp - ONNX Shape op handlers -------------------------===//

#include "../NodeImporter.h"

using namespace mlir;

namespace kiln::onnx_frontend {

void registerShapeHandlers(SmallVectorImpl<Handler> &handlers) {}

} // namespace kiln::onnx_frontend
