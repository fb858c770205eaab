//===- HandlerRegistry.cpp - ONNX op handlers by (op type, version) -------===//
//
// Fills the registry from each op family's register function, and lists it
// for kilnc --list-onnx-ops.
//
//===----------------------------------------------------------------------===//

#include "HandlerRegistry.h"

#include "kiln/Frontend/ONNX/Importer.h"

#include "llvm/ADT/STLExtras.h"

#include <tuple>

using namespace mlir;

namespace kiln::onnx_frontend {

HandlerRegistry::HandlerRegistry() {
  addFamily("elementwise", registerElementwiseHandlers);
  addFamily("contraction", registerContractionHandlers);
  addFamily("reduction & normalisation", registerReductionHandlers);
  addFamily("data movement", registerDataMovementHandlers);
  addFamily("shape & constants", registerShapeHandlers);
  addFamily("indexing", registerIndexingHandlers);
  addFamily("linear algebra", registerLinearAlgebraHandlers);
  addFamily("image", registerImageHandlers);
  addFamily("signal", registerSignalHandlers);
  addFamily("recurrent", registerRecurrentHandlers);
  addFamily("control flow", registerControlFlowHandlers);
  addFamily("random", registerRandomHandlers);
  addFamily("text", registerTextHandlers);
  addFamily("quantization", registerQuantizationHandlers);
  addFamily("quantization (com.microsoft, onnxruntime 1.20.1)",
            registerContribQuantizationHandlers);
  addFamily("loss", registerLossHandlers);
  addFamily("sequence & optional", registerSequenceHandlers);
  addFamily("training (ai.onnx.preview.training)", registerTrainingHandlers);
  addFamily("traditional ML (ai.onnx.ml)", registerMLHandlers);
  for (auto &entry : byOpType)
    llvm::sort(entry.second, [](const Handler &a, const Handler &b) {
      return a.sinceVersion < b.sinceVersion;
    });
}

void HandlerRegistry::addFamily(
    StringRef family, void (*registerFn)(SmallVectorImpl<Handler> &)) {
  SmallVector<Handler> handlers;
  registerFn(handlers);
  for (const Handler &h : handlers) {
    byOpType[h.opType].push_back(h);
    familyOf[h.opType] = family.str();
  }
}

std::vector<SupportedOp> listSupportedOps() {
  const HandlerRegistry &registry = HandlerRegistry::get();
  std::vector<SupportedOp> ops;
  for (const auto &entry : registry.all())
    for (const Handler &h : entry.second)
      ops.push_back({h.opType, h.sinceVersion,
                     registry.families().lookup(h.opType), h.limits});
  // The string ops have no handler: HostPartition.cpp moves them into host
  // steps before import (as it does Cast, CastLike, Identity, Equal,
  // Reshape, Squeeze and Unsqueeze on STRING tensors, and ai.onnx.ml's
  // LabelEncoder from or to strings, whose handler row says so).
  const char *hostFamily = "strings (host steps)";
  ops.push_back({"RegexFullMatch", 20, hostFamily,
                 "RE2 syntax; the pattern is checked at compile time"});
  ops.push_back({"StringConcat", 20, hostFamily, ""});
  ops.push_back({"StringNormalizer", 10, hostFamily,
                 "case change for ASCII, Latin-1, Greek and Cyrillic letters "
                 "whatever the locale"});
  ops.push_back({"StringSplit", 20, hostFamily, ""});
  llvm::sort(ops, [](const SupportedOp &a, const SupportedOp &b) {
    return std::tie(a.opType, a.sinceVersion) <
           std::tie(b.opType, b.sinceVersion);
  });
  return ops;
}

} // namespace kiln::onnx_frontend
