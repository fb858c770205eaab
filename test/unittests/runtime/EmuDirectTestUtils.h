//===- EmuDirectTestUtils.h - Running PTX on the interpreter directly -*- C++
//-*-===//
//
// For the sm_90 instruction tests, whose kernels take parameters the
// device API does not pack (a 128-byte tensor map): global buffers at
// fixed device addresses, a parameter buffer built by hand, and
// emu::runKernel on kernel 0 of the module.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_RUNTIME_EMUDIRECTTESTUTILS_H
#define KILN_TEST_UNITTESTS_RUNTIME_EMUDIRECTTESTUTILS_H

#include "emu/PtxInterpreter.h"

#include "EmuTestUtils.h"

#include <cstring>
#include <string>
#include <vector>

namespace kiln::runtime::test {

/// Global memory: buffer i lives at address(i).
struct DirectMemory {
  std::vector<std::vector<uint8_t>> buffers;

  static uint64_t address(size_t i) {
    return 0x100000000ull + i * 0x10000000ull;
  }
  size_t add(std::vector<uint8_t> bytes) {
    buffers.push_back(std::move(bytes));
    return buffers.size() - 1;
  }
  template <typename T> size_t add(const std::vector<T> &values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return add(std::move(bytes));
  }
  template <typename T> std::vector<T> as(size_t i) const {
    std::vector<T> values(buffers[i].size() / sizeof(T));
    std::memcpy(values.data(), buffers[i].data(), values.size() * sizeof(T));
    return values;
  }
};

/// A parameter buffer, each value at its alignment.
struct ParamBytes {
  std::vector<uint8_t> bytes;
  void add(const void *value, size_t size, size_t align) {
    while (bytes.size() % align)
      bytes.push_back(0);
    const uint8_t *p = static_cast<const uint8_t *>(value);
    bytes.insert(bytes.end(), p, p + size);
  }
  void addU64(uint64_t v) { add(&v, 8, 8); }
  void addU32(uint32_t v) { add(&v, 4, 4); }
};

struct DirectResult {
  std::string error = "<success>";
  emu::LaunchStats stats;
};

/// Parses `ptx` and runs its first kernel.
inline DirectResult runDirect(const std::string &ptx, Dim3 grid, Dim3 block,
                              const ParamBytes &params, DirectMemory &memory,
                              uint32_t dynamicShared = 0,
                              bool countPerformance = false,
                              bool checkShared = false,
                              Dim3 cluster = Dim3(),
                              bool explicitCluster = false,
                              bool checkRaces = false) {
  dumpPtx(ptx, "direct");
  DirectResult result;
  Expected<emu::Module> module = emu::parsePtx(ptx);
  if (!module) {
    result.error = module.error().message();
    return result;
  }
  std::vector<emu::MemoryRegion> regions;
  for (size_t i = 0; i < memory.buffers.size(); ++i)
    regions.push_back({DirectMemory::address(i), memory.buffers[i].size(),
                       memory.buffers[i].data()});
  emu::LaunchSpec spec;
  spec.grid = grid;
  spec.block = block;
  spec.dynamicSharedBytes = dynamicShared;
  spec.params = params.bytes.data();
  spec.paramBytes = params.bytes.size();
  spec.memory = &regions;
  spec.countPerformance = countPerformance;
  spec.checkSharedReads = checkShared;
  spec.checkRaces = checkRaces;
  spec.maxWarpInstructionsPerBlock = 50000000;
  spec.cluster = cluster;
  spec.explicitCluster = explicitCluster;
  Error err = emu::runKernel(module->kernels[0], spec, &result.stats);
  if (err)
    result.error = err.message();
  return result;
}

/// The sm_90a module header.
inline std::string sm90Header() {
  return ".version 8.0\n.target sm_90a\n.address_size 64\n\n";
}

} // namespace kiln::runtime::test

#endif // KILN_TEST_UNITTESTS_RUNTIME_EMUDIRECTTESTUTILS_H
