//===- Checksum.cpp - CRC32C (Castagnoli) ---------------------------------===//
//
// Slicing-by-8 tables built once at start-up, and the SSE4.2 crc32
// instruction (8 bytes per step) where the CPU has it. Weight sections can be
// gigabytes, so the checksum has to run at memory speed.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Checksum.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kiln::runtime {

namespace {
constexpr uint32_t kPolynomial = 0x82F63B78; // CRC-32C, bit-reversed

using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables buildTables() {
  Tables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (kPolynomial & (0u - (crc & 1)));
    tables[0][byte] = crc;
  }
  for (uint32_t byte = 0; byte < 256; ++byte)
    for (int slice = 1; slice < 8; ++slice)
      tables[slice][byte] = (tables[slice - 1][byte] >> 8) ^
                            tables[0][tables[slice - 1][byte] & 0xFF];
  return tables;
}

const Tables &tables() {
  static const Tables instance = buildTables();
  return instance;
}

/// Works on the inverted register (no initial/final xor).
uint32_t updatePortable(uint32_t crc, const uint8_t *bytes, size_t size) {
  const Tables &t = tables();
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8); // little-endian hosts only (x86-64, arm64)
    uint32_t low = static_cast<uint32_t>(word) ^ crc;
    uint32_t high = static_cast<uint32_t>(word >> 32);
    crc = t[7][low & 0xFF] ^ t[6][(low >> 8) & 0xFF] ^
          t[5][(low >> 16) & 0xFF] ^ t[4][low >> 24] ^ t[3][high & 0xFF] ^
          t[2][(high >> 8) & 0xFF] ^ t[1][(high >> 16) & 0xFF] ^
          t[0][high >> 24];
    bytes += 8;
    size -= 8;
  }
  while (size--)
    crc = (crc >> 8) ^ t[0][(crc ^ *bytes++) & 0xFF];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t
updateHardware(uint32_t crc, const uint8_t *bytes, size_t size) {
  uint64_t crc64 = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    crc64 = _mm_crc32_u64(crc64, word);
    bytes += 8;
    size -= 8;
  }
  uint32_t crc32 = static_cast<uint32_t>(crc64);
  while (size--)
    crc32 = _mm_crc32_u8(crc32, *bytes++);
  return crc32;
}

bool haveHardwareCrc() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif
} // namespace

uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc) {
  return ~updatePortable(~crc, static_cast<const uint8_t *>(data), size);
}

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  if (haveHardwareCrc())
    return ~updateHardware(~crc, static_cast<const uint8_t *>(data), size);
#endif
  return crc32cPortable(data, size, crc);
}

} // namespace kiln::runtime
