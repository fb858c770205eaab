//===- ExecBitArithmetic.cpp - Bit manipulation and mixed-type ops --------===//
//
// set, prmt, bfind, slct, lop3, testp, mul24/mad24, sad, cnot, bmsk, szext,
// dp4a and dp2a: the instructions that mostly move bits, each checked
// against the PTX ISA's tables in EmuInstructionTest.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

namespace kiln::runtime::emu::detail {

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
        // Both arms int64_t: with `int16_t : uint32_t` the conditional's
        // type is uint32_t, a negative half became 2^32 - |x| and the
        // product overflowed int64_t (UBSan, docs/reliability.md).
        int64_t x = aSigned ? int64_t(static_cast<int16_t>(ua)) : int64_t(ua);
        int64_t y = bSigned ? int64_t(static_cast<int8_t>(ub)) : int64_t(ub);
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
        int64_t x = aSigned ? int64_t(static_cast<int8_t>(ua)) : int64_t(ua);
        int64_t y = bSigned ? int64_t(static_cast<int8_t>(ub)) : int64_t(ub);
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

} // namespace kiln::runtime::emu::detail
