//===- ExecBulkCopy.cpp - TMA and bulk copies -----------------------------===//
//
// cp.async.bulk.tensor loads copy a box of a tensor (described by the
// emulator's tensor map, TensorMap.h) from global to shared memory:
// elements outside the tensor are filled with zeros (or NaN with the FMA
// fill), the box is laid out densely in shared memory with dimension 0
// innermost, and with a swizzle mode each 16-byte chunk's index within its
// span (32, 64 or 128 bytes) is XORed with the address bits 7 up, the
// pattern wgmma's descriptors read. Loads read global memory when issued
// and land (then complete their bytes on the mbarrier) when a thread waits
// on that mbarrier (ExecMbarrier.cpp). Stores (shared to global, bulk
// groups) write global memory when issued, so their commit and wait
// groups have nothing left to wait for. The non-tensor bulk copies move
// `size` bytes (a multiple of 16) the same ways.
//
//===----------------------------------------------------------------------===//

#include "InterpreterInternal.h"
#include "TensorMap.h"

namespace kiln::runtime::emu::detail {

namespace {

/// Bytes of a CUtensorMapDataType element, or 0.
unsigned elementBytes(uint8_t dataType) {
  static constexpr unsigned kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  return dataType < sizeof(kBytes) / sizeof(kBytes[0]) ? kBytes[dataType] : 0;
}

/// The NaN an FMA fill writes (CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_
/// ZERO_FMA) for a float type; integers are filled with zeros.
uint64_t nanFill(uint8_t dataType) {
  switch (dataType) {
  case 6: // f16
  case 9: // bf16
    return 0x7fff;
  case 7: // f32
  case 10:
  case 11:
  case 12:
    return 0x7fffffff;
  case 8: // f64
    return 0x7fffffffffffffffull;
  default:
    return 0;
  }
}

uint64_t swizzle(uint64_t address, unsigned span) {
  return span ? address ^ (((address >> 7) & (span / 16 - 1)) << 4) : address;
}

} // namespace

bool BlockRunner::bulkCopy(unsigned w, uint32_t pc, const Instruction &in,
                           uint32_t exec) {
  // A multicast load is a tensor load whose box lands in several blocks.
  const bool multicast = BulkOp(in.subop) == BulkOp::TensorLoadMulticast;
  const BulkOp op = multicast ? BulkOp::TensorLoad : BulkOp(in.subop);
  uint64_t *r = warpRegs(w);
  if (op == BulkOp::Commit || op == BulkOp::Wait) {
    // Stores complete when issued; the race check retires their reads of
    // shared memory here.
    if (raceCheck)
      forLanes(exec, [&](unsigned l) {
        if (op == BulkOp::Commit)
          raceCheck->bulkCommit(w * 32 + l);
        else
          raceCheck->bulkWait(
              w * 32 + l,
              static_cast<uint32_t>(r[static_cast<size_t>(in.src[0]) * 32 + l]));
      });
    return true;
  }
  const uint32_t *ops = kernel.operandLists.data() + in.target;
  bool ok = true;
  forLanes(exec, [&](unsigned l) {
    if (!ok)
      return;
    auto address = [&](unsigned i) {
      uint64_t offset = static_cast<uint64_t>(ops[3 * i + 1]) |
                        (static_cast<uint64_t>(ops[3 * i + 2]) << 32);
      return r[static_cast<size_t>(ops[3 * i]) * 32 + l] + offset;
    };
    auto sharedOffset = [&](uint64_t a, uint64_t bytes, unsigned align,
                            const char *what, uint64_t &offset) {
      bool isShared = false;
      uint8_t *p =
          resolve(w, l, pc, Space::Shared, a, static_cast<unsigned>(bytes),
                  align, what, &isShared);
      if (!p)
        return false;
      if (!isShared)
        return fault(w, l, pc,
                     fmt::format("the {} 0x{:x} is not in shared "
                                 "memory",
                                 what, a));
      offset = static_cast<uint64_t>(p - shared.data());
      return true;
    };
    // The mbarrier a load completes on: checked now, so that a missing one
    // is reported at the copy.
    auto mbarrierAt = [&](unsigned i, uint64_t &offset) {
      if (!mbarrierOffset(w, l, pc, Space::Shared, address(i), offset))
        return false;
      Mbarrier *m = findMbarrier(offset);
      if (!m || !m->valid)
        return fault(w, l, pc,
                     fmt::format("the copy completes on the mbarrier at "
                                 "shared offset {}, which is not initialized",
                                 offset));
      return true;
    };
    if (op == BulkOp::Load || op == BulkOp::Store) {
      uint64_t size =
          r[static_cast<size_t>(ops[op == BulkOp::Load ? 9 : 6]) * 32 + l] &
          0xffffffffu;
      if (size == 0 || size % 16) {
        ok = fault(
            w, l, pc,
            fmt::format("a bulk copy of {} bytes (a multiple of 16)", size));
        return;
      }
      uint64_t dst = address(0), src = address(1);
      uint64_t smem = 0;
      if (!sharedOffset(op == BulkOp::Load ? dst : src, size, 16,
                        "bulk copy's shared address", smem)) {
        ok = false;
        return;
      }
      uint64_t global = op == BulkOp::Load ? src : dst;
      if (global % 16) {
        ok = fault(w, l, pc,
                   fmt::format("misaligned bulk copy global address 0x{:x} "
                               "(needs 16 bytes)",
                               global));
        return;
      }
      uint8_t *g = globalPointer(global, static_cast<unsigned>(size));
      if (!g) {
        ok = fault(w, l, pc,
                   fmt::format("out-of-bounds bulk copy of {} bytes: {}", size,
                               describeGlobalMiss(global, size)));
        return;
      }
      if (countPerformance) {
        uint64_t a[32];
        unsigned b[32];
        a[l] = global;
        b[l] = static_cast<unsigned>(size);
        countAccess(Space::Global, a, b, 1u << l, op == BulkOp::Load,
                    op == BulkOp::Store);
        perf.asyncSharedBytes += size;
      }
      if (op == BulkOp::Store) {
        if (raceCheck) {
          raceCheck->bulkStoreBegin(w * 32 + l, pc);
          if (!raceCheck->bulkStoreRead(smem, static_cast<unsigned>(size))) {
            ok = raceFault(w, l, pc);
            return;
          }
          raceCheck->globalWrite(w * 32 + l, pc, global,
                                 static_cast<unsigned>(size));
        }
        std::memcpy(g, shared.data() + smem, size);
        return;
      }
      PendingBulk copy;
      if (!mbarrierAt(2, copy.mbarrier)) {
        ok = false;
        return;
      }
      if (raceCheck) {
        raceCheck->globalRead(w * 32 + l, pc, global,
                              static_cast<unsigned>(size));
        raceCheck->bulkLoadBegin(w * 32 + l, pc, copy.mbarrier);
        if (!raceCheck->bulkLoadWrite(smem, static_cast<unsigned>(size))) {
          ok = raceFault(w, l, pc);
          return;
        }
      }
      copy.warp = w;
      copy.lane = l;
      copy.pc = pc;
      copy.bytes = size;
      copy.data.assign(g, g + size);
      for (uint64_t c = 0; c < size; c += 16)
        copy.chunks.push_back(static_cast<uint32_t>(smem + c));
      pendingBulk.push_back(std::move(copy));
      ++mbarrierEvents;
      return;
    }
    // A tensor copy: read and check the tensor map.
    uint64_t mapAddress = address(1);
    EmuTensorMap map;
    const uint8_t *mapBytes = nullptr;
    if (mapAddress >= kParamWindow &&
        mapAddress < kParamWindow + (1ull << 32)) {
      uint64_t offset = mapAddress - kParamWindow;
      if (offset + sizeof(map) <= spec.paramBytes)
        mapBytes = spec.params + offset;
    } else {
      mapBytes = globalPointer(mapAddress, sizeof(map));
    }
    if (!mapBytes) {
      ok = fault(w, l, pc,
                 fmt::format("the tensor map at 0x{:x} is neither a kernel "
                             "parameter nor in global memory",
                             mapAddress));
      return;
    }
    std::memcpy(&map, mapBytes, sizeof(map));
    const unsigned dims = in.aux;
    const unsigned elem = elementBytes(map.dataType);
    if (map.magic != kTensorMapMagic) {
      std::string where =
          mapAddress >= kParamWindow
              ? fmt::format("parameter offset {}", mapAddress - kParamWindow)
              : fmt::format("0x{:x}", mapAddress);
      ok = fault(w, l, pc,
                 fmt::format("the tensor map at {} is not one the emulator "
                             "wrote (magic 0x{:08x}, expected 0x{:08x})",
                             where, map.magic, kTensorMapMagic));
      return;
    }
    std::string bad;
    if (map.rank != dims)
      bad = fmt::format("it has rank {}, the copy is {}d", map.rank, dims);
    else if (elem == 0)
      bad = fmt::format("data type {} is unknown", map.dataType);
    else if (map.interleave != 0)
      bad = "interleaved layouts are not emulated";
    else if (map.swizzle > 3)
      bad = fmt::format("swizzle {} is unknown", map.swizzle);
    for (unsigned d = 0; d < dims && bad.empty(); ++d) {
      if (map.boxDims[d] == 0 || map.boxDims[d] > 256)
        bad =
            fmt::format("box dimension {} is {} (1 to 256)", d, map.boxDims[d]);
      else if (map.elementStrides[d] > 1)
        bad = fmt::format("element stride {} in dimension {} is not "
                          "emulated (only 1)",
                          map.elementStrides[d], d);
    }
    static constexpr unsigned kSpans[4] = {0, 32, 64, 128};
    const unsigned span = kSpans[map.swizzle & 3];
    const uint64_t rowBytes = static_cast<uint64_t>(map.boxDims[0]) * elem;
    if (bad.empty() && rowBytes % 16)
      bad = fmt::format("the box's inner dimension is {} bytes (a multiple "
                        "of 16)",
                        rowBytes);
    if (bad.empty() && span && rowBytes > span)
      bad = fmt::format("the box's inner dimension of {} bytes exceeds the "
                        "{}-byte swizzle span",
                        rowBytes, span);
    if (!bad.empty()) {
      ok = fault(w, l, pc, "bad tensor map: " + bad);
      return;
    }
    uint64_t boxElements = 1;
    for (unsigned d = 0; d < dims; ++d)
      boxElements *= map.boxDims[d];
    const uint64_t boxBytes = boxElements * elem;
    int64_t coord[kTensorMapMaxRank] = {};
    for (unsigned d = 0; d < dims; ++d)
      coord[d] = static_cast<int32_t>(
          r[static_cast<size_t>(ops[(op == BulkOp::TensorLoad ? 9 : 6) + d]) *
                32 +
            l]);
    uint64_t smem = 0;
    if (!sharedOffset(address(0), boxBytes, 128,
                      "tensor copy's shared "
                      "address",
                      smem)) {
      ok = false;
      return;
    }
    if (raceCheck && op == BulkOp::TensorStore)
      raceCheck->bulkStoreBegin(w * 32 + l, pc);
    // Walk the box row by row (dimension 0 is a row); the shared image is
    // dense, then swizzled per 16-byte chunk.
    std::vector<uint8_t> image(boxBytes, 0);
    const uint64_t fill = map.oobFill == 1 ? nanFill(map.dataType) : 0;
    uint64_t rows = boxElements / map.boxDims[0];
    for (uint64_t row = 0; row < rows && ok; ++row) {
      int64_t pos[kTensorMapMaxRank] = {};
      bool inside = true;
      uint64_t rest = row;
      uint64_t rowBase = 0;
      for (unsigned d = 1; d < dims; ++d) {
        pos[d] = coord[d] + static_cast<int64_t>(rest % map.boxDims[d]);
        rest /= map.boxDims[d];
        inside &= pos[d] >= 0 && pos[d] < map.globalDims[d];
        rowBase += static_cast<uint64_t>(pos[d]) * map.globalStrides[d - 1];
      }
      uint8_t *out = image.data() + row * rowBytes;
      // The part of the row inside the tensor: [first, last).
      int64_t first = std::max<int64_t>(0, -coord[0]);
      int64_t last = std::min<int64_t>(map.boxDims[0],
                                       int64_t(map.globalDims[0]) - coord[0]);
      if (!inside || last <= first)
        first = last = 0;
      for (int64_t i = 0; i < map.boxDims[0]; ++i)
        if (i < first || i >= last)
          std::memcpy(out + i * elem, &fill, elem);
      if (last <= first)
        continue;
      uint64_t global = map.globalAddress + rowBase +
                        static_cast<uint64_t>(coord[0] + first) * elem;
      uint64_t bytes = static_cast<uint64_t>(last - first) * elem;
      uint8_t *g = globalPointer(global, static_cast<unsigned>(bytes));
      if (!g) {
        ok = fault(w, l, pc,
                   fmt::format("the tensor map's row at 0x{:x} ({} bytes) is "
                               "out of bounds: {}",
                               global, bytes,
                               describeGlobalMiss(global, bytes)));
        return;
      }
      if (countPerformance) {
        uint64_t a[32];
        unsigned b[32];
        a[l] = global;
        b[l] = static_cast<unsigned>(bytes);
        countAccess(Space::Global, a, b, 1u << l, op == BulkOp::TensorLoad,
                    op == BulkOp::TensorStore);
      }
      if (op == BulkOp::TensorLoad) {
        std::memcpy(out + first * elem, g, bytes);
        if (raceCheck)
          raceCheck->globalRead(w * 32 + l, pc, global,
                                static_cast<unsigned>(bytes));
      } else {
        // A store: the in-bounds elements of the row, from the swizzled
        // shared image.
        for (uint64_t b = 0; b < bytes; ++b) {
          uint64_t u = row * rowBytes + first * elem + b;
          if (raceCheck &&
              !raceCheck->bulkStoreRead(swizzle(smem + u, span), 1)) {
            ok = raceFault(w, l, pc);
            return;
          }
          g[b] = shared[swizzle(smem + u, span)];
        }
        if (raceCheck)
          raceCheck->globalWrite(w * 32 + l, pc, global,
                                 static_cast<unsigned>(bytes));
      }
    }
    if (!ok)
      return;
    if (countPerformance)
      perf.asyncSharedBytes += boxBytes;
    if (op == BulkOp::TensorStore)
      return;
    PendingBulk copy;
    uint32_t ctaMask = 0;
    if (multicast) {
      ctaMask = static_cast<uint32_t>(
          r[static_cast<size_t>(ops[9 + dims]) * 32 + l] & 0xffff);
      // The mbarrier at the same offset in each block of the mask
      // completes the bytes that block receives.
      if (!mbarrierOffset(w, l, pc, Space::Shared, address(2),
                          copy.mbarrier)) {
        ok = false;
        return;
      }
    } else if (!mbarrierAt(2, copy.mbarrier)) {
      ok = false;
      return;
    }
    if (raceCheck)
      raceCheck->bulkLoadBegin(w * 32 + l, pc, copy.mbarrier);
    copy.warp = w;
    copy.lane = l;
    copy.pc = pc;
    copy.bytes = boxBytes;
    copy.data.resize(boxBytes);
    for (uint64_t u = 0; u < boxBytes; u += 16) {
      uint64_t a = swizzle(smem + u, span);
      if (a + 16 > sharedBytes) {
        ok = fault(w, l, pc,
                   fmt::format("the swizzled box reaches shared offset {}, "
                               "past the {} bytes of shared memory",
                               a + 16, sharedBytes));
        return;
      }
      if (raceCheck && !raceCheck->bulkLoadWrite(a, 16)) {
        ok = raceFault(w, l, pc);
        return;
      }
      copy.chunks.push_back(static_cast<uint32_t>(a));
      std::memcpy(copy.data.data() + u, image.data() + u, 16);
    }
    if (!multicast) {
      pendingBulk.push_back(std::move(copy));
      ++mbarrierEvents;
      return;
    }
    if (ctaMask == 0) {
      ok = fault(w, l, pc, "a multicast tensor load with an empty ctaMask");
      return;
    }
    for (uint32_t m = ctaMask; m; m &= m - 1) {
      uint32_t rank = __builtin_ctz(m);
      BlockRunner *target = clusterBlock(rank);
      if (!target || target->exited) {
        ok = fault(w, l, pc,
                   fmt::format("a multicast tensor load to block {} of the "
                               "cluster, which {}",
                               rank,
                               target ? "has exited" : "the cluster lacks"));
        return;
      }
      target->pendingBulk.push_back(copy);
      ++target->mbarrierEvents;
    }
  });
  return ok;
}

} // namespace kiln::runtime::emu::detail
