//===- WindowAttrs.h - Window attributes of conv and pooling ----*- C++ -*-===//
//
// Conv, ConvTranspose, MaxPool and AveragePool share kernel_shape, strides,
// dilations, pads and auto_pad. These helpers read them once, check their
// lengths, and turn auto_pad into the explicit padding kiln ops carry. ONNX
// `pads` and kiln `padding` share one order: every low pad, then every high
// pad.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_ONNX_HANDLERS_WINDOWATTRS_H
#define KILN_LIB_FRONTEND_ONNX_HANDLERS_WINDOWATTRS_H

#include "../NodeImporter.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <string>

namespace kiln::onnx_frontend {

/// The window attributes of one node, one entry per spatial dimension
/// (`padding`: two).
struct WindowAttrs {
  llvm::SmallVector<int64_t> kernel;
  llvm::SmallVector<int64_t> strides;
  llvm::SmallVector<int64_t> dilations;
  llvm::SmallVector<int64_t> padding;
  /// NOTSET, SAME_UPPER, SAME_LOWER or VALID.
  std::string autoPad;
};

/// "[1, 2, 3]", for error messages.
inline std::string formatInts(llvm::ArrayRef<int64_t> values) {
  return "[" +
         llvm::join(llvm::map_range(
                        values, [](int64_t v) { return std::to_string(v); }),
                    ", ") +
         "]";
}

/// Splits `total` padding between the low and high side of spatial dim `i`;
/// the odd element goes high when `extraHigh`.
inline void splitPadding(llvm::MutableArrayRef<int64_t> padding, size_t i,
                         int64_t total, bool extraHigh) {
  size_t spatial = padding.size() / 2;
  int64_t small = total / 2, big = total - small;
  padding[i] = extraHigh ? small : big;
  padding[spatial + i] = extraHigh ? big : small;
}

/// Reads the window attributes for `spatialRank` spatial dims. Conv passes
/// the kernel its filter implies (`kernel_shape`, when present, must agree);
/// pooling passes none, and `kernel_shape` is required. `padding` holds the
/// explicit `pads` (zero by default) whatever `auto_pad` says: resolving
/// auto_pad depends on the op (see resolveForwardPadding).
inline llvm::FailureOr<WindowAttrs>
readWindowAttrs(NodeImporter &n, size_t spatialRank,
                llvm::ArrayRef<int64_t> filterKernel = {}) {
  if (failed(n.requireStringAttrIn(
          "auto_pad", "NOTSET",
          {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"})))
    return mlir::failure();
  WindowAttrs w;
  w.autoPad = n.stringAttr("auto_pad", "NOTSET");
  w.kernel = n.intsAttr("kernel_shape");
  if (w.kernel.empty()) {
    w.kernel.assign(filterKernel.begin(), filterKernel.end());
  } else if (!filterKernel.empty() &&
             llvm::ArrayRef<int64_t>(w.kernel) != filterKernel) {
    return n.fail("kernel_shape " + formatInts(w.kernel) +
                  " differs from the weight's " + formatInts(filterKernel));
  }
  if (w.kernel.empty())
    return n.fail("missing attribute 'kernel_shape'");

  auto check = [&](llvm::StringRef name, llvm::ArrayRef<int64_t> values,
                   size_t size, int64_t minimum) -> mlir::LogicalResult {
    if (values.size() != size) {
      return n.fail(llvm::Twine(name) + " has " + llvm::Twine(values.size()) +
                    " entries, expected " + llvm::Twine(size));
    }
    if (llvm::any_of(values, [&](int64_t v) { return v < minimum; })) {
      return n.fail(llvm::Twine(name) + " " + formatInts(values) +
                    " must be at least " + llvm::Twine(minimum));
    }
    return mlir::success();
  };
  // Omitted strides, dilations and pads default to 1, 1 and 0.
  auto readOr = [&](llvm::StringRef name, size_t size, int64_t defaultValue) {
    return n.hasAttr(name) ? n.intsAttr(name)
                           : llvm::SmallVector<int64_t>(size, defaultValue);
  };
  w.strides = readOr("strides", spatialRank, 1);
  w.dilations = readOr("dilations", spatialRank, 1);
  w.padding = readOr("pads", 2 * spatialRank, 0);
  if (failed(check("kernel_shape", w.kernel, spatialRank, 1)) ||
      failed(check("strides", w.strides, spatialRank, 1)) ||
      failed(check("dilations", w.dilations, spatialRank, 1)) ||
      failed(check("pads", w.padding, 2 * spatialRank, 0)))
    return mlir::failure();
  return w;
}

/// Resolves auto_pad for ops whose windows slide over their input (Conv and
/// pooling): SAME_* pads so that `out = ceil(in / stride)`, the odd element at
/// the end for SAME_UPPER and at the start for SAME_LOWER; VALID pads nothing;
/// NOTSET keeps `pads`.
inline void resolveForwardPadding(WindowAttrs &w,
                                  llvm::ArrayRef<int64_t> spatialIn) {
  if (w.autoPad == "NOTSET")
    return;
  std::fill(w.padding.begin(), w.padding.end(), 0);
  if (w.autoPad == "VALID")
    return;
  for (size_t i = 0; i < spatialIn.size(); ++i) {
    int64_t out = (spatialIn[i] + w.strides[i] - 1) / w.strides[i];
    int64_t window = w.dilations[i] * (w.kernel[i] - 1) + 1;
    int64_t total =
        std::max<int64_t>(0, (out - 1) * w.strides[i] + window - spatialIn[i]);
    splitPadding(w.padding, i, total, /*extraHigh=*/w.autoPad == "SAME_UPPER");
  }
}

} // namespace kiln::onnx_frontend

#endif // KILN_LIB_FRONTEND_ONNX_HANDLERS_WINDOWATTRS_H
