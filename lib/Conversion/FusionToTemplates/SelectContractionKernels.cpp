//===- SelectContractionKernels.cpp - Decide each region's template kernel ===//
//
// kiln-select-contraction-kernels: for every fusion region anchored on a
// matmul, a convolution or attention, decide which template kernel computes
// it and how it is tiled, and record that as a typed attribute on the region
// (`kiln.kernel`, KilnKernelAttrs.td), or why it keeps a generic kernel
// (`kiln.generic_reason`). Configs come from the tune cache, tuning
// (ContractionTuning.h) or the heuristic (`pickConfig`). Nothing is compiled
// here, so the selection is testable without NVRTC; kiln-match-contractions
// follows the attributes. The only structural changes are the splits that
// define what a kernel is: side-by-side matmuls into one region each, an
// attention region that no kernel fits into its scores and its P V product.
//
//===----------------------------------------------------------------------===//

#include "KernelConfigAttrs.h"
#include "RegionMatcher.h"

#include "kiln/Conversion/Passes.h"
#include "kiln/Target/CUDA/Nvrtc.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cstdlib>

namespace kiln {
#define GEN_PASS_DEF_SELECTCONTRACTIONKERNELSPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct SelectContractionKernelsPass
    : kiln::impl::SelectContractionKernelsPassBase<
          SelectContractionKernelsPass> {
  using Base::Base;
  void runOnOperation() override;
};

void SelectContractionKernelsPass::runOnOperation() {
  using kiln::templates::Matcher;
  ModuleOp module = getOperation();
  MLIRContext *ctx = module.getContext();
  unsigned sm = 0;
  if (StringRef digits = chip; digits.consume_front("sm_"))
    (void)digits.getAsInteger(10, sm);
  if (sm != 80 && sm != 90) {
    module.emitError() << "kiln-select-contraction-kernels: chip '" << chip
                       << "' is not sm_80 or sm_90";
    return signalPassFailure();
  }
  // Without NVRTC no template kernel can be built: every region keeps its
  // generic kernel, saying why (kilnc asks for this check; a test of the
  // selection alone does not).
  std::string noNvrtc;
  if (checkNvrtc)
    if (kiln::runtime::Error err = kiln::nvrtc::available())
      noNvrtc = err.message();

  kiln::tuning::TuneOptions tuneOptions;
  tuneOptions.tune = tune;
  tuneOptions.device = tuneDevice;
  tuneOptions.cachePath = tuneCache;
  tuneOptions.maxCandidates = tuneMaxCandidates;
  tuneOptions.workerPath = tuneWorker;
  tuneOptions.timeoutSeconds = tuneTimeout;
  tuneOptions.exportDir = tuneExport;
  tuneOptions.importDir = tuneImport;
  tuneOptions.wgmma = wgmma;
  tuneOptions.tma = tma;
  // Test hook (docs/testing.md): the candidate at this index faults.
  if (const char *inject = std::getenv("KILN_TUNE_INJECT_FAULT"))
    tuneOptions.injectFault = std::atoi(inject);
  kiln::tuning::Tuner tuner(tuneOptions, sm, [&](const std::string &w) {
    module.emitWarning() << w;
  });
  Matcher matcher(module, sm, chip, Matcher::Mode::Select, &tuner);
  matcher.wgmma = wgmma;
  // Size buckets: where the one symbolic dim's range is cut.
  if (sizeBuckets != "off") {
    std::optional<Matcher::SymbolRange> range = matcher.singleRange();
    if (sizeBuckets == "auto") {
      if (range && range->max >= 16) {
        int64_t split = (range->max + 7) / 8;
        if (split >= range->min && split < range->max)
          matcher.sizeSplits.push_back(split);
      }
    } else {
      SmallVector<StringRef> parts;
      StringRef(sizeBuckets).split(parts, ',');
      for (StringRef part : parts) {
        int64_t split = 0;
        if (part.trim().getAsInteger(10, split) || !range ||
            split < range->min || split >= range->max ||
            (!matcher.sizeSplits.empty() &&
             split <= matcher.sizeSplits.back())) {
          module.emitError()
              << "kiln-select-contraction-kernels: size-buckets '"
              << sizeBuckets << "': '" << part.trim() << "' is not "
              << (range ? "a size in " + std::to_string(range->min) + ".." +
                              std::to_string(range->max - 1) +
                              " above the previous cut"
                        : std::string("usable: the module has no single "
                                      "symbolic dim (kilnc --dim)"))
              << " (off, auto, or increasing sizes: 4,16)";
          return signalPassFailure();
        }
        matcher.sizeSplits.push_back(split);
      }
    }
  }

  SmallVector<kiln::FusionOp> fusions;
  module.walk([&](kiln::FusionOp f) { fusions.push_back(f); });
  auto holds = [](kiln::FusionOp f, auto isAnchor) {
    return llvm::any_of(f.getBody().front(), isAnchor);
  };
  auto select = [&](kiln::FusionOp f) {
    if (!noNvrtc.empty())
      f->setAttr(kiln::templates::kGenericReasonAttr,
                 StringAttr::get(ctx, noNvrtc));
    else
      matcher.run(f);
  };
  for (kiln::FusionOp f : fusions) {
    // A config already in the IR (written by hand or by a tool) stands.
    if (f->hasAttr(kiln::templates::kKernelAttr))
      continue;
    if (f.getKind() == "attention") {
      if (!noNvrtc.empty() || !matcher.selectAttention(f)) {
        std::string note = noNvrtc.empty() ? matcher.attentionSplitNote
                                           : "attention split (" + noNvrtc +
                                                 ")";
        SmallVector<kiln::FusionOp> parts = kiln::templates::splitAttention(f);
        parts.front()->setAttr(
            kiln::templates::kSelectionNoteAttr,
            ArrayAttr::get(ctx, {StringAttr::get(ctx, note)}));
        for (kiln::FusionOp part : parts)
          select(part);
      }
      continue;
    }
    if (holds(f, [](Operation &op) { return isa<kiln::ConvOp>(op); }))
      select(f);
    else if (holds(f, [](Operation &op) { return isa<kiln::MatmulOp>(op); }))
      for (kiln::FusionOp part : kiln::templates::splitSideBySide(f))
        select(part);
  }
  if (!matcher.fatalError.empty()) {
    module.emitError() << matcher.fatalError;
    return signalPassFailure();
  }
  if (llvm::Error err = tuner.finish()) {
    module.emitError() << llvm::toString(std::move(err));
    return signalPassFailure();
  }
}

} // namespace
