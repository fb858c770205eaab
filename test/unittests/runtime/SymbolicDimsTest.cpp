//===- SymbolicDimsTest.cpp - Run-time sizes of symbolic dims -------------===//
//
// Format 1.6's `symbolic-dims` section (round trip, the reader's and
// verifyArtifact's checks, older readers), the size checks and their
// messages, the box copies against index-by-index loops, and a session
// (FakeDevice) that pads an input and slices the output.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SymbolicDims.h"

#include <gmock/gmock.h>

#include <numeric>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

/// The add-scale sample (y = (x + bias) * 3 over f32 [2, 3], row by row)
/// with its batch dim symbolic: N in 1..2, separable.
Artifact symbolicArtifact(bool separable = true) {
  Artifact artifact = makeAddScaleArtifact();
  SymbolicDim n;
  n.name = "N";
  n.min = 1;
  n.max = 2;
  n.opt = 2;
  n.separable = separable;
  if (!separable)
    n.reason = "node 'mean' (kiln.reduce) reduces over it";
  artifact.symbolicDims = {n};
  artifact.inputs[0].symbolicAxes = {{0, 0, 1}};
  if (separable)
    artifact.outputs[0].symbolicAxes = {{0, 0, 1}};
  return artifact;
}

TEST(SymbolicDimsTest, SectionRoundTrips) {
  Artifact artifact = symbolicArtifact();
  artifact.symbolicDims.push_back({"S", 3, 9, 5, false, "why not"});
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  EXPECT_NE(tableEntryOf(*image, SectionKind::SymbolicDims), nullptr);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  // The writer writes the current format (symbolic dims came in 1.6).
  EXPECT_EQ(read->formatMinor, kArtifactFormatMinor);
  EXPECT_GE(read->formatMinor, 6u);
  ASSERT_EQ(read->symbolicDims.size(), 2u);
  EXPECT_EQ(read->symbolicDims[0].name, "N");
  EXPECT_TRUE(read->symbolicDims[0].separable);
  EXPECT_EQ(read->symbolicDims[1].name, "S");
  EXPECT_EQ(read->symbolicDims[1].min, 3);
  EXPECT_EQ(read->symbolicDims[1].max, 9);
  EXPECT_EQ(read->symbolicDims[1].opt, 5);
  EXPECT_FALSE(read->symbolicDims[1].separable);
  EXPECT_EQ(read->symbolicDims[1].reason, "why not");
  ASSERT_EQ(read->inputs[0].symbolicAxes.size(), 1u);
  EXPECT_EQ(read->inputs[0].symbolicAxes[0].dim, 0u);
  EXPECT_EQ(read->outputs[0].symbolicAxes[0].factor, 1u);
}

TEST(SymbolicDimsTest, StaticArtifactsHaveNoSection) {
  Expected<std::vector<uint8_t>> image =
      serializeArtifact(makeAddScaleArtifact());
  ASSERT_TRUE(image);
  for (const RawSection &section : splitImage(*image))
    EXPECT_NE(section.kind, uint32_t(SectionKind::SymbolicDims));
}

TEST(SymbolicDimsTest, OlderReaderSkipsTheSectionAndRunsTheCompiledShape) {
  // A 1.5 reader does not know kind 13: it verifies its checksum and skips
  // it, and the artifact reads as a static one at the maximum.
  Expected<std::vector<uint8_t>> image = serializeArtifact(symbolicArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections)
    if (section.kind == uint32_t(SectionKind::SymbolicDims))
      section.kind = 99; // what a reader that predates it sees
  Expected<Artifact> read = parseBytes(joinImage(sections, 1, 5));
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_TRUE(read->symbolicDims.empty());
  EXPECT_EQ(errorOf(checkInput(*read, "x", DType::F32, {1, 3}, 12)),
            "input 'x': shape [1, 3] does not match the signature's [2, 3]");
}

TEST(SymbolicDimsTest, VerifyRejectsInconsistentRecords) {
  auto errorFor = [](const std::function<void(Artifact &)> &edit) {
    Artifact artifact = symbolicArtifact();
    edit(artifact);
    return errorOf(verifyArtifact(artifact));
  };
  EXPECT_EQ(errorFor([](Artifact &) {}), "<success>");
  EXPECT_EQ(errorFor([](Artifact &a) { a.symbolicDims[0].min = 3; }),
            "section 'symbolic-dims': symbol 'N': range 3..2 (opt 2) needs "
            "1 <= min <= opt <= max");
  EXPECT_EQ(errorFor([](Artifact &a) { a.symbolicDims[0].opt = 5; }),
            "section 'symbolic-dims': symbol 'N': range 1..2 (opt 5) needs "
            "1 <= min <= opt <= max");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.symbolicDims[0].max = 4;
              a.symbolicDims[0].opt = 4;
            }),
            "section 'symbolic-dims': input 'x': dim 0 is 2, not the maximum "
            "of 'N' (4) times 1");
  EXPECT_EQ(
      errorFor([](Artifact &a) { a.inputs[0].symbolicAxes[0].symbol = 1; }),
      "section 'symbolic-dims': input 'x': dim 0: symbol 1 is out of "
      "range (the artifact has 1 symbolic dims)");
  EXPECT_EQ(errorFor([](Artifact &a) { a.inputs[0].symbolicAxes[0].dim = 2; }),
            "section 'symbolic-dims': input 'x': dim 2 is out of range (rank "
            "2) or out of order");
  EXPECT_EQ(
      errorFor([](Artifact &a) { a.inputs[0].symbolicAxes[0].factor = 2; }),
      "section 'symbolic-dims': input 'x': dim 0: factor 2 (an input's "
      "is 1, an output's at least 1)");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.symbolicDims[0].separable = false;
              a.symbolicDims[0].reason.clear();
            }),
            "section 'symbolic-dims': symbol 'N' is not separable but gives "
            "no reason");
  EXPECT_EQ(errorFor([](Artifact &a) {
              a.symbolicDims.push_back(a.symbolicDims[0]);
            }),
            "section 'symbolic-dims': symbol 'N' appears twice");
}

TEST(SymbolicDimsTest, ReaderRejectsACountThatIsNotTheSignatures) {
  Expected<std::vector<uint8_t>> image = serializeArtifact(symbolicArtifact());
  ASSERT_TRUE(image);
  std::vector<RawSection> sections = splitImage(*image);
  for (RawSection &section : sections) {
    if (section.kind != uint32_t(SectionKind::SymbolicDims))
      continue;
    // Symbol count (4), then "N" (4 + 1), min, max, opt (24), separable
    // (4), an empty reason (4): the input count follows.
    size_t at = 4 + 5 + 24 + 4 + 4;
    ASSERT_EQ(loadU32(section.bytes.data() + at), 1u);
    storeU32(section.bytes.data() + at, 2);
  }
  EXPECT_EQ(errorOf(parseBytes(joinImage(sections))),
            "test.kiln: section 'symbolic-dims': 2 input entries for 1 "
            "signature inputs");
}

TEST(SymbolicDimsTest, InputSizeErrorsNameTheInputDimRangeAndValue) {
  Artifact artifact = symbolicArtifact();
  EXPECT_EQ(errorOf(checkInput(artifact, "x", DType::F32, {1, 3}, 12)),
            "<success>");
  EXPECT_EQ(errorOf(checkInput(artifact, "x", DType::F32, {3, 3}, 36)),
            "input 'x': dim 0 (symbol 'N') is 3, outside its range 1..2");
  EXPECT_EQ(errorOf(checkInput(artifact, "x", DType::F32, {1, 4}, 16)),
            "input 'x': shape [1, 4] does not match the signature's [N, 3] "
            "(N in 1..2) (dim 1 is fixed at 3)");
  EXPECT_EQ(errorOf(checkInput(artifact, "x", DType::F32, {1, 3}, 24)),
            "input 'x': 24 bytes given, f32 [1, 3] has 12");
  Artifact fixed = symbolicArtifact(/*separable=*/false);
  EXPECT_EQ(errorOf(checkInput(fixed, "x", DType::F32, {1, 3}, 12)),
            "input 'x': dim 0 (symbol 'N') is 1, but this artifact runs N = 2 "
            "only: 'N' is not separable (node 'mean' (kiln.reduce) reduces "
            "over it)");
  EXPECT_EQ(errorOf(checkInput(fixed, "x", DType::F32, {2, 3}, 24)),
            "<success>");
}

TEST(SymbolicDimsTest, InputsThatShareASymbolMustAgree) {
  Artifact artifact = symbolicArtifact();
  artifact.inputs.push_back(artifact.inputs[0]);
  artifact.inputs[1].name = "z";
  artifact.inputs[1].shape = {4, 2};
  artifact.inputs[1].symbolicAxes = {{1, 0, 1}};
  EXPECT_EQ(errorOf(resolveSizes(artifact, {Shape{1, 3}, Shape{4, 2}})),
            "inputs 'x' and 'z' disagree on symbol 'N': 'x' has 1 (dim 0), "
            "'z' has 2 (dim 1)");
  Expected<SymbolSizes> sizes =
      resolveSizes(artifact, {Shape{1, 3}, Shape{4, 1}});
  ASSERT_TRUE(sizes) << errorOf(sizes);
  EXPECT_EQ(*sizes, SymbolSizes{1});
  // An input not bound leaves the symbol to the others.
  sizes = resolveSizes(artifact, {std::nullopt, Shape{4, 1}});
  ASSERT_TRUE(sizes);
  EXPECT_EQ(*sizes, SymbolSizes{1});
  EXPECT_EQ(shapeAt(artifact.inputs[1], {1}), (Shape{4, 1}));
}

/// The reference: every element of the common box, index by index.
std::vector<int32_t> boxByIndex(const std::vector<int32_t> &src,
                                const Shape &srcShape, const Shape &dstShape,
                                int32_t fill) {
  int64_t dstCount = std::accumulate(dstShape.begin(), dstShape.end(),
                                     int64_t(1), std::multiplies<int64_t>());
  std::vector<int32_t> dst(static_cast<size_t>(dstCount), fill);
  for (int64_t i = 0; i < dstCount; ++i) {
    int64_t rest = i, srcIndex = 0, srcStride = 1;
    bool inside = true;
    for (size_t d = dstShape.size(); d-- > 0;) {
      int64_t index = rest % dstShape[d];
      rest /= dstShape[d];
      inside &= index < srcShape[d];
      srcIndex += index * srcStride;
      srcStride *= srcShape[d];
    }
    if (inside)
      dst[static_cast<size_t>(i)] = src[static_cast<size_t>(srcIndex)];
  }
  return dst;
}

TEST(SymbolicDimsTest, BoxCopiesPadAndSliceAnyDim) {
  struct Case {
    Shape small, big;
  };
  for (const Case &c : {Case{{1, 3}, {2, 3}}, Case{{2, 3, 4}, {5, 3, 4}},
                        Case{{3, 2, 4}, {3, 5, 4}}, Case{{2, 3, 1}, {2, 3, 6}},
                        Case{{2, 1, 3}, {4, 3, 3}}, Case{{}, {}}}) {
    int64_t count = std::accumulate(c.small.begin(), c.small.end(), int64_t(1),
                                    std::multiplies<int64_t>());
    std::vector<int32_t> small(static_cast<size_t>(count));
    std::iota(small.begin(), small.end(), 1);
    // Pad: the bytes outside the box keep the destination's -1.
    std::vector<int32_t> padded = boxByIndex(small, c.small, c.big, -1);
    std::vector<int32_t> got(padded.size(), -1);
    copyBox(small.data(), c.small, got.data(), c.big, 4);
    EXPECT_EQ(got, padded) << formatShape(c.small) << " -> "
                           << formatShape(c.big);
    // Slice back: the small tensor again.
    std::vector<int32_t> back(small.size(), 0);
    copyBox(got.data(), c.big, back.data(), c.small, 4);
    EXPECT_EQ(back, small) << formatShape(c.big) << " -> "
                           << formatShape(c.small);
  }
}

/// add_bias and scale on the host (as SessionTest's), recording the x the
/// first launch saw.
std::shared_ptr<FakeDevice> makeDevice(std::vector<float> &seenX) {
  auto device = std::make_shared<FakeDevice>();
  device->kernels["add_bias"] = [&seenX](const PackedParams &p,
                                         const LaunchConfig &) {
    auto *x = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *bias = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 1));
    auto *tmp = reinterpret_cast<float *>(paramAt<uint64_t>(p, 2));
    uint32_t n = paramAt<uint32_t>(p, 3);
    seenX.assign(x, x + n);
    for (uint32_t i = 0; i < n; ++i)
      tmp[i] = x[i] + bias[i % 3];
  };
  device->kernels["scale"] = [](const PackedParams &p, const LaunchConfig &c) {
    auto *tmp = reinterpret_cast<const float *>(paramAt<uint64_t>(p, 0));
    auto *y = reinterpret_cast<float *>(paramAt<uint64_t>(p, 1));
    uint64_t k = paramAt<uint64_t>(p, 2);
    for (uint32_t i = 0; i < c.block.x; ++i)
      y[i] = tmp[i] * static_cast<float>(k);
  };
  return device;
}

TEST(SymbolicDimsTest, SessionPadsTheInputAndSlicesTheOutput) {
  std::vector<float> seenX;
  auto device = makeDevice(seenX);
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(symbolicArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  // Full size first, so the arena holds non-zero bytes where the padding
  // goes next.
  float full[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_FALSE((*session)->bindInput("x", DType::F32, {2, 3}, full, 24));
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  EXPECT_EQ(*(*session)->outputShape("y"), (Shape{2, 3}));

  float one[3] = {7, 8, 9};
  ASSERT_EQ(errorOf((*session)->bindInput("x", DType::F32, {1, 3}, one, 12)),
            "<success>");
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  // The kernel saw the compiled shape with a zero tail.
  EXPECT_THAT(seenX, ElementsAre(7, 8, 9, 0, 0, 0));
  Expected<HostTensor> y = (*session)->readOutput("y");
  ASSERT_TRUE(y) << errorOf(y);
  EXPECT_EQ(y->shape, (Shape{1, 3}));
  ASSERT_EQ(y->data.size(), 12u);
  float values[3];
  std::memcpy(values, y->data.data(), sizeof(values));
  // (x + [10, 20, 30]) * 3, independently of the kernels' own code.
  EXPECT_THAT(values, ElementsAre(51, 84, 117));
  // A buffer of the compiled size no longer fits the output.
  float wrong[6];
  EXPECT_EQ(errorOf((*session)->readOutput("y", wrong, sizeof(wrong))),
            "output 'y': a 24-byte buffer given, f32 [1, 3] has 12");
  // Out of range at bind time, naming the input, dim, range and value.
  float three[9] = {};
  EXPECT_EQ(errorOf((*session)->bindInput("x", DType::F32, {3, 3}, three, 36)),
            "input 'x': dim 0 (symbol 'N') is 3, outside its range 1..2");
}

TEST(SymbolicDimsTest, SessionPadsDeviceInputsAndSlicesOnTheDevice) {
  std::vector<float> seenX;
  auto device = makeDevice(seenX);
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(symbolicArtifact()), device);
  ASSERT_TRUE(session) << errorOf(session);
  float one[3] = {1, 2, 3};
  Expected<DevicePtr> in = device->allocate(12);
  Expected<DevicePtr> out = device->allocate(12);
  ASSERT_TRUE(in && out);
  ASSERT_FALSE(device->copyToDevice(*in, one, 12));
  ASSERT_EQ(
      errorOf((*session)->bindDeviceInput("x", DType::F32, {1, 3}, *in, 12)),
      "<success>");
  ASSERT_EQ(errorOf((*session)->run()), "<success>");
  EXPECT_THAT(seenX, ElementsAre(1, 2, 3, 0, 0, 0));
  ASSERT_EQ(errorOf((*session)->readOutputToDevice("y", *out, 12)),
            "<success>");
  float values[3];
  ASSERT_FALSE(device->copyToHost(values, *out, 12));
  EXPECT_THAT(values, ElementsAre(33, 66, 99));
  ASSERT_FALSE(device->deallocate(*in));
  ASSERT_FALSE(device->deallocate(*out));
}

} // namespace
