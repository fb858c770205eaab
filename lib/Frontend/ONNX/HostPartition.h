//===- HostPartition.h - Move STRING nodes out to host steps ----*- C++ -*-===//
//
// Internal to the ONNX frontend. Nodes on STRING tensors have no kernel:
// splitHostSteps takes them out of the model's graph into a host program
// (kiln/runtime/HostSteps.h) before the graph is imported, and rewires the
// graph so that numbers cross between the two through graph inputs (values
// the host computes before the launches) and graph outputs (device results
// the host reads after them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HOSTPARTITION_H
#define KILN_LIB_FRONTEND_ONNX_HOSTPARTITION_H

#include "kiln/Frontend/ONNX/Importer.h"
#include "kiln/runtime/HostSteps.h"

#include "mlir/Support/LogicalResult.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace kiln::onnx_frontend {

/// Fills `program` and rewrites `model`'s graph without its host nodes.
/// Does nothing when the graph has no STRING tensor. On failure `error` is
/// one line naming the node or tensor (without the file).
mlir::LogicalResult splitHostSteps(onnx::ModelProto &model,
                                   const ImportOptions &options,
                                   llvm::StringRef baseDir,
                                   mlir::MLIRContext &context,
                                   runtime::HostProgram &program,
                                   std::string &error);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HOSTPARTITION_H
