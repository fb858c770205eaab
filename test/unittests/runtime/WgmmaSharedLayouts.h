//===- WgmmaSharedLayouts.h - wgmma tiles in shared memory ------*- C++ -*-===//
//
// The shared-memory images the wgmma tests build, from the PTX ISA's
// canonical layouts ("Asynchronous Warpgroup Level Matrix Shared Memory
// Layout", written as CuTe layouts there), swizzled with the definition of
// CuTe's Swizzle<B, 4, 3>, independently of the emulator's own address
// function. Shared by EmuWgmmaTest (16- and 32-bit types) and
// Emu8BitMmaTest (8-bit types).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_WGMMASHAREDLAYOUTS_H
#define KILN_TEST_UNITTESTS_RUNTIME_WGMMASHAREDLAYOUTS_H

#include <cstdint>

namespace kiln::runtime::test {

enum class Swz { None = 0, B128 = 1, B64 = 2, B32 = 3 };

inline unsigned spanOf(Swz s) {
  return s == Swz::B128 ? 128 : s == Swz::B64 ? 64 : s == Swz::B32 ? 32 : 0;
}

/// CuTe's Swizzle<B, 4, 3> on a byte address.
inline uint64_t cuteSwizzle(uint64_t offset, unsigned bits) {
  uint64_t yyy = ((1ull << bits) - 1) << 7;
  return offset ^ ((offset & yyy) >> 3);
}

/// One operand tile in shared memory: `mn` rows of the M (or N) mode by
/// `kTile` of the K mode, in one canonical layout, with the descriptor
/// fields that describe it.
struct Tile {
  bool mnMajor = false;
  Swz swizzle = Swz::None;
  unsigned mn = 0, kTile = 0, elem = 2;
  uint64_t base = 0; // shared offset of the tile
  uint64_t lbo = 0, sbo = 0;

  /// Element offset (in elements, before the swizzle) of (i, k), from the
  /// ISA's canonical layouts repeated over the tile:
  ///   K-major,  none: ((8,m),(T,k)):((1T,SBO),(1,LBO))
  ///   K-major,  swz:  ((8,m),(T,c)):((cT,SBO),(1,T))
  ///   MN-major, none: ((T,m),(8,k)):((1,SBO),(1T,LBO))
  ///   MN-major, swz:  ((T,c,m),(8,k)):((1,T,LBO),(cT,SBO))
  /// where T = 16 / elem and c = span / 16; LBO and SBO in elements here.
  uint64_t elementOffset(uint64_t i, uint64_t k) const {
    uint64_t t = 16 / elem, c = spanOf(swizzle) / 16;
    uint64_t L = lbo / elem, S = sbo / elem;
    if (!mnMajor) {
      if (swizzle == Swz::None)
        return (i % 8) * t + (i / 8) * S + (k % t) * 1 + (k / t) * L;
      return (i % 8) * (c * t) + (i / 8) * S + (k % t) + (k / t) * t;
    }
    if (swizzle == Swz::None)
      return (i % t) + (i / t) * S + (k % 8) * t + (k / 8) * L;
    return (i % t) + ((i / t) % c) * t + (i / (c * t)) * L + (k % 8) * c * t +
           (k / 8) * S;
  }
  uint64_t byteAddress(uint64_t i, uint64_t k) const {
    uint64_t a = base + elementOffset(i, k) * elem;
    unsigned span = spanOf(swizzle);
    return span ? cuteSwizzle(a, span == 128 ? 3 : span == 64 ? 2 : 1) : a;
  }
  /// Picks compact LBO/SBO for the tile; returns its size in bytes.
  uint64_t layOut() {
    uint64_t t = 16 / elem;
    unsigned span = spanOf(swizzle);
    if (!mnMajor) {
      if (swizzle == Swz::None) { // core matrices of 8 rows x 16 bytes
        lbo = 128;
        sbo = 128 * (kTile / t);
      } else {    // K fits one swizzle row: kTile * elem == span
        lbo = 16; // unused
        sbo = 8 * span;
      }
      return (mn / 8) * sbo;
    }
    if (swizzle == Swz::None) {
      sbo = 128;
      lbo = 128 * (mn / t);
      return (kTile / 8) * lbo;
    }
    uint64_t perAtom = span / elem; // MN elements of one swizzle row
    sbo = 8 * span;
    lbo = (kTile / 8) * sbo;
    return (mn / perAtom) * lbo;
  }
  /// The descriptor of the K slice starting at element k0.
  uint64_t descriptor(uint64_t k0) const {
    uint64_t t = 16 / elem;
    uint64_t start = base;
    if (!mnMajor)
      start += swizzle == Swz::None ? (k0 / t) * lbo : k0 * elem;
    else
      start += swizzle == Swz::None ? (k0 / 8) * lbo : (k0 / 8) * sbo;
    return ((start >> 4) & 0x3fff) | (((lbo >> 4) & 0x3fff) << 16) |
           (((sbo >> 4) & 0x3fff) << 32) |
           (static_cast<uint64_t>(swizzle) << 62);
  }
};

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_WGMMASHAREDLAYOUTS_H
