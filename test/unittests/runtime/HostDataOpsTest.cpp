//===- HostDataOpsTest.cpp - Host steps of data-dependent shapes ----------===//
//
// NonZero, Compress, Unique, NonMaxSuppression, Gather, Transpose, Slice
// and Cast between numbers (runtime/lib/HostDataOps.cpp), each against
// values worked out by hand from the ONNX spec and onnxruntime's rules
// where the spec leaves room (NonMaxSuppression's ties and empty boxes).
// The end-to-end comparison with onnxruntime is
// test/Target/CUDA/data-dependent-host.test.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/HostSteps.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln::runtime;
using kiln::runtime::test::hostStep;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

using Values = std::map<std::string, HostValue, std::less<>>;

template <typename T> DType dtypeOf();
template <> DType dtypeOf<float>() { return DType::F32; }
template <> DType dtypeOf<int64_t>() { return DType::I64; }
template <> DType dtypeOf<int32_t>() { return DType::I32; }
template <> DType dtypeOf<uint8_t>() { return DType::U8; }
template <> DType dtypeOf<int8_t>() { return DType::I8; }

template <typename T> HostValue tensor(Shape shape, std::vector<T> data) {
  HostValue value;
  value.dtype = dtypeOf<T>();
  value.shape = std::move(shape);
  value.data.resize(data.size() * sizeof(T));
  std::memcpy(value.data.data(), data.data(), value.data.size());
  return value;
}

HostValue bools(std::vector<uint8_t> data) {
  HostValue value = tensor<uint8_t>({static_cast<int64_t>(data.size())}, data);
  value.dtype = DType::Bool;
  return value;
}

template <typename T> std::vector<T> elements(const HostValue &value) {
  std::vector<T> out(value.data.size() / sizeof(T));
  std::memcpy(out.data(), value.data.data(), value.data.size());
  return out;
}


TEST(HostDataOpsTest, NonZeroSkipsNegativeZeroAndKeepsNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Values values{{"x", tensor<float>({2, 3}, {0.0f, -0.0f, 2.0f, nan, 0.0f, -1.0f})}};
  ASSERT_FALSE(runHostStep(hostStep("NonZero", {"x"}, {"y"}), values));
  const HostValue &y = values["y"];
  EXPECT_EQ(y.dtype, DType::I64);
  EXPECT_THAT(y.shape, ElementsAre(2, 3));
  // (0, 2), (1, 0), (1, 2): rows first, then columns.
  EXPECT_THAT(elements<int64_t>(y), ElementsAre(0, 1, 1, 2, 0, 2));
}

TEST(HostDataOpsTest, CompressAlongAnAxisAndFlattened) {
  Values values{{"x", tensor<int32_t>({3, 2}, {1, 2, 3, 4, 5, 6})},
                {"c", bools({0, 1, 1})},
                {"short", bools({1, 0, 1})}};
  ASSERT_FALSE(runHostStep(hostStep("Compress", {"x", "c"}, {"rows"}, {{"axis", {"0"}}}),
                           values));
  EXPECT_THAT(values["rows"].shape, ElementsAre(2, 2));
  EXPECT_THAT(elements<int32_t>(values["rows"]), ElementsAre(3, 4, 5, 6));
  // No axis: the flattened input; a condition shorter than it drops the rest.
  ASSERT_FALSE(runHostStep(hostStep("Compress", {"x", "short"}, {"flat"}), values));
  EXPECT_THAT(values["flat"].shape, ElementsAre(2));
  EXPECT_THAT(elements<int32_t>(values["flat"]), ElementsAre(1, 3));
  ASSERT_FALSE(runHostStep(hostStep("Compress", {"x", "c"}, {"cols"}, {{"axis", {"-1"}}}),
                           values));
  EXPECT_THAT(values["cols"].shape, ElementsAre(3, 1));
  EXPECT_THAT(elements<int32_t>(values["cols"]), ElementsAre(2, 4, 6));
}

TEST(HostDataOpsTest, UniqueSortedAndInFirstOccurrenceOrder) {
  // numpy.unique([2, 1, 1, 3, 4, 3], return_index, return_inverse,
  // return_counts): [1 2 3 4], [1 0 3 4], [1 0 0 2 3 2], [2 1 2 1].
  Values values{{"x", tensor<float>({6}, {2, 1, 1, 3, 4, 3})}};
  ASSERT_FALSE(runHostStep(hostStep("Unique", {"x"}, {"y", "i", "inv", "c"}), values));
  EXPECT_THAT(elements<float>(values["y"]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(elements<int64_t>(values["i"]), ElementsAre(1, 0, 3, 4));
  EXPECT_THAT(elements<int64_t>(values["inv"]), ElementsAre(1, 0, 0, 2, 3, 2));
  EXPECT_THAT(elements<int64_t>(values["c"]), ElementsAre(2, 1, 2, 1));
  // sorted = 0: the spec's example, [2, 1, 3, 4], [0, 1, 3, 4], [0 1 1 2 3 2].
  ASSERT_FALSE(runHostStep(hostStep("Unique", {"x"}, {"y0", "i0", "inv0", "c0"},
                                {{"sorted", {"0"}}}),
                           values));
  EXPECT_THAT(elements<float>(values["y0"]), ElementsAre(2, 1, 3, 4));
  EXPECT_THAT(elements<int64_t>(values["i0"]), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(elements<int64_t>(values["inv0"]), ElementsAre(0, 1, 1, 2, 3, 2));
  EXPECT_THAT(elements<int64_t>(values["c0"]), ElementsAre(1, 2, 2, 1));
}

TEST(HostDataOpsTest, UniqueSlicesAlongAnAxisAndSpecialValues) {
  // The spec's example: rows [1 0 0], [1 0 0], [2 3 4] along axis 0.
  Values values{{"x", tensor<int64_t>({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4})}};
  ASSERT_FALSE(runHostStep(hostStep("Unique", {"x"}, {"y", "i", "inv", "c"},
                                {{"axis", {"0"}}}),
                           values));
  EXPECT_THAT(values["y"].shape, ElementsAre(2, 3));
  EXPECT_THAT(elements<int64_t>(values["y"]), ElementsAre(1, 0, 0, 2, 3, 4));
  EXPECT_THAT(elements<int64_t>(values["inv"]), ElementsAre(0, 0, 1));
  EXPECT_THAT(elements<int64_t>(values["c"]), ElementsAre(2, 1));
  // -0.0 equals 0.0 (the first kept); NaN equals NaN and sorts last.
  float nan = std::numeric_limits<float>::quiet_NaN();
  values["f"] = tensor<float>({5}, {nan, -0.0f, 1.0f, 0.0f, nan});
  ASSERT_FALSE(runHostStep(hostStep("Unique", {"f"}, {"u", "ui", "uinv", "n"}), values));
  std::vector<float> u = elements<float>(values["u"]);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_TRUE(u[0] == 0.0f && std::signbit(u[0]));
  EXPECT_EQ(u[1], 1.0f);
  EXPECT_TRUE(std::isnan(u[2]));
  EXPECT_THAT(elements<int64_t>(values["n"]), ElementsAre(2, 1, 2));
}

TEST(HostDataOpsTest, NonMaxSuppressionFollowsOnnxruntime) {
  // Three boxes in one class, [y1, x1, y2, x2]: 0 and 1 overlap by IoU
  // 81/119 (0.68), 2 is apart; box 3 has no area. Scores 0.9, 0.9, 0.5,
  // 0.95: the equal scores take the lower index first.
  Values values{
      {"boxes", tensor<float>({1, 4, 4}, {0, 0, 10, 10, 1, 1, 11, 11, 20, 20,
                                          30, 30, 5, 5, 5, 9})},
      {"scores", tensor<float>({1, 1, 4}, {0.9f, 0.9f, 0.5f, 0.95f})},
      {"max", tensor<int64_t>({1}, {10})},
      {"iou", tensor<float>({1}, {0.5f})},
      {"low", tensor<float>({1}, {0.6f})},
      {"loose", tensor<float>({1}, {0.7f})}};
  ASSERT_FALSE(runHostStep(
      hostStep("NonMaxSuppression", {"boxes", "scores", "max", "iou"}, {"s"}), values));
  // Box 3 first (highest score; no area: suppresses nothing), then 0, which
  // suppresses 1, then 2.
  EXPECT_THAT(values["s"].shape, ElementsAre(3, 3));
  EXPECT_THAT(elements<int64_t>(values["s"]), ElementsAre(0, 0, 3, 0, 0, 0, 0, 0, 2));
  // IoU 0.68 is not above 0.7: both kept; the score threshold drops box 2.
  ASSERT_FALSE(runHostStep(hostStep("NonMaxSuppression",
                                {"boxes", "scores", "max", "loose", "low"}, {"t"}),
                           values));
  EXPECT_THAT(elements<int64_t>(values["t"]), ElementsAre(0, 0, 3, 0, 0, 0, 0, 0, 1));
  // max_output_boxes_per_class absent: no box (the spec's default, 0).
  ASSERT_FALSE(runHostStep(hostStep("NonMaxSuppression", {"boxes", "scores"}, {"none"}),
                           values));
  EXPECT_THAT(values["none"].shape, ElementsAre(0, 3));
  // Center format: [xc, yc, w, h] of boxes 0 and 1 above.
  values["centers"] = tensor<float>({1, 2, 4}, {5, 5, 10, 10, 6, 6, 10, 10});
  values["two"] = tensor<float>({1, 1, 2}, {0.8f, 0.9f});
  ASSERT_FALSE(runHostStep(hostStep("NonMaxSuppression", {"centers", "two", "max", "iou"},
                                {"c"}, {{"center_point_box", {"1"}}}),
                           values));
  EXPECT_THAT(elements<int64_t>(values["c"]), ElementsAre(0, 0, 1));
  values["bad"] = tensor<float>({1}, {1.5f});
  Error err = runHostStep(
      hostStep("NonMaxSuppression", {"boxes", "scores", "max", "bad"}, {"u"}), values);
  ASSERT_TRUE(err);
  EXPECT_THAT(err.message(), HasSubstr("node 'n' (NonMaxSuppression): iou_threshold 1.5 is not in [0, 1]"));
}

TEST(HostDataOpsTest, GatherTransposeSlice) {
  Values values{{"x", tensor<int32_t>({2, 3}, {0, 1, 2, 3, 4, 5})},
                {"idx", tensor<int64_t>({2}, {-1, 0})},
                {"far", tensor<int64_t>({1}, {3})}};
  ASSERT_FALSE(runHostStep(hostStep("Gather", {"x", "idx"}, {"g"}, {{"axis", {"1"}}}),
                           values));
  EXPECT_THAT(values["g"].shape, ElementsAre(2, 2));
  EXPECT_THAT(elements<int32_t>(values["g"]), ElementsAre(2, 0, 5, 3));
  Error err = runHostStep(hostStep("Gather", {"x", "far"}, {"h"}, {{"axis", {"1"}}}), values);
  ASSERT_TRUE(err);
  EXPECT_THAT(err.message(), HasSubstr("index 3 is out of range for dim 1 of size 3"));
  ASSERT_FALSE(runHostStep(hostStep("Transpose", {"x"}, {"t"}), values));
  EXPECT_THAT(values["t"].shape, ElementsAre(3, 2));
  EXPECT_THAT(elements<int32_t>(values["t"]), ElementsAre(0, 3, 1, 4, 2, 5));
  // x[:, ::-2] with ends past the start (clamped): columns 2 and 0.
  values["starts"] = tensor<int64_t>({1}, {-1});
  values["ends"] = tensor<int64_t>({1}, {std::numeric_limits<int64_t>::min()});
  values["axes"] = tensor<int64_t>({1}, {1});
  values["steps"] = tensor<int64_t>({1}, {-2});
  ASSERT_FALSE(runHostStep(hostStep("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"}),
                           values));
  EXPECT_THAT(values["s"].shape, ElementsAre(2, 2));
  EXPECT_THAT(elements<int32_t>(values["s"]), ElementsAre(2, 0, 5, 3));
  // A step of INT64_MAX takes one element.
  values["big"] = tensor<int64_t>({1}, {std::numeric_limits<int64_t>::max()});
  values["zero"] = tensor<int64_t>({1}, {0});
  values["end"] = tensor<int64_t>({1}, {3});
  ASSERT_FALSE(runHostStep(hostStep("Slice", {"x", "zero", "end", "axes", "big"}, {"one"}),
                           values));
  EXPECT_THAT(elements<int32_t>(values["one"]), ElementsAre(0, 3));
}

TEST(HostDataOpsTest, CastBetweenNumbers) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Values values{{"f", tensor<float>({5}, {-1.7f, 2.9f, 300.0f, nan, -1e10f})},
                {"i", tensor<int64_t>({2}, {257, -1})}};
  ASSERT_FALSE(runHostStep(hostStep("Cast", {"f"}, {"a"}, {{"to", {"i8"}}}), values));
  // Truncated, saturated, NaN to 0.
  EXPECT_THAT(elements<int8_t>(values["a"]), ElementsAre(-1, 2, 127, 0, -128));
  ASSERT_FALSE(runHostStep(hostStep("Cast", {"i"}, {"b"}, {{"to", {"u8"}}}), values));
  // Integers wrap.
  EXPECT_THAT(elements<uint8_t>(values["b"]), ElementsAre(1, 255));
  ASSERT_FALSE(runHostStep(hostStep("Cast", {"i"}, {"c"}, {{"to", {"f32"}}}), values));
  EXPECT_THAT(elements<float>(values["c"]), ElementsAre(257.0f, -1.0f));
  ASSERT_FALSE(runHostStep(hostStep("Cast", {"f"}, {"d"}, {{"to", {"bool"}}}), values));
  EXPECT_THAT(elements<uint8_t>(values["d"]), ElementsAre(1, 1, 1, 1, 1));
}

} // namespace
