//===- ArtifactFuzzer.cpp - libFuzzer target: .kiln bytes -> emu session --===//
//
// parseArtifact on the bytes as given (so the header, table and checksum
// checks are fuzzed), then on a copy whose file size and checksums are
// recomputed (so a mutation inside a section reaches the section parsers,
// verifyArtifact and the emulator instead of stopping at a checksum). An
// artifact that parses runs on the emu device with zero inputs, within
// bounds (below): every failure must be an error, never a crash.
//
// Bounds (resources, not bugs): a 64 MiB arena and weight data, 4096 blocks
// of 1024 threads per launch, 64 launches, and KILN_EMU_MAX_STEPS=200000
// warp instructions per block (an endless loop in a mutated kernel ends the
// launch with an error).
//
//===----------------------------------------------------------------------===//

#include "ArtifactFormat.h"
#include "FuzzSupport.h"
#include "kiln/runtime/Checksum.h"
#include "kiln/runtime/Runtime.h"

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace kiln::runtime;

namespace {

constexpr uint64_t kMaxArenaBytes = 64ull << 20;
constexpr uint64_t kMaxBlocks = 4096;
constexpr uint64_t kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxLaunches = 64;

uint32_t loadU32(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t loadU64(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void storeU32(uint8_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
void storeU64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

/// Rewrites the file size, every in-range section's checksum, the table's
/// and the header's, as the writer would have.
void repairChecksums(std::vector<uint8_t> &file) {
  using namespace format;
  if (file.size() < kHeaderSize)
    return;
  uint8_t *f = file.data();
  uint64_t size = file.size();
  storeU64(f + kFileSizeOffset, size);
  uint32_t count = loadU32(f + kSectionCountOffset);
  uint64_t table = loadU64(f + kSectionTableOffset);
  if (count <= kMaxSections && table <= size &&
      uint64_t(count) * kSectionEntrySize <= size - table) {
    for (uint32_t i = 0; i < count; ++i) {
      uint8_t *e = f + table + uint64_t(i) * kSectionEntrySize;
      uint64_t offset = loadU64(e + kEntryOffsetOffset);
      uint64_t bytes = loadU64(e + kEntrySizeOffset);
      if (offset <= size && bytes <= size - offset)
        storeU32(e + kEntryChecksumOffset, crc32c(f + offset, bytes));
    }
    storeU32(f + kTableChecksumOffset,
             crc32c(f + table, uint64_t(count) * kSectionEntrySize));
  }
  storeU32(f + kHeaderChecksumOffset, crc32c(f, kHeaderChecksumOffset));
}

bool withinBounds(const Artifact &artifact) {
  if (artifact.memoryPlan.arenaSize > kMaxArenaBytes ||
      artifact.weightData.size() > kMaxArenaBytes ||
      artifact.launches.size() > kMaxLaunches)
    return false;
  for (const Kernel &kernel : artifact.kernels) {
    uint64_t blocks = uint64_t(kernel.grid.x) * kernel.grid.y * kernel.grid.z;
    uint64_t threads =
        uint64_t(kernel.block.x) * kernel.block.y * kernel.block.z;
    if (blocks > kMaxBlocks || threads > kMaxThreadsPerBlock)
      return false;
  }
  for (const TensorSignature &input : artifact.inputs) {
    std::optional<uint64_t> bytes = tensorByteSize(input.dtype, input.shape);
    if (!bytes || *bytes > kMaxArenaBytes)
      return false;
  }
  return true;
}

void runOnEmu(Artifact parsed) {
  if (!withinBounds(parsed))
    return;
  static std::shared_ptr<Device> device = [] {
    Expected<std::unique_ptr<Device>> created = createDevice("emu");
    if (!created)
      std::abort();
    return std::shared_ptr<Device>(std::move(*created));
  }();
  auto artifact = std::make_shared<const Artifact>(std::move(parsed));
  Expected<std::unique_ptr<Session>> session = Session::create(artifact, device);
  if (!session) {
    kiln::fuzz::checkOneLineError(session.error().message());
    return;
  }
  for (const TensorSignature &input : artifact->inputs) {
    std::vector<uint8_t> zeros(*tensorByteSize(input.dtype, input.shape));
    if (Error error = (*session)->bindInput(input.name, input.dtype,
                                            input.shape, zeros.data(),
                                            zeros.size())) {
      kiln::fuzz::checkOneLineError(error.message());
      return;
    }
  }
  if (artifact->entryPoints.empty()) {
    if (Error error = (*session)->run()) {
      kiln::fuzz::checkOneLineError(error.message());
      return;
    }
    for (const TensorSignature &output : artifact->outputs)
      (void)(*session)->readOutput(output.name);
    return;
  }
  for (const EntryPoint &entry : artifact->entryPoints)
    if (Error error = (*session)->runEntryPoint(entry.name)) {
      kiln::fuzz::checkOneLineError(error.message());
      return;
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  setenv("KILN_EMU_MAX_STEPS", "200000", 1);
  setenv("KILN_EMU_THREADS", "1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ReadOptions options;
  Expected<Artifact> asGiven =
      parseArtifact(Blob::copyOf(data, size), "fuzz.kiln", options);
  if (asGiven) {
    runOnEmu(std::move(*asGiven));
    return 0;
  }
  kiln::fuzz::checkOneLineError(asGiven.error().message());
  std::vector<uint8_t> repaired(data, data + size);
  repairChecksums(repaired);
  Expected<Artifact> parsed = parseArtifact(
      Blob::fromVector(std::move(repaired)), "fuzz-repaired.kiln", options);
  if (parsed)
    runOnEmu(std::move(*parsed));
  else
    kiln::fuzz::checkOneLineError(parsed.error().message());
  return 0;
}
