//===- DeviceLoops.h - Device-side loops in the launch list ----*- C++ -*-===//
//
// The artifact builder's first step for a model with device-side loops
// (`func.call`s of bodies marked `kiln.device_loop`, DeviceLoop.cpp): each
// call becomes, in place, copy launches that load the loop state, the
// body's ops (its launches), copy launches that carry the next state back,
// and copies of the final state into the call's out-parameters. The body's
// range of launches becomes a While region of the artifact (format 1.12,
// `control-regions`), which the runtime repeats while the flag buffer's
// byte is nonzero.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_CUDA_DEVICELOOPS_H
#define KILN_TARGET_CUDA_DEVICELOOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace kiln {

/// One expanded loop: the ops after `before` up to `last` (inclusive, in
/// the host function's block) are its body; `flag` is its flag buffer.
struct ExpandedDeviceLoop {
  mlir::Operation *before = nullptr;
  mlir::Operation *last = nullptr;
  mlir::Value flag;
};

/// Expands every device-loop call in `host` (after kernel outlining, before
/// the artifact is built), nested loops included, and erases the bodies'
/// functions. Outer loops come before the loops they contain. Adds the
/// copy kernel's gpu.binary to the module when a loop needs it.
llvm::Expected<std::vector<ExpandedDeviceLoop>>
expandDeviceLoops(mlir::func::FuncOp host);

} // namespace kiln

#endif // KILN_TARGET_CUDA_DEVICELOOPS_H
