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

#include "../FloatConversion.h"
#include "../Support.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>

namespace kiln::runtime::emu {

namespace {

constexpr uint32_t kFullMask = 0xffffffffu;
/// Warp instructions a warp issues before the next warp of its block runs.
constexpr uint64_t kTimeSlice = 1 << 16;

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
  // The hardware writes its canonical NaN; otherwise round to nearest even.
  return isNanBits(x) ? uint16_t(0x7fffu) : f32BitsToF16(x);
}

float bf16ToFloat(uint16_t h) {
  return bitsTo<float>(static_cast<uint32_t>(h) << 16);
}
uint16_t floatToBf16(float f) {
  uint32_t x = static_cast<uint32_t>(toBits(f));
  return isNanBits(x) ? uint16_t(0x7fffu) : f32BitsToBf16(x);
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
  return std::nextafter(s, error > 0
                               ? std::numeric_limits<double>::infinity()
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
    pendingCopies.resize(numWarps);
    committedGroups.resize(numWarps);
    checkShared = spec.checkSharedReads;
    if (checkShared)
      sharedWritten.assign(sharedBytes, 0);
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
          case Special::LanemaskEq:
            v = 1u << l;
            break;
          case Special::LanemaskLt:
            v = (1u << l) - 1;
            break;
          case Special::LanemaskLe:
            v = l == 31 ? kFullMask : (2u << l) - 1;
            break;
          case Special::LanemaskGt:
            v = l == 31 ? 0 : ~((2u << l) - 1);
            break;
          case Special::LanemaskGe:
            v = ~((1u << l) - 1);
            break;
          case Special::Smid:
          case Special::GridId:
            v = 0;
            break;
          case Special::Nsmid:
            v = 1;
            break;
          case Special::DynamicSmemSize:
            v = spec.dynamicSharedBytes;
            break;
          case Special::TotalSmemSize:
            v = sharedBytes;
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
  /// Host pointer for `bytes` at `address` in `space` for lane `lane` of
  /// warp `w` (generic addresses may be shared or local), checked for
  /// bounds and alignment to `align`; nullptr after a fault.
  __attribute__((noinline)) uint8_t *resolve(unsigned w, unsigned lane,
                                             uint32_t pc, Space space,
                                             uint64_t address, unsigned bytes,
                                             unsigned align, const char *what,
                                             bool *isSharedOut = nullptr);
  /// The shared-read check (--check-shared-reads): every byte was written.
  bool checkSharedRead(unsigned w, unsigned lane, uint32_t pc, uint64_t offset,
                       unsigned bytes);
  void markSharedWritten(uint64_t offset, unsigned bytes) {
    if (checkShared)
      std::memset(sharedWritten.data() + offset, 1, bytes);
  }
  bool atomic(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  /// vote, activemask, redux: `mask` is every lane at the instruction.
  bool warpCollective(unsigned w, uint32_t pc, const Instruction &in,
                      uint32_t mask, uint32_t exec);
  bool loadMatrix(unsigned w, uint32_t pc, const Instruction &in,
                  uint32_t exec);
  bool storeMatrix(unsigned w, uint32_t pc, const Instruction &in,
                   uint32_t exec);
  bool matrixMultiply(unsigned w, uint32_t pc, const Instruction &in,
                      uint32_t exec);
  bool asyncCopy(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  /// Completes lane `lane`'s copies of groups before `group` (all with
  /// UINT32_MAX).
  void completeCopies(unsigned w, uint32_t lanes, uint32_t keepGroups,
                      bool all);
  /// Opens barrier `id`: its waiting lanes move past it (bar.red writes).
  void releaseBarrier(uint32_t id);
  bool shuffle(unsigned w, uint32_t pc, const Instruction &in, uint32_t exec);
  bool convert(uint64_t *r, const Instruction &in, uint32_t exec);
  bool arithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
  /// prmt, bfind, slct, lop3, testp, mul24, mad24, sad, cnot, bmsk, szext,
  /// dp4a.
  bool bitArithmetic(uint64_t *r, const Instruction &in, uint32_t exec);
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

  /// Barriers 0..15: threads that arrived without waiting (bar.arrive),
  /// the thread count each expects (0: the whole block), bar.red's
  /// accumulators.
  static constexpr unsigned kBarriers = 16;
  uint32_t barrierArrived[kBarriers] = {};
  uint32_t barrierExpected[kBarriers] = {};
  uint32_t barrierPopc[kBarriers] = {};
  bool barrierAll[kBarriers] = {};
  bool barrierAny[kBarriers] = {};

  /// cp.async copies in flight: read at issue, written to shared memory
  /// when a wait completes their group.
  struct PendingCopy {
    uint64_t sharedOffset = 0;
    uint32_t group = 0;
    uint8_t lane = 0;
    uint8_t size = 0;
    uint8_t bytes[16] = {};
  };
  std::vector<std::vector<PendingCopy>> pendingCopies;
  /// Per warp and lane: groups committed so far.
  std::vector<std::array<uint32_t, 32>> committedGroups;

  bool checkShared = false;
  std::vector<uint8_t> sharedWritten;
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
  if (checkShared && !sharedWritten.empty())
    std::memset(sharedWritten.data(), 0, sharedWritten.size());
  for (unsigned w = 0; w < numWarps; ++w) {
    pendingCopies[w].clear();
    committedGroups[w].fill(0);
    warps[w].carry = 0;
  }
  for (unsigned b = 0; b < kBarriers; ++b) {
    barrierArrived[b] = barrierExpected[b] = barrierPopc[b] = 0;
    barrierAll[b] = true;
    barrierAny[b] = false;
  }
  uint64_t blockStart = warpInstructions;
  while (true) {
    // Each warp runs until it waits, exits or uses up its time slice; a
    // warp that spins on a flag another warp sets gets to see it set.
    bool runnable = false;
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].live & ~warps[w].waiting) {
        if (!runWarp(w))
          return false;
        runnable |= (warps[w].live & ~warps[w].waiting) != 0;
      }
    if (runnable) {
      if (spec.maxWarpInstructionsPerBlock &&
          warpInstructions - blockStart > spec.maxWarpInstructionsPerBlock) {
        unsigned w = 0;
        while (!(warps[w].live & ~warps[w].waiting))
          ++w;
        const WarpState &ws = warps[w];
        unsigned lane = __builtin_ctz(ws.live & ~ws.waiting);
        return fault(w, lane, ws.converged ? ws.pc : ws.lanePc[lane],
                     fmt::format("the block is still running after {} warp "
                                 "instructions (an endless loop, or a wait "
                                 "for another block?)",
                                 warpInstructions - blockStart));
      }
      continue;
    }
    // Every warp has exited or waits at a barrier. A barrier opens when
    // the threads waiting at it plus those that arrived (bar.arrive) reach
    // its count, or the whole block when it has none.
    uint32_t waitingAt[kBarriers] = {};
    bool anyWaiting = false;
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting) {
        waitingAt[warps[w].barrier] += __builtin_popcount(warps[w].waiting);
        anyWaiting = true;
      }
    if (!anyWaiting)
      return true;
    bool opened = false;
    for (uint32_t id = 0; id < kBarriers; ++id) {
      if (!waitingAt[id])
        continue;
      uint32_t need =
          barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
      if (waitingAt[id] + barrierArrived[id] >= need) {
        releaseBarrier(id);
        opened = true;
      }
    }
    if (opened)
      continue;
    // Deadlock: name the first waiting lane, and a thread that exited or
    // waits elsewhere.
    unsigned waitingWarp = 0;
    while (!warps[waitingWarp].waiting)
      ++waitingWarp;
    const WarpState &ws = warps[waitingWarp];
    uint32_t lane = __builtin_ctz(ws.waiting);
    uint32_t pc = ws.converged ? ws.pc : ws.lanePc[lane];
    uint32_t id = ws.barrier;
    auto threadName = [&](uint32_t t) {
      return fmt::format("({},{},{})", t % spec.block.x,
                         (t / spec.block.x) % spec.block.y,
                         t / (spec.block.x * spec.block.y));
    };
    for (unsigned w = 0; w < numWarps; ++w) {
      uint32_t lanes = std::min<uint32_t>(32, threadsPerBlock - w * 32);
      uint32_t all = lanes == 32 ? kFullMask : ((1u << lanes) - 1);
      if (warps[w].live != all && barrierExpected[id] == 0)
        return fault(
            waitingWarp, lane, pc,
            fmt::format(
                "barrier {} is reached by only part of the "
                "block: thread {} has exited",
                id, threadName(w * 32 + __builtin_ctz(all & ~warps[w].live))));
    }
    for (unsigned w = 0; w < numWarps; ++w)
      if (warps[w].waiting && warps[w].barrier != id)
        return fault(
            waitingWarp, lane, pc,
            fmt::format("barrier {} waits while thread {} waits at "
                        "barrier {}: neither can complete",
                        id,
                        threadName(w * 32 + __builtin_ctz(warps[w].waiting)),
                        warps[w].barrier));
    uint32_t need = barrierExpected[id] ? barrierExpected[id] : threadsPerBlock;
    return fault(waitingWarp, lane, pc,
                 fmt::format("barrier {} expects {} threads but only {} "
                             "arrived before the rest of the block exited",
                             id, need, waitingAt[id] + barrierArrived[id]));
  }
}

void BlockRunner::releaseBarrier(uint32_t id) {
  for (unsigned w = 0; w < numWarps; ++w) {
    WarpState &ws = warps[w];
    if (!ws.waiting || ws.barrier != id)
      continue;
    uint64_t *r = warpRegs(w);
    for (uint32_t m = ws.waiting; m; m &= m - 1) {
      unsigned l = __builtin_ctz(m);
      uint32_t pc = ws.converged ? ws.pc : ws.lanePc[l];
      const Instruction &in = code[pc];
      BarMode mode = BarMode(in.subop);
      uint64_t value = mode == BarMode::RedPopc  ? barrierPopc[id]
                       : mode == BarMode::RedAnd ? barrierAll[id]
                                                 : barrierAny[id];
      if (mode != BarMode::Sync && in.dst[0] != kNoSlot)
        r[static_cast<size_t>(in.dst[0]) * 32 + l] = value;
    }
    if (ws.converged) {
      ++ws.pc;
    } else {
      for (uint32_t m = ws.waiting; m; m &= m - 1)
        ++ws.lanePc[__builtin_ctz(m)];
    }
    ws.waiting = 0;
  }
  barrierArrived[id] = 0;
  barrierExpected[id] = 0;
  barrierPopc[id] = 0;
  barrierAll[id] = true;
  barrierAny[id] = false;
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
    if (!ready || issued == kTimeSlice)
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
      BarMode mode = BarMode(in.subop);
      if (exec) {
        unsigned first = __builtin_ctz(exec);
        uint32_t id = static_cast<uint32_t>(
            r[static_cast<size_t>(in.src[0]) * 32 + first]);
        if (id >= kBarriers)
          return finish(fault(w, first, pc,
                              fmt::format("barrier {} does not exist (0 to "
                                          "15)",
                                          id)));
        uint32_t count =
            in.src[1] == kNoSlot
                ? 0
                : static_cast<uint32_t>(
                      r[static_cast<size_t>(in.src[1]) * 32 + first]);
        if (count && barrierExpected[id] && count != barrierExpected[id])
          return finish(fault(w, first, pc,
                              fmt::format("barrier {} used with {} threads "
                                          "while it expects {}",
                                          id, count, barrierExpected[id])));
        if (count)
          barrierExpected[id] = count;
        if (mode == BarMode::Arrive) {
          barrierArrived[id] += __builtin_popcount(exec);
          break; // moves on like any instruction
        }
        if (mode != BarMode::Sync) {
          const uint64_t *p = r + static_cast<size_t>(in.src[2]) * 32;
          forLanes(exec, [&](unsigned l) {
            bool v = ((p[l] & 1) != 0) != in.negateSrc;
            barrierPopc[id] += v;
            barrierAll[id] = barrierAll[id] && v;
            barrierAny[id] = barrierAny[id] || v;
          });
        }
        if (ws.waiting && id != ws.barrier)
          return finish(fault(w, first, pc,
                              fmt::format("barrier {} reached while other "
                                          "lanes of the warp wait at barrier "
                                          "{}",
                                          id, ws.barrier)));
        ws.barrier = id;
      } else if (mode == BarMode::Arrive) {
        break;
      }
      uint32_t stay = mask & ~exec;
      if (stay) {
        diverge();
        forLanes(stay, [&](unsigned l) { ws.lanePc[l] = next; });
      }
      ws.waiting |= exec;
      continue;
    }
    case Op::Atom:
    case Op::Red:
      if (!atomic(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Vote:
    case Op::Activemask:
    case Op::Redux:
    case Op::Match:
      if (!warpCollective(w, pc, in, mask, exec))
        return finish(false);
      break;
    case Op::Clock: {
      // %clock/%clock64 count the warp's issued instructions since the
      // launch began on this host thread; %globaltimer is the host's
      // nanoseconds.
      uint64_t v = warpInstructions + issued;
      ClockKind kind = ClockKind(in.subop);
      if (kind == ClockKind::GlobalTimer || kind == ClockKind::GlobalTimerLo ||
          kind == ClockKind::GlobalTimerHi) {
        v = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch())
                .count());
        if (kind == ClockKind::GlobalTimerHi)
          v >>= 32;
      }
      if (typeBytes(in.type) < 8 || kind == ClockKind::Clock ||
          kind == ClockKind::GlobalTimerLo)
        v &= 0xffffffffull;
      uint64_t *d = r + static_cast<size_t>(in.dst[0]) * 32;
      forLanes(exec, [&](unsigned l) { d[l] = v; });
      break;
    }
    case Op::Ldmatrix:
      if (!loadMatrix(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Stmatrix:
      if (!storeMatrix(w, pc, in, exec))
        return finish(false);
      break;
    case Op::Mma:
      if (!matrixMultiply(w, pc, in, exec))
        return finish(false);
      break;
    case Op::CpAsync:
      if (!asyncCopy(w, pc, in, exec))
        return finish(false);
      break;
    case Op::CpAsyncCommit:
      forLanes(exec, [&](unsigned l) { ++committedGroups[w][l]; });
      break;
    case Op::CpAsyncWait: {
      uint32_t keep =
          in.numSrc
              ? static_cast<uint32_t>(r[static_cast<size_t>(in.src[0]) * 32 +
                                        (exec ? __builtin_ctz(exec) : 0)])
              : 0;
      completeCopies(w, exec, keep, in.numSrc == 0);
      break;
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
        return finish(
            fault(w, __builtin_ctz(mask), pc, "unsupported conversion"));
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
        r[static_cast<size_t>(in.dst[e]) * 32 + lane] = loadValue(p + e * size);
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
    const bool checkSharedHere = checkShared;
    // One loop per space (kind 0: global or const, 1: shared, 2: generic),
    // so that each lane makes only its space's checks.
    auto loop = [&](auto kind) {
      constexpr int K = decltype(kind)::value;
      forLanes(exec, [&](unsigned lane) {
        if (!ok)
          return;
        uint64_t address = base[lane] + in.offset;
        if (address % total != 0) {
          ok =
              fault(w, lane, pc,
                    fmt::format("misaligned {} {} of {} bytes at 0x{:x}",
                                in.space == Space::Shared ? "shared" : "global",
                                verb, total, address));
          return;
        }
        bool isShared = K == 1;
        if (K == 2 && address >= kSharedWindow &&
            address < kLocalWindow + (1ull << 32)) {
          if (address >= kLocalWindow) { // this thread's local memory
            uint8_t *p = resolve(w, lane, pc, Space::Local,
                                 address - kLocalWindow, total, total, verb);
            if (!p) {
              ok = false;
              return;
            }
            transfer(lane, p);
            return;
          }
          if (address < kSharedWindow + (1ull << 32)) {
            isShared = true;
            address -= kSharedWindow;
          }
        }
        uint8_t *p;
        if (K != 0 && isShared) {
          if (address > sharedBytes || total > sharedBytes - address) {
            ok = fault(w, lane, pc,
                       fmt::format("out-of-bounds shared {} of {} bytes at "
                                   "offset {} (the block has {} bytes of "
                                   "shared memory)",
                                   verb, total, address, sharedBytes));
            return;
          }
          p = shared.data() + address;
          if (__builtin_expect(checkSharedHere, 0)) {
            if (!isLoad)
              markSharedWritten(address, total);
            else if (!checkSharedRead(w, lane, pc, address, total)) {
              ok = false;
              return;
            }
          }
        } else if (K != 1) {
          p = globalPointer(address, total);
          if (!p) {
            ok = fault(w, lane, pc,
                       fmt::format("out-of-bounds global {} of {} bytes: {}",
                                   verb, total,
                                   describeGlobalMiss(address, total)));
            return;
          }
        } else {
          return; // not reached: shared accesses take the branch above
        }
        transfer(lane, p);
      });
    };
    if (in.space == Space::Shared)
      loop(std::integral_constant<int, 1>());
    else if (in.space == Space::Generic)
      loop(std::integral_constant<int, 2>());
    else
      loop(std::integral_constant<int, 0>());
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

uint8_t *BlockRunner::resolve(unsigned w, unsigned lane, uint32_t pc,
                              Space space, uint64_t address, unsigned bytes,
                              unsigned align, const char *what,
                              bool *isSharedOut) {
  if (isSharedOut)
    *isSharedOut = false;
  if (space == Space::Generic && address >= kSharedWindow &&
      address < kLocalWindow + (1ull << 32)) {
    if (address >= kLocalWindow) {
      space = Space::Local;
      address -= kLocalWindow;
    } else if (address < kSharedWindow + (1ull << 32)) {
      space = Space::Shared;
      address -= kSharedWindow;
    }
  }
  if (align > 1 && address % align != 0) {
    fault(w, lane, pc,
          fmt::format("misaligned {} {} of {} bytes at 0x{:x} (needs {}-byte "
                      "alignment)",
                      space == Space::Shared  ? "shared"
                      : space == Space::Local ? "local"
                                              : "global",
                      what, bytes, address, align));
    return nullptr;
  }
  if (space == Space::Shared) {
    if (address > sharedBytes || bytes > sharedBytes - address) {
      fault(w, lane, pc,
            fmt::format("out-of-bounds shared {} of {} bytes at offset {} "
                        "(the block has {} bytes of shared memory)",
                        what, bytes, address, sharedBytes));
      return nullptr;
    }
    if (isSharedOut)
      *isSharedOut = true;
    return shared.data() + address;
  }
  if (space == Space::Local) {
    uint64_t perThread = kernel.localBytes;
    if (address > perThread || bytes > perThread - address) {
      fault(w, lane, pc,
            fmt::format("out-of-bounds local {} of {} bytes at offset {} "
                        "(each thread has {} bytes)",
                        what, bytes, address, perThread));
      return nullptr;
    }
    uint64_t thread = static_cast<uint64_t>(w) * 32 + lane;
    return local.data() + thread * perThread + address;
  }
  if (space == Space::Param) {
    fault(w, lane, pc, fmt::format("{} in the parameter space", what));
    return nullptr;
  }
  uint8_t *p = globalPointer(address, bytes);
  if (!p)
    fault(w, lane, pc,
          fmt::format("out-of-bounds global {} of {} bytes: {}", what, bytes,
                      describeGlobalMiss(address, bytes)));
  return p;
}

bool BlockRunner::checkSharedRead(unsigned w, unsigned lane, uint32_t pc,
                                  uint64_t offset, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i)
    if (!sharedWritten[offset + i])
      return fault(w, lane, pc,
                   fmt::format("reads shared memory at offset {} that no "
                               "thread of the block wrote in this launch",
                               offset + i));
  return true;
}

namespace {

/// Replaces *p with f(old) atomically (other host threads run other
/// blocks); returns the old value's bits.
template <typename T, typename F> uint64_t atomicUpdate(uint8_t *p, F &&f) {
  T *ptr = reinterpret_cast<T *>(p);
  T old = __atomic_load_n(ptr, __ATOMIC_RELAXED);
  while (true) {
    T desired = static_cast<T>(f(static_cast<uint64_t>(old)));
    if (__atomic_compare_exchange_n(ptr, &old, desired, /*weak=*/false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return static_cast<uint64_t>(old);
  }
}

} // namespace

bool BlockRunner::atomic(unsigned w, uint32_t pc, const Instruction &in,
                         uint32_t exec) {
  if (!exec)
    return true;
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  const unsigned size = typeBytes(in.type);
  const AtomOp op = AtomOp(in.subop);
  const Type type = in.type;
  bool supported = size == 4 || size == 8;
  if (isFloat(type))
    supported = (type == Type::F32 || type == Type::F64) &&
                (op == AtomOp::Add || op == AtomOp::Min || op == AtomOp::Max ||
                 op == AtomOp::Exch);
  if ((op == AtomOp::Inc || op == AtomOp::Dec) && type != Type::U32)
    supported = false;
  if (!supported)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("'{}' ({} bytes of .{}) is not emulated",
                             kernel.opcodeText[pc], size, typeName(type)));
  const uint64_t *base = slot(in.src[0]);
  const uint64_t *b = slot(in.src[1]);
  const uint64_t *c = in.numSrc > 2 ? slot(in.src[2]) : nullptr;
  uint64_t *d =
      in.op == Op::Atom && in.dst[0] != kNoSlot ? slot(in.dst[0]) : nullptr;
  const uint64_t mask = size == 8 ? ~0ull : 0xffffffffull;
  const bool isSignedType = isSigned(type);
  // The new value from the old one, for lane l.
  auto update = [&](unsigned l, uint64_t old) -> uint64_t {
    uint64_t x = b[l] & mask;
    switch (op) {
    case AtomOp::Exch:
      return x;
    case AtomOp::Cas:
      return (old & mask) == x ? (c[l] & mask) : old;
    case AtomOp::And:
      return old & x;
    case AtomOp::Or:
      return old | x;
    case AtomOp::Xor:
      return old ^ x;
    case AtomOp::Inc:
      return old >= x ? 0 : old + 1;
    case AtomOp::Dec:
      return (old == 0 || old > x) ? x : old - 1;
    case AtomOp::Add:
      if (type == Type::F32) // rounds to nearest, flushes subnormals
        return toBits(flushDenormal(flushDenormal(bitsTo<float>(old)) +
                                    flushDenormal(bitsTo<float>(x))));
      if (type == Type::F64)
        return toBits(bitsTo<double>(old) + bitsTo<double>(x));
      return (old + x) & mask;
    case AtomOp::Min:
    case AtomOp::Max: {
      bool isMax = op == AtomOp::Max;
      if (type == Type::F32) {
        float u = bitsTo<float>(old), v = bitsTo<float>(x);
        return toBits(isMax ? floatMax(u, v, false) : floatMin(u, v, false));
      }
      if (type == Type::F64) {
        double u = bitsTo<double>(old), v = bitsTo<double>(x);
        return toBits(isMax ? floatMax(u, v, false) : floatMin(u, v, false));
      }
      bool less;
      if (isSignedType)
        less = size == 8 ? static_cast<int64_t>(old) < static_cast<int64_t>(x)
                         : static_cast<int32_t>(old) < static_cast<int32_t>(x);
      else
        less = old < x;
      return (less != isMax) ? old : x;
    }
    default:
      return old;
    }
  };
  bool ok = true;
  // Lanes in order: one lane's update is visible to the next.
  forLanes(exec, [&](unsigned l) {
    if (!ok)
      return;
    bool isShared = false;
    uint8_t *p = resolve(w, l, pc, in.space, base[l] + in.offset, size, size,
                         "atomic", &isShared);
    if (!p) {
      ok = false;
      return;
    }
    if (isShared && checkShared) {
      if (!checkSharedRead(w, l, pc, p - shared.data(), size)) {
        ok = false;
        return;
      }
    }
    uint64_t old = size == 8 ? atomicUpdate<uint64_t>(
                                   p, [&](uint64_t o) { return update(l, o); })
                             : atomicUpdate<uint32_t>(p, [&](uint64_t o) {
                                 return update(l, o) & 0xffffffffull;
                               });
    if (d)
      d[l] = old;
  });
  return ok;
}

bool BlockRunner::warpCollective(unsigned w, uint32_t pc, const Instruction &in,
                                 uint32_t mask, uint32_t exec) {
  if (!exec)
    return true;
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  unsigned first = __builtin_ctz(exec);
  if (in.op == Op::Activemask) {
    forLanes(exec, [&](unsigned l) { d[l] = mask; });
    return true;
  }
  // The member mask is the last source (vote without .sync: the lanes
  // here). Every member must be at this instruction.
  uint32_t members = exec;
  uint32_t memberSlot =
      in.op == Op::Vote ? (in.numSrc > 1 ? in.src[1] : kNoSlot) : in.src[1];
  if (memberSlot != kNoSlot)
    members = static_cast<uint32_t>(slot(memberSlot)[first]);
  if (members & ~exec)
    return fault(w, first, pc,
                 fmt::format("{} member mask 0x{:08x} names lane {}, which is "
                             "not at this instruction",
                             kernel.opcodeText[pc], members,
                             __builtin_ctz(members & ~exec)));
  uint32_t group = exec & members;
  const uint64_t *a = slot(in.src[0]);
  if (in.op == Op::Match) {
    uint64_t mask = typeBytes(in.type) == 8 ? ~0ull : 0xffffffffull;
    uint64_t *p = in.dst[1] != kNoSlot ? slot(in.dst[1]) : nullptr;
    if (in.subop) { // all: every member has the same value
      uint64_t v = a[__builtin_ctz(group)] & mask;
      bool same = true;
      forLanes(group, [&](unsigned l) { same = same && (a[l] & mask) == v; });
      forLanes(exec, [&](unsigned l) {
        d[l] = same ? group : 0;
        if (p)
          p[l] = same;
      });
    } else { // any: the members with this lane's value
      uint32_t result[32];
      forLanes(exec, [&](unsigned l) {
        uint32_t m = 0;
        forLanes(group, [&](unsigned k) {
          if ((a[k] & mask) == (a[l] & mask))
            m |= 1u << k;
        });
        result[l] = m;
      });
      forLanes(exec, [&](unsigned l) { d[l] = result[l]; });
    }
    return true;
  }
  if (in.op == Op::Vote) {
    uint32_t ballot = 0;
    forLanes(group, [&](unsigned l) {
      if (((a[l] & 1) != 0) != in.negateSrc)
        ballot |= 1u << l;
    });
    uint64_t v;
    switch (VoteMode(in.subop)) {
    case VoteMode::All:
      v = ballot == group;
      break;
    case VoteMode::Any:
      v = ballot != 0;
      break;
    case VoteMode::Uni:
      v = ballot == 0 || ballot == group;
      break;
    default:
      v = ballot;
      break;
    }
    forLanes(exec, [&](unsigned l) { d[l] = v; });
    return true;
  }
  // redux.sync
  AtomOp op = AtomOp(in.subop);
  bool isSignedType = isSigned(in.type);
  uint32_t acc = 0;
  bool firstLane = true;
  forLanes(group, [&](unsigned l) {
    uint32_t x = static_cast<uint32_t>(a[l]);
    if (firstLane) {
      acc = x;
      firstLane = false;
      return;
    }
    switch (op) {
    case AtomOp::Add:
      acc += x;
      break;
    case AtomOp::Min:
      acc = isSignedType
                ? static_cast<uint32_t>(std::min(static_cast<int32_t>(acc),
                                                 static_cast<int32_t>(x)))
                : std::min(acc, x);
      break;
    case AtomOp::Max:
      acc = isSignedType
                ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc),
                                                 static_cast<int32_t>(x)))
                : std::max(acc, x);
      break;
    case AtomOp::And:
      acc &= x;
      break;
    case AtomOp::Or:
      acc |= x;
      break;
    case AtomOp::Xor:
      acc ^= x;
      break;
    default:
      break;
    }
  });
  forLanes(exec, [&](unsigned l) { d[l] = acc; });
  return true;
}

bool BlockRunner::loadMatrix(unsigned w, uint32_t pc, const Instruction &in,
                             uint32_t exec) {
  if (!exec)
    return true;
  WarpState &ws = warps[w];
  uint32_t all = ws.live;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("ldmatrix needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here (live 0x{:08x})",
                             exec, all));
  uint64_t *r = warpRegs(w);
  const uint64_t *base = r + static_cast<size_t>(in.src[0]) * 32;
  // Matrix i's row j comes from the address in lane 8 * i + j.
  uint16_t rows[4][8][8];
  Space space = in.space == Space::Generic ? Space::Generic : Space::Shared;
  for (unsigned i = 0; i < in.vec; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      unsigned lane = 8 * i + j;
      bool isShared = false;
      uint8_t *p = resolve(w, lane, pc, space, base[lane] + in.offset, 16, 16,
                           "ldmatrix row load", &isShared);
      if (!p)
        return false;
      if (isShared && checkShared &&
          !checkSharedRead(w, lane, pc, p - shared.data(), 16))
        return false;
      std::memcpy(rows[i][j], p, 16);
    }
  for (unsigned i = 0; i < in.vec; ++i) {
    uint64_t *d = r + static_cast<size_t>(in.dst[i]) * 32;
    for (unsigned t = 0; t < 32; ++t) {
      unsigned row = t / 4, col = 2 * (t % 4);
      uint16_t lo, hi;
      if (in.transpose) {
        lo = rows[i][col][row];
        hi = rows[i][col + 1][row];
      } else {
        lo = rows[i][row][col];
        hi = rows[i][row][col + 1];
      }
      d[t] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
  return true;
}

bool BlockRunner::storeMatrix(unsigned w, uint32_t pc, const Instruction &in,
                              uint32_t exec) {
  if (!exec)
    return true;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("stmatrix needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here",
                             exec));
  uint64_t *r = warpRegs(w);
  const uint64_t *base = r + static_cast<size_t>(in.src[0]) * 32;
  // The inverse of ldmatrix: gather each matrix's rows from the fragments,
  // then store row j of matrix i at the address in lane 8 * i + j.
  uint16_t rows[4][8][8];
  for (unsigned i = 0; i < in.vec; ++i) {
    const uint64_t *s = r + static_cast<size_t>(in.src[1 + i]) * 32;
    for (unsigned t = 0; t < 32; ++t) {
      unsigned row = t / 4, col = 2 * (t % 4);
      uint16_t lo = static_cast<uint16_t>(s[t]),
               hi = static_cast<uint16_t>(s[t] >> 16);
      if (in.transpose) {
        rows[i][col][row] = lo;
        rows[i][col + 1][row] = hi;
      } else {
        rows[i][row][col] = lo;
        rows[i][row][col + 1] = hi;
      }
    }
  }
  Space space = in.space == Space::Generic ? Space::Generic : Space::Shared;
  for (unsigned i = 0; i < in.vec; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      unsigned lane = 8 * i + j;
      bool isShared = false;
      uint8_t *p = resolve(w, lane, pc, space, base[lane] + in.offset, 16, 16,
                           "stmatrix row store", &isShared);
      if (!p)
        return false;
      std::memcpy(p, rows[i][j], 16);
      if (isShared)
        markSharedWritten(static_cast<uint64_t>(p - shared.data()), 16);
    }
  return true;
}

bool BlockRunner::matrixMultiply(unsigned w, uint32_t pc, const Instruction &in,
                                 uint32_t exec) {
  if (!exec)
    return true;
  if (exec != kFullMask)
    return fault(w, __builtin_ctz(exec), pc,
                 fmt::format("mma.sync needs all 32 lanes of the warp; lanes "
                             "0x{:08x} are here",
                             exec));
  uint64_t *r = warpRegs(w);
  const uint32_t *ops = kernel.operandLists.data() + in.target;
  MmaShape shape = MmaShape(in.subop);
  const unsigned k =
      shape == MmaShape::M16N8K16F32 || shape == MmaShape::M16N8K16F16 ? 16 : 8;
  const unsigned numD = shape == MmaShape::M16N8K16F16 ? 2 : 4;
  const unsigned numA = shape == MmaShape::M16N8K8F32 ? 2 : 4;
  const unsigned numB = shape == MmaShape::M16N8K8F32 ? 1 : 2;
  const uint32_t *dSlots = ops, *aSlots = ops + numD,
                 *bSlots = ops + numD + numA,
                 *cSlots = ops + numD + numA + numB;
  auto reg = [&](uint32_t s, unsigned lane) {
    return static_cast<uint32_t>(r[static_cast<size_t>(s) * 32 + lane]);
  };
  const bool bf = in.srcType == Type::BF16;
  auto half = [&](uint32_t bits) -> double {
    uint16_t h = static_cast<uint16_t>(bits);
    return bf ? bf16ToFloat(h) : halfToFloat(h);
  };
  double a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    if (shape == MmaShape::M16N8K8Tf32) {
      // a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (t, g),
      // b1 (t+4, g). tf32 reads the upper 19 bits of each f32.
      for (unsigned e = 0; e < 4; ++e)
        a[g + 8 * (e & 1)][t + 4 * (e >> 1)] =
            bitsTo<float>(reg(aSlots[e], lane) & 0xffffe000u);
      for (unsigned e = 0; e < 2; ++e)
        b[t + 4 * e][g] = bitsTo<float>(reg(bSlots[e], lane) & 0xffffe000u);
    } else {
      // Element e of A is half (e & 1) of register e / 2.
      for (unsigned e = 0; e < 2 * numA; ++e) {
        unsigned row = g + 8 * ((e >> 1) & 1);
        unsigned col = 2 * t + (e & 1) + 8 * (e >> 2);
        a[row][col] = half(reg(aSlots[e / 2], lane) >> (16 * (e & 1)));
      }
      for (unsigned e = 0; e < 2 * numB; ++e)
        b[2 * t + (e & 1) + 8 * (e >> 1)][g] =
            half(reg(bSlots[e / 2], lane) >> (16 * (e & 1)));
    }
    // C: c0, c1 at (g, 2t), (g, 2t+1); c2, c3 at (g+8, ...).
    for (unsigned e = 0; e < 4; ++e) {
      unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      if (numD == 2)
        c[row][col] = halfToFloat(
            static_cast<uint16_t>(reg(cSlots[e / 2], lane) >> (16 * (e & 1))));
      else
        c[row][col] = bitsTo<float>(reg(cSlots[e], lane));
    }
  }
  // Products of f16/bf16/tf32 values are exact in a double; the sum is
  // rounded once more when it is stored.
  double dm[16][8];
  for (unsigned i = 0; i < 16; ++i)
    for (unsigned j = 0; j < 8; ++j) {
      double sum = c[i][j];
      for (unsigned q = 0; q < k; ++q)
        sum += a[i][q] * b[q][j];
      dm[i][j] = sum;
    }
  for (unsigned lane = 0; lane < 32; ++lane) {
    unsigned g = lane >> 2, t = lane & 3;
    if (numD == 2) {
      for (unsigned e = 0; e < 2; ++e) {
        uint32_t lo = roundToFormat(dm[g + 8 * e][2 * t], kHalf, Rounding::Rn);
        uint32_t hi =
            roundToFormat(dm[g + 8 * e][2 * t + 1], kHalf, Rounding::Rn);
        r[static_cast<size_t>(dSlots[e]) * 32 + lane] = lo | (hi << 16);
      }
    } else {
      for (unsigned e = 0; e < 4; ++e)
        r[static_cast<size_t>(dSlots[e]) * 32 + lane] =
            toBits(static_cast<float>(dm[g + 8 * (e >> 1)][2 * t + (e & 1)]));
    }
  }
  return true;
}

bool BlockRunner::asyncCopy(unsigned w, uint32_t pc, const Instruction &in,
                            uint32_t exec) {
  uint64_t *r = warpRegs(w);
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  const uint64_t *dstBase = slot(in.src[0]);
  const uint64_t *srcBase = slot(in.src[1]);
  const uint64_t *sizeSlot = slot(in.src[2]);
  const uint64_t *srcSizeSlot = in.numSrc > 3 ? slot(in.src[3]) : nullptr;
  // A 1-bit fourth operand is the ignore-src predicate.
  const bool ignoreSrcPredicate =
      srcSizeSlot && kernel.slotBits[in.src[3]] == 1;
  int64_t srcOffset = static_cast<int64_t>(
      static_cast<uint64_t>(kernel.operandLists[in.target]) |
      (static_cast<uint64_t>(kernel.operandLists[in.target + 1]) << 32));
  bool ok = true;
  forLanes(exec, [&](unsigned l) {
    if (!ok)
      return;
    uint32_t size = static_cast<uint32_t>(sizeSlot[l]);
    if (size != 4 && size != 8 && size != 16) {
      ok = fault(w, l, pc,
                 fmt::format("cp.async copies 4, 8 or 16 bytes, not {}", size));
      return;
    }
    uint32_t srcSize = size;
    if (ignoreSrcPredicate)
      srcSize = (srcSizeSlot[l] & 1) ? 0 : size;
    else if (srcSizeSlot)
      srcSize = static_cast<uint32_t>(srcSizeSlot[l]);
    if (srcSize > size) {
      ok = fault(w, l, pc,
                 fmt::format("cp.async src-size {} exceeds the copy size {}",
                             srcSize, size));
      return;
    }
    uint64_t dst = dstBase[l] + in.offset;
    if (dst >= kSharedWindow && dst < kSharedWindow + (1ull << 32))
      dst -= kSharedWindow;
    bool isShared = false;
    uint8_t *to = resolve(w, l, pc, Space::Shared, dst, size, size,
                          "cp.async destination", &isShared);
    if (!to) {
      ok = false;
      return;
    }
    PendingCopy copy;
    copy.sharedOffset = static_cast<uint64_t>(to - shared.data());
    copy.size = static_cast<uint8_t>(size);
    copy.lane = static_cast<uint8_t>(l);
    copy.group = committedGroups[w][l];
    if (srcSize) { // only the bytes read are checked (src-size 0 reads none)
      uint8_t *from =
          resolve(w, l, pc, Space::Global, srcBase[l] + srcOffset, srcSize,
                  srcSize == size ? size : 1, "cp.async source");
      if (!from) {
        ok = false;
        return;
      }
      std::memcpy(copy.bytes, from, srcSize);
    }
    pendingCopies[w].push_back(copy);
  });
  return ok;
}

void BlockRunner::completeCopies(unsigned w, uint32_t lanes,
                                 uint32_t keepGroups, bool all) {
  std::vector<PendingCopy> &pending = pendingCopies[w];
  size_t kept = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    PendingCopy &copy = pending[i];
    bool done = false;
    if (lanes >> copy.lane & 1) {
      uint32_t committed = committedGroups[w][copy.lane];
      // wait_group N: every committed group but the newest N.
      done = all ||
             (copy.group < committed && committed - copy.group > keepGroups);
    }
    if (done) {
      std::memcpy(shared.data() + copy.sharedOffset, copy.bytes, copy.size);
      markSharedWritten(copy.sharedOffset, copy.size);
    } else {
      pending[kept++] = copy;
    }
  }
  pending.resize(kept);
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
    Rounding rounding =
        integral || in.rounding == Rounding::None ? Rounding::Rn : in.rounding;
    Format format = dt == Type::BF16 || dt == Type::BF16x2 ? kBf16
                    : dt == Type::TF32                     ? kTf32
                                                           : kHalf;
    uint32_t bits = roundToFormat(x, format, rounding);
    uint32_t infinity = ((1u << format.exponentBits) - 1)
                        << format.mantissaBits;
    if (in.satfinite && (bits & ~(infinity << 1)) == infinity)
      bits -= 1;          // +-inf to +-max finite
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
    const bool fastHalf =
        st == Type::F32 && !in.relu && !in.satfinite && !in.sat && !integral &&
        !in.ftz &&
        (in.rounding == Rounding::None || in.rounding == Rounding::Rn);
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
      (in.op != Op::Add && in.op != Op::Mad && in.op != Op::Sub) ||
      (in.op == Op::Mad && in.mulMode == MulMode::Wide))
    return false;
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = slot(in.src[0]), *b = slot(in.src[1]);
  const uint64_t *c = in.op == Op::Mad ? slot(in.src[2]) : nullptr;
  uint64_t mask = bits == 64 ? ~0ull : 0xffffffffull;
  uint32_t carryOut = 0;
  if (in.op == Op::Sub) {
    // sub.cc sets the carry flag to the borrow; subc subtracts it.
    forLanes(exec, [&](unsigned l) {
      unsigned __int128 x = a[l] & mask, y = b[l] & mask;
      unsigned __int128 subtrahend = y + (in.carryIn ? (ws.carry >> l) & 1 : 0);
      d[l] = static_cast<uint64_t>(x - subtrahend) & mask;
      if (subtrahend > x)
        carryOut |= 1u << l;
    });
    if (in.carryOut)
      ws.carry = (ws.carry & ~exec) | carryOut;
    return true;
  }
  forLanes(exec, [&](unsigned l) {
    unsigned __int128 x = a[l] & mask, y = b[l] & mask;
    unsigned __int128 term = x;
    if (in.op == Op::Mad) {
      unsigned __int128 product = x * y;
      term =
          in.mulMode == MulMode::Hi ? (product >> bits) & mask : product & mask;
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
  case Op::Prmt:
  case Op::Bfind:
  case Op::Slct:
  case Op::Lop3:
  case Op::Testp:
  case Op::Mul24:
  case Op::Mad24:
  case Op::Sad:
  case Op::Cnot:
  case Op::Bmsk:
  case Op::Szext:
  case Op::Dp4a:
  case Op::Dp2a:
  case Op::Set:
    return bitArithmetic(r, in, exec);
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
      delta = in.toSpace ? -static_cast<int64_t>(kLocalWindow)
                         : static_cast<int64_t>(kLocalWindow);
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
    uint64_t *q =
        in.numDst > 1 && in.dst[1] != kNoSlot ? slot(in.dst[1]) : nullptr;
    const BoolOp boolOp = BoolOp(in.subop);
    const uint64_t *third = boolOp != BoolOp::None ? c : nullptr;
    auto combine = [&](bool v, unsigned l) {
      bool x = ((third[l] & 1) != 0) != in.negateSrc;
      return boolOp == BoolOp::And  ? v && x
             : boolOp == BoolOp::Or ? v || x
                                    : v != x;
    };
    // The plain form keeps its loops free of the .and/.or/.xor test.
    auto plainStore = [&](unsigned l, bool v) {
      d[l] = v;
      if (q)
        q[l] = !v;
    };
    auto combinedStore = [&](unsigned l, bool v) {
      d[l] = combine(v, l);
      if (q)
        q[l] = combine(!v, l);
    };
    auto compareAll = [&](auto store) -> bool {
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
            bool hi =
                compareFloat(in.cmp, value(a[l] >> 16), value(b[l] >> 16));
            d[l] = third ? combine(lo, l) : lo;
            if (q)
              q[l] = third ? combine(hi, l) : hi;
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
    };
    return third ? compareAll(combinedStore) : compareAll(plainStore);
  }

  bool handled = true;
  if (type == Type::F16 || type == Type::BF16 || type == Type::F16x2 ||
      type == Type::BF16x2)
    return halfArithmetic(r, in, exec);
  if (isFloat(type)) {
    RoundingScope scope(in.rounding);
    // Without .ftz and .sat (the common case) the lane loops are
    // instantiated with neither test in them.
    auto body = [&](auto tag, auto plainTag) {
      using T = decltype(tag);
      constexpr bool plain = decltype(plainTag)::value;
      const bool ftz = !plain && in.ftz, sat = !plain && in.sat;
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
    };
    bool typed = withFloatType(type, [&](auto tag) {
      if (!in.ftz && !in.sat)
        body(tag, std::true_type());
      else
        body(tag, std::false_type());
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
      if (in.sat && std::is_same_v<T, int32_t>) {
        forLanes(exec, [&](unsigned l) {
          int64_t v = static_cast<int64_t>(A(l)) - B(l);
          put(l, static_cast<T>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)));
        });
        break;
      }
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
        put(l, n >= bits ? T(0) : static_cast<T>(static_cast<U>(A(l)) << n));
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
          bool bit =
              (i < len && pos + i <= msb) ? ((x >> (pos + i)) & 1) : sbit;
          result = static_cast<U>(result | (U(bit) << i));
        }
        put(l, static_cast<T>(result));
      });
      break;
    case Op::Shf:
      // {b:a} as 64 bits; left keeps the high word, right the low word.
      forLanes(exec, [&](unsigned l) {
        uint64_t pair =
            (static_cast<uint64_t>(static_cast<uint32_t>(b[l])) << 32) |
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

bool BlockRunner::bitArithmetic(uint64_t *r, const Instruction &in,
                                uint32_t exec) {
  auto slot = [&](uint32_t s) { return r + static_cast<size_t>(s) * 32; };
  uint64_t *d = slot(in.dst[0]);
  const uint64_t *a = in.numSrc > 0 ? slot(in.src[0]) : nullptr;
  const uint64_t *b = in.numSrc > 1 ? slot(in.src[1]) : nullptr;
  const uint64_t *c = in.numSrc > 2 ? slot(in.src[2]) : nullptr;
  const uint64_t *e = in.numSrc > 3 ? slot(in.src[3]) : nullptr;
  const Type type = in.type;
  const unsigned bits = typeBytes(type) * 8;
  const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
  const bool isSignedType = isSigned(type);
  switch (in.op) {
  case Op::Set: {
    // The comparison is in the source type; true is all ones, or 1.0f.
    Type st = in.srcType;
    BoolOp boolOp = BoolOp(in.subop);
    const uint64_t one = type == Type::F32 ? 0x3f800000u : 0xffffffffu;
    auto put = [&](unsigned l, bool v) {
      if (boolOp != BoolOp::None) {
        bool x = ((c[l] & 1) != 0) != in.negateSrc;
        v = boolOp == BoolOp::And  ? v && x
            : boolOp == BoolOp::Or ? v || x
                                   : v != x;
      }
      d[l] = v ? one : 0;
    };
    if (isFloat(st))
      return withFloatType(st, [&](auto tag) {
        using T = decltype(tag);
        forLanes(exec, [&](unsigned l) {
          T x = bitsTo<T>(a[l]), y = bitsTo<T>(b[l]);
          if (in.ftz) {
            x = flushDenormal(x);
            y = flushDenormal(y);
          }
          put(l, compareFloat(in.cmp, x, y));
        });
      });
    return withIntType(st, [&](auto tag) {
      using T = decltype(tag);
      forLanes(exec, [&](unsigned l) {
        put(l, compareInt(in.cmp, bitsTo<T>(a[l]), bitsTo<T>(b[l])));
      });
    });
  }
  case Op::Prmt: {
    PrmtMode mode = PrmtMode(in.subop);
    forLanes(exec, [&](unsigned l) {
      uint64_t bytes =
          (static_cast<uint64_t>(static_cast<uint32_t>(b[l])) << 32) |
          static_cast<uint32_t>(a[l]);
      uint32_t sel = static_cast<uint32_t>(c[l]);
      auto byteAt = [&](unsigned i) {
        return static_cast<uint32_t>(bytes >> (8 * (i & 7))) & 0xff;
      };
      uint32_t result = 0;
      unsigned n = sel & 3;
      for (unsigned i = 0; i < 4; ++i) {
        uint32_t byte;
        switch (mode) {
        case PrmtMode::Default: {
          unsigned s = (sel >> (4 * i)) & 0xf;
          byte = byteAt(s);
          if (s & 8) // replicate the selected byte's sign
            byte = (byte & 0x80) ? 0xff : 0;
          break;
        }
        case PrmtMode::F4e:
          byte = byteAt(n + i);
          break;
        case PrmtMode::B4e:
          byte = byteAt(n - i);
          break;
        case PrmtMode::Rc8:
          byte = byteAt(n);
          break;
        case PrmtMode::Ecl:
          byte = byteAt(std::max(i, n));
          break;
        case PrmtMode::Ecr:
          byte = byteAt(std::min(i, n));
          break;
        case PrmtMode::Rc16:
        default:
          byte = byteAt(2 * (n & 1) + (i & 1));
          break;
        }
        result |= byte << (8 * i);
      }
      d[l] = result;
    });
    return true;
  }
  case Op::Bfind:
    forLanes(exec, [&](unsigned l) {
      uint64_t x = a[l] & mask;
      if (isSignedType && (x >> (bits - 1)) & 1)
        x = ~x & mask; // the most significant bit unlike the sign
      if (x == 0) {
        d[l] = 0xffffffffu;
        return;
      }
      uint32_t pos = 63 - __builtin_clzll(x);
      d[l] = in.shiftLeft ? bits - 1 - pos : pos;
    });
    return true;
  case Op::Slct: {
    Type ct = in.srcType;
    forLanes(exec, [&](unsigned l) {
      bool pick;
      if (ct == Type::F32) {
        float f = bitsTo<float>(c[l]);
        if (in.ftz)
          f = flushDenormal(f);
        pick = f >= 0.0f;
      } else {
        pick = static_cast<int32_t>(c[l]) >= 0;
      }
      d[l] = (pick ? a[l] : b[l]) & mask;
    });
    return true;
  }
  case Op::Lop3:
    forLanes(exec, [&](unsigned l) {
      uint32_t x = static_cast<uint32_t>(a[l]), y = static_cast<uint32_t>(b[l]),
               z = static_cast<uint32_t>(c[l]);
      uint32_t lut = static_cast<uint32_t>(e[l]) & 0xff, result = 0;
      // Bit i of the table is the result for (a, b, c) = (i>>2, i>>1, i)&1.
      for (unsigned i = 0; i < 8; ++i)
        if ((lut >> i) & 1)
          result |=
              ((i & 4) ? x : ~x) & ((i & 2) ? y : ~y) & ((i & 1) ? z : ~z);
      d[l] = result;
    });
    return true;
  case Op::Testp:
    forLanes(exec, [&](unsigned l) {
      double x = type == Type::F32 ? static_cast<double>(bitsTo<float>(a[l]))
                                   : bitsTo<double>(a[l]);
      int cls = type == Type::F32 ? std::fpclassify(bitsTo<float>(a[l]))
                                  : std::fpclassify(x);
      bool v = false;
      switch (TestpOp(in.subop)) {
      case TestpOp::Finite:
        v = std::isfinite(x);
        break;
      case TestpOp::Infinite:
        v = std::isinf(x);
        break;
      case TestpOp::Number:
        v = !std::isnan(x);
        break;
      case TestpOp::NotANumber:
        v = std::isnan(x);
        break;
      case TestpOp::Normal:
        v = cls == FP_NORMAL;
        break;
      case TestpOp::Subnormal:
        v = cls == FP_SUBNORMAL;
        break;
      }
      d[l] = v;
    });
    return true;
  case Op::Mul24:
  case Op::Mad24:
    forLanes(exec, [&](unsigned l) {
      auto low24 = [&](uint64_t v) -> int64_t {
        int64_t x = static_cast<int64_t>(v & 0xffffff);
        if (isSignedType && (x & 0x800000))
          x -= 0x1000000;
        return x;
      };
      int64_t p = low24(a[l]) * low24(b[l]); // 48 bits
      uint32_t result =
          in.mulMode == MulMode::Hi
              ? static_cast<uint32_t>(static_cast<uint64_t>(p) >> 16)
              : static_cast<uint32_t>(p);
      if (in.op == Op::Mad24)
        result += static_cast<uint32_t>(c[l]);
      d[l] = result;
    });
    return true;
  case Op::Sad:
    forLanes(exec, [&](unsigned l) {
      uint32_t x = static_cast<uint32_t>(a[l]), y = static_cast<uint32_t>(b[l]);
      uint32_t diff;
      if (isSignedType)
        diff =
            static_cast<int32_t>(x) > static_cast<int32_t>(y) ? x - y : y - x;
      else
        diff = x > y ? x - y : y - x;
      d[l] = (static_cast<uint32_t>(c[l]) + diff) & mask;
    });
    return true;
  case Op::Cnot:
    forLanes(exec, [&](unsigned l) { d[l] = (a[l] & mask) == 0 ? 1 : 0; });
    return true;
  case Op::Bmsk:
    forLanes(exec, [&](unsigned l) {
      uint32_t pos = static_cast<uint32_t>(a[l]),
               len = static_cast<uint32_t>(b[l]);
      if (in.shiftClamp) {
        pos = std::min<uint32_t>(pos, 32);
        len = std::min<uint32_t>(len, 32);
      } else {
        pos &= 31;
        len &= 31;
      }
      uint64_t ones = len >= 32 ? 0xffffffffull : ((1ull << len) - 1);
      d[l] = pos >= 32 ? 0 : static_cast<uint32_t>(ones << pos);
    });
    return true;
  case Op::Szext:
    forLanes(exec, [&](unsigned l) {
      uint32_t x = static_cast<uint32_t>(a[l]);
      uint32_t n = static_cast<uint32_t>(b[l]);
      n = in.shiftClamp ? std::min<uint32_t>(n, 32) : n & 31;
      uint32_t result;
      if (n >= 32)
        result = x;
      else if (n == 0)
        result = 0;
      else if (isSignedType)
        result = static_cast<uint32_t>(static_cast<int32_t>(x << (32 - n)) >>
                                       (32 - n));
      else
        result = x & ((1u << n) - 1);
      d[l] = result;
    });
    return true;
  case Op::Dp2a: {
    // Two 16-bit halves of a times two bytes of b (the low two for .lo,
    // the high two for .hi), plus c.
    bool aSigned = isSigned(in.type), bSigned = isSigned(in.srcType);
    unsigned first = in.mulMode == MulMode::Hi ? 2 : 0;
    forLanes(exec, [&](unsigned l) {
      int64_t sum = 0;
      for (unsigned i = 0; i < 2; ++i) {
        uint32_t ua = (static_cast<uint32_t>(a[l]) >> (16 * i)) & 0xffff;
        uint32_t ub = (static_cast<uint32_t>(b[l]) >> (8 * (first + i))) & 0xff;
        int64_t x = aSigned ? static_cast<int16_t>(ua) : ua;
        int64_t y = bSigned ? static_cast<int8_t>(ub) : ub;
        sum += x * y;
      }
      d[l] = static_cast<uint32_t>(static_cast<uint64_t>(sum) +
                                   static_cast<uint32_t>(c[l]));
    });
    return true;
  }
  case Op::Dp4a: {
    bool aSigned = isSigned(in.type), bSigned = isSigned(in.srcType);
    forLanes(exec, [&](unsigned l) {
      int64_t sum = 0;
      for (unsigned i = 0; i < 4; ++i) {
        uint32_t ua = (static_cast<uint32_t>(a[l]) >> (8 * i)) & 0xff;
        uint32_t ub = (static_cast<uint32_t>(b[l]) >> (8 * i)) & 0xff;
        int64_t x = aSigned ? static_cast<int8_t>(ua) : ua;
        int64_t y = bSigned ? static_cast<int8_t>(ub) : ub;
        sum += x * y;
      }
      d[l] = static_cast<uint32_t>(static_cast<uint64_t>(sum) +
                                   static_cast<uint32_t>(c[l]));
    });
    return true;
  }
  default:
    return false;
  }
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
  // Round to nearest without modifiers (the common case): the double is
  // rounded to odd as an f32 (still enough bits for a correct second
  // rounding), then to 16 bits with the bit-level conversions.
  const bool fast = rounding == Rounding::Rn && !in.sat && !in.relu && !in.ftz;
  auto encode = [&](double v) -> uint16_t {
    if (fast) {
      float f = static_cast<float>(v);
      if (std::isfinite(f) && static_cast<double>(f) != v && !(toBits(f) & 1))
        f = std::nextafter(f, v > f ? std::numeric_limits<float>::infinity()
                                    : -std::numeric_limits<float>::infinity());
      return bf ? floatToBf16(f) : floatToHalf(f);
    }
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
  // first, so the one rounding to the narrow format is correct. Each op
  // gets its own lane loop.
  auto apply = [&](auto &&one) {
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
  };
  auto unary = [&](double (*f)(double)) {
    return apply(
        [&](uint16_t x, uint16_t, uint16_t) { return encode(f(decode(x))); });
  };
  switch (in.op) {
  case Op::Add:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(roundOddSum(decode(x), decode(y)));
    });
  case Op::Sub:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(roundOddSum(decode(x), -decode(y)));
    });
  case Op::Mul:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(decode(x) * decode(y));
    });
  case Op::Fma:
  case Op::Mad:
    return apply([&](uint16_t x, uint16_t y, uint16_t z) {
      return encode(roundOddSum(decode(x) * decode(y), decode(z)));
    });
  case Op::Neg:
    return apply([](uint16_t x, uint16_t, uint16_t) {
      return static_cast<uint16_t>(x ^ 0x8000u);
    });
  case Op::Abs:
    return apply([](uint16_t x, uint16_t, uint16_t) {
      return static_cast<uint16_t>(x & 0x7fffu);
    });
  case Op::Min:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(floatMin(decode(x), decode(y), in.propagateNaN));
    });
  case Op::Max:
    return apply([&](uint16_t x, uint16_t y, uint16_t) {
      return encode(floatMax(decode(x), decode(y), in.propagateNaN));
    });
  case Op::Ex2:
    return unary([](double x) { return std::exp2(x); });
  case Op::Tanh:
    return unary([](double x) { return std::tanh(x); });
  case Op::Sqrt:
    return unary([](double x) { return std::sqrt(x); });
  case Op::Rcp:
    return unary([](double x) { return 1.0 / x; });
  case Op::Rsqrt:
    return unary([](double x) { return 1.0 / std::sqrt(x); });
  case Op::Lg2:
    return unary([](double x) { return std::log2(x); });
  case Op::Sin:
    return unary([](double x) { return std::sin(x); });
  case Op::Cos:
    return unary([](double x) { return std::cos(x); });
  default:
    return false;
  }
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
  unsigned workers = static_cast<unsigned>(
      std::min<uint64_t>(std::max(1u, spec.workers), blocks));
  std::atomic<uint64_t> nextBlock{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::string firstError;
  uint64_t firstErrorBlock = UINT64_MAX;
  std::atomic<uint64_t> threadInstructions{0}, warpInstructions{0};
  // A random order (blockOrderSeed) shows up kernels that depend on the
  // order blocks run in, which the hardware does not promise.
  std::vector<uint64_t> order;
  if (spec.blockOrderSeed) {
    order.resize(blocks);
    for (uint64_t i = 0; i < blocks; ++i)
      order[i] = i;
    std::mt19937_64 rng(spec.blockOrderSeed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  auto work = [&]() {
    BlockRunner runner(kernel, spec);
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t next = nextBlock.fetch_add(1);
      if (next >= blocks)
        break;
      uint64_t b = order.empty() ? next : order[next];
      Dim3 id;
      id.x = static_cast<uint32_t>(b % spec.grid.x);
      id.y = static_cast<uint32_t>((b / spec.grid.x) % spec.grid.y);
      id.z = static_cast<uint32_t>(
          b / (static_cast<uint64_t>(spec.grid.x) * spec.grid.y));
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
