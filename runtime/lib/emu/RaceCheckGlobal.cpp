//===- RaceCheckGlobal.cpp - Global memory between the blocks of a launch -===//
//
// The launch-wide tracker (RaceCheckGlobal.h has the model): the writing
// blocks of each global byte, the synchronisation locations' modification
// order, the blocks' reads and the check that runs on them when the
// launch ends. And the block's side (RaceCheck): which of its writes its
// fences and atomics release, what its threads acquire, its reads.
//
//===----------------------------------------------------------------------===//

#include "RaceCheck.h"

#include <fmt/core.h>

#include <algorithm>
#include <tuple>

namespace kiln::runtime::emu::detail {

bool joinKnowledge(SyncKnowledge &into, const SyncKnowledge &from) {
  if (from.empty())
    return false;
  if (into.empty()) {
    into = from;
    return true;
  }
  bool changed = false;
  size_t i = 0;
  for (const auto &[location, sequence] : from) {
    while (i < into.size() && into[i].first < location)
      ++i;
    if (i < into.size() && into[i].first == location) {
      if (sequence > into[i].second) {
        into[i].second = sequence;
        changed = true;
      }
    } else {
      into.insert(into.begin() + static_cast<ptrdiff_t>(i),
                  {location, sequence});
      changed = true;
    }
    ++i;
  }
  return changed;
}

uint32_t knownSequence(const SyncKnowledge &k, uint32_t location) {
  for (const auto &[l, s] : k)
    if (l == location)
      return s;
  return 0;
}

//===----------------------------------------------------------------------===//
// The launch's tracker
//===----------------------------------------------------------------------===//

GlobalAccessTracker::GlobalAccessTracker() { knowledge.emplace_back(); }

bool GlobalAccessTracker::addWrites(uint64_t block, std::vector<Write> &writes,
                                    Write &conflict, Write &otherWrite,
                                    uint64_t &otherBlock) {
  // One entry per granule, thread and release: the thread's bytes there
  // (so that a report names the thread that wrote the byte it names).
  auto key = [](const Write &w) {
    return std::make_tuple(shardOf(w.granule), w.granule, w.thread,
                           w.releaseLocation, w.releaseSequence);
  };
  std::stable_sort(
      writes.begin(), writes.end(),
      [&](const Write &a, const Write &b) { return key(a) < key(b); });
  size_t kept = 0;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (kept && key(writes[kept - 1]) == key(writes[i]))
      writes[kept - 1].mask |= writes[i].mask;
    else
      writes[kept++] = writes[i];
  }
  writes.resize(kept);
  for (size_t i = 0; i < writes.size();) {
    unsigned shard = shardOf(writes[i].granule);
    std::lock_guard<std::mutex> lock(shards[shard].mutex);
    Shard &s = shards[shard];
    for (; i < writes.size() && shardOf(writes[i].granule) == shard; ++i) {
      const Write &w = writes[i];
      Owner mine{
          block, w.pc, w.thread, w.mask, w.releaseLocation, w.releaseSequence,
          0};
      auto [it, inserted] = s.owners.try_emplace(w.granule, mine);
      if (inserted)
        continue;
      // The entries of the blocks writing bytes of the granule: a conflict
      // with another block, or this entry's own, or a new one at the end.
      Owner *o = &it->second;
      while (true) {
        if (o->block != block && (o->mask & w.mask)) {
          conflict = w;
          otherWrite = Write{w.granule, o->mask, o->thread, o->pc};
          otherBlock = o->block;
          return false;
        }
        if (o->block == block && o->thread == w.thread &&
            o->releaseLocation == w.releaseLocation &&
            o->releaseSequence == w.releaseSequence) {
          o->mask |= w.mask;
          break;
        }
        if (!o->next) {
          // Link first: `o` may point into `more`, which push_back can
          // move (found by ASan in scripts/test.sh --sanitize).
          o->next = static_cast<uint32_t>(s.more.size() + 1);
          s.more.push_back(mine);
          break;
        }
        o = &s.more[o->next - 1];
      }
    }
  }
  return true;
}

void GlobalAccessTracker::addReads(uint64_t block,
                                   std::vector<Read> &blockReads,
                                   const std::vector<SyncKnowledge> &known) {
  std::lock_guard<std::mutex> lock(readsMutex);
  // The block's knowledge lists, renumbered into the launch's.
  std::vector<uint32_t> index(known.size(), 0);
  for (size_t k = 1; k < known.size(); ++k) {
    index[k] = static_cast<uint32_t>(knowledge.size());
    knowledge.push_back(known[k]);
  }
  for (Read r : blockReads) {
    r.knowledge = index[r.knowledge];
    reads.push_back({block, r});
  }
}

GlobalAccessTracker::Location &
GlobalAccessTracker::lockLocation(uint64_t address,
                                  std::unique_lock<std::mutex> &lock) {
  LocationShard &s = locationShards[shardOf(address)];
  lock = std::unique_lock<std::mutex>(s.mutex);
  auto [it, inserted] = s.locations.try_emplace(address);
  if (inserted) {
    std::lock_guard<std::mutex> ids(locationIds);
    it->second.id = static_cast<uint32_t>(locationAddresses.size());
    locationAddresses.push_back(address);
  }
  return it->second;
}

bool GlobalAccessTracker::findReadRace(ReadRace &race) {
  if (reads.empty())
    return false;
  // Most reads are of bytes no block wrote (inputs, weights): a bitmap of
  // the written granules' hashes skips them before the map.
  constexpr unsigned kBits = 1u << 22;
  auto bit = [](uint64_t granule) {
    return static_cast<size_t>((granule * 0x9e3779b97f4a7c15ull) >> 42);
  };
  std::vector<uint64_t> written(kBits / 64, 0);
  bool anyWritten = false;
  for (Shard &s : shards)
    for (const auto &entry : s.owners) {
      size_t b = bit(entry.first);
      written[b / 64] |= 1ull << (b % 64);
      anyWritten = true;
    }
  if (!anyWritten)
    return false;
  bool found = false;
  for (const BlockRead &br : reads) {
    const Read &r = br.read;
    size_t b = bit(r.granule);
    if (!((written[b / 64] >> (b % 64)) & 1))
      continue;
    if (found &&
        (br.block > race.readBlock ||
         (br.block == race.readBlock && r.granule * kGranule >= race.address)))
      continue;
    Shard &s = shards[shardOf(r.granule)];
    auto it = s.owners.find(r.granule);
    if (it == s.owners.end())
      continue;
    for (const Owner *o = &it->second; o;
         o = o->next ? &s.more[o->next - 1] : nullptr) {
      uint16_t both = o->mask & r.mask;
      if (o->block == br.block || !both)
        continue;
      ReadRace::Cause cause;
      if (o->releaseLocation == kNoRelease) {
        cause = ReadRace::Unreleased;
      } else {
        uint32_t s = knownSequence(knowledge[r.knowledge], o->releaseLocation);
        if (s > o->releaseSequence)
          continue; // ordered
        cause = s ? ReadRace::AcquiredEarlier : ReadRace::NotAcquired;
      }
      uint64_t address = r.granule * kGranule + __builtin_ctz(both);
      if (found && (br.block > race.readBlock ||
                    (br.block == race.readBlock && address >= race.address)))
        continue;
      found = true;
      race.readBlock = br.block;
      race.writeBlock = o->block;
      race.address = address;
      race.read = r;
      race.write = Write{r.granule, o->mask, o->thread, o->pc};
      race.cause = cause;
      race.releaseAddress = o->releaseLocation == kNoRelease
                                ? 0
                                : locationAddresses[o->releaseLocation];
    }
  }
  return found;
}

//===----------------------------------------------------------------------===//
// The block's side: releases, acquires, reads and writes
//===----------------------------------------------------------------------===//

void RaceCheck::learnKnowledge(unsigned t, const SyncKnowledge &k,
                               bool pending) {
  if (k.empty())
    return;
  if (pending) {
    joinKnowledge(pendingAcquired[t], k);
    return;
  }
  if (joinKnowledge(acquired[t], k))
    knowledgeIndex[t] = UINT32_MAX;
}

void RaceCheck::joinAllKnowledge() {
  // A full barrier: every thread knows what any of them knew.
  SyncKnowledge all, allPending;
  for (unsigned u = 0; u < threads; ++u) {
    joinKnowledge(all, acquired[u]);
    joinKnowledge(allPending, pendingAcquired[u]);
  }
  for (unsigned u = 0; u < threads; ++u) {
    learnKnowledge(u, all, false);
    learnKnowledge(u, allPending, true);
  }
}

void RaceCheck::memoryFence(unsigned t, uint32_t pc) {
  if (!syncTracking || !(pcFlags[pc] & kPcGpuFence))
    return;
  // What the thread knows now is released by an atomic ordered after
  // this fence; its later accesses are after it.
  settle(t);
  if (fenceSnapshots.empty() || fenceSnapshotEpoch != epoch) {
    fenceSnapshots.emplace_back(snapshot.begin(), snapshot.begin() + threads);
    fenceSnapshotEpoch = epoch;
  }
  FenceRecord f;
  f.thread = static_cast<uint16_t>(t);
  f.clock = clocks[t];
  f.snapshot = static_cast<uint32_t>(fenceSnapshots.size() - 1);
  for (uint32_t i : view[t].entries())
    if (i < threads)
      f.above.emplace_back(i, view[t].at(i));
  fences.push_back(std::move(f));
  tick(t);
  // The atomics it made, or learned of through barriers, now acquire.
  if (anyKnowledge && !pendingAcquired[t].empty()) {
    learnKnowledge(t, pendingAcquired[t], false);
    pendingAcquired[t].clear();
  }
}

void RaceCheck::releaseFrontier(unsigned a, bool qualified,
                                std::vector<uint32_t> &frontier) {
  frontier.assign(threads, 0);
  int latest = -1;
  for (const FenceRecord &f : fences) {
    if (known(a, f.thread) < f.clock)
      continue; // a fence this thread is not ordered after
    latest = std::max(latest, static_cast<int>(f.snapshot));
    for (auto [x, c] : f.above)
      frontier[x] = std::max(frontier[x], c);
    frontier[f.thread] = std::max(frontier[f.thread], f.clock);
  }
  if (latest >= 0) // snapshots grow: the latest one covers the others
    for (unsigned x = 0; x < threads; ++x)
      frontier[x] = std::max(frontier[x], fenceSnapshots[latest][x]);
  if (qualified)
    for (unsigned x = 0; x < threads; ++x)
      frontier[x] = std::max(frontier[x], known(a, x));
}

void RaceCheck::syncLocked(unsigned t, uint32_t pc,
                           GlobalAccessTracker::Location &at, bool reads,
                           bool writes) {
  settle(t);
  uint32_t sequence;
  if (writes) {
    sequence = ++at.sequence;
    bool qualified = pcFlags[pc] & kPcRelease;
    if (qualified || !fences.empty()) {
      ReleaseRecord r;
      r.location = at.id;
      r.sequence = sequence;
      releaseFrontier(t, qualified, r.frontier);
      releases.push_back(std::move(r));
    }
    // What the thread acquired travels on (chains through blocks).
    if (anyKnowledge)
      joinKnowledge(at.carried, acquired[t]);
  } else {
    sequence = at.sequence + 1; // an ld.acquire: after the last operation
  }
  if (!reads)
    return;
  SyncKnowledge learned = at.carried;
  joinKnowledge(learned, SyncKnowledge{{at.id, sequence}});
  if (!anyKnowledge) {
    anyKnowledge = true;
    // The barriers' and mbarriers' knowledge starts empty (cleared when
    // each opened or was initialised).
  }
  learnKnowledge(t, learned, /*pending=*/!(pcFlags[pc] & kPcAcquire));
  bump(t);
}

void RaceCheck::globalWrite(unsigned t, uint32_t pc, uint64_t address,
                            unsigned bytes) {
  if (!global || bytes == 0)
    return;
  settle(t);
  constexpr uint64_t kG = GlobalAccessTracker::kGranule;
  uint64_t end = address + bytes;
  for (uint64_t g = address / kG; g * kG < end; ++g) {
    uint64_t from = std::max(address, g * kG), to = std::min(end, g * kG + kG);
    uint16_t mask =
        static_cast<uint16_t>(((1u << (to - from)) - 1) << (from - g * kG));
    GlobalAccessTracker::Write w;
    w.granule = g;
    w.mask = mask;
    w.thread = static_cast<uint16_t>(t);
    w.pc = pc;
    w.clock = clocks[t];
    globalWrites.push_back(w);
  }
}

void RaceCheck::globalRead(unsigned t, uint32_t pc, uint64_t address,
                           unsigned bytes) {
  if (!global || bytes == 0 || !checkReads)
    return;
  uint32_t known = 0;
  if (anyKnowledge && !acquired[t].empty()) {
    if (knowledgeIndex[t] == UINT32_MAX) {
      auto it = std::find(blockKnowledge.begin() + 1, blockKnowledge.end(),
                          acquired[t]);
      knowledgeIndex[t] = static_cast<uint32_t>(it - blockKnowledge.begin());
      if (it == blockKnowledge.end())
        blockKnowledge.push_back(acquired[t]);
    }
    known = knowledgeIndex[t];
  }
  constexpr uint64_t kG = GlobalAccessTracker::kGranule;
  uint64_t end = address + bytes;
  for (uint64_t g = address / kG; g * kG < end; ++g) {
    uint64_t from = std::max(address, g * kG), to = std::min(end, g * kG + kG);
    uint16_t mask =
        static_cast<uint16_t>(((1u << (to - from)) - 1) << (from - g * kG));
    size_t slots = readTable.size();
    // The lanes of a warp mostly read the granule the previous lane read.
    const GlobalAccessTracker::Read &last = readTable[lastRead];
    size_t h = last.mask && last.granule == g && last.knowledge == known
                   ? lastRead
                   : readSlot(g, known, slots);
    while (true) {
      GlobalAccessTracker::Read &slot = readTable[h];
      bool fresh = slot.mask == 0;
      if (fresh) {
        slot.granule = g;
        slot.knowledge = known;
        slot.pc = pc;
        for (uint16_t &r : slot.thread)
          r = UINT16_MAX;
      } else if (slot.granule != g || slot.knowledge != known) {
        h = (h + 1) & (slots - 1);
        continue;
      }
      slot.mask |= mask;
      for (unsigned w = 0; w < 4; ++w)
        if (((mask >> (4 * w)) & 0xf) && slot.thread[w] == UINT16_MAX)
          slot.thread[w] = static_cast<uint16_t>(t);
      lastRead = h;
      if (fresh) {
        readUsed.push_back(static_cast<uint32_t>(h));
        if (2 * readUsed.size() > slots)
          growReadTable();
      }
      break;
    }
  }
}

void RaceCheck::growReadTable() {
  std::vector<GlobalAccessTracker::Read> old(readTable.size() * 2);
  old.swap(readTable);
  std::vector<uint32_t> used;
  used.swap(readUsed);
  size_t slots = readTable.size();
  for (uint32_t i : used) {
    size_t h = readSlot(old[i].granule, old[i].knowledge, slots);
    while (readTable[h].mask)
      h = (h + 1) & (slots - 1);
    readTable[h] = old[i];
    readUsed.push_back(static_cast<uint32_t>(h));
  }
  lastRead = 0;
}

bool RaceCheck::endBlock(unsigned &faultThread, uint32_t &faultPc) {
  if (!global)
    return true;
  if (!readUsed.empty()) {
    // In the order the entries were made (the same in every run).
    globalReads.clear();
    for (uint32_t i : readUsed) {
      globalReads.push_back(readTable[i]);
      readTable[i].mask = 0;
    }
    readUsed.clear();
    global->addReads(linearBlock, globalReads, blockKnowledge);
  }
  if (globalWrites.empty())
    return true;
  // Each write's first release (in the block's order): the first atomic
  // whose frontier reaches the write's clock.
  for (GlobalAccessTracker::Write &w : globalWrites)
    for (const ReleaseRecord &r : releases)
      if (r.frontier[w.thread] >= w.clock) {
        w.releaseLocation = r.location;
        w.releaseSequence = r.sequence;
        break;
      }
  GlobalAccessTracker::Write mine, other;
  uint64_t otherBlock = 0;
  if (global->addWrites(linearBlock, globalWrites, mine, other, otherBlock))
    return true;
  faultThread = mine.thread;
  faultPc = mine.pc;
  Dim3 b;
  b.x = static_cast<uint32_t>(otherBlock % spec.grid.x);
  b.y = static_cast<uint32_t>((otherBlock / spec.grid.x) % spec.grid.y);
  b.z = static_cast<uint32_t>(
      otherBlock / (static_cast<uint64_t>(spec.grid.x) * spec.grid.y));
  unsigned first = __builtin_ctz(mine.mask & other.mask);
  report = fmt::format(
      "global write-write race: block ({},{},{}) also writes global memory "
      "at 0x{:x} (its thread {} at {}), outside atomics; blocks run in no "
      "defined order, so which value stays is undefined",
      b.x, b.y, b.z, mine.granule * GlobalAccessTracker::kGranule + first,
      threadName(other.thread), lineOf(other.pc));
  return false;
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

std::string describeReadRace(const Kernel &kernel, const LaunchSpec &spec,
                             const GlobalAccessTracker::ReadRace &race) {
  auto block = [&](uint64_t linear) {
    return fmt::format("({},{},{})", linear % spec.grid.x,
                       (linear / spec.grid.x) % spec.grid.y,
                       linear /
                           (static_cast<uint64_t>(spec.grid.x) * spec.grid.y));
  };
  auto thread = [&](unsigned t) {
    return fmt::format("({},{},{})", t % spec.block.x,
                       (t / spec.block.x) % spec.block.y,
                       t / (spec.block.x * spec.block.y));
  };
  auto line = [&](uint32_t pc) {
    return fmt::format("PTX line {} ({})", kernel.code[pc].line,
                       kernel.opcodeText[pc]);
  };
  std::string why;
  switch (race.cause) {
  case GlobalAccessTracker::ReadRace::Unreleased:
    why = "the write is released by no atomic (a gpu-scope fence after the "
          "write, by its thread or one a barrier orders after it, then an "
          "atomic ordered after that fence)";
    break;
  case GlobalAccessTracker::ReadRace::NotAcquired:
    why = fmt::format(
        "the write is released through the atomic at 0x{:x}, but this read "
        "is not ordered after an acquire there (an atomic on it that "
        "observes the release, then a gpu-scope fence, then a barrier or "
        "program order to this read)",
        race.releaseAddress);
    break;
  case GlobalAccessTracker::ReadRace::AcquiredEarlier:
    why = fmt::format("the write is released through the atomic at 0x{:x} "
                      "after the atomic this read acquired through",
                      race.releaseAddress);
    break;
  }
  return fmt::format(
      "kernel '{}', block {}, thread {}, {}: global read-after-write race at "
      "0x{:x}: this read and the write of block {}, thread {} at {} are not "
      "ordered: {}",
      kernel.name, block(race.readBlock),
      thread(race.read.thread[(race.address % 16) / 4]), line(race.read.pc),
      race.address, block(race.writeBlock), thread(race.write.thread),
      line(race.write.pc), why);
}

} // namespace kiln::runtime::emu::detail
