//===- HandlerRegistry.h - ONNX op handlers by (op type, version) -*- C++
//-*-===//
//
// Every handler the importer has, keyed by op type and sorted by
// since-version, with the op family each belongs to (docs/onnx-ops.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERREGISTRY_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERREGISTRY_H

#include "NodeImporter.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace kiln::onnx_frontend {

/// Handlers by op type, each list sorted by since-version.
class HandlerRegistry {
public:
  static const HandlerRegistry &get() {
    static const HandlerRegistry registry;
    return registry;
  }

  /// The handler for `opType` at `opset`: the newest whose since-version is
  /// at most `opset`. Null when there is none.
  const Handler *lookup(llvm::StringRef opType, int64_t opset) const {
    auto it = byOpType.find(opType);
    if (it == byOpType.end())
      return nullptr;
    const Handler *best = nullptr;
    for (const Handler &h : it->second)
      if (h.sinceVersion <= opset)
        best = &h;
    return best;
  }
  /// The oldest opset any handler of `opType` supports, or 0.
  int firstVersion(llvm::StringRef opType) const {
    auto it = byOpType.find(opType);
    return it == byOpType.end() ? 0 : it->second.front().sinceVersion;
  }

  const llvm::StringMap<llvm::SmallVector<Handler>> &all() const {
    return byOpType;
  }
  const llvm::StringMap<std::string> &families() const { return familyOf; }

private:
  HandlerRegistry();
  void addFamily(llvm::StringRef family,
                 void (*registerFn)(llvm::SmallVectorImpl<Handler> &));

  llvm::StringMap<llvm::SmallVector<Handler>> byOpType;
  llvm::StringMap<std::string> familyOf;
};

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERREGISTRY_H
