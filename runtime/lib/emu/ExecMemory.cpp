//===- ExecMemory.cpp - Loads, stores, atomics and their checks -----------===//
//
// ld/st in every state space (param, global, const, shared, local,
// generic), atom and red, and the checks every access makes: bounds against
// the device's allocations (naming the one it overran), natural alignment,
// the optional shared-read check. resolve() maps a generic address to
// shared or local memory and is shared with the other families' accesses.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "Numerics.h"

namespace kiln::runtime::emu::detail {

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

/// One element of a load or store. Global memory is shared by blocks that
/// run on several host threads, and PTX lets a kernel race on it (a
/// volatile load against another block's atomics, a flag polled across
/// blocks): each naturally aligned element moves as one relaxed atomic, as
/// on a GPU, so the emulator itself has no data race (ThreadSanitizer,
/// docs/reliability.md "Sanitizers"; races of the emulated kernel are
/// KILN_EMU_CHECK=races's job). On x86 these are the same plain moves.
template <typename T> T loadElement(const uint8_t *p) {
  T v;
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0)
    return __atomic_load_n(reinterpret_cast<const T *>(p), __ATOMIC_RELAXED);
  std::memcpy(&v, p, sizeof(T));
  return v;
}

void storeElement(uint8_t *p, const void *value, unsigned size) {
  auto store = [&](auto type) {
    using T = decltype(type);
    T v;
    std::memcpy(&v, value, sizeof(T));
    if (reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0)
      __atomic_store_n(reinterpret_cast<T *>(p), v, __ATOMIC_RELAXED);
    else
      std::memcpy(p, &v, sizeof(T));
  };
  switch (size) {
  case 1:
    return store(uint8_t());
  case 2:
    return store(uint16_t());
  case 4:
    return store(uint32_t());
  case 8:
    return store(uint64_t());
  default:
    std::memcpy(p, value, size);
  }
}

} // namespace

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
      uint8_t v = loadElement<uint8_t>(p);
      return signExtend ? static_cast<uint64_t>(static_cast<int8_t>(v)) : v;
    }
    case 2: {
      uint16_t v = loadElement<uint16_t>(p);
      return signExtend ? static_cast<uint64_t>(static_cast<int16_t>(v)) : v;
    }
    case 4: {
      uint32_t v = loadElement<uint32_t>(p);
      return signExtend ? static_cast<uint64_t>(static_cast<int32_t>(v)) : v;
    }
    default:
      return loadElement<uint64_t>(p);
    }
  };
  auto transfer = [&](unsigned lane, uint8_t *p) {
    if (isLoad) {
      for (unsigned e = 0; e < in.vec; ++e)
        r[static_cast<size_t>(in.dst[e]) * 32 + lane] = loadValue(p + e * size);
    } else {
      for (unsigned e = 0; e < in.vec; ++e)
        storeElement(p + e * size,
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
    RaceCheck *const races = raceCheck.get();
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
            address < kParamWindow + (1ull << 32)) {
          if (address >= kParamWindow) { // a parameter (cvta.param)
            uint64_t offset = address - kParamWindow;
            if (!isLoad || offset + total > spec.paramBytes) {
              ok = fault(w, lane, pc,
                         fmt::format("generic {} at parameter offset {} of "
                                     "{} bytes (parameters are read-only, "
                                     "{} bytes passed)",
                                     verb, offset, total, spec.paramBytes));
              return;
            }
            transfer(lane, const_cast<uint8_t *>(spec.params) + offset);
            return;
          }
          if (address >= kLocalWindow &&
              address < kLocalWindow + (1ull << 32)) { // local memory
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
          if (__builtin_expect(address >> kClusterRankShift, 0) &&
              address < (1ull << 32)) {
            // Another block of the cluster (distributed shared memory).
            uint64_t offset = 0;
            BlockRunner *target =
                clusterTarget(w, lane, pc, address, total, verb, offset);
            if (!target) {
              ok = false;
              return;
            }
            if (!isLoad)
              target->markSharedWritten(offset, total);
            transfer(lane, target->shared.data() + offset);
            return;
          }
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
          if (__builtin_expect(races != nullptr, 0) &&
              !(isLoad ? races->read(w * 32 + lane, pc, address, total)
                       : races->write(w * 32 + lane, pc, address, total))) {
            ok = raceFault(w, lane, pc);
            return;
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
          if (__builtin_expect(races != nullptr, 0) &&
              in.space != Space::Const) {
            // ld.acquire / st.release synchronise; other accesses are
            // data the check follows between blocks.
            if (races->isSyncAccess(pc)) {
              races->globalSync(w * 32 + lane, pc, address, isLoad, !isLoad,
                                [&] { transfer(lane, p); });
              return;
            }
            if (isLoad)
              races->globalRead(w * 32 + lane, pc, address, total);
            else
              races->globalWrite(w * 32 + lane, pc, address, total);
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
    if (__builtin_expect(countPerformance, 0) && ok)
      countUniformAccess(in.space, base, in.offset, total, exec, isLoad,
                         !isLoad);
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
    if (isShared && raceCheck &&
        !raceCheck->atomic(w * 32 + l, pc, p - shared.data(), size)) {
      ok = raceFault(w, l, pc);
      return;
    }
    auto perform = [&] {
      uint64_t old =
          size == 8 ? atomicUpdate<uint64_t>(
                          p, [&](uint64_t o) { return update(l, o); })
                    : atomicUpdate<uint32_t>(p, [&](uint64_t o) {
                        return update(l, o) & 0xffffffffull;
                      });
      if (d)
        d[l] = old;
    };
    // A global atomic is a synchronisation between blocks (RaceCheckGlobal.h):
    // atom reads and writes its location, red writes it.
    if (!isShared && raceCheck)
      raceCheck->globalSync(w * 32 + l, pc, base[l] + in.offset,
                            in.op == Op::Atom, /*writes=*/true, perform);
    else
      perform();
  });
  if (countPerformance && ok)
    countUniformAccess(in.space, base, in.offset, size, exec, /*reads=*/true,
                       /*writes=*/true);
  return ok;
}

} // namespace kiln::runtime::emu::detail
