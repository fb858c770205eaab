//===- ArtifactWriter.cpp - Artifact to .kiln bytes -----------------------===//
//
// Encodes the small sections in memory, lays every section out (8-byte
// aligned; the weight data 64-byte aligned and last), fills in the section
// table and the header, then streams the file out. The weight data is never
// copied: it goes from the Artifact's Blob straight to the file.
//
//===----------------------------------------------------------------------===//

#include "ArtifactFormat.h"
#include "Support.h"

#include "kiln/runtime/Checksum.h"

#include <functional>

namespace kiln::runtime {

using namespace format;

namespace {

/// Little-endian encoder for one section's bytes.
class ByteWriter {
public:
  void u32(uint32_t value) { append(&value, 4); }
  void u64(uint64_t value) { append(&value, 8); }
  void i64(int64_t value) { append(&value, 8); }
  void string(const std::string &text) {
    u32(static_cast<uint32_t>(text.size()));
    append(text.data(), text.size());
  }
  /// u64 length, then the bytes.
  void bytes(const void *data, size_t size) {
    u64(size);
    append(data, size);
  }
  std::vector<uint8_t> take() { return std::move(buffer); }

private:
  void append(const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    buffer.insert(buffer.end(), p, p + size);
  }
  std::vector<uint8_t> buffer;
};

void encodeTensor(ByteWriter &out, const std::string &name, DType dtype,
                  const Shape &shape) {
  out.string(name);
  out.u32(static_cast<uint32_t>(dtype));
  out.u32(static_cast<uint32_t>(shape.size()));
  for (int64_t dim : shape)
    out.i64(dim);
  out.u64(*tensorByteSize(dtype, shape)); // verifyArtifact checked it
}

std::vector<uint8_t> encodeMeta(const Artifact &artifact) {
  ByteWriter out;
  out.string(artifact.compilerVersion);
  out.string(artifact.compilerOptions);
  out.string(artifact.target);
  return out.take();
}

std::vector<uint8_t> encodeSignature(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.inputs.size()));
  out.u32(static_cast<uint32_t>(artifact.outputs.size()));
  for (const auto *tensors : {&artifact.inputs, &artifact.outputs}) {
    for (const TensorSignature &tensor : *tensors) {
      encodeTensor(out, tensor.name, tensor.dtype, tensor.shape);
      out.u64(tensor.arenaOffset);
      out.u32(tensor.buffer);
    }
  }
  return out.take();
}

std::vector<uint8_t> encodeWeights(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.weights.size()));
  for (const Weight &weight : artifact.weights) {
    encodeTensor(out, weight.name, weight.dtype, weight.shape);
    out.u64(weight.offset);
  }
  return out.take();
}

/// Written only when there is something to say (a weight with an origin, an
/// inlined initializer, stripped bytes): an older reader skips it.
std::vector<uint8_t> encodeWeightOrigins(const Artifact &artifact) {
  ByteWriter out;
  out.u64(artifact.strippedWeightBytes);
  out.u32(static_cast<uint32_t>(artifact.weights.size()));
  for (const Weight &weight : artifact.weights)
    out.string(weight.origin);
  out.u32(static_cast<uint32_t>(artifact.inlinedInitializers.size()));
  for (const InlinedInitializer &inlined : artifact.inlinedInitializers) {
    encodeTensor(out, inlined.name, inlined.dtype, inlined.shape);
    out.string(std::string(inlined.bytes.begin(), inlined.bytes.end()));
  }
  return out.take();
}

bool needsWeightOriginsSection(const Artifact &artifact) {
  for (const Weight &weight : artifact.weights)
    if (!weight.origin.empty())
      return true;
  return !artifact.inlinedInitializers.empty() ||
         artifact.strippedWeightBytes != 0;
}

std::vector<uint8_t> encodeKernels(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.kernels.size()));
  for (const Kernel &kernel : artifact.kernels) {
    out.string(kernel.name);
    for (const Dim3 *dims : {&kernel.grid, &kernel.block}) {
      out.u32(dims->x);
      out.u32(dims->y);
      out.u32(dims->z);
    }
    out.u32(kernel.dynamicSharedBytes);
    out.u32(static_cast<uint32_t>(kernel.params.size()));
    for (const KernelParam &param : kernel.params) {
      out.u32(static_cast<uint32_t>(param.kind));
      out.string(param.name);
    }
    out.bytes(kernel.ptx.data(), kernel.ptx.size());
    out.u32(kernel.cubinSm);
    out.bytes(kernel.cubin.data(), kernel.cubin.size());
  }
  return out.take();
}

/// Written when any kernel has resources (format 1.2): one entry per
/// kernel, a presence flag then the figures.
std::vector<uint8_t> encodeKernelResources(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.kernels.size()));
  for (const Kernel &kernel : artifact.kernels) {
    KernelResources resources = kernel.resources.value_or(KernelResources());
    out.u32(kernel.resources ? 1 : 0);
    out.u32(resources.registersPerThread);
    out.u32(resources.staticSharedBytes);
    out.u32(resources.stackFrameBytes);
    out.u32(resources.spillStoreBytes);
    out.u32(resources.spillLoadBytes);
  }
  return out.take();
}

/// Written when any launch takes a tensor map (format 1.4): a count, then
/// each record's fixed 140 bytes (docs/artifact-format.md).
std::vector<uint8_t> encodeTensorMaps(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.tensorMaps.size()));
  for (const TensorMapRecord &map : artifact.tensorMaps) {
    out.u32(map.addressParam);
    out.u32(static_cast<uint32_t>(map.dtype));
    out.u32(map.rank);
    for (uint64_t dim : map.globalDims)
      out.u64(dim);
    for (uint64_t stride : map.globalStrides)
      out.u64(stride);
    for (uint32_t box : map.boxDims)
      out.u32(box);
    for (uint32_t stride : map.elementStrides)
      out.u32(stride);
    out.u32(map.interleave);
    out.u32(map.swizzle);
    out.u32(map.l2Promotion);
    out.u32(map.oobFill);
  }
  return out.take();
}

bool needsKernelResourcesSection(const Artifact &artifact) {
  for (const Kernel &kernel : artifact.kernels)
    if (kernel.resources)
      return true;
  return false;
}

/// Format 1.3: entry points and persistent state (docs/artifact-format.md).
std::vector<uint8_t> encodeTraining(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.entryPoints.size()));
  for (const EntryPoint &entry : artifact.entryPoints) {
    out.string(entry.name);
    out.u32(entry.firstLaunch);
    out.u32(entry.launchCount);
    for (const auto *indices : {&entry.inputs, &entry.outputs}) {
      out.u32(static_cast<uint32_t>(indices->size()));
      for (uint32_t index : *indices)
        out.u32(index);
    }
    out.u32(static_cast<uint32_t>(entry.updates.size()));
    for (const StateUpdate &update : entry.updates) {
      out.u32(update.output);
      out.u32(update.state);
    }
  }
  out.u32(static_cast<uint32_t>(artifact.state.size()));
  for (const StateTensor &tensor : artifact.state) {
    encodeTensor(out, tensor.name, tensor.dtype, tensor.shape);
    out.u64(tensor.arenaOffset);
    out.u32(tensor.buffer);
    out.bytes(tensor.initial.data(), tensor.initial.size());
    out.u32(static_cast<uint32_t>(tensor.segments.size()));
    for (const StateSegment &segment : tensor.segments) {
      out.string(segment.name);
      out.u64(segment.elementOffset);
      out.u32(static_cast<uint32_t>(segment.shape.size()));
      for (int64_t dim : segment.shape)
        out.i64(dim);
    }
  }
  return out.take();
}

/// Format 1.5: data-parallel collective steps (docs/artifact-format.md).
std::vector<uint8_t> encodeCollectives(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.collectives.size()));
  for (const CollectiveStep &step : artifact.collectives) {
    out.u32(static_cast<uint32_t>(step.kind));
    out.u32(step.state);
    out.u64(step.elementOffset);
    out.u64(step.elementCount);
    out.u32(step.afterLaunch);
  }
  return out.take();
}

/// Format 1.7: PowerSGD's rank, seed and matrices (docs/artifact-format.md).
std::vector<uint8_t> encodePowerSgd(const Artifact &artifact) {
  ByteWriter out;
  out.u32(artifact.powerSgd.rank);
  out.u64(artifact.powerSgd.seed);
  out.u32(static_cast<uint32_t>(artifact.powerSgd.matrices.size()));
  for (const PowerSgdMatrix &matrix : artifact.powerSgd.matrices) {
    out.u32(matrix.step);
    out.u64(matrix.elementOffset);
    out.u64(matrix.rows);
    out.u64(matrix.cols);
  }
  return out.take();
}

/// Format 1.8: ZeRO stage 1's world size and states (docs/artifact-format.md).
std::vector<uint8_t> encodeShardOptimizer(const Artifact &artifact) {
  const ShardOptimizerConfig &config = artifact.shardOptimizer;
  ByteWriter out;
  out.u32(config.shards);
  out.u32(config.gradShard);
  out.u32(config.paramsShard);
  out.u32(config.squaredNorm);
  out.u32(static_cast<uint32_t>(config.sharded.size()));
  for (uint32_t state : config.sharded)
    out.u32(state);
  return out.take();
}

/// Format 1.6: the buffers the runtime zeroes (docs/artifact-format.md).
std::vector<uint8_t> encodeZeroedBuffers(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.zeroedBuffers.size()));
  for (uint32_t buffer : artifact.zeroedBuffers)
    out.u32(buffer);
  return out.take();
}

/// Format 1.9: one record per scaled launch (docs/artifact-format.md).
std::vector<uint8_t> encodeLaunchScales(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.launchScales.size()));
  for (const LaunchScale &scale : artifact.launchScales) {
    out.u32(scale.launch);
    out.u32(scale.symbol);
    out.u32(scale.gridDim);
    out.u64(scale.numerator);
    out.u64(scale.denominator);
  }
  return out.take();
}

/// Format 1.11: one record per guarded launch (docs/artifact-format.md).
std::vector<uint8_t> encodeLaunchGuards(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.launchGuards.size()));
  for (const LaunchGuard &guard : artifact.launchGuards) {
    out.u32(guard.launch);
    out.u32(guard.symbol);
    out.u64(static_cast<uint64_t>(guard.min));
    out.u64(static_cast<uint64_t>(guard.max));
  }
  return out.take();
}

/// Format 1.12: one record per device-side loop (docs/artifact-format.md).
std::vector<uint8_t> encodeControlRegions(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.controlRegions.size()));
  for (const ControlRegion &region : artifact.controlRegions) {
    out.u32(static_cast<uint32_t>(region.kind));
    out.u32(region.firstLaunch);
    out.u32(region.launchCount);
    out.u32(region.flagBuffer);
    out.u64(region.flagOffset);
  }
  return out.take();
}

/// Format 1.10: one record per size mask input (docs/artifact-format.md).
std::vector<uint8_t> encodeSizeMasks(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.sizeMasks.size()));
  for (const SizeMask &mask : artifact.sizeMasks) {
    out.u32(mask.input);
    out.u32(mask.symbol);
    out.u32(static_cast<uint32_t>(mask.kind));
    out.u64(mask.factor);
  }
  return out.take();
}

/// Format 1.9: the input groups, then the output groups.
std::vector<uint8_t> encodeSignatureGroups(const Artifact &artifact) {
  ByteWriter out;
  for (const auto *groups : {&artifact.inputGroups, &artifact.outputGroups}) {
    out.u32(static_cast<uint32_t>(groups->size()));
    for (const SignatureGroup &group : *groups) {
      out.string(group.name);
      out.u32(static_cast<uint32_t>(group.kind));
      out.u32(group.present ? 1 : 0);
      out.u32(group.first);
      out.u32(group.count);
    }
  }
  return out.take();
}

/// Format 1.9: the host program (docs/artifact-format.md, "host-steps").
void encodeHostDecl(ByteWriter &out, const std::string &name, bool isString,
                    DType dtype, const Shape &shape) {
  out.string(name);
  out.u32(isString ? kStringDTypeCode : static_cast<uint32_t>(dtype));
  out.u32(static_cast<uint32_t>(shape.size()));
  for (int64_t dim : shape)
    out.i64(dim);
}

void encodeNames(ByteWriter &out, const std::vector<std::string> &names) {
  out.u32(static_cast<uint32_t>(names.size()));
  for (const std::string &name : names)
    out.string(name);
}

std::vector<uint8_t> encodeHostSteps(const Artifact &artifact) {
  const HostProgram &host = artifact.host;
  ByteWriter out;
  for (const auto *decls : {&host.inputs, &host.outputs}) {
    out.u32(static_cast<uint32_t>(decls->size()));
    for (const HostTensorDecl &decl : *decls)
      encodeHostDecl(out, decl.name, decl.isString, decl.dtype, decl.shape);
  }
  out.u32(static_cast<uint32_t>(host.constants.size()));
  for (const HostConstant &constant : host.constants) {
    const HostValue &value = constant.value;
    encodeHostDecl(out, constant.name, value.isString, value.dtype,
                   value.shape);
    if (value.isString)
      for (const std::string &text : value.strings)
        out.string(text);
    else
      out.bytes(value.data.data(), value.data.size());
  }
  out.u32(static_cast<uint32_t>(host.steps.size()));
  for (const HostStep &step : host.steps) {
    out.string(step.op);
    out.string(step.node);
    out.u32(static_cast<uint32_t>(step.phase));
    encodeNames(out, step.inputs);
    encodeNames(out, step.outputs);
    out.u32(static_cast<uint32_t>(step.attributes.size()));
    for (const HostAttribute &attribute : step.attributes) {
      out.string(attribute.name);
      encodeNames(out, attribute.values);
    }
  }
  encodeNames(out, host.toDevice);
  encodeNames(out, host.fromDevice);
  encodeNames(out, host.hiddenOutputs);
  return out.take();
}

/// Format 1.6: the symbolic dims, then each input's and each output's
/// symbolic axes (docs/artifact-format.md).
std::vector<uint8_t> encodeSymbolicDims(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.symbolicDims.size()));
  for (const SymbolicDim &dim : artifact.symbolicDims) {
    out.string(dim.name);
    out.i64(dim.min);
    out.i64(dim.max);
    out.i64(dim.opt);
    out.u32(dim.separable ? 1 : 0);
    out.string(dim.reason);
  }
  for (const auto *tensors : {&artifact.inputs, &artifact.outputs}) {
    out.u32(static_cast<uint32_t>(tensors->size()));
    for (const TensorSignature &tensor : *tensors) {
      out.u32(static_cast<uint32_t>(tensor.symbolicAxes.size()));
      for (const SymbolicAxis &axis : tensor.symbolicAxes) {
        out.u32(axis.dim);
        out.u32(axis.symbol);
        out.u64(axis.factor);
      }
    }
  }
  return out.take();
}

std::vector<uint8_t> encodeLaunches(const Artifact &artifact) {
  ByteWriter out;
  out.u32(static_cast<uint32_t>(artifact.launches.size()));
  for (const Launch &launch : artifact.launches) {
    out.u32(launch.kernel);
    out.u32(static_cast<uint32_t>(launch.args.size()));
    for (uint64_t arg : launch.args)
      out.u64(arg);
  }
  return out.take();
}

std::vector<uint8_t> encodeMemoryPlan(const Artifact &artifact) {
  ByteWriter out;
  out.u64(artifact.memoryPlan.arenaSize);
  out.u32(static_cast<uint32_t>(artifact.memoryPlan.buffers.size()));
  for (const ArenaBuffer &buffer : artifact.memoryPlan.buffers) {
    out.string(buffer.name);
    out.u64(buffer.offset);
    out.u64(buffer.size);
    out.u32(buffer.firstUse);
    out.u32(buffer.lastUse);
  }
  return out.take();
}

/// Counts and lengths the format stores in 32 bits.
Error checkEncodable(const Artifact &artifact) {
  constexpr uint64_t limit = 0xFFFFFFFFu;
  auto tooMany = [&](std::string_view what, uint64_t count) {
    return makeError("cannot write the artifact: {} {} do not fit the "
                     "format's 32-bit count",
                     count, what);
  };
  if (artifact.inputs.size() > limit || artifact.outputs.size() > limit)
    return tooMany("signature tensors", artifact.inputs.size());
  if (artifact.weights.size() > limit)
    return tooMany("weights", artifact.weights.size());
  if (artifact.kernels.size() > limit)
    return tooMany("kernels", artifact.kernels.size());
  if (artifact.launches.size() > limit)
    return tooMany("launches", artifact.launches.size());
  if (artifact.memoryPlan.buffers.size() > limit)
    return tooMany("buffers", artifact.memoryPlan.buffers.size());
  if (artifact.compilerOptions.size() > limit)
    return makeError("cannot write the artifact: the compiler options string "
                     "is longer than 4 GiB");
  return Error::success();
}

struct PlannedSection {
  SectionKind kind;
  const uint8_t *data;
  uint64_t size;
  uint64_t offset = 0;
  uint32_t checksum = 0;
};

using WriteFn = std::function<Error(const void *, size_t)>;

Error emitArtifact(const Artifact &artifact, const WriteFn &write) {
  if (Error err = verifyArtifact(artifact))
    return err.withContext("cannot write an invalid artifact");
  if (Error err = checkEncodable(artifact))
    return err;

  std::vector<uint8_t> meta = encodeMeta(artifact);
  std::vector<uint8_t> signature = encodeSignature(artifact);
  std::vector<uint8_t> weights = encodeWeights(artifact);
  std::vector<uint8_t> kernels = encodeKernels(artifact);
  std::vector<uint8_t> launches = encodeLaunches(artifact);
  std::vector<uint8_t> memoryPlan = encodeMemoryPlan(artifact);
  std::vector<PlannedSection> sections = {
      {SectionKind::Meta, meta.data(), meta.size()},
      {SectionKind::Signature, signature.data(), signature.size()},
      {SectionKind::Weights, weights.data(), weights.size()},
      {SectionKind::Kernels, kernels.data(), kernels.size()},
      {SectionKind::Launches, launches.data(), launches.size()},
      {SectionKind::MemoryPlan, memoryPlan.data(), memoryPlan.size()},
      {SectionKind::WeightData, artifact.weightData.data(),
       artifact.weightData.size()},
  };
  std::vector<uint8_t> origins;
  if (needsWeightOriginsSection(artifact)) {
    origins = encodeWeightOrigins(artifact);
    sections.insert(sections.end() - 1, {SectionKind::WeightOrigins,
                                         origins.data(), origins.size()});
  }
  std::vector<uint8_t> resources;
  if (needsKernelResourcesSection(artifact)) {
    resources = encodeKernelResources(artifact);
    sections.insert(sections.end() - 1, {SectionKind::KernelResources,
                                         resources.data(), resources.size()});
  }
  std::vector<uint8_t> tensorMaps;
  if (!artifact.tensorMaps.empty()) {
    tensorMaps = encodeTensorMaps(artifact);
    sections.insert(sections.end() - 1, {SectionKind::TensorMaps,
                                         tensorMaps.data(), tensorMaps.size()});
  }

  std::vector<uint8_t> training;
  bool hasEntryPoints = !artifact.entryPoints.empty();
  if (hasEntryPoints) {
    training = encodeTraining(artifact);
    sections.insert(sections.end() - 1, {SectionKind::Training,
                                         training.data(), training.size()});
  }
  std::vector<uint8_t> collectives;
  bool hasCollectives = !artifact.collectives.empty();
  if (hasCollectives) {
    collectives = encodeCollectives(artifact);
    sections.insert(sections.end() - 1,
                    {SectionKind::Collectives, collectives.data(),
                     collectives.size()});
  }
  std::vector<uint8_t> powerSgd;
  if (artifact.powerSgd.rank != 0) {
    powerSgd = encodePowerSgd(artifact);
    sections.insert(sections.end() - 1,
                    {SectionKind::PowerSgd, powerSgd.data(), powerSgd.size()});
  }
  std::vector<uint8_t> shardOptimizer;
  if (artifact.shardOptimizer.shards != 0) {
    shardOptimizer = encodeShardOptimizer(artifact);
    sections.insert(sections.end() - 1,
                    {SectionKind::ShardOptimizer, shardOptimizer.data(),
                     shardOptimizer.size()});
  }
  std::vector<uint8_t> zeroed;
  bool hasZeroed = !artifact.zeroedBuffers.empty();
  if (hasZeroed) {
    zeroed = encodeZeroedBuffers(artifact);
    sections.insert(sections.end() - 1, {SectionKind::ZeroedBuffers,
                                         zeroed.data(), zeroed.size()});
  }

  std::vector<uint8_t> symbolicDims;
  if (!artifact.symbolicDims.empty()) {
    symbolicDims = encodeSymbolicDims(artifact);
    sections.insert(
        sections.end() - 1,
        {SectionKind::SymbolicDims, symbolicDims.data(), symbolicDims.size()});
  }

  std::vector<uint8_t> groups;
  bool hasGroups =
      !artifact.inputGroups.empty() || !artifact.outputGroups.empty();
  if (hasGroups) {
    groups = encodeSignatureGroups(artifact);
    sections.insert(sections.end() - 1, {SectionKind::SignatureGroups,
                                         groups.data(), groups.size()});
  }

  std::vector<uint8_t> launchScales;
  if (!artifact.launchScales.empty()) {
    launchScales = encodeLaunchScales(artifact);
    sections.insert(
        sections.end() - 1,
        {SectionKind::LaunchScales, launchScales.data(), launchScales.size()});
  }

  std::vector<uint8_t> launchGuards;
  if (!artifact.launchGuards.empty()) {
    launchGuards = encodeLaunchGuards(artifact);
    sections.insert(
        sections.end() - 1,
        {SectionKind::LaunchGuards, launchGuards.data(), launchGuards.size()});
  }

  std::vector<uint8_t> controlRegions;
  bool hasControlRegions = !artifact.controlRegions.empty();
  if (hasControlRegions) {
    controlRegions = encodeControlRegions(artifact);
    sections.insert(sections.end() - 1,
                    {SectionKind::ControlRegions, controlRegions.data(),
                     controlRegions.size()});
  }

  std::vector<uint8_t> sizeMasks;
  bool hasSizeMasks = !artifact.sizeMasks.empty();
  if (hasSizeMasks) {
    sizeMasks = encodeSizeMasks(artifact);
    sections.insert(sections.end() - 1, {SectionKind::SizeMasks,
                                         sizeMasks.data(), sizeMasks.size()});
  }

  std::vector<uint8_t> hostSteps;
  bool hasHostSteps = !artifact.host.empty();
  if (hasHostSteps) {
    hostSteps = encodeHostSteps(artifact);
    sections.insert(sections.end() - 1, {SectionKind::HostSteps,
                                         hostSteps.data(), hostSteps.size()});
  }

  uint64_t tableSize = uint64_t(kSectionEntrySize) * sections.size();
  uint64_t cursor = kHeaderSize + tableSize;
  for (PlannedSection &section : sections) {
    uint64_t alignment = section.kind == SectionKind::WeightData
                             ? kWeightAlignment
                             : kSectionAlignment;
    section.offset = *alignUp(cursor, alignment);
    cursor = section.offset + section.size;
    section.checksum = crc32c(section.data, section.size);
  }
  uint64_t fileSize = cursor;

  std::vector<uint8_t> table(tableSize, 0);
  for (size_t i = 0; i < sections.size(); ++i) {
    uint8_t *entry = table.data() + i * kSectionEntrySize;
    storeU32(entry + kEntryKindOffset, static_cast<uint32_t>(sections[i].kind));
    storeU64(entry + kEntryOffsetOffset, sections[i].offset);
    storeU64(entry + kEntrySizeOffset, sections[i].size);
    storeU32(entry + kEntryChecksumOffset, sections[i].checksum);
  }

  uint8_t header[kHeaderSize] = {};
  std::memcpy(header + kMagicOffset, kMagic, sizeof(kMagic));
  storeU32(header + kMajorOffset, kArtifactFormatMajor);
  storeU32(header + kMinorOffset, kArtifactFormatMinor);
  storeU32(header + kHeaderSizeOffset, kHeaderSize);
  storeU32(header + kSectionCountOffset,
           static_cast<uint32_t>(sections.size()));
  storeU64(header + kSectionTableOffset, kHeaderSize);
  storeU64(header + kFileSizeOffset, fileSize);
  storeU32(header + kFlagsOffset,
           (hasEntryPoints ? kHeaderFlagEntryPoints : 0) |
               (hasCollectives ? kHeaderFlagCollectives : 0) |
               (hasZeroed ? kHeaderFlagZeroedBuffers : 0) |
               (hasGroups ? kHeaderFlagSignatureGroups : 0) |
               (hasHostSteps ? kHeaderFlagHostSteps : 0) |
               (hasSizeMasks ? kHeaderFlagSizeMasks : 0) |
               (hasControlRegions ? kHeaderFlagControlRegions : 0));
  storeU32(header + kTableChecksumOffset, crc32c(table.data(), table.size()));
  storeU32(header + kHeaderChecksumOffset,
           crc32c(header, kHeaderChecksumOffset));

  if (Error err = write(header, sizeof(header)))
    return err;
  if (Error err = write(table.data(), table.size()))
    return err;
  uint64_t written = kHeaderSize + tableSize;
  static const uint8_t zeros[kWeightAlignment] = {};
  for (const PlannedSection &section : sections) {
    if (Error err = write(zeros, section.offset - written))
      return err;
    if (Error err = write(section.data, section.size))
      return err;
    written = section.offset + section.size;
  }
  return Error::success();
}

} // namespace

Expected<std::vector<uint8_t>> serializeArtifact(const Artifact &artifact) {
  std::vector<uint8_t> image;
  Error err = emitArtifact(artifact, [&](const void *data, size_t size) {
    const auto *bytes = static_cast<const uint8_t *>(data);
    image.insert(image.end(), bytes, bytes + size);
    return Error::success();
  });
  if (err)
    return err;
  return image;
}

Error writeArtifact(const Artifact &artifact, const std::string &path) {
  // Verify before creating anything, so an invalid artifact leaves no file.
  if (Error err = verifyArtifact(artifact))
    return err.withContext(
        fmt::format("cannot write '{}': invalid artifact", path));
  Expected<AtomicFileWriter> writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.takeError();
  if (Error err = emitArtifact(artifact, [&](const void *data, size_t size) {
        return writer->write(data, size);
      }))
    return err;
  return writer->commit();
}

} // namespace kiln::runtime
