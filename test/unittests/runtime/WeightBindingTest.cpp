//===- WeightBindingTest.cpp - stripWeights and bindWeights ---------------===//
//
// Expected bytes are written out by hand (bf16/f16 bit patterns of chosen
// values, ties included), not computed by the code under test.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

#include <cstring>
#include <map>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

template <typename T> std::vector<uint8_t> bytesOf(std::vector<T> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename ArtifactT>
auto &weightNamed(ArtifactT &artifact, const std::string &name) {
  for (auto &weight : artifact.weights)
    if (weight.name == name)
      return weight;
  ADD_FAILURE() << "no weight " << name;
  return artifact.weights.front();
}

std::vector<uint8_t> weightBytes(const Artifact &artifact,
                                 const std::string &name) {
  const Weight &weight = weightNamed(artifact, name);
  const uint8_t *start = artifact.weightData.data() + weight.offset;
  return std::vector<uint8_t>(
      start, start + *tensorByteSize(weight.dtype, weight.shape));
}

// 1 + 2^-11 and 1 + 3 * 2^-11 are ties at tf32's 10 mantissa bits.
const float kTieLow = 1.0f + 1.0f / 2048, kTieHigh = 1.0f + 3.0f / 2048;

/// The AddScale test artifact plus weights that exercise every step, each
/// read by one kernel launch (one argument points inside its weight).
Artifact makeBindableArtifact() {
  Artifact artifact = makeAddScaleArtifact();
  artifact.weights[0].origin.clear(); // "bias" has no origin: it stays put
  auto add = [&](const std::string &name, DType dtype, Shape shape,
                 const std::string &origin) {
    std::vector<uint8_t> zeros(*tensorByteSize(dtype, shape), 0);
    Expected<uint32_t> index =
        artifact.addWeight(name, dtype, shape, zeros.data(), zeros.size());
    EXPECT_TRUE(index.hasValue());
    artifact.weights[*index].origin = origin;
  };
  add("wt", DType::F32, {3, 2}, "initializer f32 2x3 w\ntranspose 1,0");
  add("wp", DType::BF16, {2, 4},
      "initializer f32 2x3 w\npad 0,0 0,1\nconvert bf16");
  add("v", DType::F16, {3}, "initializer f32 3 v\nconvert f16");
  add("t", DType::F32, {3}, "initializer f32 1x3 t\nreshape 3\nconvert tf32");
  Kernel reader;
  reader.name = "reader";
  reader.ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
               ".visible .entry reader() { ret; }\n";
  for (const char *name : {"bias", "wt", "wp", "v", "t"})
    reader.params.push_back({ParamKind::WeightsPointer, name});
  artifact.kernels.push_back(reader);
  Launch launch{2, {}};
  for (const Weight &weight : artifact.weights)
    launch.args.push_back(weight.offset + (weight.name == "wt" ? 8 : 0));
  artifact.launches.push_back(launch);
  EXPECT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  return artifact;
}

/// New values for the initializers, from a map; absent names are nullopt.
InitializerSource sourceOf(std::map<std::string, NpyArray> values) {
  return [values](const std::string &name)
             -> Expected<std::optional<NpyArray>> {
    auto it = values.find(name);
    if (it == values.end())
      return std::optional<NpyArray>();
    return std::optional<NpyArray>(it->second);
  };
}

std::map<std::string, NpyArray> newValues() {
  return {
      {"w", {DType::F32, {2, 3}, bytesOf<float>({1.5f, -2, 3.25f, 0.1f, 5, -7})}},
      {"v", {DType::F32, {3}, bytesOf<float>({1, 70000, 2049})}},
      {"t", {DType::F32, {1, 3}, bytesOf<float>({kTieLow, kTieHigh, 3})}},
  };
}

TEST(WeightBindingTest, BindReplaysEveryStep) {
  Artifact artifact = makeBindableArtifact();
  std::vector<uint8_t> bias = weightBytes(artifact, "bias");
  ASSERT_EQ(errorOf(bindWeights(artifact, sourceOf(newValues()))),
            "<success>");
  EXPECT_EQ(weightBytes(artifact, "wt"),
            bytesOf<float>({1.5f, 0.1f, -2, 5, 3.25f, -7}));
  // bf16: 1.5 0x3fc0, -2 0xc000, 3.25 0x4050, 0.1 0x3dcd (0x3dcccccd rounds
  // up), 5 0x40a0, -7 0xc0e0; the padding column is +0.
  EXPECT_EQ(weightBytes(artifact, "wp"),
            bytesOf<uint16_t>({0x3fc0, 0xc000, 0x4050, 0x0000, 0x3dcd, 0x40a0,
                               0xc0e0, 0x0000}));
  // f16: 1 0x3c00; 70000 overflows to +inf 0x7c00; 2049 is a tie between
  // 2048 and 2050 and goes to the even 2048, 0x6800.
  EXPECT_EQ(weightBytes(artifact, "v"),
            bytesOf<uint16_t>({0x3c00, 0x7c00, 0x6800}));
  // tf32, nearest even: 1 + 2^-11 -> 1, 1 + 3 * 2^-11 -> 1 + 2^-9.
  EXPECT_EQ(weightBytes(artifact, "t"),
            bytesOf<float>({1.0f, 1.0f + 1.0f / 512, 3.0f}));
  EXPECT_EQ(weightBytes(artifact, "bias"), bias);
  EXPECT_EQ(artifact.strippedWeightBytes, 0u);
}

TEST(WeightBindingTest, StripThenBindRestoresTheWeightsAndLaunches) {
  Artifact compiled = makeBindableArtifact();
  ASSERT_EQ(errorOf(bindWeights(compiled, sourceOf(newValues()))),
            "<success>");
  Artifact stripped = compiled;
  ASSERT_EQ(errorOf(stripWeights(stripped)), "<success>");
  // Only the bias (12 bytes) is left; the four others lie past it.
  EXPECT_EQ(stripped.weightData.size(), 12u);
  EXPECT_GT(stripped.strippedWeightBytes, 0u);
  EXPECT_EQ(weightBytes(stripped, "bias"), weightBytes(compiled, "bias"));
  for (const Weight &weight : stripped.weights)
    if (weight.name != "bias")
      EXPECT_GE(weight.offset, stripped.weightData.size()) << weight.name;
  // The launch's arguments moved with their weights (wt's points 8 bytes in).
  const Launch &launch = stripped.launches.back();
  for (size_t a = 0; a < stripped.weights.size(); ++a)
    EXPECT_EQ(launch.args[a], stripped.weights[a].offset +
                                  (stripped.weights[a].name == "wt" ? 8 : 0));
  // Idempotent, and survives the file format.
  Artifact again = stripped;
  ASSERT_EQ(errorOf(stripWeights(again)), "<success>");
  EXPECT_EQ(again.weightData.size(), stripped.weightData.size());
  Expected<std::vector<uint8_t>> image = serializeArtifact(stripped);
  ASSERT_TRUE(image) << errorOf(image);
  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  EXPECT_EQ(read->strippedWeightBytes, stripped.strippedWeightBytes);
  // Binding the same values reproduces every weight exactly.
  ASSERT_EQ(errorOf(bindWeights(*read, sourceOf(newValues()))), "<success>");
  for (const Weight &weight : compiled.weights)
    EXPECT_EQ(weightBytes(*read, weight.name), weightBytes(compiled, weight.name))
        << weight.name;
}

TEST(WeightBindingTest, MissingInitializerIsNamed) {
  Artifact artifact = makeBindableArtifact();
  std::map<std::string, NpyArray> values = newValues();
  values.erase("v");
  EXPECT_EQ(errorOf(bindWeights(artifact, sourceOf(values))),
            "binding weight 'v': no value given for initializer 'v'");
}

TEST(WeightBindingTest, WrongShapeOrDtypeIsNamedAndChangesNothing) {
  Artifact artifact = makeBindableArtifact();
  std::vector<uint8_t> before(artifact.weightData.data(),
                              artifact.weightData.data() +
                                  artifact.weightData.size());
  std::map<std::string, NpyArray> values = newValues();
  values["w"].shape = {3, 2};
  EXPECT_EQ(errorOf(bindWeights(artifact, sourceOf(values))),
            "binding weight 'wt': initializer 'w' is f32 [3, 2], but the "
            "artifact was compiled for f32 [2, 3]");
  values = newValues();
  values["v"] = {DType::F64, {3}, bytesOf<double>({1, 2, 3})};
  EXPECT_THAT(errorOf(bindWeights(artifact, sourceOf(values))),
              HasSubstr("initializer 'v' is f64 [3], but the artifact was "
                        "compiled for f32 [3]"));
  EXPECT_EQ(std::vector<uint8_t>(artifact.weightData.data(),
                                 artifact.weightData.data() +
                                     artifact.weightData.size()),
            before);
}

TEST(WeightBindingTest, MalformedOriginsAreErrors) {
  struct Case {
    std::string origin, error;
  };
  for (const Case &c : std::vector<Case>{
           {"initializer f32 3", "does not start with 'initializer DTYPE"},
           {"initializer q7 3 v", "unknown dtype 'q7'"},
           {"initializer f32 3 v\nrotate 90", "unknown step 'rotate 90'"},
           {"initializer f32 3 v\ntranspose 1,0", "transpose [1, 0] is not a "
                                                  "permutation of 1 dimensions"},
           {"initializer f32 3 v\nreshape 2,2", "reshape [2, 2] does not keep "
                                                "the 3 elements of [3]"},
           {"initializer f32 3 v\nconvert f8", "convert to 'f8' is not "
                                               "supported"},
           {"initializer f32 3 v\npad 0,x 1", "'0,x' is not a list"},
           {"initializer f32 3 v", "the origin makes f32 [3], not the "
                                   "weight's f16 [3]"},
       }) {
    Artifact artifact = makeBindableArtifact();
    weightNamed(artifact, "v").origin = c.origin;
    EXPECT_THAT(errorOf(bindWeights(artifact, sourceOf(newValues()))),
                HasSubstr(c.error))
        << c.origin;
  }
}

TEST(WeightBindingTest, InlinedInitializerMustBeUnchanged) {
  Artifact artifact = makeBindableArtifact();
  std::map<std::string, NpyArray> values = newValues();
  values["scale"] = {DType::F32, {1}, bytesOf<float>({3.0f})};
  EXPECT_EQ(errorOf(bindWeights(artifact, sourceOf(values))), "<success>");
  values["scale"] = {DType::F32, {1}, bytesOf<float>({4.0f})};
  EXPECT_EQ(errorOf(bindWeights(artifact, sourceOf(values))),
            "initializer 'scale' (f32 [1]) was compiled into the kernels as a "
            "constant and cannot be rebound: its new value differs (recompile "
            "with it)");
  values["scale"] = {DType::F32, {}, bytesOf<float>({3.0f})};
  EXPECT_EQ(errorOf(bindWeights(artifact, sourceOf(values))),
            "initializer 'scale' was compiled into the kernels as a constant "
            "of f32 [1]; the value given is f32 []");
}

TEST(WeightBindingTest, VerifyRejectsAStrippedWeightWithoutOrigin) {
  Artifact artifact = makeBindableArtifact();
  ASSERT_EQ(errorOf(stripWeights(artifact)), "<success>");
  weightNamed(artifact, "v").origin.clear();
  EXPECT_EQ(errorOf(verifyArtifact(artifact)),
            "section 'weights': weight 'v' was stripped but has no origin to "
            "rebuild it from");
}

} // namespace
