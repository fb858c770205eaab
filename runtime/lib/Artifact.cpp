//===- Artifact.cpp - The in-memory artifact and its consistency checks ---===//
//
// verifyArtifact is the one place that decides whether an artifact is safe to
// run: the writer calls it before writing and the reader after parsing, so a
// compiler bug and a corrupt file are caught by the same checks.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/SignatureGroups.h"
#include "kiln/runtime/SymbolicDims.h"

#include "Support.h"

#include <cstring>
#include <unordered_map>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// Blob
//===----------------------------------------------------------------------===//

Blob Blob::copyOf(const void *data, size_t size) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  return fromVector(std::vector<uint8_t>(bytes, bytes + size));
}

Blob Blob::fromVector(std::vector<uint8_t> bytes) {
  Blob blob;
  blob.owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  blob.ptr = blob.owned->data();
  blob.length = blob.owned->size();
  return blob;
}

Blob Blob::view(std::shared_ptr<const void> keepAlive, const uint8_t *data,
                size_t size) {
  Blob blob;
  blob.keepAlive = std::move(keepAlive);
  blob.ptr = data;
  blob.length = size;
  return blob;
}

Blob Blob::slice(size_t offset, size_t size) const {
  assert(rangeFits(offset, size, length) && "slice outside the blob");
  std::shared_ptr<const void> owner =
      owned ? std::shared_ptr<const void>(owned) : keepAlive;
  return view(std::move(owner), ptr + offset, size);
}

uint64_t Blob::append(const void *data, size_t size, uint64_t alignment) {
  if (!owned || owned.use_count() > 1 || ptr != owned->data() ||
      length != owned->size()) {
    // Borrowed, shared or a slice: make a private copy first.
    *this = fromVector(std::vector<uint8_t>(ptr, ptr + length));
  }
  uint64_t offset = *alignUp(owned->size(), alignment);
  owned->resize(offset, 0);
  const auto *bytes = static_cast<const uint8_t *>(data);
  owned->insert(owned->end(), bytes, bytes + size);
  ptr = owned->data();
  length = owned->size();
  return offset;
}

//===----------------------------------------------------------------------===//
// Artifact
//===----------------------------------------------------------------------===//

namespace {
/// "[a, b)", for byte ranges in messages.
std::string byteRange(uint64_t offset, uint64_t size) {
  return fmt::format("[{}, {})", offset, offset + size);
}

Error verifyTensorShape(std::string_view what, const std::string &name,
                        DType dtype, const Shape &shape) {
  if (!dtypeFromCode(static_cast<uint32_t>(dtype)))
    return makeError("{} '{}': unknown dtype code {}", what, name,
                     static_cast<unsigned>(dtype));
  for (int64_t dim : shape)
    if (dim < 0)
      return makeError("{} '{}': shape {} has a negative dimension", what, name,
                       formatShape(shape));
  if (!tensorByteSize(dtype, shape))
    return makeError("{} '{}': {} {} overflows 64 bits", what, name,
                     dtypeName(dtype), formatShape(shape));
  return Error::success();
}
} // namespace

std::string_view paramKindName(ParamKind kind) {
  switch (kind) {
  case ParamKind::ArenaPointer:
    return "arena-pointer";
  case ParamKind::WeightsPointer:
    return "weights-pointer";
  case ParamKind::Scalar32:
    return "scalar32";
  case ParamKind::Scalar64:
    return "scalar64";
  case ParamKind::TensorMap:
    return "tensor-map";
  }
  return "unknown";
}

Expected<uint32_t> Artifact::addWeight(std::string name, DType dtype,
                                       Shape shape, const void *data,
                                       uint64_t size) {
  if (Error err = verifyTensorShape("weight", name, dtype, shape))
    return err;
  std::optional<uint64_t> expected = tensorByteSize(dtype, shape);
  if (*expected != size)
    return makeError("weight '{}': {} bytes given for {} {} ({} bytes)", name,
                     size, dtypeName(dtype), formatShape(shape), *expected);
  Weight weight;
  weight.name = std::move(name);
  weight.dtype = dtype;
  weight.shape = std::move(shape);
  weight.offset = weightData.append(data, size, kWeightAlignment);
  weights.push_back(std::move(weight));
  return static_cast<uint32_t>(weights.size() - 1);
}

const TensorSignature *Artifact::findInput(std::string_view name) const {
  for (const TensorSignature &input : inputs)
    if (input.name == name)
      return &input;
  return nullptr;
}

const SizeMask *Artifact::findSizeMask(std::string_view name) const {
  for (const SizeMask &mask : sizeMasks)
    if (mask.input < inputs.size() && inputs[mask.input].name == name)
      return &mask;
  return nullptr;
}

const TensorSignature *Artifact::findOutput(std::string_view name) const {
  for (const TensorSignature &output : outputs)
    if (output.name == name)
      return &output;
  return nullptr;
}

uint32_t Artifact::targetSm() const {
  std::string_view text = target;
  if (text.substr(0, 3) != "sm_")
    return 0;
  text.remove_prefix(3);
  if (!text.empty() && (text.back() == 'a' || text.back() == 'f'))
    text.remove_suffix(1);
  if (text.empty() || text.size() > 4)
    return 0;
  uint32_t sm = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return 0;
    sm = sm * 10 + static_cast<uint32_t>(c - '0');
  }
  return sm;
}

//===----------------------------------------------------------------------===//
// verifyArtifact
//===----------------------------------------------------------------------===//

namespace {

Error verifyMeta(const Artifact &artifact) {
  if (artifact.targetSm() == 0)
    return makeError("section 'meta': target '{}' is not an sm name like "
                     "'sm_90'",
                     artifact.target);
  return Error::success();
}

Error verifySignature(const Artifact &artifact) {
  const std::vector<ArenaBuffer> &buffers = artifact.memoryPlan.buffers;
  for (bool isInput : {true, false}) {
    std::string_view what = isInput ? "input" : "output";
    const std::vector<TensorSignature> &tensors =
        isInput ? artifact.inputs : artifact.outputs;
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorSignature &tensor = tensors[i];
      if (tensor.name.empty())
        return makeError("section 'signature': {} {} has no name", what, i);
      if (!seen.emplace(tensor.name, i).second)
        return makeError("section 'signature': {} '{}' appears twice", what,
                         tensor.name);
      if (Error err =
              verifyTensorShape(what, tensor.name, tensor.dtype, tensor.shape))
        return err.withContext("section 'signature'");
      uint64_t size = *tensorByteSize(tensor.dtype, tensor.shape);
      if (tensor.buffer >= buffers.size())
        return makeError("section 'signature': {} '{}': buffer {} is out of "
                         "range (the memory plan has {} buffers)",
                         what, tensor.name, tensor.buffer, buffers.size());
      const ArenaBuffer &buffer = buffers[tensor.buffer];
      if (tensor.arenaOffset < buffer.offset ||
          !rangeFits(tensor.arenaOffset - buffer.offset, size, buffer.size))
        return makeError("section 'signature': {} '{}': bytes {} lie outside "
                         "its buffer {} '{}' at {}",
                         what, tensor.name, byteRange(tensor.arenaOffset, size),
                         tensor.buffer, buffer.name,
                         byteRange(buffer.offset, buffer.size));
    }
  }
  return Error::success();
}

Error verifyWeights(const Artifact &artifact) {
  std::unordered_map<std::string, size_t> seen;
  uint64_t kept = artifact.weightData.size();
  uint64_t total = kept + artifact.strippedWeightBytes;
  for (size_t i = 0; i < artifact.weights.size(); ++i) {
    const Weight &weight = artifact.weights[i];
    if (weight.name.empty())
      return makeError("section 'weights': weight {} has no name", i);
    if (!seen.emplace(weight.name, i).second)
      return makeError("section 'weights': weight '{}' appears twice",
                       weight.name);
    if (Error err = verifyTensorShape("weight", weight.name, weight.dtype,
                                      weight.shape))
      return err.withContext("section 'weights'");
    if (weight.offset % kWeightAlignment != 0)
      return makeError("section 'weights': weight '{}': offset {} is not a "
                       "multiple of {}",
                       weight.name, weight.offset, kWeightAlignment);
    uint64_t size = *tensorByteSize(weight.dtype, weight.shape);
    if (!rangeFits(weight.offset, size, total))
      return makeError("section 'weights': weight '{}': bytes {} lie past the "
                       "end of the weight data ({} bytes)",
                       weight.name, byteRange(weight.offset, size), total);
    if (weight.offset + size > kept && weight.origin.empty())
      return makeError("section 'weights': weight '{}' was stripped but has "
                       "no origin to rebuild it from",
                       weight.name);
  }
  return Error::success();
}

Error verifyKernel(const Kernel &kernel) {
  if (kernel.ptx.empty())
    return makeError("has no PTX");
  if (kernel.cubin.empty() != (kernel.cubinSm == 0))
    return kernel.cubin.empty()
               ? makeError("names cubin sm {} but has no cubin", kernel.cubinSm)
               : makeError("has a cubin but no sm for it");
  const Dim3 &grid = kernel.grid;
  const Dim3 &block = kernel.block;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7FFFFFFFu ||
      grid.y > 65535 || grid.z > 65535)
    return makeError("grid ({}, {}, {}) is empty or too large", grid.x, grid.y,
                     grid.z);
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.z > 64 ||
      threads > 1024)
    return makeError("block ({}, {}, {}) is empty or has more than 1024 "
                     "threads",
                     block.x, block.y, block.z);
  for (size_t p = 0; p < kernel.params.size(); ++p)
    if (paramKindName(kernel.params[p].kind) == "unknown")
      return makeError("parameter {} has unknown kind {}", p,
                       static_cast<unsigned>(kernel.params[p].kind));
  return Error::success();
}

Error verifyKernels(const Artifact &artifact) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < artifact.kernels.size(); ++i) {
    const Kernel &kernel = artifact.kernels[i];
    if (kernel.name.empty())
      return makeError("section 'kernels': kernel {} has no name", i);
    auto [it, inserted] = seen.emplace(kernel.name, i);
    if (!inserted)
      return makeError("section 'kernels': kernel {} '{}': kernel {} has the "
                       "same name",
                       i, kernel.name, it->second);
    if (Error err = verifyKernel(kernel))
      return err.withContext(
          fmt::format("section 'kernels': kernel {} '{}'", i, kernel.name));
    // The occupancy model divides the register file by this.
    if (kernel.resources && kernel.resources->registersPerThread > 255)
      return makeError("section 'kernel-resources': kernel {} '{}': {} "
                       "registers per thread is more than any GPU has (255)",
                       i, kernel.name, kernel.resources->registersPerThread);
  }
  return Error::success();
}

Error verifyLaunches(const Artifact &artifact) {
  uint64_t arenaSize = artifact.memoryPlan.arenaSize;
  uint64_t weightSize =
      artifact.weightData.size() + artifact.strippedWeightBytes;
  for (size_t i = 0; i < artifact.launches.size(); ++i) {
    const Launch &launch = artifact.launches[i];
    if (launch.kernel >= artifact.kernels.size())
      return makeError("section 'launches': launch {}: kernel index {} is out "
                       "of range (the artifact has {} kernels)",
                       i, launch.kernel, artifact.kernels.size());
    const Kernel &kernel = artifact.kernels[launch.kernel];
    std::string where = fmt::format(
        "section 'launches': launch {} (kernel '{}')", i, kernel.name);
    if (launch.args.size() != kernel.params.size())
      return makeError("{}: {} arguments for {} parameters", where,
                       launch.args.size(), kernel.params.size());
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const KernelParam &param = kernel.params[a];
      uint64_t value = launch.args[a];
      std::string arg =
          fmt::format("argument {}{}{}", a, param.name.empty() ? "" : " '",
                      param.name.empty() ? "" : param.name + "'");
      switch (param.kind) {
      case ParamKind::ArenaPointer:
        if (value >= arenaSize && !(value == 0 && arenaSize == 0))
          return makeError("{}: {}: arena offset {} is past the end of the "
                           "arena ({} bytes)",
                           where, arg, value, arenaSize);
        break;
      case ParamKind::WeightsPointer:
        if (value >= weightSize && !(value == 0 && weightSize == 0))
          return makeError("{}: {}: weights offset {} is past the end of the "
                           "weight data ({} bytes)",
                           where, arg, value, weightSize);
        break;
      case ParamKind::Scalar32:
        if (value > 0xFFFFFFFFu)
          return makeError("{}: {}: value {} does not fit the 32-bit "
                           "parameter",
                           where, arg, value);
        break;
      case ParamKind::Scalar64:
        break;
      case ParamKind::TensorMap: {
        if (value >= artifact.tensorMaps.size())
          return makeError("{}: {}: tensor map {} is out of range (the "
                           "artifact has {})",
                           where, arg, value, artifact.tensorMaps.size());
        uint32_t address = artifact.tensorMaps[value].addressParam;
        if (address >= kernel.params.size() ||
            (kernel.params[address].kind != ParamKind::ArenaPointer &&
             kernel.params[address].kind != ParamKind::WeightsPointer))
          return makeError("{}: {}: tensor map {} takes its address from "
                           "parameter {}, which is not a pointer parameter",
                           where, arg, value, address);
        break;
      }
      }
    }
  }
  return Error::success();
}

/// What cuTensorMapEncodeTiled requires of its arguments, checked here so a
/// bad record fails at load on every device with the same message.
Error verifyTensorMap(const TensorMapRecord &map) {
  uint64_t elementBytes = dtypeSize(map.dtype);
  if (map.dtype != DType::F32 && map.dtype != DType::F16 &&
      map.dtype != DType::BF16)
    return makeError("dtype {} is not f32, f16 or bf16", dtypeName(map.dtype));
  if (map.rank < 1 || map.rank > kTensorMapMaxRank)
    return makeError("rank {} is not 1 to {}", map.rank, kTensorMapMaxRank);
  for (uint32_t d = 0; d < map.rank; ++d) {
    if (map.globalDims[d] < 1 || map.globalDims[d] > (1ull << 32))
      return makeError("dimension {} has {} elements (1 to 2^32)", d,
                       map.globalDims[d]);
    if (map.boxDims[d] < 1 || map.boxDims[d] > 256)
      return makeError("box dimension {} is {} (1 to 256)", d, map.boxDims[d]);
    if (map.elementStrides[d] < 1 || map.elementStrides[d] > 8)
      return makeError("element stride {} is {} (1 to 8)", d,
                       map.elementStrides[d]);
  }
  for (uint32_t d = map.rank; d < kTensorMapMaxRank; ++d)
    if (map.globalDims[d] || map.boxDims[d] ||
        (d > 0 && map.globalStrides[d - 1]))
      return makeError("dimension {} is set but the rank is {}", d, map.rank);
  for (uint32_t d = 1; d < map.rank; ++d)
    if (map.globalStrides[d - 1] % 16 || map.globalStrides[d - 1] == 0 ||
        map.globalStrides[d - 1] >= (1ull << 40))
      return makeError("the stride of dimension {} is {} bytes (a multiple "
                       "of 16 below 2^40)",
                       d, map.globalStrides[d - 1]);
  if (map.interleave != 0)
    return makeError("interleave {} is not 0 (none)", map.interleave);
  if (map.swizzle > 3)
    return makeError("swizzle {} is not 0 to 3", map.swizzle);
  if (map.l2Promotion > 3)
    return makeError("L2 promotion {} is not 0 to 3", map.l2Promotion);
  if (map.oobFill > 1)
    return makeError("out-of-bounds fill {} is not 0 or 1", map.oobFill);
  uint64_t innerBytes = uint64_t(map.boxDims[0]) * elementBytes;
  if (innerBytes % 16)
    return makeError("the box's inner dimension is {} bytes, not a multiple "
                     "of 16",
                     innerBytes);
  if (map.swizzle && innerBytes > (16ull << map.swizzle))
    return makeError("the box's inner dimension is {} bytes, more than the "
                     "{}-byte swizzle span",
                     innerBytes, 16ull << map.swizzle);
  return Error::success();
}

Error verifyTensorMaps(const Artifact &artifact) {
  for (size_t i = 0; i < artifact.tensorMaps.size(); ++i)
    if (Error err = verifyTensorMap(artifact.tensorMaps[i]))
      return err.withContext(
          fmt::format("section 'tensor-maps': tensor map {}", i));
  return Error::success();
}

Error verifyMemoryPlan(const Artifact &artifact) {
  const ArenaLayout &plan = artifact.memoryPlan;
  size_t launchCount = artifact.launches.size();
  std::vector<LiveBuffer> live;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const ArenaBuffer &buffer = plan.buffers[i];
    if (buffer.firstUse > buffer.lastUse)
      return makeError("section 'memory-plan': buffer {} '{}': first use {} "
                       "is after last use {}",
                       i, buffer.name, buffer.firstUse, buffer.lastUse);
    if (buffer.lastUse >= std::max<size_t>(launchCount, 1))
      return makeError("section 'memory-plan': buffer {} '{}': last use {} is "
                       "past the last launch ({} launches)",
                       i, buffer.name, buffer.lastUse, launchCount);
    live.push_back({buffer.size, buffer.firstUse, buffer.lastUse});
    offsets.push_back(buffer.offset);
  }
  Error err = checkMemoryPlanLabelled(
      live, offsets, plan.arenaSize, kArenaAlignment, [&](size_t i) {
        return fmt::format("buffer {} '{}'", i, plan.buffers[i].name);
      });
  return err.withContext("section 'memory-plan'");
}

/// A zeroed buffer keeps its contents across launches (a kernel relies on
/// what the last one left), so it must be live for the whole launch list:
/// then the memory plan's overlap check keeps every other buffer off it.
Error verifyZeroedBuffers(const Artifact &artifact) {
  const std::vector<ArenaBuffer> &buffers = artifact.memoryPlan.buffers;
  uint32_t last = artifact.launches.empty()
                      ? 0
                      : static_cast<uint32_t>(artifact.launches.size() - 1);
  std::vector<bool> seen(buffers.size(), false);
  for (size_t i = 0; i < artifact.zeroedBuffers.size(); ++i) {
    uint32_t index = artifact.zeroedBuffers[i];
    if (index >= buffers.size())
      return makeError("section 'zeroed-buffers': entry {}: buffer {} is not "
                       "in the memory plan ({} buffers)",
                       i, index, buffers.size());
    if (seen[index])
      return makeError("section 'zeroed-buffers': buffer {} '{}' is listed "
                       "twice",
                       index, buffers[index].name);
    seen[index] = true;
    const ArenaBuffer &buffer = buffers[index];
    if (buffer.firstUse != 0 || buffer.lastUse != last)
      return makeError("section 'zeroed-buffers': buffer {} '{}' is live for "
                       "launches [{}, {}], not the whole launch list [0, {}]",
                       index, buffer.name, buffer.firstUse, buffer.lastUse,
                       last);
  }
  return Error::success();
}

/// Format 1.12: each region's range inside the launch list, the records
/// sorted (first launch ascending, an outer region before the regions
/// inside it), every pair nested or disjoint, and the flag byte inside a
/// buffer that is live across the whole region (so no other buffer reuses
/// its bytes between the write that sets it and the test that reads it).
/// A region lies inside one entry point, and no collective step follows a
/// launch inside a region (BucketScheduler queues each step once per run).
Error verifyControlRegions(const Artifact &artifact) {
  const std::vector<ControlRegion> &regions = artifact.controlRegions;
  const std::vector<ArenaBuffer> &buffers = artifact.memoryPlan.buffers;
  uint64_t launchCount = artifact.launches.size();
  auto range = [](const ControlRegion &region) {
    return fmt::format("[{}, {})", region.firstLaunch,
                       uint64_t(region.firstLaunch) + region.launchCount);
  };
  // Indices of the regions that contain the one being checked, outermost
  // first.
  std::vector<size_t> open;
  for (size_t i = 0; i < regions.size(); ++i) {
    const ControlRegion &region = regions[i];
    std::string what = fmt::format(
        "section 'control-regions': record {} (launches {})", i, range(region));
    if (controlRegionKindName(region.kind) == "unknown")
      return makeError("{}: unknown kind {}", what,
                       static_cast<uint32_t>(region.kind));
    if (region.launchCount == 0)
      return makeError("{}: the region has no launches", what);
    uint64_t end = uint64_t(region.firstLaunch) + region.launchCount;
    if (end > launchCount)
      return makeError("{}: the range lies outside the launch list ({} "
                       "launches)",
                       what, launchCount);
    if (i > 0) {
      const ControlRegion &previous = regions[i - 1];
      uint64_t previousEnd =
          uint64_t(previous.firstLaunch) + previous.launchCount;
      if (region.firstLaunch == previous.firstLaunch && end == previousEnd)
        return makeError("{}: record {} has the same range", what, i - 1);
      if (region.firstLaunch < previous.firstLaunch ||
          (region.firstLaunch == previous.firstLaunch && end > previousEnd))
        return makeError("{}: it comes after record {} (launches {}) but "
                         "must come before it (regions are sorted by first "
                         "launch, an outer region before the regions inside "
                         "it)",
                         what, i - 1, range(previous));
    }
    // Sorted: a region that ends at or before this one's start is closed;
    // the innermost one still open must contain this one whole.
    while (!open.empty() && uint64_t(regions[open.back()].firstLaunch) +
                                    regions[open.back()].launchCount <=
                                region.firstLaunch)
      open.pop_back();
    if (!open.empty()) {
      const ControlRegion &outer = regions[open.back()];
      if (end > uint64_t(outer.firstLaunch) + outer.launchCount)
        return makeError("{}: it partly overlaps record {} (launches {}): "
                         "regions must nest or be disjoint",
                         what, open.back(), range(outer));
    }
    open.push_back(i);

    if (region.flagBuffer >= buffers.size())
      return makeError("{}: flag buffer {} is out of range (the memory plan "
                       "has {} buffers)",
                       what, region.flagBuffer, buffers.size());
    const ArenaBuffer &buffer = buffers[region.flagBuffer];
    if (region.flagOffset < buffer.offset ||
        region.flagOffset - buffer.offset >= buffer.size)
      return makeError("{}: the flag byte at arena offset {} lies outside "
                       "its buffer {} '{}' at {}",
                       what, region.flagOffset, region.flagBuffer, buffer.name,
                       byteRange(buffer.offset, buffer.size));
    if (buffer.firstUse > region.firstLaunch || buffer.lastUse < end - 1)
      return makeError("{}: flag buffer {} '{}' is live for launches [{}, "
                       "{}], not across the whole region [{}, {}]",
                       what, region.flagBuffer, buffer.name, buffer.firstUse,
                       buffer.lastUse, region.firstLaunch, end - 1);

    if (!artifact.entryPoints.empty()) {
      bool inside = false;
      for (const EntryPoint &entry : artifact.entryPoints)
        inside |= entry.firstLaunch <= region.firstLaunch &&
                  end <= uint64_t(entry.firstLaunch) + entry.launchCount;
      if (!inside)
        return makeError("{}: the region does not lie inside one entry "
                         "point",
                         what);
    }
    for (size_t s = 0; s < artifact.collectives.size(); ++s) {
      uint32_t after = artifact.collectives[s].afterLaunch;
      if (after >= region.firstLaunch && after < end)
        return makeError("{}: collective step {} follows launch {}, inside "
                         "the region: a collective step cannot repeat in a "
                         "device-side loop",
                         what, s, after);
    }
  }
  return Error::success();
}

} // namespace

std::string_view controlRegionKindName(ControlRegionKind kind) {
  switch (kind) {
  case ControlRegionKind::While:
    return "while";
  }
  return "unknown";
}

/// Names end up in error messages, one line each: no control characters.
Error verifyNames(const Artifact &artifact) {
  auto check = [](std::string_view section, std::string_view what, size_t i,
                  const std::string &name) -> Error {
    if (hasControlCharacter(name))
      return makeError("section '{}': {} {} '{}' has a control character in "
                       "its name",
                       section, what, i, printable(name));
    return Error::success();
  };
  for (size_t i = 0; i < artifact.inputs.size(); ++i)
    if (Error err = check("signature", "input", i, artifact.inputs[i].name))
      return err;
  for (size_t i = 0; i < artifact.outputs.size(); ++i)
    if (Error err = check("signature", "output", i, artifact.outputs[i].name))
      return err;
  for (size_t i = 0; i < artifact.weights.size(); ++i)
    if (Error err = check("weights", "weight", i, artifact.weights[i].name))
      return err;
  for (size_t i = 0; i < artifact.kernels.size(); ++i)
    if (Error err = check("kernels", "kernel", i, artifact.kernels[i].name))
      return err;
  return Error::success();
}

Error verifyArtifact(const Artifact &artifact) {
  if (Error err = verifyNames(artifact))
    return err;
  if (Error err = verifyMeta(artifact))
    return err;
  if (Error err = verifySignature(artifact))
    return err;
  if (Error err = verifyWeights(artifact))
    return err;
  if (Error err = verifyKernels(artifact))
    return err;
  if (Error err = verifyTensorMaps(artifact))
    return err;
  if (Error err = verifyLaunches(artifact))
    return err;
  if (Error err = verifyMemoryPlan(artifact))
    return err;
  if (Error err = verifyZeroedBuffers(artifact))
    return err;
  if (Error err = verifyTraining(artifact))
    return err;
  if (Error err = verifySymbolicDims(artifact))
    return err;
  if (Error err = verifyLaunchScales(artifact))
    return err;
  if (Error err = verifyLaunchGuards(artifact))
    return err;
  if (Error err = verifyControlRegions(artifact))
    return err;
  if (Error err = verifySizeMasks(artifact))
    return err;
  if (Error err = verifySignatureGroups(artifact))
    return err;
  if (Error err = verifyHostProgram(artifact))
    return err;
  return verifyCollectives(artifact);
}

} // namespace kiln::runtime
