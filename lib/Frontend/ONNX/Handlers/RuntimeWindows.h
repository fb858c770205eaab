//===- RuntimeWindows.h - Slice and Pad windows given at run time -*- C++
//-*-===//
//
// Private to the ONNX handlers (issue 24; docs/runtime.md "Shape inputs at
// run time"). Slice's starts, ends, axes and steps, and Pad's pads,
// constant_value and axes, passed as graph inputs. The declared output
// shape fixes the extents; the values still decide which elements are read
// (a Slice of 3 rows may start at row 0 or row 5), so the device computes,
// per dimension, the index of every output element from them and gathers
// along it. A ShapeGuard (kinds `slice`, `pad`) checks before the launches
// that the values give the compiled shape.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEWINDOWS_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEWINDOWS_H

#include "../NodeImporter.h"

#include <optional>

namespace kiln::onnx_frontend {

/// Slice-10 and later with starts, ends, axes or steps given at run time.
/// Nothing when every one is a constant, or one cannot be taken at run time
/// (not a guardable graph input, no declared output shape, an empty
/// dimension): the handler then asks for a constant.
std::optional<mlir::LogicalResult> importRuntimeSlice(NodeImporter &n);

/// Pad-11 and later with pads, constant_value or axes given at run time, in
/// `mode` (constant, edge, reflect or wrap). Nothing as for Slice.
std::optional<mlir::LogicalResult> importRuntimePad(NodeImporter &n,
                                                    llvm::StringRef mode);

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_RUNTIMEWINDOWS_H
