//===- ArtifactFormat.h - Byte layout of .kiln files ------------*- C++ -*-===//
//
// Constants of the artifact format shared by the reader, the writer and the
// tests that corrupt files on purpose. docs/artifact-format.md is the
// specification; this file must agree with it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_ARTIFACTFORMAT_H
#define KILN_RUNTIME_LIB_ARTIFACTFORMAT_H

#include "kiln/runtime/Artifact.h"

#include <cstdint>
#include <cstring>
#include <string_view>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the artifact format is little-endian; so must the host be");

namespace kiln::runtime::format {

/// "KILN\r\n\x1a\n": text-mode transfers and `cat` to a terminal show up as
/// a bad magic rather than as a confusing checksum error.
constexpr uint8_t kMagic[8] = {'K', 'I', 'L', 'N', '\r', '\n', 0x1A, '\n'};

// The 64-byte header; every field little-endian.
constexpr uint32_t kHeaderSize = 64;
constexpr size_t kMagicOffset = 0;           // u8[8]
constexpr size_t kMajorOffset = 8;           // u32
constexpr size_t kMinorOffset = 12;          // u32
constexpr size_t kHeaderSizeOffset = 16;     // u32, always 64 in 1.x
constexpr size_t kSectionCountOffset = 20;   // u32
constexpr size_t kSectionTableOffset = 24;   // u64
constexpr size_t kFileSizeOffset = 32;       // u64
constexpr size_t kFlagsOffset = 40;          // u32, kHeaderFlag* below
/// Header flag (format 1.3): the artifact has entry points (a `training`
/// section). Readers before 1.3 reject it as an unknown flag rather than run
/// train_step and eval as one launch list.
constexpr uint32_t kHeaderFlagEntryPoints = 1;
/// Header flag (format 1.5): the artifact has collective steps (a
/// `collectives` section). Readers before 1.5 reject it as an unknown flag
/// rather than train each rank on its own without the gradient all-reduce.
constexpr uint32_t kHeaderFlagCollectives = 2;
/// Header flag (format 1.6): the artifact has zeroed buffers (a
/// `zeroed-buffers` section). Readers before 1.6 reject it as an unknown
/// flag rather than run split-K kernels on semaphores nobody zeroed.
constexpr uint32_t kHeaderFlagZeroedBuffers = 4;
/// Header flag (format 1.9): the artifact has signature groups (a
/// `signature-groups` section). Readers before 1.9 reject it as an unknown
/// flag rather than bind a sequence's tensors, or run an optional compiled
/// absent, without knowing it.
constexpr uint32_t kHeaderFlagSignatureGroups = 8;
/// Header flag (format 1.9): the artifact has host steps (a `host-steps`
/// section). Readers before 1.9 reject it as an unknown flag rather than
/// run the launches without the steps on STRING tensors around them.
constexpr uint32_t kHeaderFlagHostSteps = 16;
/// Header flag (format 1.10): the artifact has size masks (a `size-masks`
/// section). Readers before 1.10 reject it as an unknown flag rather than
/// ask the user for the mask inputs, or fill them with random numbers.
constexpr uint32_t kHeaderFlagSizeMasks = 32;
/// Header flag (format 1.12): the artifact has device-side loops (a
/// `control-regions` section). Readers before 1.12 reject it as an unknown
/// flag rather than skip the section and run each loop body once.
constexpr uint32_t kHeaderFlagControlRegions = 64;
constexpr size_t kTableChecksumOffset = 44;  // u32, CRC32C of the table
constexpr size_t kHeaderChecksumOffset = 60; // u32, CRC32C of bytes [0, 60)

// One 32-byte section table entry.
constexpr uint32_t kSectionEntrySize = 32;
constexpr size_t kEntryKindOffset = 0;      // u32
constexpr size_t kEntryFlagsOffset = 4;     // u32, 0 in 1.x
constexpr size_t kEntryOffsetOffset = 8;    // u64, from the start of the file
constexpr size_t kEntrySizeOffset = 16;     // u64
constexpr size_t kEntryChecksumOffset = 24; // u32, CRC32C of the section
// Bytes [28, 32) are reserved (0).

/// More sections than this is a corrupt table, not a real artifact.
constexpr uint32_t kMaxSections = 1024;
/// Sections start at multiples of 8; the weight data at multiples of 64.
constexpr uint64_t kSectionAlignment = 8;

enum class SectionKind : uint32_t {
  Meta = 1,
  Signature = 2,
  Weights = 3,
  WeightData = 4,
  Kernels = 5,
  Launches = 6,
  MemoryPlan = 7,
  /// Optional (format 1.1): each weight's origin, and the stripped size.
  WeightOrigins = 8,
  /// Optional (format 1.2): registers and static shared memory per kernel.
  KernelResources = 9,
  /// Optional (format 1.3): entry points and persistent state.
  Training = 10,
  /// Optional (format 1.4): TMA tensor maps the runtime encodes at load.
  TensorMaps = 11,
  /// Optional (format 1.5): data-parallel collective steps.
  Collectives = 12,
  /// Optional (format 1.6): the symbolic dims of the signature's tensors.
  SymbolicDims = 13,
  /// Optional (format 1.6): buffers the runtime zeroes before the first run.
  ZeroedBuffers = 14,
  /// Optional (format 1.7): PowerSGD's gradient matrices.
  PowerSgd = 15,
  /// Optional (format 1.8): ZeRO stage 1's world size and shard states.
  ShardOptimizer = 16,
  /// Optional (format 1.9): sequence and optional inputs and outputs.
  SignatureGroups = 17,
  /// Optional (format 1.9): launch grids that follow a symbolic dim.
  LaunchScales = 18,
  /// Optional (format 1.9): steps on STRING tensors that run on the host.
  HostSteps = 19,
  /// Optional (format 1.10): inputs the runtime fills from the run's sizes.
  SizeMasks = 20,
  /// Optional (format 1.11): launches that run only at some sizes.
  LaunchGuards = 21,
  /// Optional (format 1.12): device-side loops over the launch list.
  ControlRegions = 22,
};
constexpr uint32_t kFirstSectionKind = 1;
constexpr uint32_t kLastSectionKind = 22;
/// Sections a reader must find; later kinds are optional.
constexpr uint32_t kLastRequiredSectionKind = 7;

/// The format minor version (of major 1) that introduced a section kind: a
/// 1.m file has exactly the kinds introduced at or before m (the optional
/// ones only when it has something to say). A new section kind gets a case
/// here when kArtifactFormatMinor is bumped for it; until then it counts as
/// the current minor's. The compatibility tests drop the kinds newer than a
/// minor to rebuild what its writer wrote.
constexpr uint32_t sectionKindSinceMinor(uint32_t kind) {
  if (kind <= kLastRequiredSectionKind)
    return 0;
  if (kind == uint32_t(SectionKind::WeightOrigins))
    return 1;
  if (kind == uint32_t(SectionKind::KernelResources))
    return 2;
  if (kind == uint32_t(SectionKind::Training))
    return 3;
  if (kind == uint32_t(SectionKind::TensorMaps))
    return 4;
  if (kind == uint32_t(SectionKind::Collectives))
    return 5;
  if (kind == uint32_t(SectionKind::SymbolicDims) ||
      kind == uint32_t(SectionKind::ZeroedBuffers))
    return 6;
  if (kind == uint32_t(SectionKind::PowerSgd))
    return 7;
  if (kind == uint32_t(SectionKind::ShardOptimizer))
    return 8;
  if (kind == uint32_t(SectionKind::SignatureGroups) ||
      kind == uint32_t(SectionKind::LaunchScales) ||
      kind == uint32_t(SectionKind::HostSteps))
    return 9;
  if (kind == uint32_t(SectionKind::SizeMasks))
    return 10;
  if (kind == uint32_t(SectionKind::LaunchGuards))
    return 11;
  if (kind == uint32_t(SectionKind::ControlRegions))
    return 12;
  return kArtifactFormatMinor;
}

/// The name messages use for a section kind ("unknown" for others).
inline std::string_view sectionName(uint32_t kind) {
  switch (static_cast<SectionKind>(kind)) {
  case SectionKind::Meta:
    return "meta";
  case SectionKind::Signature:
    return "signature";
  case SectionKind::Weights:
    return "weights";
  case SectionKind::WeightData:
    return "weight-data";
  case SectionKind::Kernels:
    return "kernels";
  case SectionKind::Launches:
    return "launches";
  case SectionKind::MemoryPlan:
    return "memory-plan";
  case SectionKind::WeightOrigins:
    return "weight-origins";
  case SectionKind::KernelResources:
    return "kernel-resources";
  case SectionKind::Training:
    return "training";
  case SectionKind::Collectives:
    return "collectives";
  case SectionKind::TensorMaps:
    return "tensor-maps";
  case SectionKind::SymbolicDims:
    return "symbolic-dims";
  case SectionKind::ZeroedBuffers:
    return "zeroed-buffers";
  case SectionKind::PowerSgd:
    return "powersgd";
  case SectionKind::ShardOptimizer:
    return "shard-optimizer";
  case SectionKind::SignatureGroups:
    return "signature-groups";
  case SectionKind::LaunchScales:
    return "launch-scales";
  case SectionKind::HostSteps:
    return "host-steps";
  case SectionKind::SizeMasks:
    return "size-masks";
  case SectionKind::LaunchGuards:
    return "launch-guards";
  case SectionKind::ControlRegions:
    return "control-regions";
  }
  return "unknown";
}
inline std::string_view sectionName(SectionKind kind) {
  return sectionName(static_cast<uint32_t>(kind));
}

inline uint32_t loadU32(const uint8_t *p) {
  uint32_t value;
  std::memcpy(&value, p, 4); // the format is little-endian, like our hosts
  return value;
}
inline uint64_t loadU64(const uint8_t *p) {
  uint64_t value;
  std::memcpy(&value, p, 8);
  return value;
}
inline void storeU32(uint8_t *p, uint32_t value) { std::memcpy(p, &value, 4); }
inline void storeU64(uint8_t *p, uint64_t value) { std::memcpy(p, &value, 8); }

} // namespace kiln::runtime::format

#endif // KILN_RUNTIME_LIB_ARTIFACTFORMAT_H
