//===- ConvProblem.cpp - An NHWC convolution as an implicit GEMM ----------===//
//
// The GEMM view: rows are output pixels (n, p, q), columns output channels
// of one group, K runs over (kh, kw, c) with c innermost and padded to the
// 16-byte chunk, so every chunk the kernel copies is 8 (or 4) channels of
// one input pixel: contiguous in NHWC, zero-filled where the window falls
// in the padding or past the group's channels. Groups are the batch.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include <cstring>

namespace kiln::contraction {

uint64_t paddedGroupChannels(const ConvProblem &p) {
  uint64_t chunk = 16 / std::max<uint32_t>(dtypeBytes(p.inputType), 1);
  uint64_t cg = p.groups ? p.c / p.groups : p.c;
  return (cg + chunk - 1) / chunk * chunk;
}

GemmProblem convolutionAsGemm(const ConvProblem &p) {
  GemmProblem g;
  ImplicitConv &conv = g.conv;
  conv.enabled = true;
  conv.h = p.h, conv.w = p.w, conv.c = p.c;
  conv.kh = p.kh, conv.kw = p.kw;
  conv.strideH = p.strideH, conv.strideW = p.strideW;
  conv.padH = p.padH, conv.padW = p.padW;
  conv.dilationH = p.dilationH, conv.dilationW = p.dilationW;
  uint32_t groups = std::max<uint32_t>(p.groups, 1);
  conv.groupChannels = p.c / groups;
  conv.paddedGroupChannels = paddedGroupChannels(p);
  auto outSize = [](uint64_t in, uint32_t k, uint32_t stride, uint32_t pad0,
                    uint32_t pad1, uint32_t dilation) -> uint64_t {
    int64_t span = int64_t(dilation) * (k - 1) + 1;
    int64_t padded = int64_t(in) + pad0 + pad1;
    return padded < span || !stride ? 0
                                    : uint64_t((padded - span) / stride + 1);
  };
  conv.p =
      p.p ? p.p
          : outSize(p.h, p.kh, p.strideH, p.padH, p.padBottom, p.dilationH);
  conv.q = p.q ? p.q
               : outSize(p.w, p.kw, p.strideW, p.padW, p.padRight, p.dilationW);

  g.m = p.n * conv.p * conv.q;
  g.n = p.o / groups;
  g.k = uint64_t(p.kh) * p.kw * conv.paddedGroupChannels;
  g.batch = groups;
  g.inputType = p.inputType;
  g.inputTypeB = p.inputType; // the 8-bit families: the filter's type too
  g.outputType = p.outputType;
  g.layoutA = Layout::RowMajor; // A's addressing is the convolution's
  g.lda = g.k;
  g.layoutB = Layout::ColMajor; // the filter is [O][K]
  g.ldb = g.k;
  g.ldc = p.o;
  g.batchStrideA = conv.groupChannels; // a group's first input channel
  g.batchStrideB = g.n * g.k;
  g.batchStrideC = g.n;
  g.alignA = p.alignX, g.alignB = p.alignFilter, g.alignC = p.alignY;
  return g;
}

std::vector<uint8_t> reorderConvFilter(const ConvProblem &p, const void *oihw,
                                       size_t elementBytes) {
  uint32_t groups = std::max<uint32_t>(p.groups, 1);
  uint64_t cg = p.c / groups, cp = paddedGroupChannels(p);
  std::vector<uint8_t> out(p.o * p.kh * p.kw * cp * elementBytes, 0);
  const auto *in = static_cast<const uint8_t *>(oihw);
  for (uint64_t o = 0; o < p.o; ++o)
    for (uint64_t c = 0; c < cg; ++c)
      for (uint64_t y = 0; y < p.kh; ++y)
        for (uint64_t x = 0; x < p.kw; ++x) {
          uint64_t from = ((o * cg + c) * p.kh + y) * p.kw + x;
          uint64_t to = ((o * p.kh + y) * p.kw + x) * cp + c;
          std::memcpy(&out[to * elementBytes], &in[from * elementBytes],
                      elementBytes);
        }
  return out;
}

} // namespace kiln::contraction
