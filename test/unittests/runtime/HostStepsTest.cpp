//===- HostStepsTest.cpp - Format 1.9 host steps: format, checks, runs ----===//
//
// The `host-steps` section round-trips and is checked (an undefined value,
// a device input the host does not compute, a bad RE2 pattern, a reader
// that predates it); each string op against values worked out by hand from
// the ONNX spec (Python's str.split for StringSplit, NumPy's str() for
// Cast); and a session that runs host steps around the sample artifact's
// two kernels on the FakeDevice.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/HostSteps.h"
#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Runtime.h"

#include "HostStringOps.h"
#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

using Values = std::map<std::string, HostValue, std::less<>>;

HostValue strings(Shape shape, std::vector<std::string> text) {
  HostValue value;
  value.isString = true;
  value.shape = std::move(shape);
  value.strings = std::move(text);
  return value;
}


std::string format(float value) {
  return formatHostNumber(DType::F32, reinterpret_cast<uint8_t *>(&value));
}

TEST(HostStepsTest, CastFormatsFloatsAsNumPyStrDoes) {
  EXPECT_EQ(format(0.039187793f), "0.039187793");
  EXPECT_EQ(format(0.9767611f), "0.9767611");
  EXPECT_EQ(format(1e10f), "10000000000.0");
  EXPECT_EQ(format(1e16f), "1e+16");
  EXPECT_EQ(format(1e-4f), "1e-04");
  EXPECT_EQ(format(0.00012345f), "0.00012345");
  EXPECT_EQ(format(-2.5e15f), "-2500000000000000.0");
  EXPECT_EQ(format(123456789.0f), "123456790.0");
  EXPECT_EQ(format(1.5e-5f), "1.5e-05");
  EXPECT_EQ(format(3.0f), "3.0");
  EXPECT_EQ(format(-0.0f), "-0.0");
  EXPECT_EQ(format(0.3f), "0.3");
  EXPECT_EQ(format(std::numeric_limits<float>::quiet_NaN()), "NaN");
  EXPECT_EQ(format(-std::numeric_limits<float>::infinity()), "-INF");
  int64_t big = -9007199254740993;
  EXPECT_EQ(formatHostNumber(DType::I64, reinterpret_cast<uint8_t *>(&big)),
            "-9007199254740993");
}

TEST(HostStepsTest, CastParsesNumbersAndSpecialValues) {
  float f = 0;
  auto *out = reinterpret_cast<uint8_t *>(&f);
  ASSERT_TRUE(parseHostNumber("1e-5", DType::F32, out));
  EXPECT_EQ(f, 1e-5f);
  ASSERT_TRUE(parseHostNumber("+INF", DType::F32, out));
  EXPECT_TRUE(std::isinf(f) && f > 0);
  ASSERT_TRUE(parseHostNumber("-inf", DType::F32, out));
  EXPECT_TRUE(std::isinf(f) && f < 0);
  ASSERT_TRUE(parseHostNumber("NaN", DType::F32, out));
  EXPECT_TRUE(std::isnan(f));
  EXPECT_FALSE(parseHostNumber("Hello", DType::F32, out));
  EXPECT_FALSE(parseHostNumber("", DType::F32, out));
  int32_t i = 0;
  ASSERT_TRUE(
      parseHostNumber("100.5", DType::I32, reinterpret_cast<uint8_t *>(&i)));
  EXPECT_EQ(i, 100);
  uint8_t u = 0;
  EXPECT_FALSE(parseHostNumber("300", DType::U8, &u));
}

TEST(HostStepsTest, CastOfABadStringNamesTheNodeAndElement) {
  Values values{{"s", strings({2}, {"1.5", "abc"})}};
  Error err = runHostStep(hostStep("Cast", {"s"}, {"f"}, {{"to", {"f32"}}}),
                          values);
  EXPECT_EQ(err.message(),
            "node 'n' (Cast): element 1 ('abc') is not f32 number");
}

TEST(HostStepsTest, StringSplitFollowsPythonSplit) {
  Values values{
      {"x", strings({3}, {"a,,b", "  one two  ", "c"})}};
  ASSERT_FALSE(runHostStep(hostStep("StringSplit", {"x"}, {"y", "z"},
                                {{"delimiter", {","}}}),
                           values));
  EXPECT_EQ(values["y"].shape, (Shape{3, 3}));
  EXPECT_THAT(values["y"].strings,
              ElementsAre("a", "", "b", "  one two  ", "", "", "c", "", ""));
  ASSERT_FALSE(runHostStep(hostStep("StringSplit", {"x"}, {"w", "len"},
                                {{"maxsplit", {"1"}}}),
                           values));
  // No delimiter: whitespace runs, ends trimmed; maxsplit 1 keeps the rest.
  EXPECT_THAT(values["w"].strings,
              ElementsAre("a,,b", "", "one", "two", "c", ""));
  const HostValue &lengths = values["len"];
  ASSERT_EQ(lengths.data.size(), 24u);
  std::vector<int64_t> counts(3);
  std::memcpy(counts.data(), lengths.data.data(), 24);
  EXPECT_THAT(counts, ElementsAre(1, 2, 1));
}

TEST(HostStepsTest, StringNormalizerStopwordsAndCase) {
  Values values{{"x", strings({1, 4}, {"Monday", "tuesday", "MONDAY", "é"})}};
  ASSERT_FALSE(runHostStep(hostStep("StringNormalizer", {"x"}, {"y"},
                                {{"case_change_action", {"UPPER"}},
                                 {"stopwords", {"monday"}}}),
                           values));
  EXPECT_EQ(values["y"].shape, (Shape{1, 2}));
  EXPECT_THAT(values["y"].strings, ElementsAre("TUESDAY", "É"));
  ASSERT_FALSE(runHostStep(hostStep("StringNormalizer", {"x"}, {"z"},
                                {{"is_case_sensitive", {"1"}},
                                 {"stopwords", {"Monday", "tuesday", "MONDAY",
                                                "é"}}}),
                           values));
  EXPECT_EQ(values["z"].shape, (Shape{1, 1}));
  EXPECT_THAT(values["z"].strings, ElementsAre(""));
}

TEST(HostStepsTest, DataMovementOnStrings) {
  Values values{{"x", strings({2, 3}, {"a", "b", "c", "d", "e", "f"})}};
  ASSERT_FALSE(runHostStep(hostStep("Unsqueeze", {"x"}, {"u"}, {{"axes", {"0"}}}),
                           values));
  EXPECT_EQ(values["u"].shape, (Shape{1, 2, 3}));
  ASSERT_FALSE(runHostStep(hostStep("Squeeze", {"u"}, {"q"}), values));
  EXPECT_EQ(values["q"].shape, (Shape{2, 3}));
  // An axis from the file that is not a number fails, naming the node.
  EXPECT_EQ(runHostStep(hostStep("Squeeze", {"u"}, {"bad"}, {{"axes", {"zero"}}}),
                        values)
                .message(),
            "node 'n' (Squeeze): axis 'zero' is not an integer");
  EXPECT_THAT(runHostStep(hostStep("Squeeze", {"x"}, {"bad"}, {{"axes", {"1"}}}),
                          values)
                  .message(),
              HasSubstr("cannot squeeze dim 1 of size 3"));
}

TEST(HostStepsTest, EqualAndConcatBroadcast) {
  Values values{{"a", strings({2, 1}, {"x", "y"})},
                {"b", strings({3}, {"x", "y", "z"})}};
  ASSERT_FALSE(runHostStep(hostStep("Equal", {"a", "b"}, {"eq"}), values));
  EXPECT_EQ(values["eq"].shape, (Shape{2, 3}));
  EXPECT_THAT(values["eq"].data, ElementsAre(1, 0, 0, 0, 1, 0));
  ASSERT_FALSE(runHostStep(hostStep("StringConcat", {"a", "b"}, {"c"}), values));
  EXPECT_THAT(values["c"].strings,
              ElementsAre("xx", "xy", "xz", "yx", "yy", "yz"));
}

TEST(HostStepsTest, LabelEncoderMapsStringsThroughItsTable) {
  Values values{{"x", strings({2, 2}, {"b", "zz", "a", "b"})}};
  // To int16 (a values_tensor's type), unknown keys taking the default.
  ASSERT_FALSE(runHostStep(hostStep("LabelEncoder", {"x"}, {"i"},
                                {{"keys", {"a", "b"}},
                                 {"values", {"0", "-300"}},
                                 {"default", {"42"}},
                                 {"to", {"i16"}}}),
                           values));
  EXPECT_EQ(values["i"].dtype, DType::I16);
  EXPECT_EQ(values["i"].shape, (Shape{2, 2}));
  std::vector<int16_t> ints(4);
  ASSERT_EQ(values["i"].data.size(), 8u);
  std::memcpy(ints.data(), values["i"].data.data(), 8);
  EXPECT_THAT(ints, ElementsAre(-300, 42, 0, -300));
  // To f32, read back exactly from the text the compiler writes (%.9g).
  ASSERT_FALSE(runHostStep(hostStep("LabelEncoder", {"x"}, {"f"},
                                {{"keys", {"a", "b"}},
                                 {"values", {"0.100000001", "2.5"}},
                                 {"default", {"-0"}},
                                 {"to", {"f32"}}}),
                           values));
  std::vector<float> floats(4);
  std::memcpy(floats.data(), values["f"].data.data(), 16);
  EXPECT_THAT(floats, ElementsAre(2.5f, -0.0f, 0.1f, 2.5f));
  EXPECT_TRUE(std::signbit(floats[1]));
  // To strings.
  ASSERT_FALSE(runHostStep(hostStep("LabelEncoder", {"x"}, {"s"},
                                {{"keys", {"a"}},
                                 {"values", {"A"}},
                                 {"default", {"_Unused"}},
                                 {"to", {"string"}}}),
                           values));
  EXPECT_THAT(values["s"].strings,
              ElementsAre("_Unused", "_Unused", "A", "_Unused"));
}

TEST(HostStepsTest, LabelEncoderChecksItsTable) {
  auto encoder = [](std::vector<std::string> keys,
                    std::vector<std::string> values, std::string fallback,
                    std::string to) {
    return verifyHostStep(hostStep("LabelEncoder", {"x"}, {"y"},
                               {{"keys", std::move(keys)},
                                {"values", std::move(values)},
                                {"default", {std::move(fallback)}},
                                {"to", {std::move(to)}}}))
        .message();
  };
  EXPECT_EQ(encoder({"a", "a"}, {"1", "2"}, "0", "i64"),
            "node 'n' (LabelEncoder): key 'a' is listed twice");
  EXPECT_EQ(encoder({"a"}, {"1", "2"}, "0", "i64"),
            "node 'n' (LabelEncoder): 1 keys but 2 values");
  EXPECT_EQ(encoder({"a"}, {"one"}, "0", "i64"),
            "node 'n' (LabelEncoder): value 'one' is not a number of type i64");
  EXPECT_EQ(
      encoder({"a"}, {"1"}, "x", "i32"),
      "node 'n' (LabelEncoder): the default 'x' is not a number of type i32");
  EXPECT_THAT(encoder({"a"}, {"1"}, "0", "f16"),
              HasSubstr("values of type 'f16' are not supported on the host"));
  EXPECT_EQ(encoder({"a"}, {"1"}, "0", "i64"), "");
  // A numeric input is refused when the step runs.
  Values values{{"x", HostValue{}}};
  values["x"].shape = {1};
  values["x"].data.resize(4);
  EXPECT_EQ(runHostStep(hostStep("LabelEncoder", {"x"}, {"y"},
                             {{"keys", {"a"}},
                              {"values", {"1"}},
                              {"default", {"0"}},
                              {"to", {"i64"}}}),
                        values)
                .message(),
            "node 'n' (LabelEncoder): the input must be strings on the host");
}

TEST(HostStepsTest, RegexFullMatchAndABadPattern) {
  if (!haveRegexSupport())
    GTEST_SKIP() << "built without RE2";
  Values values{{"x", strings({3}, {"ab12", "ab", "xab12"})}};
  ASSERT_FALSE(runHostStep(hostStep("RegexFullMatch", {"x"}, {"m"},
                                {{"pattern", {"ab\\d+"}}}),
                           values));
  EXPECT_THAT(values["m"].data, ElementsAre(1, 0, 0));
  EXPECT_THAT(verifyHostStep(hostStep("RegexFullMatch", {"x"}, {"m"},
                                  {{"pattern", {"(ab"}}}))
                  .message(),
              HasSubstr("node 'n' (RegexFullMatch): pattern '(ab' is not a "
                        "valid RE2 regular expression: missing )"));
}

/// The sample artifact with host steps around it: strings -> Cast -> x,
/// (x + bias) * 3 on the device, y -> Cast -> strings.
Artifact makeStringArtifact() {
  Artifact artifact = makeAddScaleArtifact();
  HostProgram &host = artifact.host;
  host.inputs.push_back({"s", true, DType::F32, {2, 3}});
  host.outputs.push_back({"ys", true, DType::F32, {2, 3}});
  HostStep in = hostStep("Cast", {"s"}, {"x"}, {{"to", {"f32"}}});
  in.node = "to_float";
  HostStep out = hostStep("Cast", {"y"}, {"ys"}, {{"to", {"string"}}});
  out.node = "to_string";
  out.phase = HostPhase::After;
  host.steps = {in, out};
  host.toDevice = {"x"};
  host.fromDevice = {"y"};
  host.hiddenOutputs = {"y"};
  return artifact;
}

TEST(HostStepsTest, SectionRoundTrips) {
  Artifact artifact = makeStringArtifact();
  artifact.host.constants.push_back({"words", strings({2}, {"a", "é"})});
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  const HostProgram &host = read->host;
  ASSERT_EQ(host.steps.size(), 2u);
  EXPECT_EQ(host.steps[1].node, "to_string");
  EXPECT_EQ(host.steps[1].phase, HostPhase::After);
  EXPECT_EQ(host.steps[0].attributes[0].values[0], "f32");
  ASSERT_EQ(host.inputs.size(), 1u);
  EXPECT_TRUE(host.inputs[0].isString);
  EXPECT_EQ(host.constants[0].value.strings[1], "é");
  EXPECT_EQ(host.toDevice, std::vector<std::string>{"x"});
  EXPECT_EQ(host.hiddenOutputs, std::vector<std::string>{"y"});
}

TEST(HostStepsTest, AnOlderReaderRefusesTheFile) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeStringArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  // The header flag makes a 1.8 reader refuse rather than skip the steps.
  std::vector<uint8_t> old = joinImage(sections, 1, 8);
  format::storeU32(old.data() + format::kFlagsOffset,
                   format::kHeaderFlagHostSteps);
  refreshHeaderChecksum(old);
  EXPECT_THAT(errorOf(parseBytes(old)), HasSubstr("unknown flags 0x10"));
}

TEST(HostStepsTest, SectionChecksumIsChecked) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeStringArtifact());
  ASSERT_TRUE(image);
  uint8_t *entry = tableEntryOf(*image, format::SectionKind::HostSteps);
  uint64_t offset = format::loadU64(entry + format::kEntryOffsetOffset);
  uint64_t size = format::loadU64(entry + format::kEntrySizeOffset);
  (*image)[offset + size / 2] ^= 0x01;
  EXPECT_THAT(errorOf(parseBytes(*image)),
              HasSubstr("section 'host-steps': checksum mismatch"));
}

TEST(HostStepsTest, VerifierNamesWhatIsWrong) {
  Artifact undefined = makeStringArtifact();
  undefined.host.steps[0].inputs = {"nowhere"};
  EXPECT_THAT(errorOf(serializeArtifact(undefined)),
              HasSubstr("node 'to_float' (Cast): input 'nowhere' is not "
                        "defined before it"));
  Artifact late = makeStringArtifact();
  late.host.steps[0].phase = HostPhase::After;
  EXPECT_THAT(errorOf(serializeArtifact(late)),
              HasSubstr("device input 'x' is not computed before the "
                        "launches"));
  Artifact unknownOp = makeStringArtifact();
  unknownOp.host.steps[0].op = "GatherND";
  EXPECT_THAT(errorOf(serializeArtifact(unknownOp)),
              HasSubstr("node 'to_float' (GatherND): not an op the host runs"));
}

TEST(HostStepsTest, SessionRunsHostStepsAroundTheLaunches) {
  auto device = std::make_shared<FakeDevice>();
  device->kernels["add_bias"] = [](const PackedParams &p,
                                   const LaunchConfig &) {
    auto *x = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *bias = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 1));
    auto *tmp = reinterpret_cast<float *>(paramAt<uint64_t>(p, 2));
    for (uint32_t i = 0; i < paramAt<uint32_t>(p, 3); ++i)
      tmp[i] = x[i] + bias[i % 3];
  };
  device->kernels["scale"] = [](const PackedParams &p, const LaunchConfig &c) {
    auto *tmp = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *y = reinterpret_cast<float *>(paramAt<uint64_t>(p, 1));
    for (uint32_t i = 0; i < c.block.x; ++i)
      y[i] = tmp[i] * static_cast<float>(paramAt<uint64_t>(p, 2));
  };
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(makeStringArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  HostTensor s;
  s.isString = true;
  s.shape = {2, 3};
  s.strings = {"1", "2", "3", "4.5", "-1", "0"};
  EXPECT_THAT((*session)->bindInput("x", DType::F32, {2, 3}, nullptr, 24)
                  .message(),
              HasSubstr("input 'x' is computed by the model's host steps"));
  ASSERT_FALSE((*session)->bindInput("s", s));
  ASSERT_FALSE((*session)->run());
  Expected<HostTensor> ys = (*session)->readOutput("ys");
  ASSERT_TRUE(ys) << errorOf(ys);
  ASSERT_TRUE(ys->isString);
  // (x + [10, 20, 30]) * 3, as NumPy's str() writes float32s.
  EXPECT_THAT(ys->strings,
              ElementsAre("33.0", "66.0", "99.0", "43.5", "57.0", "90.0"));
  // A string Cast cannot parse fails the run, naming the node.
  s.strings[4] = "minus one";
  ASSERT_FALSE((*session)->bindInput("s", s));
  EXPECT_EQ((*session)->run().message(),
            "host step: node 'to_float' (Cast): element 4 ('minus one') is "
            "not f32 number");
}

TEST(HostStepsTest, NpyUnicodeRoundTrips) {
  Expected<std::vector<uint8_t>> bytes =
      encodeNpyStrings({2}, {"héllo", ""});
  ASSERT_TRUE(bytes) << errorOf(bytes);
  std::string text(bytes->begin(), bytes->end());
  EXPECT_THAT(text, HasSubstr("'descr': '<U5'"));
  Expected<NpyArray> array = parseNpy(bytes->data(), bytes->size(), "t.npy");
  ASSERT_TRUE(array) << errorOf(array);
  EXPECT_TRUE(array->isString);
  EXPECT_THAT(array->strings, ElementsAre("héllo", ""));
  EXPECT_THAT(errorOf(encodeNpyStrings({1}, {"\xff"})),
              HasSubstr("string 0 is not valid UTF-8"));
}

TEST(HostStepsTest, NpyRefusesZeroWidthStrings) {
  // '<U0' stores no bytes: without this refusal a header alone could ask
  // for any number of strings (kiln-fuzz-npy, reliability.md finding 10).
  Expected<std::vector<uint8_t>> bytes = encodeNpyStrings({2}, {"", ""});
  ASSERT_TRUE(bytes) << errorOf(bytes);
  std::string text(bytes->begin(), bytes->end());
  size_t at = text.find("'<U1'");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 5, "'<U0'");
  std::vector<uint8_t> zero(text.begin(), text.end());
  zero.resize(zero.size() - 8); // the two '<U1' elements' bytes
  EXPECT_THAT(errorOf(parseNpy(zero.data(), zero.size(), "t.npy")),
              HasSubstr("'<U0' (strings of width 0) is not supported"));
}

} // namespace
