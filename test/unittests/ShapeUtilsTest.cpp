//===- ShapeUtilsTest.cpp - Shape rules shared by the kiln ops
//--------------===//
//
// Expected values follow numpy's broadcasting rules and PyTorch's documented
// pooling output formula, worked by hand in the comments.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include <gtest/gtest.h>

using kiln::broadcastShapes;
using kiln::normalizeAxis;
using kiln::windowOutputSize;

namespace {

TEST(BroadcastShapes, TrailingDimensionsAlign) {
  // numpy.broadcast_shapes((2, 3), (3,)) == (2, 3)
  EXPECT_EQ(*broadcastShapes({2, 3}, {3}), (llvm::SmallVector<int64_t>{2, 3}));
  // numpy.broadcast_shapes((4, 1, 5), (3, 1)) == (4, 3, 5)
  EXPECT_EQ(*broadcastShapes({4, 1, 5}, {3, 1}),
            (llvm::SmallVector<int64_t>{4, 3, 5}));
  // A scalar broadcasts to anything.
  EXPECT_EQ(*broadcastShapes({}, {2, 7}), (llvm::SmallVector<int64_t>{2, 7}));
  // numpy.broadcast_shapes((0, 1), (1, 5)) == (0, 5): size 1 stretches to 0.
  EXPECT_EQ(*broadcastShapes({0, 1}, {1, 5}),
            (llvm::SmallVector<int64_t>{0, 5}));
}

TEST(BroadcastShapes, IncompatibleShapesFail) {
  EXPECT_FALSE(broadcastShapes({2, 3}, {4}).has_value());
  EXPECT_FALSE(broadcastShapes({2, 3}, {3, 3}).has_value());
}

TEST(WindowOutputSize, ResNetStem) {
  // conv1: 224 input, 7x7 kernel, stride 2, pad 3: (224 + 6 - 6 - 1) / 2 + 1.
  EXPECT_EQ(windowOutputSize(224, 7, 2, 1, 3, 3), 112);
  // max pool: 112 input, 3x3 kernel, stride 2, pad 1: (112 + 2 - 2 - 1) / 2
  // + 1.
  EXPECT_EQ(windowOutputSize(112, 3, 2, 1, 1, 1), 56);
}

TEST(WindowOutputSize, DilationWidensTheKernel) {
  // Effective kernel 1 + 2 * (3 - 1) = 5: (10 - 5) / 1 + 1 = 6.
  EXPECT_EQ(windowOutputSize(10, 3, 1, 2, 0, 0), 6);
}

TEST(WindowOutputSize, CeilModeCountsPartialWindows) {
  // (112 - 3) / 2 + 1 = 55.5: floor 55, ceil 56; the last window starts at
  // 110 < 112, inside the input, so it stays.
  EXPECT_EQ(windowOutputSize(112, 3, 2, 1, 0, 0, /*ceilMode=*/false), 55);
  EXPECT_EQ(windowOutputSize(112, 3, 2, 1, 0, 0, /*ceilMode=*/true), 56);
  // in 2, kernel 1, stride 2, pads 1/1: ceil((2 + 2 - 1) / 2) + 1 = 3, but the
  // third window would start at 4 >= in + lo = 3, entirely in the high
  // padding, so PyTorch and ONNX drop it.
  EXPECT_EQ(windowOutputSize(2, 1, 2, 1, 1, 1, /*ceilMode=*/true), 2);
}

TEST(NormalizeAxis, NegativeAxesCountFromTheEnd) {
  EXPECT_EQ(normalizeAxis(-1, 4), 3);
  EXPECT_EQ(normalizeAxis(-4, 4), 0);
  EXPECT_EQ(normalizeAxis(3, 4), 3);
  EXPECT_EQ(normalizeAxis(4, 4), -1);
  EXPECT_EQ(normalizeAxis(-5, 4), -1);
}

} // namespace
