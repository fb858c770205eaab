//===- HostGuardsTest.cpp - ShapeGuard host steps ---------------------------===//
//
// The guard on a shape input taken at run time (runtime/lib/HostGuards.h):
// for each kind, values that give the compiled shape are accepted in every
// spelling the ONNX spec allows (negative axes, -1 and 0 in a Reshape's
// shape, empty axes meaning all), values that do not are refused with the
// node, the input, the value and the compiled shape; malformed guards are
// refused by verifyHostStep. Expected results worked out by hand from the
// spec.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/HostSteps.h"

#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using ::testing::HasSubstr;

namespace {

using Values = std::map<std::string, HostValue, std::less<>>;

HostValue int64s(std::vector<int64_t> values) {
  HostValue value;
  value.dtype = DType::I64;
  value.shape = {static_cast<int64_t>(values.size())};
  value.data.resize(values.size() * sizeof(int64_t));
  if (!values.empty())
    std::memcpy(value.data.data(), values.data(), value.data.size());
  return value;
}

std::vector<std::string> text(std::vector<int64_t> values) {
  std::vector<std::string> out;
  for (int64_t v : values)
    out.push_back(std::to_string(v));
  return out;
}

HostStep guard(std::string kind, std::string op, std::vector<int64_t> shape,
               std::vector<int64_t> expected,
               std::vector<HostAttribute> extra = {}) {
  HostStep step;
  step.op = "ShapeGuard";
  step.node = "n";
  step.inputs = {"v"};
  step.attributes = {{"kind", {kind}},
                     {"op", {op}},
                     {"operand", {"axes"}},
                     {"input_shape", text(shape)},
                     {"expected", text(expected)}};
  for (HostAttribute &attribute : extra)
    step.attributes.push_back(std::move(attribute));
  return step;
}

/// The guard's verdict on `value`: "" when accepted, else the message.
std::string check(const HostStep &step, std::vector<int64_t> value) {
  Values values;
  values["v"] = int64s(std::move(value));
  Error err = runHostStep(step, values);
  return err ? err.message() : std::string();
}

TEST(HostGuardsTest, AxesOneOfAcceptsEverySpellingOfTheCompiledAxes) {
  // ReduceSum over axis 1 of a 3x2x2 tensor, keepdims: declared 3x1x2.
  // `expected` holds bitmasks: {1} is 2.
  HostStep step = guard("axes-one-of", "ReduceSum", {3, 2, 2}, {2});
  EXPECT_EQ(check(step, {1}), "");
  EXPECT_EQ(check(step, {-2}), "");
  std::string refused = check(step, {0});
  EXPECT_THAT(refused, HasSubstr("node 'n' (ReduceSum)"));
  EXPECT_THAT(refused, HasSubstr("input 'v' (axes) is [0]"));
  EXPECT_THAT(refused, HasSubstr("names axes [0]"));
  EXPECT_THAT(refused, HasSubstr("compiled for axes [1]"));
  // Empty axes reduce every axis, unless noop_with_empty_axes.
  EXPECT_THAT(check(step, {}), HasSubstr("names axes [0, 1, 2]"));
  EXPECT_THAT(check(step, {1, 1}), HasSubstr("out of range or repeated"));
  EXPECT_THAT(check(step, {3}), HasSubstr("out of range or repeated"));
}

TEST(HostGuardsTest, AxesOneOfTakesAnyOfSeveralSets) {
  // 3x2x2 to 3x2 without keepdims: axis 1 ({1} = 2) or axis 2 ({2} = 4).
  HostStep step = guard("axes-one-of", "ReduceSum", {3, 2, 2}, {2, 4});
  EXPECT_EQ(check(step, {1}), "");
  EXPECT_EQ(check(step, {2}), "");
  EXPECT_EQ(check(step, {-1}), "");
  EXPECT_THAT(check(step, {0}),
              HasSubstr("names axes [0]; this artifact was compiled for axes "
                        "[1] or [2]"));
  EXPECT_THAT(check(step, {1, 2}), HasSubstr("names axes [1, 2]"));
}

TEST(HostGuardsTest, AxesOneOfLetsFreeSizeOneAxesGoEitherWay) {
  // Sum over axes {0} of 3x1x2 with axis 1 (size 1) free: reducing it or
  // not gives the same numbers. `free` is one mask: {1} is 2.
  HostStep step = guard("axes-one-of", "ReduceSum", {3, 1, 2}, {1},
                        {{"free", {"2"}}});
  EXPECT_EQ(check(step, {0}), "");
  EXPECT_EQ(check(step, {0, 1}), "");
  EXPECT_EQ(check(step, {-2, -3}), "");
  EXPECT_THAT(check(step, {0, 2}), HasSubstr("names axes [0, 2]"));
  // All axes: 0 and 2 reduced ({0, 2} = 5), 1 free.
  HostStep all = guard("axes-one-of", "ReduceMax", {3, 1, 2}, {5},
                       {{"free", {"2"}}});
  EXPECT_EQ(check(all, {}), "");
  HostStep noop = guard("axes-one-of", "ReduceMax", {3, 1, 2}, {5},
                        {{"free", {"2"}}, {"noop_with_empty_axes", {"1"}}});
  EXPECT_THAT(check(noop, {}), HasSubstr("names axes []"));
}

TEST(HostGuardsTest, ReshapeFollowsTheSpecsZeroAndMinusOne) {
  // 2x3x2 to 2x6.
  HostStep step = guard("reshape", "Reshape", {2, 3, 2}, {2, 6});
  EXPECT_EQ(check(step, {2, 6}), "");
  EXPECT_EQ(check(step, {2, -1}), "");
  EXPECT_EQ(check(step, {0, -1}), "");
  EXPECT_THAT(check(step, {3, 4}),
              HasSubstr("gives shape [3, 4]; this artifact was compiled for "
                        "shape [2, 6]"));
  EXPECT_THAT(check(step, {-1, -1}), HasSubstr("two -1 entries"));
  EXPECT_THAT(check(step, {5, 5}), HasSubstr("12 elements do not fill"));
  // With allowzero a 0 is a 0.
  HostStep zero = guard("reshape", "Reshape", {2, 3, 2}, {2, 6},
                        {{"allowzero", {"1"}}});
  EXPECT_THAT(check(zero, {0, -1}), HasSubstr("cannot infer the -1 entry"));
}

TEST(HostGuardsTest, SqueezeUnsqueezeAndExpand) {
  HostStep squeeze = guard("squeeze", "Squeeze", {1, 3, 1, 5}, {3, 1, 5});
  EXPECT_EQ(check(squeeze, {0}), "");
  EXPECT_EQ(check(squeeze, {-4}), "");
  EXPECT_THAT(check(squeeze, {2}), HasSubstr("gives shape [1, 3, 5]"));
  EXPECT_THAT(check(squeeze, {1}), HasSubstr("cannot squeeze dim 1 of size 3"));
  HostStep unsqueeze = guard("unsqueeze", "Unsqueeze", {3, 4}, {3, 1, 4});
  EXPECT_EQ(check(unsqueeze, {1}), "");
  EXPECT_EQ(check(unsqueeze, {-2}), "");
  EXPECT_THAT(check(unsqueeze, {0}), HasSubstr("gives shape [1, 3, 4]"));
  HostStep expand = guard("expand", "Expand", {3, 1}, {2, 3, 6});
  EXPECT_EQ(check(expand, {2, 1, 6}), "");
  EXPECT_EQ(check(expand, {2, 3, 6}), "");
  EXPECT_THAT(check(expand, {2, 1, 5}), HasSubstr("gives shape [2, 3, 5]"));
  EXPECT_THAT(check(expand, {2, 2, 6}), HasSubstr("does not broadcast"));
  EXPECT_THAT(check(expand, {-1, 6}), HasSubstr("dim -1 is negative"));
}

TEST(HostGuardsTest, EqualNeedsTheExactValues) {
  HostStep step = guard("equal", "Tile", {}, {2, 1, 3});
  EXPECT_EQ(check(step, {2, 1, 3}), "");
  EXPECT_THAT(check(step, {2, 1, 4}),
              HasSubstr("is [2, 1, 4], which differs; this artifact was "
                        "compiled for [2, 1, 3]"));
  EXPECT_THAT(check(step, {2, 1}), HasSubstr("differs"));
  // AffineGrid's size [N, C, H, W]: C never shapes the grid.
  HostStep grid = guard("equal", "AffineGrid", {}, {2, 1, 4, 5},
                        {{"free", {"1"}}});
  EXPECT_EQ(check(grid, {2, 3, 4, 5}), "");
  EXPECT_THAT(check(grid, {2, 3, 4, 6}), HasSubstr("differs"));
}

TEST(HostGuardsTest, FloatValuesAreTruncatedAsOneHotsDepthIs) {
  HostStep step = guard("equal", "OneHot", {}, {10});
  Values values;
  HostValue depth;
  depth.dtype = DType::F32;
  depth.shape = {};
  float ten = 10.7f;
  depth.data.resize(4);
  std::memcpy(depth.data.data(), &ten, 4);
  values["v"] = depth;
  EXPECT_FALSE(runHostStep(step, values));
  float nine = 9.0f;
  std::memcpy(values["v"].data.data(), &nine, 4);
  EXPECT_THAT(runHostStep(step, values).message(),
              HasSubstr("is [9], which differs"));
  float huge = 1e30f;
  std::memcpy(values["v"].data.data(), &huge, 4);
  EXPECT_THAT(runHostStep(step, values).message(), HasSubstr("not a size"));
}

TEST(HostGuardsTest, MalformedGuardsAreRefused) {
  HostStep unknown = guard("transpose", "Transpose", {2}, {2});
  EXPECT_THAT(verifyHostStep(unknown).message(),
              HasSubstr("guard kind 'transpose' is not one of"));
  HostStep noShape = guard("reshape", "Reshape", {2}, {2});
  noShape.attributes.erase(noShape.attributes.begin() + 3);
  EXPECT_THAT(verifyHostStep(noShape).message(), HasSubstr("needs input_shape"));
  HostStep badInt = guard("equal", "Tile", {}, {2});
  badInt.attributes.back().values = {"two"};
  EXPECT_THAT(verifyHostStep(badInt).message(),
              HasSubstr("holds 'two', not an integer"));
  HostStep output = guard("equal", "Tile", {}, {2});
  output.outputs = {"y"};
  EXPECT_THAT(verifyHostStep(output).message(), HasSubstr("1 outputs"));
}

TEST(HostGuardsTest, AnUnnamedNodeIsNamedByWhatItProduces) {
  HostStep step = guard("equal", "TopK", {}, {3});
  step.node.clear();
  step.attributes.push_back({"produces", {"values"}});
  EXPECT_THAT(check(step, {4}),
              HasSubstr("unnamed node producing 'values' (TopK)"));
}

/// A guard of a kind that reads several operands: `inputs` name the step's
/// inputs ("" for an operand given as an attribute).
HostStep operandGuard(std::string kind, std::string op,
                      std::vector<std::string> inputs,
                      std::vector<int64_t> shape, std::vector<int64_t> expected,
                      std::vector<HostAttribute> extra = {}) {
  HostStep step = guard(std::move(kind), std::move(op), std::move(shape),
                        std::move(expected), std::move(extra));
  step.inputs = std::move(inputs);
  return step;
}

HostValue float32s(std::vector<float> values) {
  HostValue value;
  value.dtype = DType::F32;
  value.shape = {static_cast<int64_t>(values.size())};
  value.data.resize(values.size() * sizeof(float));
  std::memcpy(value.data.data(), values.data(), value.data.size());
  return value;
}

std::string verdict(const HostStep &step, Values values) {
  Error err = runHostStep(step, values);
  return err ? err.message() : std::string();
}

TEST(HostGuardsTest, SliceChecksTheWindowOfAllItsOperands) {
  // Slice rows of a 4x4 tensor to 2x4; axes a constant attribute, no steps.
  HostStep step = operandGuard("slice", "Slice", {"s", "e"}, {4, 4}, {2, 4},
                               {{"axes", {"0"}}});
  auto run = [&](std::vector<int64_t> starts, std::vector<int64_t> ends) {
    Values values;
    values["s"] = int64s(std::move(starts));
    values["e"] = int64s(std::move(ends));
    return verdict(step, values);
  };
  EXPECT_EQ(run({0}, {2}), "");
  EXPECT_EQ(run({2}, {100}), ""); // ends clamp to the extent
  EXPECT_EQ(run({-2}, {4}), "");  // starts count from the end
  std::string refused = run({0}, {3});
  EXPECT_THAT(refused,
              HasSubstr("input 's' (starts) is [0], input 'e' "
                        "(ends) is [3], which gives shape [3, 4]; "
                        "this artifact was compiled for shape [2, 4]"));
  // Steps at run time: rows 3 and 1.
  HostStep stepped = operandGuard("slice", "Slice", {"s", "e", "", "t"}, {4, 4},
                                  {2, 4}, {{"axes", {"0"}}});
  Values values;
  values["s"] = int64s({3});
  values["e"] = int64s({0});
  values["t"] = int64s({-2});
  EXPECT_EQ(verdict(stepped, values), "");
  values["t"] = int64s({0});
  EXPECT_THAT(verdict(stepped, values), HasSubstr("a step is 0"));
}

TEST(HostGuardsTest, PadAddsBothPadsOfEachAxis) {
  HostStep step = operandGuard("pad", "Pad", {"p"}, {3, 4}, {5, 5});
  auto run = [&](std::vector<int64_t> pads) {
    Values values;
    values["p"] = int64s(std::move(pads));
    return verdict(step, values);
  };
  EXPECT_EQ(run({1, 0, 1, 1}), "");
  EXPECT_EQ(run({0, -1, 2, 2}), ""); // a negative pad crops
  EXPECT_THAT(run({1, 1, 1, 1}), HasSubstr("gives shape [5, 6]"));
  EXPECT_THAT(run({1, 1}), HasSubstr("2 values for 2 axes"));
  // Axes at run time: the pads go where they name.
  HostStep axes = operandGuard("pad", "Pad", {"p", "a"}, {3, 4}, {3, 6});
  Values values;
  values["p"] = int64s({1, 1});
  values["a"] = int64s({-1});
  EXPECT_EQ(verdict(axes, values), "");
  values["a"] = int64s({0});
  EXPECT_THAT(verdict(axes, values), HasSubstr("gives shape [5, 4]"));
  values["p"] = int64s({-4, 0});
  EXPECT_THAT(verdict(axes, values), HasSubstr("remove more than the 3"));
}

TEST(HostGuardsTest, ResizeScalesFloorEachScaledExtent) {
  // 1x1x4x6 by scales over axes 2, 3 to 1x1x2x3: floor(4 s) = 2 for s in
  // [0.5, 0.75), floor(6 t) = 3 for t in [0.5, 0.667).
  HostStep step = operandGuard("resize-scales", "Resize", {"s"}, {1, 1, 4, 6},
                               {1, 1, 2, 3}, {{"axes", {"2", "3"}}});
  auto run = [&](std::vector<float> scales) {
    Values values;
    values["s"] = float32s(std::move(scales));
    return verdict(step, values);
  };
  EXPECT_EQ(run({0.5f, 0.5f}), "");
  EXPECT_EQ(run({0.74f, 0.66f}), "");
  EXPECT_THAT(run({0.75f, 0.5f}), HasSubstr("gives shape [1, 1, 3, 3]"));
  EXPECT_THAT(run({0.5f}), HasSubstr("1 values for 2 axes"));
  EXPECT_THAT(run({-0.5f, 0.5f}), HasSubstr("not a positive size factor"));
}

TEST(HostGuardsTest, ResizeSizesFitOneScaleKeepingTheAspectRatio) {
  // not_larger: scale = min(size / extent); each extent becomes
  // floor(scale * extent + 0.5). 4x6 with sizes [2, 5]: min(0.5, 0.83) =
  // 0.5, so 2x3; not_smaller takes max = 0.83: 3x5.
  HostStep fit =
      operandGuard("resize-sizes", "Resize", {"z"}, {1, 1, 4, 6}, {1, 1, 2, 3},
                   {{"axes", {"2", "3"}}, {"not_smaller", {"0"}}});
  HostStep cover =
      operandGuard("resize-sizes", "Resize", {"z"}, {1, 1, 4, 6}, {1, 1, 3, 5},
                   {{"axes", {"2", "3"}}, {"not_smaller", {"1"}}});
  Values values;
  values["z"] = int64s({2, 5});
  EXPECT_EQ(verdict(fit, values), "");
  EXPECT_EQ(verdict(cover, values), "");
  values["z"] = int64s({4, 6});
  EXPECT_THAT(verdict(fit, values), HasSubstr("gives shape [1, 1, 4, 6]"));
  values["z"] = int64s({0, 6});
  EXPECT_THAT(verdict(fit, values), HasSubstr("size 0 is not positive"));
}

TEST(HostGuardsTest, RangeCountsItsElementsInF64) {
  // start at run time, limit and delta constants (as %.17g text).
  HostStep step = operandGuard("range", "Range", {"s"}, {}, {4},
                               {{"limit", {"2.5"}}, {"delta", {"0.5"}}});
  auto run = [&](float start) {
    Values values;
    values["s"] = float32s({start});
    values["s"].shape = {};
    return verdict(step, values);
  };
  EXPECT_EQ(run(0.5f), "");                             // 0.5, 1, 1.5, 2
  EXPECT_EQ(run(0.6f), "");                             // ceil(1.9 / 0.5) = 4
  EXPECT_THAT(run(0.4f), HasSubstr("gives shape [5]")); // ceil(4.2)
  EXPECT_THAT(run(-1.0f), HasSubstr("gives shape [7]"));
  HostStep zero = operandGuard("range", "Range", {"s"}, {}, {4},
                               {{"limit", {"2"}}, {"delta", {"0"}}});
  Values values;
  values["s"] = int64s({0});
  EXPECT_THAT(verdict(zero, values), HasSubstr("delta is zero"));
  HostStep text =
      operandGuard("range", "Range", {"s"}, {}, {4}, {{"limit", {"two"}}});
  EXPECT_THAT(verifyHostStep(text).message(),
              HasSubstr("attribute 'limit' holds 'two', not a number"));
}

TEST(HostGuardsTest, OperandKindsNeedARunTimeInput) {
  HostStep none = operandGuard("slice", "Slice", {"", ""}, {4}, {2});
  EXPECT_THAT(verifyHostStep(none).message(),
              HasSubstr("checks 1 to 4 inputs"));
  HostStep tooMany = operandGuard("pad", "Pad", {"p", "a", "b"}, {3}, {5});
  EXPECT_THAT(verifyHostStep(tooMany).message(),
              HasSubstr("checks 1 to 2 inputs, got 3"));
  HostStep badConstant =
      operandGuard("slice", "Slice", {"s"}, {4}, {2}, {{"ends", {"x"}}});
  EXPECT_THAT(verifyHostStep(badConstant).message(),
              HasSubstr("holds 'x', not an integer"));
}

} // namespace
