//===- RaceCheck.cpp - Data races and async-proxy hazards in a block ------===//
//
// The happens-before bookkeeping of KILN_EMU_CHECK=races (RaceCheck.h has
// the model): vector clocks, kept as a block snapshot plus, per thread, the
// entries above it (SparseClock), so that a full-block barrier, the common
// synchronisation, costs O(threads) instead of O(threads^2); what each
// synchronisation releases and acquires; the asynchronous units' agents.
// The shadow of shared memory and the reports are RaceCheckShadow.cpp's;
// global memory between blocks RaceCheckGlobal.cpp's.
//
//===----------------------------------------------------------------------===//

#include "RaceCheck.h"

#include <fmt/core.h>

#include <algorithm>
#include <string_view>

namespace kiln::runtime::emu::detail {

//===----------------------------------------------------------------------===//
// Vector clocks
//===----------------------------------------------------------------------===//

void RaceCheck::SparseClock::init(size_t width) {
  value.assign(width, 0);
  stamp.assign(width, 0);
  touched.clear();
  current = 1;
}

void RaceCheck::SparseClock::raise(uint32_t i, uint32_t v) {
  if (stamp[i] != current) {
    stamp[i] = current;
    value[i] = v;
    touched.push_back(i);
  } else if (v > value[i]) {
    value[i] = v;
  }
}

void RaceCheck::SparseClock::clear() {
  touched.clear();
  if (++current == 0) { // wrapped: forget every old stamp
    std::fill(stamp.begin(), stamp.end(), 0);
    current = 1;
  }
}

RaceCheck::RaceCheck(const Kernel &kernel, const LaunchSpec &spec,
                     uint64_t sharedBytes, unsigned numWarps,
                     GlobalAccessTracker *global)
    : kernel(kernel), spec(spec), global(global), numWarps(numWarps) {
  threads = spec.block.x * spec.block.y * spec.block.z;
  width = threads + 2 * numWarps + kMbarrierAgents;
  bool anyFence = false, anyAsyncRead = false;
  for (const Instruction &in : kernel.code) {
    anyFence |= in.op == Op::Membar && FenceKind(in.subop) == FenceKind::ProxyAsync;
    anyAsyncRead |=
        (in.op == Op::Wgmma && WgmmaOp(in.subop) == WgmmaOp::MmaAsync) ||
        (in.op == Op::BulkCopy && (BulkOp(in.subop) == BulkOp::Store ||
                                   BulkOp(in.subop) == BulkOp::TensorStore));
  }
  fenceTracking = anyFence && anyAsyncRead;
  // Global synchronisation: the qualifiers the decoder drops, from the
  // opcode's text.
  pcFlags.assign(kernel.code.size(), 0);
  for (size_t pc = 0; pc < kernel.code.size(); ++pc) {
    const Instruction &in = kernel.code[pc];
    bool memoryFence =
        in.op == Op::Membar && FenceKind(in.subop) == FenceKind::Memory;
    bool access = in.op == Op::Atom || in.op == Op::Red ||
                  ((in.op == Op::Ld || in.op == Op::St) &&
                   (in.space == Space::Global || in.space == Space::Generic));
    if (!memoryFence && !access)
      continue;
    bool cta = false, gpu = false, acq = false, rel = false;
    const std::string &text = kernel.opcodeText[pc];
    for (size_t from = 0; from <= text.size();) {
      size_t to = text.find('.', from);
      if (to == std::string::npos)
        to = text.size();
      std::string_view part(text.data() + from, to - from);
      cta |= part == "cta" || part == "cluster";
      gpu |= part == "gl" || part == "gpu" || part == "sys";
      acq |= part == "acquire" || part == "acq_rel";
      rel |= part == "release" || part == "acq_rel";
      from = to + 1;
    }
    if (memoryFence) {
      if (gpu && !cta)
        pcFlags[pc] = kPcGpuFence;
      continue;
    }
    if (in.space == Space::Shared)
      continue;
    if (!cta)
      pcFlags[pc] = (acq ? kPcAcquire : 0) | (rel ? kPcRelease : 0);
    syncTracking |= in.op == Op::Atom || in.op == Op::Red || pcFlags[pc];
  }
  clocks.assign(width, 0);
  tickPending.assign(threads, 0);
  warpVersion.assign(numWarps, 0);
  syncedVersion.assign(numWarps, UINT32_MAX);
  syncedLanes.assign(numWarps, 0);
  snapshot.assign(width, 0);
  view.resize(threads);
  for (SparseClock &v : view)
    v.init(width);
  if (fenceTracking) {
    fenced.assign(threads, std::vector<uint32_t>(width, 0));
    warpFenced.assign(width, 0);
  }
  auto initReleased = [&](Released &r) {
    r.clocks.init(width);
    if (fenceTracking)
      r.fenced.assign(width, 0);
  };
  barriers.resize(16);
  for (Released &r : barriers)
    initReleased(r);
  initReleased(scratch);
  barrierArrived.assign(16, false);
  copyArrives.resize(threads);
  wgmmaGroups.resize(numWarps);
  wgmmaCommitted.assign(numWarps, 0);
  bulkGroups.resize(threads);
  bulkCommitted.assign(threads, 0);
  warpView.assign(width, 0);
  if (syncTracking) {
    acquired.resize(threads);
    pendingAcquired.resize(threads);
    knowledgeIndex.assign(threads, 0);
  }
  readTable.resize(1024);
  uint64_t blocks =
      static_cast<uint64_t>(spec.grid.x) * spec.grid.y * spec.grid.z;
  uint32_t clusterSize = spec.cluster.x * spec.cluster.y * spec.cluster.z;
  checkReads = spec.sampleBlocks == 0 ||
               (spec.sampleBlocks + clusterSize - 1) / clusterSize >=
                   blocks / clusterSize;
  seenStamp.assign(width, 0);
  seenSlot.assign(width, 0);
  rowChecked.assign(sharedBytes / 16 + 1, 0);
  uniform.assign(sharedBytes / 16 + 1, 1);
  rowWrites.resize(sharedBytes / 16 + 1);
  rowReads.resize(sharedBytes / 16 + 1);
  rowLists.assign(sharedBytes / 16 + 1, 0);
  writes.resize(sharedBytes);
  reads.resize(sharedBytes);
  readList.assign(sharedBytes, 0);
}

RaceCheck::~RaceCheck() = default;

void RaceCheck::beginBlock(Dim3 id, uint64_t linear) {
  ctaid = id;
  linearBlock = linear;
  if (epoch > 0xf0000000u) { // forget every record before the count wraps
    std::fill(writes.begin(), writes.end(), Record());
    std::fill(reads.begin(), reads.end(), Record());
    std::fill(rowWrites.begin(), rowWrites.end(), Record());
    std::fill(rowReads.begin(), rowReads.end(), Record());
    epoch = 0;
  }
  blockEpoch = ++epoch;
  std::fill(clocks.begin(), clocks.end(), 0);
  std::fill(clocks.begin(), clocks.begin() + threads, 1);
  std::fill(tickPending.begin(), tickPending.end(), 0);
  bumpAll();
  std::fill(syncedLanes.begin(), syncedLanes.end(), 0);
  std::fill(snapshot.begin(), snapshot.end(), 0);
  for (SparseClock &v : view)
    v.clear();
  for (std::vector<uint32_t> &f : fenced)
    std::fill(f.begin(), f.end(), 0);
  auto clearReleased = [&](Released &r) {
    r.clocks.clear();
    std::fill(r.fenced.begin(), r.fenced.end(), 0);
  };
  for (Released &r : barriers)
    clearReleased(r);
  std::fill(barrierArrived.begin(), barrierArrived.end(), false);
  mbarriers.clear();
  nextMbarrierAgent = 0;
  for (auto &a : copyArrives)
    a.clear();
  for (auto &g : wgmmaGroups)
    g.clear();
  for (auto &g : bulkGroups)
    g.clear();
  std::fill(wgmmaCommitted.begin(), wgmmaCommitted.end(), 0);
  std::fill(bulkCommitted.begin(), bulkCommitted.end(), 0);
  if (anyList) {
    std::fill(readList.begin(), readList.end(), 0);
    std::fill(rowLists.begin(), rowLists.end(), 0);
    freeLists.clear();
    for (uint32_t i = 0; i < lists.size(); ++i) {
      lists[i].records.clear();
      lists[i].refs = 0;
      freeLists.push_back(i);
    }
    anyList = false;
  }
  globalWrites.clear();
  globalReads.clear();
  for (uint32_t i : readUsed)
    readTable[i].mask = 0;
  readUsed.clear();
  fences.clear();
  fenceSnapshots.clear();
  fenceSnapshotEpoch = 0;
  releases.clear();
  if (anyKnowledge) {
    for (SyncKnowledge &k : acquired)
      k.clear();
    for (SyncKnowledge &k : pendingAcquired)
      k.clear();
    for (Released &r : barriers) {
      r.acquired.clear();
      r.pending.clear();
    }
    std::fill(knowledgeIndex.begin(), knowledgeIndex.end(), 0);
    anyKnowledge = false;
  }
  blockKnowledge.assign(1, SyncKnowledge());
  // Every record is stale: alike in effect.
  std::fill(uniform.begin(), uniform.end(), 1);
}

void RaceCheck::publish(unsigned u, Released &into) {
  const SparseClock &v = view[u];
  for (uint32_t i : v.entries())
    into.clocks.raise(i, v.at(i));
  into.clocks.raise(u, clocks[u]);
  if (fenceTracking) {
    const std::vector<uint32_t> &f = fenced[u];
    for (unsigned x = 0; x < width; ++x)
      into.fenced[x] = std::max(into.fenced[x], f[x]);
  }
  if (anyKnowledge) {
    joinKnowledge(into.acquired, acquired[u]);
    joinKnowledge(into.pending, pendingAcquired[u]);
  }
}

void RaceCheck::acquire(unsigned u, const Released &from) {
  SparseClock &v = view[u];
  bool learned = false;
  for (uint32_t i : from.clocks.entries()) {
    uint32_t c = from.clocks.at(i);
    if (i != u && c > known(u, i)) {
      v.raise(i, c);
      learned = true;
    }
  }
  if (learned || fenceTracking)
    bump(u);
  if (fenceTracking) {
    std::vector<uint32_t> &f = fenced[u];
    for (unsigned x = 0; x < width; ++x)
      f[x] = std::max(f[x], from.fenced[x]);
  }
  if (anyKnowledge) {
    learnKnowledge(u, from.acquired, /*pending=*/false);
    learnKnowledge(u, from.pending, /*pending=*/true);
  }
}

void RaceCheck::fullBarrier() {
  // Afterwards every thread knows every thread's clock at the barrier and
  // whatever any of them knew of the agents: that is the new snapshot.
  for (unsigned u = 0; u < threads; ++u)
    for (uint32_t i : view[u].entries())
      if (i >= threads)
        snapshot[i] = std::max(snapshot[i], view[u].at(i));
  for (unsigned x = 0; x < threads; ++x)
    snapshot[x] = clocks[x];
  if (fenceTracking) {
    std::vector<uint32_t> &joined = warpFenced;
    std::fill(joined.begin(), joined.end(), 0);
    for (const std::vector<uint32_t> &f : fenced)
      for (unsigned x = 0; x < width; ++x)
        joined[x] = std::max(joined[x], f[x]);
    for (std::vector<uint32_t> &f : fenced)
      f = joined;
  }
  if (anyKnowledge)
    joinAllKnowledge();
  for (unsigned u = 0; u < threads; ++u) {
    view[u].clear();
    tick(u);
  }
  bumpAll();
  ++epoch;
}

//===----------------------------------------------------------------------===//
// Accesses and synchronisation
//===----------------------------------------------------------------------===//

bool RaceCheck::read(unsigned t, uint32_t pc, uint64_t offset,
                     unsigned bytes) {
  return access(threadActor(t, pc, KindRead), offset, bytes);
}

bool RaceCheck::write(unsigned t, uint32_t pc, uint64_t offset,
                      unsigned bytes) {
  return access(threadActor(t, pc, KindWrite), offset, bytes);
}

bool RaceCheck::atomic(unsigned t, uint32_t pc, uint64_t offset,
                       unsigned bytes) {
  return access(threadActor(t, pc, KindAtomic), offset, bytes);
}

bool RaceCheck::copyIssued(unsigned t, uint32_t pc, uint64_t offset,
                           unsigned bytes) {
  Actor a = threadActor(t, pc, KindCopy);
  a.clock = kInFlightClock;
  return access(a, offset, bytes);
}

void RaceCheck::copyLanded(unsigned t, uint64_t offset, unsigned bytes,
                           uint64_t serial, bool byOwnWait) {
  // A cp.async.mbarrier.arrive issued after the copy completes it: it
  // belongs to that mbarrier's agent (what waits there learns it), even
  // when the thread's own wait lands it first.
  CopyArrive *cover = nullptr;
  for (CopyArrive &c : copyArrives[t])
    if (c.serial > serial) {
      cover = &c;
      break;
    }
  Record r;
  r.kind = KindCopy;
  r.thread = static_cast<uint16_t>(t);
  r.gen = epoch;
  if (cover) {
    MbarrierState &m = mbarrierState(cover->mbarrier);
    r.who = m.agent;
    r.clock = ++clocks[m.agent];
    cover->agentClock = std::max(cover->agentClock, r.clock);
    if (byOwnWait && r.clock > known(t, m.agent)) {
      view[t].raise(m.agent, r.clock);
      bump(t);
    }
  } else {
    settle(t); // after any release the thread made before its wait
    r.who = static_cast<uint16_t>(t);
    r.clock = clocks[t];
  }
  // (The cp.async's own record, in flight until now, keeps its pc.)
  for (uint64_t b = offset; b < offset + bytes;) {
    uint64_t row = b / 16;
    if (b % 16 == 0 && offset + bytes - b >= 16 && uniform[row]) {
      r.pc = rowWrites[row].pc;
      rowWrites[row] = r;
      b += 16;
      continue;
    }
    materialize(row);
    r.pc = writes[b].pc;
    writes[b] = r;
    ++b;
  }
}

void RaceCheck::copyArriveIssued(unsigned t, uint64_t mbarrier,
                                 uint64_t serial) {
  CopyArrive arrive;
  arrive.mbarrier = mbarrier;
  arrive.serial = serial;
  for (uint32_t i : view[t].entries())
    arrive.clocks.emplace_back(i, view[t].at(i));
  arrive.clocks.emplace_back(t, clocks[t]);
  if (fenceTracking)
    arrive.fenced = fenced[t];
  copyArrives[t].push_back(std::move(arrive));
  tick(t);
}

void RaceCheck::copyArriveLanded(unsigned t, uint64_t mbarrier) {
  std::vector<CopyArrive> &arrives = copyArrives[t];
  for (size_t i = 0; i < arrives.size(); ++i) {
    if (arrives[i].mbarrier != mbarrier)
      continue;
    MbarrierState &m = mbarrierState(mbarrier);
    for (auto [index, clock] : arrives[i].clocks)
      m.released.clocks.raise(index, clock);
    if (arrives[i].agentClock)
      m.released.clocks.raise(m.agent, arrives[i].agentClock);
    if (fenceTracking)
      for (unsigned x = 0; x < width; ++x)
        m.released.fenced[x] =
            std::max(m.released.fenced[x], arrives[i].fenced[x]);
    arrives.erase(arrives.begin() + i);
    return;
  }
}

void RaceCheck::barrierArrive(unsigned id, unsigned t) {
  publish(t, barriers[id]);
  barrierArrived[id] = true;
  tick(t);
}

void RaceCheck::barrierOpen(unsigned id, const uint32_t *waiting) {
  unsigned count = 0;
  for (unsigned w = 0; w < numWarps; ++w)
    count += __builtin_popcount(waiting[w]);
  Released &r = barriers[id];
  if (count == threads && !barrierArrived[id]) {
    fullBarrier();
  } else {
    for (unsigned w = 0; w < numWarps; ++w)
      for (uint32_t m = waiting[w]; m; m &= m - 1)
        publish(w * 32 + __builtin_ctz(m), r);
    for (unsigned w = 0; w < numWarps; ++w)
      for (uint32_t m = waiting[w]; m; m &= m - 1) {
        unsigned t = w * 32 + __builtin_ctz(m);
        acquire(t, r);
        tick(t);
      }
  }
  r.clocks.clear();
  std::fill(r.fenced.begin(), r.fenced.end(), 0);
  r.acquired.clear();
  r.pending.clear();
  barrierArrived[id] = false;
}

void RaceCheck::warpSync(unsigned w, uint32_t lanes) {
  if (__builtin_popcount(lanes) < 2)
    return;
  // Nothing changed since these lanes last met: nothing to join.
  if (lanes == syncedLanes[w] && warpVersion[w] == syncedVersion[w])
    return;
  scratch.clocks.clear();
  std::fill(scratch.fenced.begin(), scratch.fenced.end(), 0);
  scratch.acquired.clear();
  scratch.pending.clear();
  for (uint32_t m = lanes; m; m &= m - 1)
    publish(w * 32 + __builtin_ctz(m), scratch);
  for (uint32_t m = lanes; m; m &= m - 1) {
    unsigned t = w * 32 + __builtin_ctz(m);
    acquire(t, scratch);
    tick(t);
  }
  syncedLanes[w] = lanes;
  syncedVersion[w] = warpVersion[w];
}

void RaceCheck::proxyFence(unsigned t) {
  if (!fenceTracking)
    return;
  std::vector<uint32_t> &f = fenced[t];
  for (unsigned x = 0; x < width; ++x)
    f[x] = std::max(f[x], known(t, x));
  bump(t);
  tick(t); // later writes of this thread are after the fence
}

RaceCheck::MbarrierState &RaceCheck::mbarrierState(uint64_t offset) {
  for (MbarrierState &m : mbarriers)
    if (m.offset == offset)
      return m;
  mbarriers.emplace_back();
  MbarrierState &m = mbarriers.back();
  m.offset = offset;
  // More mbarriers than agents share agents (their copies then order a
  // little more than they should, never less).
  m.agent = static_cast<uint16_t>(firstMbarrierAgent() +
                                  nextMbarrierAgent++ % kMbarrierAgents);
  m.released.clocks.init(width);
  if (fenceTracking)
    m.released.fenced.assign(width, 0);
  return m;
}

void RaceCheck::mbarrierInit(uint64_t offset) {
  MbarrierState &m = mbarrierState(offset);
  m.released.clocks.clear();
  std::fill(m.released.fenced.begin(), m.released.fenced.end(), 0);
  m.released.acquired.clear();
  m.released.pending.clear();
  m.inFlight.clear();
}

void RaceCheck::mbarrierArrive(uint64_t offset, unsigned t) {
  publish(t, mbarrierState(offset).released);
  tick(t);
}

void RaceCheck::mbarrierAcquire(uint64_t offset, unsigned t) {
  acquire(t, mbarrierState(offset).released);
}

//===----------------------------------------------------------------------===//
// Asynchronous units: wgmma, TMA and bulk copies
//===----------------------------------------------------------------------===//

void RaceCheck::wgmmaBegin(unsigned w, uint32_t pc) {
  // The warp's 32 lanes issue it together: what any of them knows orders
  // its reads (joined once while nothing changes: a K loop's wgmmas).
  if (cachedWarp != w || cachedWarpVersion != warpVersion[w]) {
    warpView = snapshot;
    if (fenceTracking)
      std::fill(warpFenced.begin(), warpFenced.end(), 0);
    for (unsigned l = 0; l < 32; ++l) {
      unsigned t = w * 32 + l;
      if (t >= threads)
        break;
      for (uint32_t i : view[t].entries())
        warpView[i] = std::max(warpView[i], view[t].at(i));
      warpView[t] = std::max(warpView[t], clocks[t]);
      if (fenceTracking)
        for (unsigned x = 0; x < width; ++x)
          warpFenced[x] = std::max(warpFenced[x], fenced[t][x]);
    }
    cachedWarp = w;
    cachedWarpVersion = warpVersion[w];
  }
  uint32_t agent = wgmmaAgent(w);
  uint32_t clock = ++clocks[agent];
  wgmmaGroups[w].push_back({UINT32_MAX, clock});
  asyncActor = Actor();
  asyncActor.view = warpView.data();
  asyncActor.fenced = fenceTracking ? warpFenced.data() : nullptr;
  asyncActor.who = static_cast<uint16_t>(agent);
  asyncActor.clock = clock;
  asyncActor.reportThread = static_cast<uint16_t>(w * 32);
  asyncActor.pc = pc;
  asyncActor.kind = KindAsyncRead;
  if (++wgmmaSerial == 0) { // wrapped: forget the old marks
    std::fill(rowChecked.begin(), rowChecked.end(), 0);
    wgmmaSerial = 1;
  }
}

bool RaceCheck::wgmmaRead(uint64_t offset, unsigned bytes) {
  uint64_t row = offset / 16;
  if (offset % 16 + bytes > 16 || row >= rowChecked.size() ||
      (row + 1) * 16 > writes.size())
    return access(asyncActor, offset, bytes);
  if (rowChecked[row] == wgmmaSerial)
    return true;
  rowChecked[row] = wgmmaSerial;
  return access(asyncActor, row * 16, 16);
}

void RaceCheck::wgmmaCommit(unsigned w) {
  for (PendingGroup &g : wgmmaGroups[w])
    if (g.group == UINT32_MAX)
      g.group = wgmmaCommitted[w];
  ++wgmmaCommitted[w];
}

void RaceCheck::wgmmaWait(unsigned w, uint32_t lanes, uint32_t keepGroups) {
  uint32_t retired = retire(wgmmaGroups[w], wgmmaCommitted[w], keepGroups);
  if (!retired)
    return;
  uint32_t agent = wgmmaAgent(w);
  for (uint32_t m = lanes; m; m &= m - 1) {
    unsigned t = w * 32 + __builtin_ctz(m);
    if (retired > known(t, agent)) {
      view[t].raise(agent, retired);
      bump(t);
    }
  }
}

uint32_t RaceCheck::retire(std::vector<PendingGroup> &groups,
                           uint32_t committed, uint32_t keepGroups) {
  uint32_t retired = 0;
  size_t kept = 0;
  for (const PendingGroup &g : groups) {
    if (g.group != UINT32_MAX && committed - g.group > keepGroups)
      retired = std::max(retired, g.clock);
    else
      groups[kept++] = g;
  }
  groups.resize(kept);
  return retired;
}

void RaceCheck::bulkLoadBegin(unsigned t, uint32_t pc, uint64_t mbarrier) {
  MbarrierState &m = mbarrierState(mbarrier);
  uint32_t clock = ++clocks[m.agent];
  m.inFlight.push_back(clock);
  loadActor = threadActor(t, pc, KindAsyncWrite);
  loadActor.who = m.agent;
  loadActor.clock = clock;
}

bool RaceCheck::bulkLoadWrite(uint64_t offset, unsigned bytes) {
  return access(loadActor, offset, bytes);
}

void RaceCheck::bulkLoadLanded(uint64_t mbarrier) {
  MbarrierState &m = mbarrierState(mbarrier);
  if (m.inFlight.empty())
    return;
  m.released.clocks.raise(m.agent, m.inFlight.front());
  m.inFlight.erase(m.inFlight.begin());
}

void RaceCheck::bulkStoreBegin(unsigned t, uint32_t pc) {
  uint32_t agent = bulkAgent(t / 32);
  uint32_t clock = ++clocks[agent];
  bulkGroups[t].push_back({UINT32_MAX, clock});
  asyncActor = threadActor(t, pc, KindAsyncRead);
  asyncActor.who = static_cast<uint16_t>(agent);
  asyncActor.clock = clock;
}

bool RaceCheck::bulkStoreRead(uint64_t offset, unsigned bytes) {
  return access(asyncActor, offset, bytes);
}

void RaceCheck::bulkCommit(unsigned t) {
  for (PendingGroup &g : bulkGroups[t])
    if (g.group == UINT32_MAX)
      g.group = bulkCommitted[t];
  ++bulkCommitted[t];
}

void RaceCheck::bulkWait(unsigned t, uint32_t keepGroups) {
  uint32_t retired = retire(bulkGroups[t], bulkCommitted[t], keepGroups);
  uint32_t agent = bulkAgent(t / 32);
  if (retired > known(t, agent)) {
    view[t].raise(agent, retired);
    bump(t);
  }
}

} // namespace kiln::runtime::emu::detail
