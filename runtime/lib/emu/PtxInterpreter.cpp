//===- PtxInterpreter.cpp - Runs decoded PTX kernels on the CPU -----------===//
//
// Registers live in one array per warp, slot-major: slot s of lane l is
// regs[s * 32 + l], a 64-bit cell holding the value's bits zero-extended
// (a 32-bit register's upper half is never read). Each instruction is
// dispatched once per warp and loops over its active lanes inside.
//
// This file is compiled with -frounding-math: the directed roundings (.rz,
// .rm, .rp) switch the host's rounding mode around an instruction's lanes.
//
//===----------------------------------------------------------------------===//

#include "PtxInterpreter.h"

#include "../Support.h"

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <type_traits>

namespace kiln::runtime::emu {

namespace {

constexpr uint32_t kFullMask = 0xffffffffu;

template <typename F>
inline __attribute__((always_inline)) void forLanes(uint32_t mask, F &&f) {
  if (mask == kFullMask) {
    for (unsigned l = 0; l < 32; ++l)
      f(l);
  } else {
    for (uint32_t m = mask; m; m &= m - 1)
      f(static_cast<unsigned>(__builtin_ctz(m)));
  }
}

//===----------------------------------------------------------------------===//
// Numeric helpers
//===----------------------------------------------------------------------===//

template <typename T> inline T bitsTo(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
template <typename T> inline uint64_t toBits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

inline float flushDenormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
inline double flushDenormal(double x) { return x; }

template <typename T> inline T saturate01(T x) {
  if (std::isnan(x))
    return T(0);
  return std::min(std::max(x, T(0)), T(1));
}

/// IEEE half <-> float, round to nearest even.
float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      // Subnormal: normalise.
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mantissa & 0x3ff) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return bitsTo<float>(bits);
}

uint16_t floatToHalf(float f) {
  uint32_t x = static_cast<uint32_t>(toBits(f));
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) // NaN: the hardware's canonical NaN
    return 0x7fffu;
  if (absx == 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) { // below the smallest normal half: subnormal
    float magnitude = bitsTo<float>(absx);
    // Scale so that the half subnormal step (2^-24) is 1, round to even.
    float scaled = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(scaled));
  }
  uint32_t mantissa = absx & 0x7fffffu;
  uint32_t exponent = (absx >> 23) - 127 + 15;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

float bf16ToFloat(uint16_t h) {
  return bitsTo<float>(static_cast<uint32_t>(h) << 16);
}
uint16_t floatToBf16(float f) {
  uint32_t x = static_cast<uint32_t>(toBits(f));
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return 0x7fffu; // the hardware's canonical NaN
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

/// A binary floating-point format narrower than f64.
struct Format {
  int exponentBits;
  int mantissaBits;
};
constexpr Format kHalf{5, 10}, kBf16{8, 7}, kTf32{8, 10};

/// Rounds `x` to `format` (sign, exponent, mantissa packed in the low
/// 1 + E + M bits), with subnormals, overflow by rounding direction, and
/// NaN as the canonical all-ones NaN. Independent of the host's rounding
/// mode: only exact operations (frexp, ldexp, floor, ceil, trunc).
uint32_t roundToFormat(double x, Format format, Rounding rounding) {
  const int e = format.exponentBits, m = format.mantissaBits;
  const uint32_t sign = std::signbit(x) ? 1u << (e + m) : 0u;
  const uint32_t infinity = ((1u << e) - 1) << m;
  if (std::isnan(x))
    return infinity | ((1u << m) - 1);
  if (std::isinf(x))
    return sign | infinity;
  double magnitude = std::fabs(x);
  if (magnitude == 0)
    return sign;
  const int bias = (1 << (e - 1)) - 1;
  const int minExponent = 1 - bias, maxExponent = bias;
  int binary = 0;
  std::frexp(magnitude, &binary); // magnitude in [2^(binary-1), 2^binary)
  int exponent = std::max(binary - 1, minExponent);
  double scaled = std::ldexp(magnitude, m - exponent);
  bool negative = sign != 0;
  double n;
  switch (rounding) {
  case Rounding::Rz:
    n = std::trunc(scaled);
    break;
  case Rounding::Rm:
    n = negative ? std::ceil(scaled) : std::floor(scaled);
    break;
  case Rounding::Rp:
    n = negative ? std::floor(scaled) : std::ceil(scaled);
    break;
  case Rounding::Rna:
    n = std::floor(scaled + 0.5); // scaled < 2^(m+1): exact
    break;
  default: {
    n = std::floor(scaled);
    double rest = scaled - n;
    if (rest > 0.5 || (rest == 0.5 && std::fmod(n, 2.0) != 0))
      n += 1;
    break;
  }
  }
  uint64_t q = static_cast<uint64_t>(n);
  if (q >= (2ull << m)) { // rounded up into the next binade
    q >>= 1;
    ++exponent;
  }
  if (exponent > maxExponent) {
    bool toInfinity = rounding == Rounding::Rp   ? !negative
                      : rounding == Rounding::Rm ? negative
                                                 : rounding != Rounding::Rz;
    uint32_t maxFinite = (((1u << e) - 2) << m) | ((1u << m) - 1);
    return sign | (toInfinity ? infinity : maxFinite);
  }
  if (q < (1ull << m)) // subnormal (exponent is the minimum)
    return sign | static_cast<uint32_t>(q);
  return sign | (static_cast<uint32_t>(exponent + bias) << m) |
         (static_cast<uint32_t>(q) - (1u << m));
}

/// x + y rounded to odd: correct after a second rounding to any format at
/// least two bits narrower than f64 (TwoSum gives the exact error).
double roundOddSum(double x, double y) {
  double s = x + y;
  if (!std::isfinite(s))
    return s;
  double yv = s - x;
  double error = (x - (s - yv)) + (y - yv);
  if (error == 0 || (toBits(s) & 1))
    return s;
  return std::nextafter(s, error > 0 ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity());
}

int roundingModeOf(Rounding r) {
  switch (r) {
  case Rounding::Rz:
  case Rounding::Rzi:
    return FE_TOWARDZERO;
  case Rounding::Rm:
  case Rounding::Rmi:
    return FE_DOWNWARD;
  case Rounding::Rp:
  case Rounding::Rpi:
    return FE_UPWARD;
  default:
    return FE_TONEAREST;
  }
}

/// Sets the host rounding mode for one instruction when it asks for a
/// directed one.
class RoundingScope {
public:
  explicit RoundingScope(Rounding r) : mode(roundingModeOf(r)) {
    if (mode != FE_TONEAREST)
      std::fesetround(mode);
  }
  ~RoundingScope() {
    if (mode != FE_TONEAREST)
      std::fesetround(FE_TONEAREST);
  }

private:
  int mode;
};

template <typename T> T roundToIntegral(T x, Rounding r) {
  switch (r) {
  case Rounding::Rzi:
    return std::trunc(x);
  case Rounding::Rmi:
    return std::floor(x);
  case Rounding::Rpi:
    return std::ceil(x);
  case Rounding::Rni:
    return std::nearbyint(x); // the default mode: to nearest even
  default:
    return x;
  }
}

/// PTX min/max for floats: a NaN operand is ignored unless .NaN, and -0 is
/// below +0.
template <typename T> T floatMin(T a, T b, bool propagateNaN) {
  if (std::isnan(a) || std::isnan(b)) {
    if (propagateNaN || (std::isnan(a) && std::isnan(b)))
      return std::numeric_limits<T>::quiet_NaN();
    return std::isnan(a) ? b : a;
  }
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
template <typename T> T floatMax(T a, T b, bool propagateNaN) {
  if (std::isnan(a) || std::isnan(b)) {
    if (propagateNaN || (std::isnan(a) && std::isnan(b)))
      return std::numeric_limits<T>::quiet_NaN();
    return std::isnan(a) ? b : a;
  }
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

template <typename T> bool compareInt(Cmp cmp, T a, T b) {
  switch (cmp) {
  case Cmp::Eq:
    return a == b;
  case Cmp::Ne:
    return a != b;
  case Cmp::Lt:
  case Cmp::Lo:
    return a < b;
  case Cmp::Le:
  case Cmp::Ls:
    return a <= b;
  case Cmp::Gt:
  case Cmp::Hi:
    return a > b;
  case Cmp::Ge:
  case Cmp::Hs:
    return a >= b;
  default:
    return false;
  }
}

template <typename T> bool compareFloat(Cmp cmp, T a, T b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (cmp) {
  case Cmp::Eq:
    return !unordered && a == b;
  case Cmp::Ne:
    return !unordered && a != b;
  case Cmp::Lt:
    return !unordered && a < b;
  case Cmp::Le:
    return !unordered && a <= b;
  case Cmp::Gt:
    return !unordered && a > b;
  case Cmp::Ge:
    return !unordered && a >= b;
  case Cmp::Equ:
    return unordered || a == b;
  case Cmp::Neu:
    return unordered || a != b;
  case Cmp::Ltu:
    return unordered || a < b;
  case Cmp::Leu:
    return unordered || a <= b;
  case Cmp::Gtu:
    return unordered || a > b;
  case Cmp::Geu:
    return unordered || a >= b;
  case Cmp::Num:
    return !unordered;
  case Cmp::Nan:
    return unordered;
  default:
    return false;
  }
}

/// Float to integer: NaN is 0, out-of-range values saturate.
template <typename I, typename F> I floatToInt(F x) {
  if (std::isnan(x))
    return 0;
  if (x <= static_cast<F>(std::numeric_limits<I>::min()))
    return std::numeric_limits<I>::min();
  if (x >= static_cast<F>(std::numeric_limits<I>::max()))
    return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

/// Calls f with a value of the C++ type for an integer PTX type.
template <typename F> bool withIntType(Type type, F &&f) {
  switch (type) {
  case Type::B8:
  case Type::U8:
    f(uint8_t{});
    return true;
  case Type::S8:
    f(int8_t{});
    return true;
  case Type::B16:
  case Type::U16:
    f(uint16_t{});
    return true;
  case Type::S16:
    f(int16_t{});
    return true;
  case Type::B32:
  case Type::U32:
    f(uint32_t{});
    return true;
  case Type::S32:
    f(int32_t{});
    return true;
  case Type::B64:
  case Type::U64:
    f(uint64_t{});
    return true;
  case Type::S64:
    f(int64_t{});
    return true;
  default:
    return false;
  }
}

template <typename F> bool withFloatType(Type type, F &&f) {
  switch (type) {
  case Type::F32:
    f(float{});
    return true;
  case Type::F64:
    f(double{});
    return true;
  default:
    return false;
  }
}

/// The unsigned integer type of the same size.
template <typename T> struct UnsignedOf {
  using type = std::make_unsigned_t<T>;
};
template <typename T> using UnsignedOfT = typename UnsignedOf<T>::type;

template <typename T> struct WideOf;
template <> struct WideOf<uint8_t> { using type = uint16_t; };
template <> struct WideOf<int8_t> { using type = int16_t; };
template <> struct WideOf<uint16_t> { using type = uint32_t; };
template <> struct WideOf<int16_t> { using type = int32_t; };
template <> struct WideOf<uint32_t> { using type = uint64_t; };
template <> struct WideOf<int32_t> { using type = int64_t; };
template <> struct WideOf<uint64_t> { using type = unsigned __int128; };
template <> struct WideOf<int64_t> { using type = __int128; };
template <typename T> using WideOfT = typename WideOf<T>::type;

//===----------------------------------------------------------------------===//
// Warps and blocks
//===----------------------------------------------------------------------===//

struct WarpState {
  /// Lanes that have not exited.
  uint32_t live = 0;
  /// Lanes waiting at a barrier.
  uint32_t waiting = 0;
  /// When true every live lane that is not waiting is at `pc`.
  bool converged = true;
  uint32_t pc = 0;
  uint32_t lanePc[32] = {};
  /// The barrier id the waiting lanes wait at.
  uint32_t barrier = 0;
  /// Each lane's carry flag (CC.CF), for add.cc/addc/mad.cc/madc.
  uint32_t carry = 0;
};

/// Stops a warp: the fault to report, with the lane that caused it.
struct Fault {
  bool raised = false;
  unsigned warp = 0, lane = 0;
  uint32_t pc = 0;
  std::string what;
};

class BlockRunner {
public:
  BlockRunner(const Kernel &kernel, const LaunchSpec &spec)
      : kernel(kernel), spec(spec), code(kernel.code.data()),
        numSlots(kernel.numSlots) {
    threadsPerBlock = spec.block.x * spec.block.y * spec.block.z;
    numWarps = (threadsPerBlock + 31) / 32;
    regs.assign(static_cast<size_t>(numWarps) * numSlots * 32, 0);
    warps.resize(numWarps);
    sharedBytes = kernel.dynamicSharedOffset + spec.dynamicSharedBytes;
    if (spec.dynamicSharedBytes == 0)
      sharedBytes = std::max<uint64_t>(kernel.staticSharedBytes, 0);
    shared.assign(sharedBytes, 0);
    local.assign(kernel.localBytes * threadsPerBlock, 0);
    regions = spec.memory->data();
    numRegions = spec.memory->size();
    // Constants and per-thread specials are the same in every block.
    for (unsigned w = 0; w < numWarps; ++w) {
      uint64_t *r = warpRegs(w);
      for (const Constant &c : kernel.constants)
        std::fill_n(r + static_cast<size_t>(c.slot) * 32, 32, c.value);
      for (const SpecialSlot &s : kernel.specials) {
        uint64_t *cell = r + static_cast<size_t>(s.slot) * 32;
        for (unsigned l = 0; l < 32; ++l) {
          uint32_t t = w * 32 + l;
          uint64_t v = 0;
          switch (s.which) {
          case Special::TidX:
            v = t % spec.block.x;
            break;
          case Special::TidY:
            v = (t / spec.block.x) % spec.block.y;
            break;
          case Special::TidZ:
            v = t / (spec.block.x * spec.block.y);
            break;
          case Special::NtidX:
            v = spec.block.x;
            break;
          case Special::NtidY:
            v = spec.block.y;
            break;
          case Special::NtidZ:
            v = spec.block.z;
            break;
          case Special::NctaidX:
            v = spec.grid.x;
            break;
          case Special::NctaidY:
            v = spec.grid.y;
            break;
          case Special::NctaidZ:
            v = spec.grid.z;
            break;
          case Special::LaneId:
            v = l;
            break;
          case Special::WarpId:
            v = w;
            break;
          case Special::NWarpId:
            v = numWarps;
            break;
          default: // ctaid: per block
            break;
          }
          cell[l] = v;
        }
      }
    }
  }

  /// Runs block `ctaid`; false on a fault (see errorMessage()).
  bool runBlock(Dim3 ctaid);
  std::string errorMessage() const;

  uint64_t threadInstructions = 0;
  uint64_t warpInstructions = 0;

private:
  uint64_t *warpRegs(unsigned w) {
    return regs.data() + static_cast<size_t>(w) * numSlots * 32;
  }
  bool runWarp(unsigned w);
  bool fault(unsigned warp, unsigned lane, uint32_t pc, std::string what) {
    if (!faultState.raised) {
      faultState.raised = true;
      faultState.warp = warp;
      faultState.lane = lane;
      faultState.pc = pc;
      faultState.what = std::move(what);
    }
    return false;
  }

  /// Host pointer for a global access, or nullptr (and a fault).
  uint8_t *globalPointer(uint64_t address, unsigned size) {
    if (address >= cacheBase && address - cacheBase + size <= cacheSize)
      return cacheHost + (address - cacheBase);
    // Binary search for the last region starting at or before address.
    size_t lo = 0, hi = numRegions;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (regions[mid].base <= address)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0)
      return nullptr;
    const MemoryRegion &region = regions[lo - 1];
    if (address - region.base + size > region.size)
      return nullptr;
    cacheBase = region.base;
    cacheSize = region.size;
    cacheHost = region.host;
    return region.host + (address - region.base);
  }
  std::string describeGlobalMiss(uint64_t address, unsigned size) const;

  bool memoryAccess(unsigned w, uint32_t pc, const Instruction &in,
                    uint32_t exec);
  bool shuffle(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  bool convert(uint64_t *r, const Instruction &in, uint32_t exec);
  bool arithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// f16, bf16, f16x2 and bf16x2 arithmetic (each half on its own).
  bool halfArithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// add/mad with .cc (carry out) or addc/madc (carry in), 32 or 64 bits.
  bool carryArithmetic(WarpState &ws, uint64_t *r, const Instruction &in,
                       uint32_t exec);

  const Kernel &kernel;
  const LaunchSpec &spec;
  const Instruction *code;
  uint32_t numSlots;
  uint32_t threadsPerBlock = 0;
  unsigned numWarps = 0;
  std::vector<uint64_t> regs;
  std::vector<WarpState> warps;
  std::vector<uint8_t> shared;
  uint64_t sharedBytes = 0;
  /// Every thread's local memory, kernel.localBytes each, by thread index.
  std::vector<uint8_t> local;
  const MemoryRegion *regions = nullptr;
  size_t numRegions = 0;
  uint64_t cacheBase = 0, cacheSize = 0;
  uint8_t *cacheHost = nullptr;
  Dim3 ctaid;
  Fault faultState;
};

std::string BlockRunner::describeGlobalMiss(uint64_t address,
                                            unsigned size) const {
  // The allocation just below the address, if it is close: most stray
  // accesses are a little past the end of the buffer they index.
  const MemoryRegion *below = nullptr;
  for (size_t i = 0; i < numRegions; ++i)
    if (regions[i].base <= address)
      below = &regions[i];
  if (below && address < below->base + below->size)
    return fmt::format("[0x{:x}, 0x{:x}) runs past the end of the "
                       "{}-byte allocation at 0x{:x}",
                       address, address + size, below->size, below->base);
  if (below && address - (below->base + below->size) < (1u << 20))
    return fmt::format("0x{:x} is {} bytes past the end of the {}-byte "
                       "allocation at 0x{:x}",
                       address, address - (below->base + below->size),
                       below->size, below->base);
  return fmt::format("0x{:x} is in no allocation", address);
}

std::string BlockRunner::errorMessage() const {
  uint32_t t = faultState.warp * 32 + faultState.lane;
  uint32_t tx = t % spec.block.x, ty = (t / spec.block.x) % spec.block.y,
           tz = t / (spec.block.x * spec.block.y);
  const Instruction &in = code[faultState.pc];
  return fmt::format("kernel '{}', block ({},{},{}), thread ({},{},{}), PTX "
                     "line {} ({}): {}",
                     kernel.name, ctaid.x, ctaid.y, ctaid.z, tx, ty, tz,
                     in.line, kernel.opcodeText[faultState.pc],
                     faultState.what);
}

bool BlockRunner::runBlock(Dim3 id) {
  ctaid = id;
  for (unsigned w = 0; w < numWarps; ++w) {
    uint64_t *r = warpRegs(w);
    for (const SpecialSlot &s : kernel.specials) {
      uint64_t v;
      if (s.which == Special::CtaidX)
        v = id.x;
      else if (s.which == Special::CtaidY)
        v = id.y;
      else if (s.which == Special::CtaidZ)
        v = id.z;
      else
        continue;
      std::fill_n(r + static_cast<size_t>(s.slot) * 32, 32, v);
    }
    WarpState &ws = warps[w];
    uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
    ws.live = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
    ws.waiting = 0;
    ws.converged = true;
    ws.pc = 0;
  }
  if (!shared.empty())
    std::memset(shared.data(), 0, shared.size());
  while (true) {
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].live & ~warps[w].waiting)
        if (!runWarp(w))
          return false;
    // Every warp has exited or waits at a barrier.
    bool anyWaiting = false, anyExited = false;
    unsigned exitedWarp = 0, exitedLane = 0, waitingWarp = 0;
    uint32_t barrier = 0;
    for (unsigned w = 0; w < numWarps; ++w) {
      const WarpState &ws = warps[w];
      uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
      uint32_t all = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
      if (ws.waiting) {
        if (anyWaiting && ws.barrier != barrier) {
          uint32_t pc = ws.converged ? ws.pc
                                     : ws.lanePc[__builtin_ctz(ws.waiting)];
          return fault(w, __builtin_ctz(ws.waiting), pc,
                       fmt::format("barrier {} reached while warp {} waits "
                                   "at barrier {}",
                                   ws.barrier, waitingWarp, barrier));
        }
        if (!anyWaiting) {
          barrier = ws.barrier;
          waitingWarp = w;
        }
        anyWaiting = true;
      }
      if (ws.live != all && !anyExited) {
        anyExited = true;
        exitedWarp = w;
        exitedLane = __builtin_ctz(all & ~ws.live);
      }
    }
    if (!anyWaiting)
      return true;
    if (anyExited) {
      const WarpState &ws = warps[waitingWarp];
      uint32_t lane = __builtin_ctz(ws.waiting);
      uint32_t pc = ws.converged ? ws.pc : ws.lanePc[lane];
      uint32_t t = exitedWarp * 32 + exitedLane;
      return fault(waitingWarp, lane, pc,
                   fmt::format("barrier {} is reached by only part of the "
                               "block: thread ({},{},{}) has exited",
                               barrier, t % spec.block.x,
                               (t / spec.block.x) % spec.block.y,
                               t / (spec.block.x * spec.block.y)));
    }
    // Open the barrier: every waiting lane moves past it.
    for (WarpState &ws : warps) {
      if (!ws.waiting)
        continue;
      if (ws.converged) {
        ++ws.pc;
      } else {
        for (uint32_t m = ws.waiting; m; m &= m - 1)
          ++ws.lanePc[__builtin_ctz(m)];
      }
      ws.waiting = 0;
    }
  }
}

bool BlockRunner::runWarp(unsigned w) {
  WarpState &ws = warps[w];
  uint64_t *r = warpRegs(w);
  const uint32_t codeSize = static_cast<uint32_t>(kernel.code.size());
  uint64_t issuedLanes = 0, issued = 0;
  auto finish = [&](bool ok) {
    threadInstructions += issuedLanes;
    warpInstructions += issued;
    return ok;
  };
  // Writes every lane's pc so that lanes can go separate ways.
  auto diverge = [&]() {
    if (!ws.converged)
      return;
    for (unsigned l = 0; l < 32; ++l)
      ws.lanePc[l] = ws.pc;
    ws.converged = false;
  };
  while (true) {
    uint32_t ready = ws.live & ~ws.waiting;
    if (!ready)
      return finish(true);
    uint32_t pc, mask;
    if (ws.converged) {
      pc = ws.pc;
      mask = ready;
    } else {
      pc = UINT32_MAX;
      for (uint32_t m = ready; m; m &= m - 1)
        pc = std::min(pc, ws.lanePc[__builtin_ctz(m)]);
      mask = 0;
      for (uint32_t m = ready; m; m &= m - 1) {
        unsigned l = __builtin_ctz(m);
        if (ws.lanePc[l] == pc)
          mask |= 1u << l;
      }
      if (mask == ready && ws.waiting == 0) {
        ws.converged = true;
        ws.pc = pc;
      }
    }
    if (pc >= codeSize)
      return finish(fault(w, __builtin_ctz(mask), codeSize - 1,
                          "ran past the end of the kernel"));
    const Instruction &in = code[pc];
    ++issued;
    issuedLanes += __builtin_popcount(mask);
    uint32_t exec = mask;
    if (in.guard != kNoSlot) {
      const uint64_t *g = r + static_cast<size_t>(in.guard) * 32;
      uint32_t on = 0;
      forLanes(mask, [&](unsigned l) { on |= (g[l] & 1) << l; });
      exec = in.negateGuard ? mask & ~on : on;
    }
    uint32_t next = pc + 1;
    switch (in.op) {
    case Op::Bra: {
      uint32_t stay = mask & ~exec;
      if (ws.converged && stay == 0) {
        ws.pc = in.target;
      } else if (ws.converged && exec == 0) {
        ws.pc = next;
      } else {
        diverge();
        forLanes(exec, [&](unsigned l) { ws.lanePc[l] = in.target; });
        forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      continue;
    }
    case Op::Ret:
    case Op::Exit: {
      ws.live &= ~exec;
      uint32_t stay = mask & ~exec;
      if (stay) {
        if (ws.converged)
          ws.pc = next;
        else
          forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      continue;
    }
    case Op::Bar: {
      if (in.numSrc > 1)
        return finish(fault(w, __builtin_ctz(mask), pc,
                            "bar.sync with a thread count is not emulated"));
      uint32_t id = static_cast<uint32_t>(
          r[static_cast<size_t>(in.src[0]) * 32 + __builtin_ctz(mask)]);
      if (ws.waiting && id != ws.barrier)
        return finish(fault(w, __builtin_ctz(mask), pc,
                            fmt::format("barrier {} reached while other "
                                        "lanes of the warp wait at barrier {}",
                                        id, ws.barrier)));
      uint32_t stay = mask & ~exec;
      if (stay) {
        diverge();
        forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      ws.waiting |= exec;
      ws.barrier = id;
      continue;
    }
    case Op::Shfl:
      if (!shuffle(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Ld:
    case Op::St:
      if (!memoryAccess(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Membar:
      break;
    case Op::Cvt:
      if (!convert(r, in, exec))
        return finish(fault(w, __builtin_ctz(mask), pc,
                            "unsupported conversion"));
      break;
    default:
      if (in.carryIn || in.carryOut) {
        if (!carryArithmetic(ws, r, in, exec))
          return finish(fault(w, __builtin_ctz(mask), pc,
                              "unsupported carry-chain instruction"));
        break;
      }
      if (!arithmetic(r, in, exec))
        return finish(fault(w, __builtin_ctz(mask), pc,
                            fmt::format("type .{} is not emulated for this "
                                        "instruction",
                                        typeName(in.type))));
      break;
    }
    if (ws.converged)
      ws.pc = next;
    else
      forLanes(mask, [&](unsigned l) { ws.lanePc[l] = next; });
  }
}

bool BlockRunner::shuffle(unsigned w, uint32_t pc, const Instruction &in,
                          uint32_t exec) {
  if (!exec)
    return true;
  uint64_t *r = warpRegs(w);
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  const uint64_t *b = r + static_cast<size_t>(in.src[1]) * 32;
  const uint64_t *c = r + static_cast<size_t>(in.src[2]) * 32;
  const uint64_t *memberMask = r + static_cast<size_t>(in.src[3]) * 32;
  unsigned first = __builtin_ctz(exec);
  uint32_t members = static_cast<uint32_t>(memberMask[first]);
  if (members & ~exec) {
    unsigned missing = __builtin_ctz(members & ~exec);
    return fault(w, first, pc,
                 fmt::format("shfl.sync member mask 0x{:08x} names lane {}, "
                             "which is not at this instruction",
                             members, missing));
  }
  uint32_t values[32];
  bool valid[32];
  forLanes(exec, [&](unsigned lane) {
    uint32_t bval = static_cast<uint32_t>(b[lane]) & 31;
    uint32_t cval = static_cast<uint32_t>(c[lane]);
    uint32_t segmask = (cval >> 8) & 31;
    uint32_t clamp = cval & 31;
    int maxLane = static_cast<int>((lane & segmask) | (clamp & ~segmask));
    int minLane = static_cast<int>(lane & segmask);
    int j = 0;
    bool pval = false;
    switch (in.shflMode) {
    case ShflMode::Up: // the clamp is a lower bound here (c is usually 0)
      j = static_cast<int>(lane) - static_cast<int>(bval);
      pval = j >= maxLane;
      break;
    case ShflMode::Down:
      j = static_cast<int>(lane) + static_cast<int>(bval);
      pval = j <= maxLane;
      break;
    case ShflMode::Bfly:
      j = static_cast<int>(lane ^ bval);
      pval = j <= maxLane;
      break;
    case ShflMode::Idx:
      j = minLane | static_cast<int>(bval & ~segmask);
      pval = j <= maxLane;
      break;
    }
    if (!pval)
      j = static_cast<int>(lane);
    values[lane] = static_cast<uint32_t>(a[j]);
    valid[lane] = pval;
  });
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  forLanes(exec, [&](unsigned lane) { d[lane] = values[lane]; });
  if (in.dst[1] != kNoSlot) {
    uint64_t *p = r + static_cast<size_t>(in.dst[1]) * 32;
    forLanes(exec, [&](unsigned lane) { p[lane] = valid[lane]; });
  }
  return true;
}

bool BlockRunner::memoryAccess(unsigned w, uint32_t pc, const Instruction &in,
                               uint32_t exec) {
  uint64_t *r = warpRegs(w);
  const unsigned size = typeBytes(in.type);
  const unsigned total = size * in.vec;
  const bool isLoad = in.op == Op::Ld;
  const uint64_t *base = r + static_cast<size_t>(in.src[0]) * 32;
  const bool signExtend = isSigned(in.type);
  const char *verb = isLoad ? "load" : "store";
  bool ok = true;
  auto loadValue = [&](const uint8_t *p) -> uint64_t {
    switch (size) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return signExtend ? static_cast<uint64_t>(static_cast<int8_t>(v)) : v;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return signExtend ? static_cast<uint64_t>(static_cast<int16_t>(v)) : v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return signExtend ? static_cast<uint64_t>(static_cast<int32_t>(v)) : v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    }
  };
  auto transfer = [&](unsigned lane, uint8_t *p) {
    if (isLoad) {
      for (unsigned e = 0; e < in.vec; ++e)
        r[static_cast<size_t>(in.dst[e]) * 32 + lane] =
            loadValue(p + e * size);
    } else {
      for (unsigned e = 0; e < in.vec; ++e)
        std::memcpy(p + e * size,
                    &r[static_cast<size_t>(in.src[1 + e]) * 32 + lane], size);
    }
  };
  switch (in.space) {
  case Space::Param: {
    if (!isLoad)
      return fault(w, __builtin_ctz(exec), pc,
                   "stores to the parameter space are not emulated");
    bool inRange = true;
    forLanes(exec, [&](unsigned lane) {
      uint64_t address = base[lane] + in.offset;
      if (address + total > spec.paramBytes || address > spec.paramBytes) {
        inRange = false;
        return;
      }
      transfer(lane, const_cast<uint8_t *>(spec.params) + address);
    });
    if (!inRange)
      return fault(w, __builtin_ctz(exec), pc,
                   fmt::format("parameter load outside the {} bytes of "
                               "parameters passed",
                               spec.paramBytes));
    return true;
  }
  case Space::Shared:
  case Space::Global:
  case Space::Const:
  case Space::Generic: {
    forLanes(exec, [&](unsigned lane) {
      if (!ok)
        return;
      uint64_t address = base[lane] + in.offset;
      if (address % total != 0) {
        ok = fault(w, lane, pc,
                   fmt::format("misaligned {} {} of {} bytes at 0x{:x}",
                               in.space == Space::Shared ? "shared" : "global",
                               verb, total, address));
        return;
      }
      bool isShared = in.space == Space::Shared;
      if (in.space == Space::Generic && address >= kSharedWindow &&
          address < kSharedWindow + (1ull << 32)) {
        isShared = true;
        address -= kSharedWindow;
      }
      uint8_t *p;
      if (isShared) {
        if (address > sharedBytes || total > sharedBytes - address) {
          ok = fault(w, lane, pc,
                     fmt::format("out-of-bounds shared {} of {} bytes at "
                                 "offset {} (the block has {} bytes of "
                                 "shared memory)",
                                 verb, total, address, sharedBytes));
          return;
        }
        p = shared.data() + address;
      } else {
        p = globalPointer(address, total);
        if (!p) {
          ok = fault(w, lane, pc,
                     fmt::format("out-of-bounds global {} of {} bytes: {}",
                                 verb, total,
                                 describeGlobalMiss(address, total)));
          return;
        }
      }
      transfer(lane, p);
    });
    return ok;
  }
  case Space::Local: {
    uint64_t bytes = kernel.localBytes;
    forLanes(exec, [&](unsigned lane) {
      if (!ok)
        return;
      uint64_t address = base[lane] + in.offset;
      if (address > bytes || total > bytes - address) {
        ok = fault(w, lane, pc,
                   fmt::format("out-of-bounds local {} of {} bytes at offset "
                               "{} (each thread has {} bytes)",
                               verb, total, address, bytes));
        return;
      }
      uint64_t thread = static_cast<uint64_t>(w) * 32 + lane;
      transfer(lane, local.data() + thread * bytes + address);
    });
    return ok;
  }
  }
  return fault(w, __builtin_ctz(exec), pc, "unknown state space");
}

bool BlockRunner::convert(uint64_t *r, const Instruction &in, uint32_t exec) {
  const uint64_t *a = r + static_cast<size_t>(in.src[0]) * 32;
  uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
  Type dt = in.type, st = in.srcType;
  // Reads the source as a double (floats) or int64/uint64 (integers).
  auto readFloat = [&](const uint64_t *s, unsigned l) -> double {
    if (st == Type::F16) {
      float f = halfToFloat(static_cast<uint16_t>(s[l]));
      return in.ftz ? flushDenormal(f) : f;
    }
    if (st == Type::BF16)
      return bf16ToFloat(static_cast<uint16_t>(s[l]));
    if (st == Type::F32 || st == Type::TF32) {
      float f = bitsTo<float>(s[l]);
      return in.ftz ? flushDenormal(f) : f;
    }
    return bitsTo<double>(s[l]);
  };
  const bool integral =
      in.rounding == Rounding::Rni || in.rounding == Rounding::Rzi ||
      in.rounding == Rounding::Rmi || in.rounding == Rounding::Rpi;
  // Rounds a double to a 16-bit (or tf32) destination; the result's bits.
  auto toNarrow = [&](double x) -> uint64_t {
    if (in.relu && x < 0)
      x = 0;
    Rounding rounding = integral || in.rounding == Rounding::None
                            ? Rounding::Rn
                            : in.rounding;
    Format format = dt == Type::BF16 || dt == Type::BF16x2 ? kBf16
                    : dt == Type::TF32                     ? kTf32
                                                           : kHalf;
    uint32_t bits = roundToFormat(x, format, rounding);
    uint32_t infinity = ((1u << format.exponentBits) - 1)
                        << format.mantissaBits;
    if (in.satfinite && (bits & ~(infinity << 1)) == infinity)
      bits -= 1; // +-inf to +-max finite
    if (dt == Type::TF32) // an f32 pattern whose low 13 bits are zero
      return std::isnan(x) ? 0x7fffffffu : static_cast<uint64_t>(bits) << 13;
    if (in.ftz && dt == Type::F16 && (bits & 0x7c00u) == 0)
      bits &= 0x8000u;
    return bits;
  };
  auto isNarrow = [](Type t) {
    return t == Type::F16 || t == Type::BF16 || t == Type::TF32 ||
           t == Type::F16x2 || t == Type::BF16x2;
  };
  RoundingScope scope(isFloat(dt) && !isFloat(st) ? in.rounding
                      : isFloat(dt) && isFloat(st) &&
                              typeBytes(dt) < typeBytes(st)
                          ? in.rounding
                          : Rounding::None);
  if (isFloat(st) && !isFloat(dt)) {
    // Float to integer.
    if (st == Type::F16x2 || st == Type::BF16x2)
      return false;
    Rounding rnd = in.rounding == Rounding::None ? Rounding::Rzi : in.rounding;
    return withIntType(dt, [&](auto tag) {
      using T = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        double x = roundToIntegral(readFloat(a, l), rnd);
        d[l] = toBits(static_cast<UnsignedOfT<T>>(floatToInt<T>(x)));
      });
    });
  }
  if (!isFloat(st) && isFloat(dt)) {
    // Integer to float.
    if (dt == Type::F16x2 || dt == Type::BF16x2 || dt == Type::TF32)
      return false;
    return withIntType(st, [&](auto tag) {
      using S = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        S x = bitsTo<S>(a[l]);
        if (dt == Type::F64) {
          d[l] = toBits(static_cast<double>(x));
        } else if (dt == Type::F32) {
          float f = static_cast<float>(x); // rounded in the scope's mode
          if (in.sat)
            f = saturate01(f);
          d[l] = toBits(f);
        } else {
          // One rounding, from the exact value (exact in a double for
          // integers up to 2^53).
          double v = static_cast<double>(x);
          if (in.sat)
            v = saturate01(v);
          d[l] = toNarrow(v);
        }
      });
    });
  }
  if (isFloat(st) && isFloat(dt)) {
    if (st == Type::F16x2 || st == Type::BF16x2)
      return false;
    if (dt == Type::F16x2 || dt == Type::BF16x2) {
      // cvt.rn.f16x2.f32 d, a, b: a in the upper half, b in the lower.
      if (st != Type::F32 || in.numSrc != 2)
        return false;
      const uint64_t *b = r + static_cast<size_t>(in.src[1]) * 32;
      forLanes(exec, [&](unsigned l) {
        double hi = readFloat(a, l), lo = readFloat(b, l);
        if (in.sat) {
          hi = saturate01(hi);
          lo = saturate01(lo);
        }
        d[l] = (toNarrow(hi) << 16) | toNarrow(lo);
      });
      return true;
    }
    const bool fastHalf = st == Type::F32 && !in.relu && !in.satfinite &&
                          !in.sat && !integral && !in.ftz &&
                          (in.rounding == Rounding::None ||
                           in.rounding == Rounding::Rn);
    if (fastHalf && dt == Type::F16) {
      forLanes(exec,
               [&](unsigned l) { d[l] = floatToHalf(bitsTo<float>(a[l])); });
      return true;
    }
    if (fastHalf && dt == Type::BF16) {
      forLanes(exec,
               [&](unsigned l) { d[l] = floatToBf16(bitsTo<float>(a[l])); });
      return true;
    }
    forLanes(exec, [&](unsigned l) {
      double x = readFloat(a, l);
      if (integral)
        x = roundToIntegral(x, in.rounding); // exact in the source's type
      if (in.sat)
        x = saturate01(x);
      if (dt == Type::F64) {
        d[l] = toBits(x);
        return;
      }
      if (isNarrow(dt)) {
        d[l] = toNarrow(x);
        return;
      }
      float f = static_cast<float>(x); // f64: rounded in the scope's mode
      if (in.ftz)
        f = flushDenormal(f);
      d[l] = toBits(f);
    });
    return true;
  }
  // Integer to integer: extend by the source's signedness, saturate to the
  // destination's range when asked, truncate.
  return withIntType(st, [&](auto stag) {
    using S = decltype(stag);
    withIntType(dt, [&](auto dtag) {
      using D = decltype(dtag);
      forLanes(exec, [&](unsigned l) {
        S x = bitsTo<S>(a[l]);
        D y;
        if (in.sat) {
          // Compare in a type wide enough for both.
          using W = __int128;
          W v = static_cast<W>(x);
          W lo = static_cast<W>(std::numeric_limits<D>::min());
          W hi = static_cast<W>(std::numeric_limits<D>::max());
          y = static_cast<D>(std::min(std::max(v, lo), hi));
        } else {
          y = static_cast<D>(x);
        }
        d[l] = toBits(static_cast<UnsignedOfT<D>>(y));
      });
    });
  });
}

bool BlockRunner::carryArithmetic(WarpState &ws, uint64_t *r,
                                  const Instruction &in, uint32_t exec) {
  unsigned bits = typeBytes(in.type) * 8;
  if ((bits != 32 && bits != 64) || isFloat(in.type) ||
      (in.op != Op::Add && in.op != Op::Mad) ||
      (in.op == Op::Mad && in.mulMode == MulMode::Wide))
    return false;
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = slot(in.src[0]), *b = slot(in.src[1]);
  const uint64_t *c = in.op == Op::Mad ? slot(in.src[2]) : nullptr;
  uint64_t mask = bits == 64 ? ~0ull : 0xffffffffull;
  uint32_t carryOut = 0;
  forLanes(exec, [&](unsigned l) {
    unsigned __int128 x = a[l] & mask, y = b[l] & mask;
    unsigned __int128 term = x;
    if (in.op == Op::Mad) {
      unsigned __int128 product = x * y;
      term = in.mulMode == MulMode::Hi ? (product >> bits) & mask
                                       : product & mask;
      y = c[l] & mask;
    }
    unsigned __int128 sum = term + y + (in.carryIn ? (ws.carry >> l) & 1 : 0);
    d[l] = static_cast<uint64_t>(sum) & mask;
    if ((sum >> bits) & 1)
      carryOut |= 1u << l;
  });
  if (in.carryOut)
    ws.carry = (ws.carry & ~exec) | carryOut;
  return true;
}

bool BlockRunner::arithmetic(uint64_t *r, const Instruction &in,
                             uint32_t exec) {
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = in.numSrc > 0 ? slot(in.src[0]) : nullptr;
  const uint64_t *b = in.numSrc > 1 ? slot(in.src[1]) : nullptr;
  const uint64_t *c = in.numSrc > 2 ? slot(in.src[2]) : nullptr;
  const Type type = in.type;

  // Ops that only move bits.
  switch (in.op) {
  case Op::Mov: {
    if (in.vec > 1) {
      unsigned bits = typeBytes(type) * 8 / in.vec;
      uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
      if (in.numDst == 1) { // pack
        forLanes(exec, [&](unsigned l) {
          uint64_t v = 0;
          for (unsigned e = 0; e < in.vec; ++e)
            v |= (slot(in.src[e])[l] & mask) << (e * bits);
          d[l] = v;
        });
      } else { // unpack
        forLanes(exec, [&](unsigned l) {
          uint64_t v = a[l];
          for (unsigned e = 0; e < in.vec; ++e)
            if (in.dst[e] != kNoSlot)
              slot(in.dst[e])[l] = (v >> (e * bits)) & mask;
        });
      }
      return true;
    }
    unsigned bytes = typeBytes(type);
    uint64_t mask = type == Type::Pred ? 1
                    : bytes == 8       ? ~0ull
                                       : ((1ull << (bytes * 8)) - 1);
    forLanes(exec, [&](unsigned l) { d[l] = a[l] & mask; });
    return true;
  }
  case Op::Selp: {
    unsigned bytes = typeBytes(type);
    uint64_t mask = bytes == 8 ? ~0ull : ((1ull << (bytes * 8)) - 1);
    forLanes(exec,
             [&](unsigned l) { d[l] = ((c[l] & 1) ? a[l] : b[l]) & mask; });
    return true;
  }
  case Op::Cvta: {
    // Global addresses are the same in the generic space; shared ones are
    // offset by the shared window.
    uint64_t mask = typeBytes(type) == 8 ? ~0ull : 0xffffffffull;
    int64_t delta = 0;
    if (in.space == Space::Shared)
      delta = in.toSpace ? -static_cast<int64_t>(kSharedWindow)
                         : static_cast<int64_t>(kSharedWindow);
    else if (in.space == Space::Local)
      return false;
    forLanes(exec, [&](unsigned l) { d[l] = (a[l] + delta) & mask; });
    return true;
  }
  default:
    break;
  }

  if (type == Type::Pred) {
    switch (in.op) {
    case Op::And:
      forLanes(exec, [&](unsigned l) { d[l] = a[l] & b[l] & 1; });
      return true;
    case Op::Or:
      forLanes(exec, [&](unsigned l) { d[l] = (a[l] | b[l]) & 1; });
      return true;
    case Op::Xor:
      forLanes(exec, [&](unsigned l) { d[l] = (a[l] ^ b[l]) & 1; });
      return true;
    case Op::Not:
      forLanes(exec, [&](unsigned l) { d[l] = (a[l] & 1) ^ 1; });
      return true;
    default:
      return false;
    }
  }

  if (in.op == Op::Setp) {
    uint64_t *q = in.numDst > 1 && in.dst[1] != kNoSlot ? slot(in.dst[1])
                                                        : nullptr;
    auto store = [&](unsigned l, bool v) {
      d[l] = v;
      if (q)
        q[l] = !v;
    };
    if (isFloat(type)) {
      if (type == Type::F16 || type == Type::BF16 || type == Type::F16x2 ||
          type == Type::BF16x2) {
        // For the x2 types p compares the lower halves and q the upper.
        bool bf = type == Type::BF16 || type == Type::BF16x2;
        bool pair = type == Type::F16x2 || type == Type::BF16x2;
        auto value = [&](uint64_t bits) {
          uint16_t h = static_cast<uint16_t>(bits);
          float f = bf ? bf16ToFloat(h) : halfToFloat(h);
          return in.ftz && !bf && (h & 0x7c00u) == 0 ? std::copysign(0.f, f)
                                                      : f;
        };
        forLanes(exec, [&](unsigned l) {
          bool lo = compareFloat(in.cmp, value(a[l]), value(b[l]));
          if (!pair) {
            store(l, lo);
            return;
          }
          d[l] = lo;
          if (q)
            q[l] = compareFloat(in.cmp, value(a[l] >> 16), value(b[l] >> 16));
        });
        return true;
      }
      return withFloatType(type, [&](auto tag) {
        using T = decltype(tag);
        forLanes(exec, [&](unsigned l) {
          T x = bitsTo<T>(a[l]), y = bitsTo<T>(b[l]);
          if (in.ftz) {
            x = flushDenormal(x);
            y = flushDenormal(y);
          }
          store(l, compareFloat(in.cmp, x, y));
        });
      });
    }
    return withIntType(type, [&](auto tag) {
      using T = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        store(l, compareInt(in.cmp, bitsTo<T>(a[l]), bitsTo<T>(b[l])));
      });
    });
  }

  bool handled = true;
  if (type == Type::F16 || type == Type::BF16 || type == Type::F16x2 ||
      type == Type::BF16x2)
    return halfArithmetic(r, in, exec);
  if (isFloat(type)) {
    RoundingScope scope(in.rounding);
    bool typed = withFloatType(type, [&](auto tag) {
      using T = decltype(tag);
      const bool ftz = in.ftz, sat = in.sat;
      auto in1 = [&](const uint64_t *s, unsigned l) {
        T x = bitsTo<T>(s[l]);
        return ftz ? flushDenormal(x) : x;
      };
      auto out = [&](unsigned l, T x) {
        if (sat)
          x = saturate01(x);
        if (ftz)
          x = flushDenormal(x);
        d[l] = toBits(x);
      };
      switch (in.op) {
      case Op::Add:
        forLanes(exec, [&](unsigned l) { out(l, in1(a, l) + in1(b, l)); });
        break;
      case Op::Sub:
        forLanes(exec, [&](unsigned l) { out(l, in1(a, l) - in1(b, l)); });
        break;
      case Op::Mul:
        forLanes(exec, [&](unsigned l) { out(l, in1(a, l) * in1(b, l)); });
        break;
      case Op::Div:
        forLanes(exec, [&](unsigned l) { out(l, in1(a, l) / in1(b, l)); });
        break;
      case Op::Mad:
      case Op::Fma:
        forLanes(exec, [&](unsigned l) {
          out(l, std::fma(in1(a, l), in1(b, l), in1(c, l)));
        });
        break;
      case Op::Neg:
        forLanes(exec, [&](unsigned l) { out(l, -in1(a, l)); });
        break;
      case Op::Abs:
        forLanes(exec, [&](unsigned l) { out(l, std::fabs(in1(a, l))); });
        break;
      case Op::Min:
        forLanes(exec, [&](unsigned l) {
          out(l, floatMin(in1(a, l), in1(b, l), in.propagateNaN));
        });
        break;
      case Op::Max:
        forLanes(exec, [&](unsigned l) {
          out(l, floatMax(in1(a, l), in1(b, l), in.propagateNaN));
        });
        break;
      case Op::Copysign: // copysign d, a, b: b's magnitude, a's sign
        forLanes(exec, [&](unsigned l) {
          out(l, std::copysign(in1(b, l), in1(a, l)));
        });
        break;
      case Op::Rcp:
        forLanes(exec, [&](unsigned l) { out(l, T(1) / in1(a, l)); });
        break;
      case Op::Sqrt:
        forLanes(exec, [&](unsigned l) { out(l, std::sqrt(in1(a, l))); });
        break;
      case Op::Rsqrt:
        forLanes(exec,
                 [&](unsigned l) { out(l, T(1) / std::sqrt(in1(a, l))); });
        break;
      case Op::Ex2:
        forLanes(exec, [&](unsigned l) { out(l, std::exp2(in1(a, l))); });
        break;
      case Op::Lg2:
        forLanes(exec, [&](unsigned l) { out(l, std::log2(in1(a, l))); });
        break;
      case Op::Sin:
        forLanes(exec, [&](unsigned l) { out(l, std::sin(in1(a, l))); });
        break;
      case Op::Cos:
        forLanes(exec, [&](unsigned l) { out(l, std::cos(in1(a, l))); });
        break;
      case Op::Tanh:
        forLanes(exec, [&](unsigned l) { out(l, std::tanh(in1(a, l))); });
        break;
      default:
        handled = false;
        break;
      }
    });
    return typed && handled;
  }

  // Integer ops. Arithmetic wraps (done in the unsigned type).
  bool typed = withIntType(type, [&](auto tag) {
    using T = decltype(tag);
    using U = UnsignedOfT<T>;
    constexpr unsigned bits = sizeof(T) * 8;
    auto A = [&](unsigned l) { return bitsTo<T>(a[l]); };
    auto B = [&](unsigned l) { return bitsTo<T>(b[l]); };
    auto C = [&](unsigned l) { return bitsTo<T>(c[l]); };
    auto put = [&](unsigned l, T v) { d[l] = toBits(static_cast<U>(v)); };
    switch (in.op) {
    case Op::Add:
      if (in.sat && std::is_same_v<T, int32_t>) {
        forLanes(exec, [&](unsigned l) {
          int64_t v = static_cast<int64_t>(A(l)) + B(l);
          put(l, static_cast<T>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)));
        });
      } else {
        forLanes(exec, [&](unsigned l) {
          put(l, static_cast<T>(static_cast<U>(A(l)) + static_cast<U>(B(l))));
        });
      }
      break;
    case Op::Sub:
      forLanes(exec, [&](unsigned l) {
        put(l, static_cast<T>(static_cast<U>(A(l)) - static_cast<U>(B(l))));
      });
      break;
    case Op::Mul:
    case Op::Mad: {
      bool mad = in.op == Op::Mad;
      using W = WideOfT<T>;
      using WU = std::make_unsigned_t<W>;
      if (in.mulMode == MulMode::Wide) {
        if constexpr (sizeof(T) == 8) {
          handled = false;
        } else {
          forLanes(exec, [&](unsigned l) {
            W p = static_cast<W>(A(l)) * static_cast<W>(B(l));
            if (mad)
              p = static_cast<W>(static_cast<WU>(p) +
                                 static_cast<WU>(bitsTo<W>(c[l])));
            d[l] = toBits(static_cast<WU>(p));
          });
        }
      } else if (in.mulMode == MulMode::Hi) {
        forLanes(exec, [&](unsigned l) {
          W p = static_cast<W>(A(l)) * static_cast<W>(B(l));
          T hi = static_cast<T>(p >> bits);
          if (mad)
            hi = static_cast<T>(static_cast<U>(hi) + static_cast<U>(C(l)));
          put(l, hi);
        });
      } else {
        forLanes(exec, [&](unsigned l) {
          U p = static_cast<U>(static_cast<U>(A(l)) * static_cast<U>(B(l)));
          if (mad)
            p = static_cast<U>(p + static_cast<U>(C(l)));
          put(l, static_cast<T>(p));
        });
      }
      break;
    }
    case Op::Div:
      forLanes(exec, [&](unsigned l) {
        T x = A(l), y = B(l);
        if (y == 0)
          put(l, static_cast<T>(~U(0))); // what the hardware returns
        else if (std::is_signed_v<T> && y == T(-1))
          put(l, static_cast<T>(U(0) - static_cast<U>(x)));
        else
          put(l, static_cast<T>(x / y));
      });
      break;
    case Op::Rem:
      forLanes(exec, [&](unsigned l) {
        T x = A(l), y = B(l);
        if (y == 0)
          put(l, x);
        else if (std::is_signed_v<T> && y == T(-1))
          put(l, T(0));
        else
          put(l, static_cast<T>(x % y));
      });
      break;
    case Op::Neg:
      forLanes(exec, [&](unsigned l) {
        put(l, static_cast<T>(U(0) - static_cast<U>(A(l))));
      });
      break;
    case Op::Abs:
      forLanes(exec, [&](unsigned l) {
        T x = A(l);
        put(l, x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x);
      });
      break;
    case Op::Min:
      forLanes(exec, [&](unsigned l) { put(l, std::min(A(l), B(l))); });
      break;
    case Op::Max:
      forLanes(exec, [&](unsigned l) { put(l, std::max(A(l), B(l))); });
      break;
    case Op::And:
      forLanes(exec, [&](unsigned l) { put(l, static_cast<T>(A(l) & B(l))); });
      break;
    case Op::Or:
      forLanes(exec, [&](unsigned l) { put(l, static_cast<T>(A(l) | B(l))); });
      break;
    case Op::Xor:
      forLanes(exec, [&](unsigned l) { put(l, static_cast<T>(A(l) ^ B(l))); });
      break;
    case Op::Not:
      forLanes(exec, [&](unsigned l) { put(l, static_cast<T>(~A(l))); });
      break;
    case Op::Shl:
      forLanes(exec, [&](unsigned l) {
        uint32_t n = static_cast<uint32_t>(b[l]);
        put(l, n >= bits ? T(0)
                         : static_cast<T>(static_cast<U>(A(l)) << n));
      });
      break;
    case Op::Shr:
      forLanes(exec, [&](unsigned l) {
        uint32_t n = static_cast<uint32_t>(b[l]);
        T x = A(l);
        if (n >= bits)
          put(l, (std::is_signed_v<T> && x < 0) ? T(-1) : T(0));
        else
          put(l, static_cast<T>(x >> n)); // arithmetic for signed
      });
      break;
    case Op::Popc:
      forLanes(exec, [&](unsigned l) {
        d[l] = static_cast<uint32_t>(
            __builtin_popcountll(static_cast<uint64_t>(static_cast<U>(A(l)))));
      });
      break;
    case Op::Clz:
      forLanes(exec, [&](unsigned l) {
        uint64_t x = static_cast<U>(A(l));
        d[l] = x == 0 ? bits
                      : static_cast<uint32_t>(__builtin_clzll(x) - (64 - bits));
      });
      break;
    case Op::Brev:
      forLanes(exec, [&](unsigned l) {
        U x = static_cast<U>(A(l)), y = 0;
        for (unsigned i = 0; i < bits; ++i)
          y = static_cast<U>(y | (((x >> i) & 1) << (bits - 1 - i)));
        put(l, static_cast<T>(y));
      });
      break;
    case Op::Bfe:
      forLanes(exec, [&](unsigned l) {
        U x = static_cast<U>(A(l));
        unsigned pos = static_cast<uint32_t>(b[l]) & 0xff;
        unsigned len = static_cast<uint32_t>(c[l]) & 0xff;
        unsigned msb = bits - 1;
        bool sbit = false;
        if (std::is_signed_v<T> && len != 0)
          sbit = (x >> std::min(pos + len - 1, msb)) & 1;
        U result = 0;
        for (unsigned i = 0; i <= msb; ++i) {
          bool bit = (i < len && pos + i <= msb) ? ((x >> (pos + i)) & 1)
                                                 : sbit;
          result = static_cast<U>(result | (U(bit) << i));
        }
        put(l, static_cast<T>(result));
      });
      break;
    case Op::Shf:
      // {b:a} as 64 bits; left keeps the high word, right the low word.
      forLanes(exec, [&](unsigned l) {
        uint64_t pair = (static_cast<uint64_t>(static_cast<uint32_t>(b[l])) << 32) |
                        static_cast<uint32_t>(a[l]);
        uint32_t n = static_cast<uint32_t>(c[l]);
        n = in.shiftClamp ? std::min<uint32_t>(n, 32) : n & 31;
        uint32_t v = in.shiftLeft ? static_cast<uint32_t>((pair << n) >> 32)
                                  : static_cast<uint32_t>(pair >> n);
        d[l] = v;
      });
      break;
    case Op::Bfi:
      forLanes(exec, [&](unsigned l) {
        U x = static_cast<U>(A(l)), y = static_cast<U>(B(l));
        const uint64_t *e = slot(in.src[3]);
        unsigned pos = static_cast<uint32_t>(c[l]) & 0xff;
        unsigned len = static_cast<uint32_t>(e[l]) & 0xff;
        U result = y;
        for (unsigned i = 0; i < len && pos + i < bits; ++i) {
          U bit = (x >> i) & 1;
          result = static_cast<U>((result & ~(U(1) << (pos + i))) |
                                  (bit << (pos + i)));
        }
        put(l, static_cast<T>(result));
      });
      break;
    default:
      handled = false;
      break;
    }
  });
  return typed && handled;
}

bool BlockRunner::halfArithmetic(uint64_t *r, const Instruction &in,
                                 uint32_t exec) {
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = in.numSrc > 0 ? slot(in.src[0]) : nullptr;
  const uint64_t *b = in.numSrc > 1 ? slot(in.src[1]) : nullptr;
  const uint64_t *c = in.numSrc > 2 ? slot(in.src[2]) : nullptr;
  const bool bf = in.type == Type::BF16 || in.type == Type::BF16x2;
  const unsigned halves =
      in.type == Type::F16x2 || in.type == Type::BF16x2 ? 2 : 1;
  const Format format = bf ? kBf16 : kHalf;
  const uint16_t exponentMask = bf ? 0x7f80u : 0x7c00u;
  const Rounding rounding =
      in.rounding == Rounding::None ? Rounding::Rn : in.rounding;
  auto decode = [&](uint16_t h) -> double {
    if (in.ftz && (h & exponentMask) == 0)
      h &= 0x8000u;
    return bf ? bf16ToFloat(h) : halfToFloat(h);
  };
  auto encode = [&](double v) -> uint16_t {
    if (in.sat)
      v = saturate01(v);
    if (in.relu && v < 0)
      v = 0;
    uint16_t h = static_cast<uint16_t>(roundToFormat(v, format, rounding));
    if (in.ftz && (h & exponentMask) == 0)
      h &= 0x8000u;
    return h;
  };
  // Products of two halves are exact in a double; sums are rounded to odd
  // first, so the one rounding to the narrow format is correct.
  auto one = [&](uint16_t x, uint16_t y, uint16_t z) -> uint16_t {
    switch (in.op) {
    case Op::Add:
      return encode(roundOddSum(decode(x), decode(y)));
    case Op::Sub:
      return encode(roundOddSum(decode(x), -decode(y)));
    case Op::Mul:
      return encode(decode(x) * decode(y));
    case Op::Fma:
    case Op::Mad:
      return encode(roundOddSum(decode(x) * decode(y), decode(z)));
    case Op::Neg:
      return static_cast<uint16_t>(x ^ 0x8000u);
    case Op::Abs:
      return static_cast<uint16_t>(x & 0x7fffu);
    case Op::Min:
      return encode(floatMin(decode(x), decode(y), in.propagateNaN));
    case Op::Max:
      return encode(floatMax(decode(x), decode(y), in.propagateNaN));
    case Op::Ex2:
      return encode(std::exp2(decode(x)));
    case Op::Tanh:
      return encode(std::tanh(decode(x)));
    case Op::Sqrt:
      return encode(std::sqrt(decode(x)));
    case Op::Rcp:
      return encode(1.0 / decode(x));
    case Op::Rsqrt:
      return encode(1.0 / std::sqrt(decode(x)));
    case Op::Lg2:
      return encode(std::log2(decode(x)));
    case Op::Sin:
      return encode(std::sin(decode(x)));
    case Op::Cos:
      return encode(std::cos(decode(x)));
    default:
      return 0;
    }
  };
  switch (in.op) {
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Fma:
  case Op::Mad:
  case Op::Neg:
  case Op::Abs:
  case Op::Min:
  case Op::Max:
  case Op::Ex2:
  case Op::Tanh:
  case Op::Sqrt:
  case Op::Rcp:
  case Op::Rsqrt:
  case Op::Lg2:
  case Op::Sin:
  case Op::Cos:
    break;
  default:
    return false;
  }
  forLanes(exec, [&](unsigned l) {
    uint64_t result = 0;
    for (unsigned h = 0; h < halves; ++h) {
      unsigned shift = 16 * h;
      uint16_t x = static_cast<uint16_t>(a[l] >> shift);
      uint16_t y = b ? static_cast<uint16_t>(b[l] >> shift) : 0;
      uint16_t z = c ? static_cast<uint16_t>(c[l] >> shift) : 0;
      result |= static_cast<uint64_t>(one(x, y, z)) << shift;
    }
    d[l] = result;
  });
  return true;
}

} // namespace

Error runKernel(const Kernel &kernel, const LaunchSpec &spec,
                LaunchStats *stats) {
  uint64_t threads =
      static_cast<uint64_t>(spec.block.x) * spec.block.y * spec.block.z;
  if (threads == 0 || threads > 1024)
    return makeError("kernel '{}': {} threads per block (1 to 1024 allowed)",
                     kernel.name, threads);
  if (kernel.maxThreads && threads > kernel.maxThreads)
    return makeError("kernel '{}': {} threads per block exceed its .maxntid "
                     "of {}",
                     kernel.name, threads, kernel.maxThreads);
  if (spec.paramBytes < kernel.paramBytes)
    return makeError("kernel '{}': {} bytes of parameters passed, the kernel "
                     "takes {}",
                     kernel.name, spec.paramBytes, kernel.paramBytes);
  uint64_t blocks =
      static_cast<uint64_t>(spec.grid.x) * spec.grid.y * spec.grid.z;
  if (blocks == 0)
    return Error::success();
  unsigned workers =
      static_cast<unsigned>(std::min<uint64_t>(std::max(1u, spec.workers),
                                               blocks));
  std::atomic<uint64_t> nextBlock{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::string firstError;
  uint64_t firstErrorBlock = UINT64_MAX;
  std::atomic<uint64_t> threadInstructions{0}, warpInstructions{0};
  auto work = [&]() {
    BlockRunner runner(kernel, spec);
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t b = nextBlock.fetch_add(1);
      if (b >= blocks)
        break;
      Dim3 id;
      id.x = static_cast<uint32_t>(b % spec.grid.x);
      id.y = static_cast<uint32_t>((b / spec.grid.x) % spec.grid.y);
      id.z = static_cast<uint32_t>(b / (static_cast<uint64_t>(spec.grid.x) *
                                        spec.grid.y));
      if (!runner.runBlock(id)) {
        std::lock_guard<std::mutex> lock(errorMutex);
        // Report the lowest failing block, whichever worker found it.
        if (b < firstErrorBlock) {
          firstErrorBlock = b;
          firstError = runner.errorMessage();
        }
        stop = true;
        break;
      }
    }
    threadInstructions += runner.threadInstructions;
    warpInstructions += runner.warpInstructions;
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < workers; ++i)
      pool.emplace_back(work);
    for (std::thread &t : pool)
      t.join();
  }
  if (stats) {
    stats->threadInstructions += threadInstructions;
    stats->warpInstructions += warpInstructions;
  }
  if (!firstError.empty())
    return Error::failure(firstError);
  return Error::success();
}

} // namespace kiln::runtime::emu
