//===- KernelConfigAttrs.cpp - Template configs <-> kiln attributes -------===//

#include "KernelConfigAttrs.h"

using namespace mlir;
namespace cx = kiln::contraction;

namespace kiln::templates {

namespace {
GemmFamily toAttrFamily(cx::Family family) {
  switch (family) {
  case cx::Family::MmaF16:
    return GemmFamily::MmaF16;
  case cx::Family::MmaTf32:
    return GemmFamily::MmaTf32;
  case cx::Family::SimtF32:
    return GemmFamily::SimtF32;
  case cx::Family::WgmmaF16:
    return GemmFamily::WgmmaF16;
  case cx::Family::WgmmaTf32:
    return GemmFamily::WgmmaTf32;
  case cx::Family::MmaS8:
    return GemmFamily::MmaS8;
  case cx::Family::MmaF8:
    return GemmFamily::MmaF8;
  case cx::Family::WgmmaF8:
    return GemmFamily::WgmmaF8;
  case cx::Family::WgmmaS8:
    return GemmFamily::WgmmaS8;
  }
  llvm_unreachable("unknown family");
}

cx::Family fromAttrFamily(GemmFamily family) {
  switch (family) {
  case GemmFamily::MmaF16:
    return cx::Family::MmaF16;
  case GemmFamily::MmaTf32:
    return cx::Family::MmaTf32;
  case GemmFamily::SimtF32:
    return cx::Family::SimtF32;
  case GemmFamily::WgmmaF16:
    return cx::Family::WgmmaF16;
  case GemmFamily::WgmmaTf32:
    return cx::Family::WgmmaTf32;
  case GemmFamily::MmaS8:
    return cx::Family::MmaS8;
  case GemmFamily::MmaF8:
    return cx::Family::MmaF8;
  case GemmFamily::WgmmaF8:
    return cx::Family::WgmmaF8;
  case GemmFamily::WgmmaS8:
    return cx::Family::WgmmaS8;
  }
  llvm_unreachable("unknown family");
}
} // namespace

GemmConfigAttr toAttr(MLIRContext *ctx, const cx::GemmConfig &c) {
  GemmFamily family = toAttrFamily(c.family);
  bool simt = c.family == cx::Family::SimtF32;
  return GemmConfigAttr::get(
      ctx, family, c.blockM, c.blockN, c.blockK, simt ? c.threadM : c.warpM,
      simt ? c.threadN : c.warpN, c.stages, c.splitK,
      c.tma ? GemmProducer::Tma : GemmProducer::CpAsync,
      GemmConfigAttr::swizzleOf(family));
}

cx::GemmConfig fromAttr(GemmConfigAttr attr) {
  cx::GemmConfig c;
  c.family = fromAttrFamily(attr.getFamily());
  c.blockM = attr.getBlockM();
  c.blockN = attr.getBlockN();
  c.blockK = attr.getBlockK();
  if (c.family == cx::Family::SimtF32) {
    c.threadM = attr.getSubM();
    c.threadN = attr.getSubN();
  } else {
    c.warpM = attr.getSubM();
    c.warpN = attr.getSubN();
  }
  c.stages = attr.getStages();
  c.splitK = attr.getSplitK();
  c.tma = attr.getProducer() == GemmProducer::Tma;
  return c;
}

DepthwiseConfigAttr toAttr(MLIRContext *ctx, const cx::DepthwiseConfig &c) {
  return DepthwiseConfigAttr::get(ctx, c.vector, c.pixels);
}

cx::DepthwiseConfig fromAttr(DepthwiseConfigAttr attr) {
  return {static_cast<uint32_t>(attr.getVector()),
          static_cast<uint32_t>(attr.getPixels())};
}

AttentionConfigAttr toAttr(MLIRContext *ctx, const cx::AttentionConfig &c,
                           bool tensorCores) {
  AttentionFamily family = c.wgmma       ? AttentionFamily::WgmmaF16
                           : tensorCores ? AttentionFamily::MmaF16
                                         : AttentionFamily::SimtF32;
  return AttentionConfigAttr::get(ctx, family, c.blockM, c.blockN, c.warps,
                                  c.wgmma ? c.stages : 2);
}

cx::AttentionConfig fromAttr(AttentionConfigAttr attr) {
  cx::AttentionConfig c;
  c.wgmma = attr.getFamily() == AttentionFamily::WgmmaF16;
  c.blockM = attr.getBlockM();
  c.blockN = attr.getBlockN();
  c.warps = attr.getWarps();
  c.stages = attr.getStages();
  return c;
}

} // namespace kiln::templates
