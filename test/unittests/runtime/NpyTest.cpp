//===- NpyTest.cpp - .npy reading and writing -----------------------------===//

#include "kiln/runtime/Npy.h"

#include "RuntimeTestUtils.h"

#include <gmock/gmock.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

/// A .npy image with the given header dict (padded like NumPy) and data.
std::vector<uint8_t> npyWithHeader(std::string dict, size_t dataBytes,
                                   uint8_t major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  for (size_t i = 0; i < prefix - 8; ++i)
    bytes.push_back(static_cast<uint8_t>(dict.size() >> (8 * i)));
  bytes.insert(bytes.end(), dict.begin(), dict.end());
  bytes.resize(bytes.size() + dataBytes, 0x11);
  return bytes;
}

std::string parseError(const std::vector<uint8_t> &bytes) {
  return errorOf(parseNpy(bytes.data(), bytes.size(), "a.npy"));
}

TEST(NpyTest, RoundTripEveryDTypeAndRank) {
  TempDir dir;
  std::vector<Shape> shapes = {{}, {5}, {2, 3}, {2, 1, 4}, {3, 0}};
  for (DType dtype : allDTypes()) {
    for (const Shape &shape : shapes) {
      uint64_t size = *tensorByteSize(dtype, shape);
      std::vector<uint8_t> data(size);
      for (size_t i = 0; i < size; ++i)
        data[i] = static_cast<uint8_t>(i * 13 + 1);
      std::string path = dir.file("t.npy");
      ASSERT_EQ(errorOf(writeNpy(path, dtype, shape, data.data(), size)),
                "<success>");
      Expected<NpyArray> array = readNpy(path);
      ASSERT_TRUE(array) << errorOf(array);
      // float8 types share '|V1', which reads as f8e4m3fn.
      EXPECT_EQ(array->dtype,
                isFloat8DType(dtype) ? DType::F8E4M3FN : dtype)
          << dtypeName(dtype);
      EXPECT_TRUE(npyDTypeMatches(array->dtype, dtype)) << dtypeName(dtype);
      EXPECT_EQ(array->shape, shape) << formatShape(shape);
      EXPECT_EQ(array->data, data);
      // NumPy puts the data at a multiple of 64.
      EXPECT_EQ((readBytes(path).size() - size) % 64, 0u);
    }
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.npy"});
}

TEST(NpyTest, WritesWhatNumPyWrites) {
  // np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)) with NumPy 1.26.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                       "3), }";
  header.append(118 - 1 - header.size(), ' ');
  header += '\n';
  std::vector<uint8_t> expected = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 118, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  float values[6] = {0, 1, 2, 3, 4, 5};
  const auto *bytes = reinterpret_cast<const uint8_t *>(values);
  expected.insert(expected.end(), bytes, bytes + sizeof(values));
  Expected<std::vector<uint8_t>> encoded =
      encodeNpy(DType::F32, {2, 3}, values, sizeof(values));
  ASSERT_TRUE(encoded);
  EXPECT_EQ(*encoded, expected);
}

TEST(NpyTest, ReadsOtherSpellings) {
  struct Case {
    std::string descr;
    DType dtype;
  };
  for (const Case &c : std::vector<Case>{{"<f4", DType::F32},
                                         {"|u1", DType::U8},
                                         {"<u1", DType::U8},
                                         {"|i1", DType::I8},
                                         {"?", DType::Bool},
                                         {"|b1", DType::Bool},
                                         {"<V2", DType::BF16},
                                         {"|V2", DType::BF16},
                                         {"bfloat16", DType::BF16},
                                         {"=i8", DType::I64},
                                         {">u1", DType::U8}}) {
    std::vector<uint8_t> bytes = npyWithHeader(
        "{'descr': '" + c.descr + "', 'fortran_order': False, 'shape': (2,), }",
        2 * dtypeSize(c.dtype));
    Expected<NpyArray> array = parseNpy(bytes.data(), bytes.size(), "a.npy");
    ASSERT_TRUE(array) << c.descr << ": " << errorOf(array);
    EXPECT_EQ(array->dtype, c.dtype) << c.descr;
  }
  // Double quotes, no trailing comma, key order, 3L-style longs, version 2.0.
  std::vector<uint8_t> bytes = npyWithHeader(
      "{\"shape\": (3L, 1), \"fortran_order\": False, \"descr\": \"<i4\"}", 12,
      2);
  Expected<NpyArray> array = parseNpy(bytes.data(), bytes.size(), "a.npy");
  ASSERT_TRUE(array) << errorOf(array);
  EXPECT_EQ(array->shape, (Shape{3, 1}));
}

TEST(NpyTest, LargeHeaderUsesVersion2) {
  Shape shape(25000, 1); // "1, " x 25000 needs more than 64 KiB
  uint8_t value = 7;
  Expected<std::vector<uint8_t>> encoded =
      encodeNpy(DType::U8, shape, &value, 1);
  ASSERT_TRUE(encoded);
  EXPECT_EQ((*encoded)[6], 2);
  Expected<NpyArray> array = parseNpy(encoded->data(), encoded->size(), "big");
  ASSERT_TRUE(array) << errorOf(array);
  EXPECT_EQ(array->shape, shape);
}

TEST(NpyTest, MalformedFiles) {
  const std::string f4 =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24)),
      "a.npy: Fortran-order arrays are not supported; save "
      "np.ascontiguousarray(a)");
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24)),
      "a.npy: big-endian data ('>f4') is not supported; save "
      "a.astype(a.dtype.newbyteorder('<'))");
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16)),
      "a.npy: object arrays ('|O') are not supported");
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16)),
      "a.npy: unsupported dtype '<c8'");
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
          8)),
      "a.npy: structured arrays are not supported");
  EXPECT_EQ(
      parseError(npyWithHeader(f4, 20)),
      "a.npy: truncated data: f32 [2, 3] needs 24 bytes, the file has 20");
  EXPECT_EQ(parseError(npyWithHeader(f4, 28)),
            "a.npy: 4 unexpected bytes after the data of f32 [2, 3]");
  EXPECT_EQ(
      parseError(npyWithHeader("{'descr': '<f4', 'fortran_order': False}", 4)),
      "a.npy: malformed header: it needs 'descr', 'fortran_order' and "
      "'shape'");
  EXPECT_EQ(
      parseError(npyWithHeader(
          "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 4)),
      "a.npy: malformed header: 'shape' holds a non-integer or negative "
      "dimension");
  EXPECT_EQ(parseError(npyWithHeader(
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (), }", 4)),
            "a.npy: malformed header: 'fortran_order' is not True or False");
  EXPECT_EQ(parseError(npyWithHeader(
                "{'descr': '<f4', 'order': 'C', 'shape': (), }", 4)),
            "a.npy: malformed header: unexpected key 'order'");
  // A control character read from the file stays on the error's one line
  // (kiln-fuzz-npy, fuzz/regressions/npy).
  EXPECT_EQ(parseError(npyWithHeader(
                "{'descr': '<f4', 'or\nder': 'C', 'shape': (), }", 4)),
            "a.npy: malformed header: unexpected key 'or\\x0ader'");

  std::vector<uint8_t> good = npyWithHeader(f4, 24);
  std::vector<uint8_t> badMagic = good;
  badMagic[1] = 'X';
  EXPECT_EQ(parseError(badMagic), "a.npy: not a .npy file (bad magic)");
  std::vector<uint8_t> badVersion = good;
  badVersion[6] = 4;
  EXPECT_EQ(parseError(badVersion),
            "a.npy: unsupported .npy version 4.0 (1.0, 2.0 and 3.0 are "
            "supported)");
  std::vector<uint8_t> cutHeader(good.begin(), good.begin() + 40);
  EXPECT_EQ(parseError(cutHeader),
            "a.npy: truncated header (118 bytes announced, 30 present)");
  EXPECT_EQ(parseError({0x93, 'N', 'U'}), "a.npy: not a .npy file (bad magic)");
}

TEST(NpyTest, MissingFileAndBadEncodeSize) {
  EXPECT_THAT(errorOf(readNpy("/nonexistent/x.npy")),
              HasSubstr("cannot open '/nonexistent/x.npy'"));
  float value = 1;
  EXPECT_EQ(errorOf(encodeNpy(DType::F32, {2}, &value, 4)),
            "cannot encode .npy: 4 bytes given for f32 [2]");
  EXPECT_EQ(errorOf(encodeNpy(DType(0), {1}, &value, 4)),
            "cannot encode .npy: unknown dtype code 0");
}

} // namespace
