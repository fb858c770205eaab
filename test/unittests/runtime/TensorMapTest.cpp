//===- TensorMapTest.cpp - TMA tensor maps: artifact records, devices ----===//
//
// The `tensor-maps` section (format 1.4): a record survives the round trip
// field for field, verifyArtifact and the reader reject malformed ones with
// a message naming the section and the record, a session packs the map as
// a 64-byte aligned 128-byte parameter, and the emu device encodes it as
// the emulator's EmuTensorMap (refusing what the driver would refuse).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "emu/TensorMap.h"
#include "kiln/runtime/Runtime.h"

#include <fmt/format.h>
#include <gmock/gmock.h>

#include <cstring>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using namespace kiln::runtime::format;
using ::testing::HasSubstr;

namespace {

/// A record with every field off its default.
TensorMapRecord sampleMap() {
  TensorMapRecord map;
  map.addressParam = 0;
  map.dtype = DType::BF16;
  map.rank = 3;
  map.globalDims[0] = 72, map.globalDims[1] = 100, map.globalDims[2] = 3;
  map.globalStrides[0] = 144, map.globalStrides[1] = 14400;
  map.boxDims[0] = 64, map.boxDims[1] = 128, map.boxDims[2] = 1;
  map.elementStrides[1] = 2;
  map.swizzle = 3;
  map.l2Promotion = 2;
  map.oobFill = 1;
  return map;
}

/// makeAddScaleArtifact with the `scale` kernel taking a tensor map over
/// its first parameter (`tmp`).
Artifact withTensorMap(const TensorMapRecord &map = sampleMap()) {
  Artifact artifact = makeAddScaleArtifact();
  artifact.kernels[1].params.push_back({ParamKind::TensorMap, "tensorMapA"});
  artifact.launches[1].args.push_back(0);
  artifact.tensorMaps.push_back(map);
  return artifact;
}

void expectSameMap(const TensorMapRecord &a, const TensorMapRecord &b) {
  EXPECT_EQ(a.addressParam, b.addressParam);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.rank, b.rank);
  for (uint32_t d = 0; d < kTensorMapMaxRank; ++d) {
    EXPECT_EQ(a.globalDims[d], b.globalDims[d]) << d;
    EXPECT_EQ(a.boxDims[d], b.boxDims[d]) << d;
    EXPECT_EQ(a.elementStrides[d], b.elementStrides[d]) << d;
    if (d > 0) {
      EXPECT_EQ(a.globalStrides[d - 1], b.globalStrides[d - 1]) << d;
    }
  }
  EXPECT_EQ(a.interleave, b.interleave);
  EXPECT_EQ(a.swizzle, b.swizzle);
  EXPECT_EQ(a.l2Promotion, b.l2Promotion);
  EXPECT_EQ(a.oobFill, b.oobFill);
}

TEST(TensorMapTest, RecordRoundTripsFieldForField) {
  Artifact artifact = withTensorMap();
  ASSERT_EQ(errorOf(verifyArtifact(artifact)), "<success>");
  Expected<std::vector<uint8_t>> image = serializeArtifact(artifact);
  ASSERT_TRUE(image) << errorOf(image);
  // The writer adds the section only when there are records.
  bool hasSection = false;
  for (const RawSection &s : splitImage(*image))
    hasSection |= s.kind == uint32_t(SectionKind::TensorMaps);
  EXPECT_TRUE(hasSection);
  for (const RawSection &s :
       splitImage(*serializeArtifact(makeAddScaleArtifact())))
    EXPECT_NE(s.kind, uint32_t(SectionKind::TensorMaps));

  Expected<Artifact> read = parseBytes(*image);
  ASSERT_TRUE(read) << errorOf(read);
  ASSERT_EQ(read->tensorMaps.size(), 1u);
  expectSameMap(read->tensorMaps[0], artifact.tensorMaps[0]);
  EXPECT_EQ(read->kernels[1].params.back().kind, ParamKind::TensorMap);
  EXPECT_EQ(read->kernels[1].params.back().name, "tensorMapA");
  EXPECT_EQ(read->launches[1].args.back(), 0u);
  EXPECT_EQ(paramKindName(ParamKind::TensorMap), "tensor-map");
}

TEST(TensorMapTest, VerifierRejectsBadRecordsNamingThem) {
  auto errorWith = [](auto edit) {
    TensorMapRecord map = sampleMap();
    edit(map);
    return errorOf(verifyArtifact(withTensorMap(map)));
  };
  EXPECT_EQ(errorWith([](TensorMapRecord &m) { m.rank = 0; }),
            "section 'tensor-maps': tensor map 0: rank 0 is not 1 to 5");
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.globalStrides[0] = 120; }),
              HasSubstr("tensor map 0: the stride of dimension 1 is 120 "
                        "bytes (a multiple of 16 below 2^40)"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.boxDims[1] = 512; }),
              HasSubstr("box dimension 1 is 512 (1 to 256)"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.boxDims[0] = 128; }),
              HasSubstr("256 bytes, more than the 128-byte swizzle span"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.boxDims[0] = 4; }),
              HasSubstr("8 bytes, not a multiple of 16"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.globalDims[0] = 0; }),
              HasSubstr("dimension 0 has 0 elements"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.globalDims[3] = 5; }),
              HasSubstr("dimension 3 is set but the rank is 3"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.swizzle = 4; }),
              HasSubstr("swizzle 4 is not 0 to 3"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.oobFill = 2; }),
              HasSubstr("out-of-bounds fill 2 is not 0 or 1"));
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.dtype = DType::I8; }),
              HasSubstr("dtype i8 is not f32, f16 or bf16"));
  // The address must come from a pointer parameter of the launch.
  EXPECT_THAT(errorWith([](TensorMapRecord &m) { m.addressParam = 2; }),
              HasSubstr("launch 1 (kernel 'scale'): argument 3 'tensorMapA': "
                        "tensor map 0 takes its address from parameter 2, "
                        "which is not a pointer parameter"));
  Artifact outOfRange = withTensorMap();
  outOfRange.launches[1].args.back() = 1;
  EXPECT_THAT(errorOf(verifyArtifact(outOfRange)),
              HasSubstr("tensor map 1 is out of range (the artifact has 1)"));
}

TEST(TensorMapTest, ReaderRejectsCorruptSection) {
  std::vector<RawSection> sections = splitImage(*serializeArtifact(withTensorMap()));
  auto section = [&]() -> RawSection & {
    for (RawSection &s : sections)
      if (s.kind == uint32_t(SectionKind::TensorMaps))
        return s;
    ADD_FAILURE() << "no tensor-maps section";
    return sections[0];
  };
  std::vector<RawSection> saved = sections;
  // A record cut short (the checksums recomputed, so the parser sees it).
  section().bytes.resize(section().bytes.size() - 4);
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("section 'tensor-maps'"));
  // A count the bytes cannot hold.
  sections = saved;
  storeU32(section().bytes.data(), 1000);
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("1000 tensor maps cannot fit"));
  // An unknown dtype code (bytes [8, 12) of the first record).
  sections = saved;
  storeU32(section().bytes.data() + 4 + 4, 99);
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("tensor map 0: unknown dtype code 99"));
  // A valid layout but a bad stride: verifyArtifact's message.
  sections = saved;
  storeU64(section().bytes.data() + 4 + 12 + 5 * 8, 100);
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("section 'tensor-maps': tensor map 0: the stride of "
                        "dimension 1 is 100 bytes"));
  // An older reader's view: without the section the launch's map is out of
  // range, never silently a garbage parameter.
  sections = saved;
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const RawSection &s) {
                                  return s.kind ==
                                         uint32_t(SectionKind::TensorMaps);
                                }),
                 sections.end());
  EXPECT_THAT(errorOf(parseBytes(joinImage(sections))),
              HasSubstr("tensor map 0 is out of range (the artifact has 0)"));
}

TEST(TensorMapTest, ChecksumCoversTheSection) {
  std::vector<uint8_t> image = *serializeArtifact(withTensorMap());
  uint64_t table = loadU64(image.data() + kSectionTableOffset);
  uint32_t count = loadU32(image.data() + kSectionCountOffset);
  bool flipped = false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *entry = image.data() + table + i * kSectionEntrySize;
    if (loadU32(entry + kEntryKindOffset) != uint32_t(SectionKind::TensorMaps))
      continue;
    image[loadU64(entry + kEntryOffsetOffset) + 20] ^= 0x01;
    flipped = true;
  }
  ASSERT_TRUE(flipped);
  EXPECT_THAT(errorOf(parseBytes(image)),
              HasSubstr("section 'tensor-maps': checksum mismatch"));
}

TEST(TensorMapTest, PackedParamsAlignsTheMapTo64Bytes) {
  PackedParams params;
  params.addU64(1);
  params.addU32(2);
  uint8_t map[128];
  std::memset(map, 0xAB, sizeof(map));
  params.addBytes(map, sizeof(map), 64);
  params.addU32(3);
  ASSERT_EQ(params.count(), 4u);
  EXPECT_EQ(params.offset(2), 64u); // as `.param .align 64 .b8 m[128]`
  EXPECT_EQ(params.offset(3), 192u);
  EXPECT_EQ(std::memcmp(params.data() + 64, map, 128), 0);
}

TEST(TensorMapTest, EmuChecksThePackedLayoutAgainstThePtx) {
  // A kernel taking a tensor map after a u32: the map is at byte 64.
  const char *ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n"
                    ".visible .entry k(.param .u32 k_n, .param .align 64 .b8 "
                    "k_map[128]) { ret; }\n";
  Expected<std::unique_ptr<Device>> device = createEmuDevice();
  ASSERT_TRUE(device) << errorOf(device);
  Expected<ModuleHandle> module = (*device)->loadModule({"k", ptx});
  ASSERT_TRUE(module) << errorOf(module);
  Expected<FunctionHandle> function = (*device)->getFunction(*module, "k");
  ASSERT_TRUE(function) << errorOf(function);
  Expected<StreamHandle> stream = (*device)->createStream();
  ASSERT_TRUE(stream) << errorOf(stream);
  uint8_t map[128] = {};
  PackedParams good, bad;
  good.addU32(1);
  good.addBytes(map, sizeof(map), 64);
  bad.addU32(1);
  bad.addBytes(map, sizeof(map), 8);
  LaunchConfig config{{1, 1, 1}, {32, 1, 1}, 0};
  EXPECT_EQ(errorOf((*device)->launch(*function, config, good, *stream)),
            "<success>");
  EXPECT_EQ(errorOf((*device)->launch(*function, config, bad, *stream)),
            "emu: kernel 'k': parameter 1 'k_map' is packed at byte 8 but the "
            "PTX declares it at byte 64");
}

TEST(TensorMapTest, EmuEncodesTheEmulatorsMap) {
  Expected<std::unique_ptr<Device>> device = createEmuDevice();
  ASSERT_TRUE(device) << errorOf(device);
  Expected<DevicePtr> buffer = (*device)->allocate(1 << 16);
  ASSERT_TRUE(buffer) << errorOf(buffer);
  TensorMapRecord record = sampleMap();
  alignas(64) uint8_t bytes[128] = {};
  ASSERT_EQ(errorOf((*device)->encodeTensorMap(record, *buffer, "map A", bytes)),
            "<success>");
  emu::EmuTensorMap map;
  std::memcpy(&map, bytes, sizeof(map));
  EXPECT_EQ(map.magic, emu::kTensorMapMagic);
  EXPECT_EQ(map.dataType, emu::kTensorMapBFloat16);
  EXPECT_EQ(map.rank, 3u);
  EXPECT_EQ(map.globalAddress, *buffer);
  EXPECT_EQ(map.globalDims[1], 100u);
  EXPECT_EQ(map.globalStrides[1], 14400u);
  EXPECT_EQ(map.boxDims[1], 128u);
  EXPECT_EQ(map.elementStrides[1], 2u);
  EXPECT_EQ(map.swizzle, 3u);
  EXPECT_EQ(map.oobFill, 1u);
  // What cuTensorMapEncodeTiled refuses, emu refuses, naming the map.
  EXPECT_EQ(errorOf((*device)->encodeTensorMap(record, *buffer + 8,
                                                "kernel 'k' tensor map 0",
                                                bytes)),
            fmt::format("kernel 'k' tensor map 0: the driver refused the "
                        "tensor map: global address {:#x} is not 16-byte "
                        "aligned",
                        *buffer + 8));
}

TEST(TensorMapTest, SessionNamesTheKernelAndTensorOfARefusedMap) {
  // The map's address (buffer 'tmp' + 8) is not 16-byte aligned: the
  // session fails at load, naming the launch, kernel, map and tensor.
  Artifact artifact = withTensorMap();
  artifact.launches[1].args[0] += 8;
  Expected<std::unique_ptr<Device>> device = createEmuDevice();
  ASSERT_TRUE(device) << errorOf(device);
  std::shared_ptr<Device> shared = std::move(*device);
  auto session =
      Session::create(std::make_shared<const Artifact>(artifact), shared);
  EXPECT_THAT(errorOf(session),
              HasSubstr("launch 1: kernel 'scale' tensor map 0 over buffer "
                        "'tmp' (parameter 0): the driver refused the tensor "
                        "map: global address"));
  // Aligned, the same artifact loads.
  auto good = Session::create(std::make_shared<const Artifact>(withTensorMap()),
                              shared);
  EXPECT_TRUE(good) << errorOf(good);
}

} // namespace
