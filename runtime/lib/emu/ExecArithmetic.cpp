//===- ExecArithmetic.cpp - Integer, float and predicate arithmetic -------===//
//
// mov, selp, cvta, predicate logic, setp, the f32/f64 float operations
// (every rounding mode, .ftz, .sat, the .approx functions) and the integer
// ones (wrapping, .sat, .hi/.wide, shifts, bit fields), and the carry chains
// (add.cc, addc, sub.cc, subc, mad.cc, madc). Bit-level instructions go to
// ExecBitArithmetic.cpp, 16-bit floats to ExecHalfArithmetic.cpp.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

namespace kiln::runtime::emu::detail {

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
    else if (in.space == Space::Param) // __grid_constant__ parameters
      delta = in.toSpace ? -static_cast<int64_t>(kParamWindow)
                         : static_cast<int64_t>(kParamWindow);
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

} // namespace kiln::runtime::emu::detail
