//===- RaceCheckShadow.cpp - The race check's shadow shared memory --------===//
//
// Per shared byte the last write and the reads since (RaceCheck.h), each
// access checked against them with the accessing thread's (or agent's)
// vector clock, and the reports naming both accesses. Runs of bytes in the
// same state are handled once; a 16-byte row whose bytes are alike keeps
// one state (the dense row arrays) until an access touches part of it;
// concurrent reads live in reference-counted lists, compacted as they
// grow.
//
//===----------------------------------------------------------------------===//

#include "RaceCheck.h"

#include <fmt/core.h>

#include <algorithm>

namespace kiln::runtime::emu::detail {

//===----------------------------------------------------------------------===//
// Shadow shared memory
//===----------------------------------------------------------------------===//

RaceCheck::Actor RaceCheck::threadActor(unsigned t, uint32_t pc,
                                        uint8_t kind) {
  settle(t);
  Actor a;
  a.thread = static_cast<int>(t);
  a.fenced = fenceTracking ? fenced[t].data() : nullptr;
  a.who = static_cast<uint16_t>(t);
  a.clock = clocks[t];
  a.reportThread = static_cast<uint16_t>(t);
  a.pc = pc;
  a.kind = kind;
  return a;
}

uint32_t RaceCheck::newList(unsigned refs) {
  uint32_t index;
  if (!freeLists.empty()) {
    index = freeLists.back();
    freeLists.pop_back();
  } else {
    index = static_cast<uint32_t>(lists.size());
    lists.emplace_back();
  }
  lists[index].records.clear();
  lists[index].refs = refs;
  lists[index].compactAt = 8;
  anyList = true;
  return index;
}

void RaceCheck::clearReads(const Slots &at, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    at.reads[i].gen = 0;
    if (uint32_t l = at.lists[i]) {
      if (--lists[l - 1].refs == 0)
        freeLists.push_back(l - 1);
      at.lists[i] = 0;
    }
  }
}

void RaceCheck::compact(const Actor &a, std::vector<Record> &list) {
  // The newest read (last) stays. Reads ordered before it need not be
  // kept: a write ordered after it is ordered after them too; and of one
  // thread's (or agent's) reads the latest is enough.
  Record newest = list.back();
  list.pop_back();
  if (++compactStamp == 0) { // wrapped: forget the old marks
    std::fill(seenStamp.begin(), seenStamp.end(), 0);
    compactStamp = 1;
  }
  size_t kept = 0;
  for (const Record &e : list) {
    if (!valid(e) || e.who == newest.who || ordered(a, e))
      continue;
    if (seenStamp[e.who] == compactStamp) { // a later read of the same one
      Record &first = list[seenSlot[e.who]];
      if (e.clock > first.clock)
        first = e;
      continue;
    }
    seenStamp[e.who] = compactStamp;
    seenSlot[e.who] = static_cast<uint32_t>(kept);
    list[kept++] = e;
  }
  list.resize(kept);
  list.push_back(newest);
}

void RaceCheck::addReads(const Actor &a, const Slots &at, unsigned n,
                         const Record &r) {
  if (uint32_t l = at.lists[0]) {
    uint32_t index = l - 1;
    if (lists[index].refs != n) {
      // Other bytes share the list: these get a copy of their own.
      uint32_t copy = newList(n);
      lists[copy].records = lists[index].records;
      lists[index].refs -= n;
      for (unsigned i = 0; i < n; ++i)
        at.lists[i] = copy + 1;
      index = copy;
    }
    ReadList &list = lists[index];
    if (!list.records.empty() && list.records.back().who == r.who) {
      list.records.back() = r;
      return;
    }
    list.records.push_back(r);
    if (list.records.size() >= list.compactAt) {
      compact(a, list.records);
      list.compactAt =
          std::max<uint32_t>(8, 2 * static_cast<uint32_t>(list.records.size()));
    }
    return;
  }
  const Record old = at.reads[0];
  if (!valid(old) || old.who == r.who || ordered(a, old)) {
    for (unsigned i = 0; i < n; ++i)
      at.reads[i] = r;
    return;
  }
  // Concurrent readers: keep them all.
  uint32_t index = newList(n);
  lists[index].records.assign({old, r});
  for (unsigned i = 0; i < n; ++i) {
    at.lists[i] = index + 1;
    at.reads[i] = Record();
  }
}

bool RaceCheck::accessRun(const Actor &a, uint64_t b, const Slots &at,
                          unsigned n) {
  const Record w = at.writes[0];
  Record mine{a.clock, epoch, a.pc, issue, a.who, a.reportThread, a.kind};
  if (a.kind == KindRead || a.kind == KindAsyncRead) {
    if (valid(w)) {
      if (!ordered(a, w))
        return raceWith(a, b, w);
      if (a.kind == KindAsyncRead && isGenericWrite(w.kind) &&
          !(a.fenced && a.fenced[w.who] >= w.clock))
        return raceWith(a, b, w, /*proxy=*/true);
    }
    addReads(a, at, n, mine);
    return true;
  }
  // A write (store, atomic, cp.async, TMA/bulk load). Lanes of one store
  // instruction writing the same bytes are not a race: one of them writes.
  if (valid(w) && !(a.kind == KindAtomic && w.kind == KindAtomic) &&
      !(a.kind == KindWrite && w.kind == KindWrite && w.issue == issue &&
        a.thread >= 0) &&
      !ordered(a, w))
    return raceWith(a, b, w);
  if (uint32_t l = at.lists[0]) {
    for (const Record &e : lists[l - 1].records)
      if (valid(e) && !ordered(a, e))
        return raceWith(a, b, e);
  } else if (valid(at.reads[0]) && !ordered(a, at.reads[0])) {
    return raceWith(a, b, at.reads[0]);
  }
  clearReads(at, n);
  for (unsigned i = 0; i < n; ++i)
    at.writes[i] = mine;
  return true;
}

void RaceCheck::materialize(uint64_t row) {
  if (!uniform[row])
    return;
  uniform[row] = 0;
  uint64_t b = row * 16, end = std::min<uint64_t>(b + 16, writes.size());
  for (uint64_t c = b; c < end; ++c) {
    writes[c] = rowWrites[row];
    reads[c] = rowReads[row];
    readList[c] = rowLists[row];
  }
  if (rowLists[row])
    lists[rowLists[row] - 1].refs += static_cast<uint32_t>(end - b) - 1;
  rowLists[row] = 0;
}

void RaceCheck::makeUniform(uint64_t row) {
  // Every byte of the row is alike: the row's slot speaks for them.
  uint64_t b = row * 16;
  rowWrites[row] = writes[b];
  rowReads[row] = reads[b];
  rowLists[row] = readList[b];
  for (uint64_t c = b; c < b + 16; ++c)
    if (uint32_t l = readList[c]) {
      if (c != b)
        --lists[l - 1].refs; // the row holds one reference
      readList[c] = 0;
    }
  uniform[row] = 1;
}

bool RaceCheck::access(const Actor &a, uint64_t offset, unsigned bytes) {
  // Bytes in the same state take the same path and end in the same state
  // (an access usually finds its bytes alike): handle each run once. A
  // 16-byte row whose bytes are alike keeps one state for all of them
  // (`uniform`, in the dense row arrays) until an access touches part of
  // it.
  for (unsigned i = 0; i < bytes;) {
    uint64_t b = offset + i, row = b / 16;
    if (b % 16 == 0 && bytes - i >= 16 && uniform[row]) {
      if (!accessRun(a, b, {&rowWrites[row], &rowReads[row], &rowLists[row]},
                     1))
        return false;
      i += 16;
      continue;
    }
    materialize(row);
    unsigned rowEnd = static_cast<unsigned>(
        std::min<uint64_t>(bytes, (row + 1) * 16 - offset));
    unsigned j = i + 1;
    for (; j < rowEnd; ++j) {
      uint64_t c = offset + j;
      if (readList[c] != readList[b] || !(writes[c] == writes[b]) ||
          !(reads[c] == reads[b]))
        break;
    }
    if (!accessRun(a, b, {&writes[b], &reads[b], &readList[b]}, j - i))
      return false;
    if (b % 16 == 0 && j - i == 16)
      makeUniform(row);
    i = j;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

std::string RaceCheck::threadName(unsigned t) const {
  return fmt::format("({},{},{})", t % spec.block.x,
                     (t / spec.block.x) % spec.block.y,
                     t / (spec.block.x * spec.block.y));
}

std::string RaceCheck::lineOf(uint32_t pc) const {
  return fmt::format("PTX line {} ({})", kernel.code[pc].line,
                     kernel.opcodeText[pc]);
}

std::string RaceCheck::describe(const Record &r) const {
  std::string who = threadName(r.thread);
  if (r.who < threads) {
    const char *what = r.kind == KindRead     ? "the read"
                       : r.kind == KindAtomic ? "the atomic"
                       : r.kind == KindCopy   ? "the cp.async"
                                              : "the write";
    return fmt::format("{} of thread {} at {}", what, who, lineOf(r.pc));
  }
  if (r.who < threads + numWarps)
    return fmt::format("the wgmma.mma_async of warp {} (thread {}) at {}",
                       r.who - threads, who, lineOf(r.pc));
  if (r.who < firstMbarrierAgent())
    return fmt::format("the bulk/TMA store of thread {} at {}", who,
                       lineOf(r.pc));
  if (r.kind == KindCopy)
    return fmt::format("the cp.async of thread {} at {} (completed through "
                       "a cp.async.mbarrier.arrive)",
                       who, lineOf(r.pc));
  return fmt::format("the TMA/bulk copy issued by thread {} at {}", who,
                     lineOf(r.pc));
}

bool RaceCheck::raceWith(const Actor &a, uint64_t b, const Record &other,
                         bool proxy) {
  const char *mine = a.kind == KindRead         ? "this read"
                     : a.kind == KindWrite      ? "this write"
                     : a.kind == KindAtomic     ? "this atomic"
                     : a.kind == KindCopy       ? "this cp.async"
                     : a.kind == KindAsyncWrite ? "this TMA/bulk copy"
                     : a.who < threads + numWarps
                         ? "this wgmma.mma_async (async proxy)"
                         : "this bulk/TMA store (async proxy)";
  if (proxy) {
    report = fmt::format(
        "async-proxy hazard at shared offset {}: {} reads what {} wrote "
        "through the generic proxy, with no fence.proxy.async on the way "
        "from that write to this read",
        b, mine, describe(other));
    return false;
  }
  if (other.clock == kInFlightClock) {
    report = fmt::format(
        "data race at shared offset {}: {} meets {}, which is still in "
        "flight (no cp.async.wait_group or mbarrier wait has completed it)",
        b, mine, describe(other));
    return false;
  }
  const char *hint = "";
  if (other.who >= firstMbarrierAgent() && other.kind == KindAsyncWrite)
    hint = "; wait on the copy's mbarrier first";
  else if (other.kind == KindAsyncRead && other.who < threads + numWarps)
    hint = "; the wgmma.wait_group that retires it comes first";
  else if (other.kind == KindAsyncRead)
    hint = "; cp.async.bulk.wait_group.read comes first";
  report = fmt::format(
      "data race at shared offset {}: {} and {} are not ordered (no "
      "barrier, mbarrier wait or warp-synchronous exchange between them{})",
      b, mine, describe(other), hint);
  return false;
}

} // namespace kiln::runtime::emu::detail
