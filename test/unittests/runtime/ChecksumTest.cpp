//===- ChecksumTest.cpp - CRC32C against published check values -----------===//

#include "kiln/runtime/Checksum.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace kiln::runtime;

namespace {

TEST(ChecksumTest, KnownValues) {
  // The CRC-32C check value and the iSCSI (RFC 3720, B.4) test vectors.
  std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32cPortable(check.data(), check.size()), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), ascending(32);
  for (int i = 0; i < 32; ++i)
    ascending[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(ChecksumTest, HardwareAndPortableAgree) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(4099);
  for (uint8_t &b : data)
    b = static_cast<uint8_t>(rng());
  for (size_t start : {0, 1, 3, 7})
    for (size_t size : {0, 1, 7, 8, 9, 63, 64, 1000, 4092})
      EXPECT_EQ(crc32c(data.data() + start, size),
                crc32cPortable(data.data() + start, size))
          << start << "+" << size;
}

TEST(ChecksumTest, IncrementalEqualsOneShot) {
  std::string text = "the quick brown fox jumps over the lazy dog";
  uint32_t whole = crc32c(text.data(), text.size());
  for (size_t split = 0; split <= text.size(); ++split) {
    uint32_t first = crc32c(text.data(), split);
    EXPECT_EQ(crc32c(text.data() + split, text.size() - split, first), whole);
    EXPECT_EQ(crc32cPortable(text.data() + split, text.size() - split, first),
              whole);
  }
}

TEST(ChecksumTest, DetectsEverySingleBitFlip) {
  std::vector<uint8_t> data(64, 0x5A);
  uint32_t clean = crc32c(data.data(), data.size());
  for (size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<uint8_t>(1 << (bit % 8));
    EXPECT_NE(crc32c(data.data(), data.size()), clean) << bit;
    data[bit / 8] ^= static_cast<uint8_t>(1 << (bit % 8));
  }
}

} // namespace
