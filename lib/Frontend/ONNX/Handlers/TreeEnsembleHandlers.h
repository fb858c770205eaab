//===- TreeEnsembleHandlers.h - ai.onnx.ml's tree ensembles -----*- C++ -*-===//
//
// TreeEnsemble (opset 5) and TreeEnsembleRegressor (opsets 1 and 3), both
// normalised to one description and composed the same way
// (TreeEnsembleHandlers.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_TREEENSEMBLEHANDLERS_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_TREEENSEMBLEHANDLERS_H

#include "../NodeImporter.h"

namespace kiln::onnx_frontend {

void registerTreeEnsembleHandlers(llvm::SmallVectorImpl<Handler> &handlers);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_TREEENSEMBLEHANDLERS_H
