//===- ArtifactReader.cpp - .kiln bytes to Artifact, trusting nothing -----===//
//
// Checks run from the outside in: the header (magic, version, checksum, file
// size), the section table (checksum, every section inside the file and
// apart from the others), each section's checksum, then each section's
// contents (every read bounds-checked, every count checked against the bytes
// left before anything is allocated), and finally verifyArtifact for the
// cross-section rules. Each failure is one line naming the section and, where
// there is one, the tensor, kernel, launch or buffer.
//
//===----------------------------------------------------------------------===//

#include "ArtifactFormat.h"
#include "Support.h"

#include "kiln/runtime/Checksum.h"

#include <algorithm>

namespace kiln::runtime {

using namespace format;

namespace {

/// Bounds-checked little-endian decoder over one section. The first failure
/// sticks: later reads return zeros, and error() reports the first problem.
class SectionReader {
public:
  SectionReader(const uint8_t *data, uint64_t size, SectionKind kind)
      : data(data), size(size), section(sectionName(kind)) {}

  /// What is being read, for messages ("kernel 2 'gemm'").
  void setContext(std::string text) { context = std::move(text); }

  uint32_t u32(std::string_view what) {
    uint32_t value = 0;
    if (const uint8_t *p = take(4, what))
      value = loadU32(p);
    return value;
  }
  uint64_t u64(std::string_view what) {
    uint64_t value = 0;
    if (const uint8_t *p = take(8, what))
      value = loadU64(p);
    return value;
  }
  int64_t i64(std::string_view what) { return static_cast<int64_t>(u64(what)); }
  std::string string(std::string_view what) {
    uint32_t length = u32(what);
    const uint8_t *p = take(length, what);
    return p ? std::string(reinterpret_cast<const char *>(p), length)
             : std::string();
  }
  /// A u64 length and that many bytes.
  std::pair<const uint8_t *, uint64_t> bytes(std::string_view what) {
    uint64_t length = u64(what);
    const uint8_t *p = take(length, what);
    return {p, p ? length : 0};
  }
  /// A u32 count of elements that take at least `minElementSize` bytes each;
  /// a count the remaining bytes cannot hold fails here, before anyone
  /// allocates for it.
  uint32_t count(std::string_view what, uint64_t minElementSize) {
    uint32_t value = u32(what);
    if (!failed() && uint64_t(value) * minElementSize > size - position) {
      fail(fmt::format("{} {} cannot fit in the {} bytes left", value, what,
                       size - position));
      return 0;
    }
    return value;
  }

  bool failed() const { return err.failed(); }
  const Error &error() const { return err; }

  /// Fails unless every byte was consumed.
  Error finish() {
    if (!failed() && position != size) {
      context.clear();
      fail(fmt::format("{} unexpected bytes after the last entry",
                       size - position));
    }
    return err;
  }

  /// Records a failure in the current context.
  void fail(const std::string &message) {
    if (failed())
      return;
    err = context.empty()
              ? makeError("section '{}': {}", section, message)
              : makeError("section '{}': {}: {}", section, context, message);
  }

private:
  const uint8_t *take(uint64_t length, std::string_view what) {
    if (failed())
      return nullptr;
    if (length > size - position) {
      fail(fmt::format("truncated while reading {} ({} bytes needed at offset "
                       "{}, {} left)",
                       what, length, position, size - position));
      return nullptr;
    }
    const uint8_t *p = data + position;
    position += length;
    return p;
  }

  const uint8_t *data;
  uint64_t size;
  uint64_t position = 0;
  std::string_view section;
  std::string context;
  Error err;
};

/// The smallest encodings, for SectionReader::count.
constexpr uint64_t kMinTensorBytes = 4 + 4 + 4 + 8; // name, dtype, rank, size
constexpr uint64_t kMinKernelBytes = 4 + 7 * 4 + 4 + 8 + 4 + 8;
constexpr uint64_t kMinParamBytes = 4 + 4;
constexpr uint64_t kMinLaunchBytes = 4 + 4;
constexpr uint64_t kMinBufferBytes = 4 + 8 + 8 + 4 + 4;

/// Reads name, dtype, shape and stored byte size, and checks the size
/// against the shape.
void readTensor(SectionReader &in, std::string_view what, std::string &name,
                DType &dtype, Shape &shape) {
  name = in.string("a tensor name");
  in.setContext(fmt::format("{} '{}'", what, name));
  uint32_t code = in.u32("the dtype");
  uint32_t rank = in.count("dimensions", 8);
  shape.resize(rank);
  for (int64_t &dim : shape)
    dim = in.i64("a dimension");
  uint64_t storedSize = in.u64("the byte size");
  if (in.failed())
    return;
  std::optional<DType> type = dtypeFromCode(code);
  if (!type)
    return in.fail(fmt::format("unknown dtype code {}", code));
  dtype = *type;
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return in.fail(
        fmt::format("shape {} has a negative dimension", formatShape(shape)));
  std::optional<uint64_t> size = tensorByteSize(dtype, shape);
  if (!size)
    return in.fail(fmt::format("{} {} overflows 64 bits", dtypeName(dtype),
                               formatShape(shape)));
  if (*size != storedSize)
    in.fail(fmt::format("stored byte size {} does not match {} {} ({} bytes)",
                        storedSize, dtypeName(dtype), formatShape(shape),
                        *size));
}

Error parseMeta(SectionReader in, Artifact &artifact) {
  artifact.compilerVersion = in.string("the compiler version");
  artifact.compilerOptions = in.string("the compiler options");
  artifact.target = in.string("the target");
  return in.finish();
}

Error parseSignature(SectionReader in, Artifact &artifact) {
  uint32_t inputCount = in.count("inputs", kMinTensorBytes + 12);
  uint32_t outputCount = in.count("outputs", kMinTensorBytes + 12);
  for (uint32_t pass = 0; pass < 2 && !in.failed(); ++pass) {
    bool isInput = pass == 0;
    auto &tensors = isInput ? artifact.inputs : artifact.outputs;
    tensors.resize(isInput ? inputCount : outputCount);
    for (size_t i = 0; i < tensors.size() && !in.failed(); ++i) {
      TensorSignature &tensor = tensors[i];
      in.setContext(fmt::format("{} {}", isInput ? "input" : "output", i));
      readTensor(in, isInput ? "input" : "output", tensor.name, tensor.dtype,
                 tensor.shape);
      tensor.arenaOffset = in.u64("the arena offset");
      tensor.buffer = in.u32("the buffer index");
    }
  }
  return in.finish();
}

Error parseWeightOrigins(SectionReader in, Artifact &artifact) {
  artifact.strippedWeightBytes = in.u64("the stripped weight bytes");
  uint32_t count = in.u32("the origin count");
  if (!in.failed() && count != artifact.weights.size())
    return makeError("section 'weight-origins': {} origins for {} weights",
                     count, artifact.weights.size());
  for (size_t i = 0; i < count && !in.failed(); ++i) {
    in.setContext(fmt::format("weight {}", i));
    artifact.weights[i].origin = in.string("the origin");
  }
  in.setContext("");
  artifact.inlinedInitializers.resize(
      in.count("inlined initializers", kMinTensorBytes + 4));
  for (size_t i = 0; i < artifact.inlinedInitializers.size() && !in.failed();
       ++i) {
    InlinedInitializer &inlined = artifact.inlinedInitializers[i];
    in.setContext(fmt::format("inlined initializer {}", i));
    readTensor(in, "inlined initializer", inlined.name, inlined.dtype,
               inlined.shape);
    std::string bytes = in.string("the values");
    inlined.bytes.assign(bytes.begin(), bytes.end());
  }
  return in.finish();
}

Error parseKernelResources(SectionReader in, Artifact &artifact) {
  uint32_t count = in.u32("the kernel count");
  if (!in.failed() && count != artifact.kernels.size())
    return makeError("section 'kernel-resources': {} entries for {} kernels",
                     count, artifact.kernels.size());
  for (size_t i = 0; i < count && !in.failed(); ++i) {
    in.setContext(fmt::format("kernel {} '{}'", i, artifact.kernels[i].name));
    uint32_t present = in.u32("the presence flag");
    KernelResources resources;
    resources.registersPerThread = in.u32("the register count");
    resources.staticSharedBytes = in.u32("the static shared memory size");
    resources.stackFrameBytes = in.u32("the stack frame size");
    resources.spillStoreBytes = in.u32("the spill store size");
    resources.spillLoadBytes = in.u32("the spill load size");
    if (in.failed())
      break;
    if (present > 1) {
      in.fail(fmt::format("presence flag {} is neither 0 nor 1", present));
      break;
    }
    if (present)
      artifact.kernels[i].resources = resources;
  }
  return in.finish();
}

Error parseTensorMaps(SectionReader in, Artifact &artifact) {
  constexpr uint64_t kRecordBytes = 3 * 4 + 9 * 8 + 10 * 4 + 4 * 4;
  artifact.tensorMaps.resize(in.count("tensor maps", kRecordBytes));
  for (size_t i = 0; i < artifact.tensorMaps.size() && !in.failed(); ++i) {
    TensorMapRecord &map = artifact.tensorMaps[i];
    in.setContext(fmt::format("tensor map {}", i));
    map.addressParam = in.u32("the address parameter");
    uint32_t dtype = in.u32("the dtype");
    map.rank = in.u32("the rank");
    for (uint64_t &dim : map.globalDims)
      dim = in.u64("a global dimension");
    for (uint64_t &stride : map.globalStrides)
      stride = in.u64("a global stride");
    for (uint32_t &box : map.boxDims)
      box = in.u32("a box dimension");
    for (uint32_t &stride : map.elementStrides)
      stride = in.u32("an element stride");
    map.interleave = in.u32("the interleave");
    map.swizzle = in.u32("the swizzle");
    map.l2Promotion = in.u32("the L2 promotion");
    map.oobFill = in.u32("the out-of-bounds fill");
    if (in.failed())
      break;
    std::optional<DType> type = dtypeFromCode(dtype);
    if (!type) {
      in.fail(fmt::format("unknown dtype code {}", dtype));
      break;
    }
    map.dtype = *type;
  }
  return in.finish();
}

Error parseTraining(SectionReader in, Artifact &artifact) {
  artifact.entryPoints.resize(in.count("entry points", 4 + 5 * 4));
  for (size_t i = 0; i < artifact.entryPoints.size() && !in.failed(); ++i) {
    EntryPoint &entry = artifact.entryPoints[i];
    in.setContext(fmt::format("entry point {}", i));
    entry.name = in.string("the entry point name");
    in.setContext(fmt::format("entry point '{}'", entry.name));
    entry.firstLaunch = in.u32("the first launch");
    entry.launchCount = in.u32("the launch count");
    for (auto *indices : {&entry.inputs, &entry.outputs}) {
      indices->resize(in.count("tensor indices", 4));
      for (uint32_t &index : *indices)
        index = in.u32("a tensor index");
    }
    entry.updates.resize(in.count("state updates", 8));
    for (StateUpdate &update : entry.updates) {
      update.output = in.u32("an update's output");
      update.state = in.u32("an update's state");
    }
  }
  in.setContext("");
  artifact.state.resize(in.count("state tensors", kMinTensorBytes + 24));
  for (size_t i = 0; i < artifact.state.size() && !in.failed(); ++i) {
    StateTensor &tensor = artifact.state[i];
    in.setContext(fmt::format("state {}", i));
    readTensor(in, "state", tensor.name, tensor.dtype, tensor.shape);
    tensor.arenaOffset = in.u64("the arena offset");
    tensor.buffer = in.u32("the buffer index");
    auto [initial, initialSize] = in.bytes("the initial value");
    if (initial)
      tensor.initial.assign(initial, initial + initialSize);
    tensor.segments.resize(in.count("segments", 4 + 8 + 4));
    for (StateSegment &segment : tensor.segments) {
      segment.name = in.string("a segment name");
      segment.elementOffset = in.u64("a segment offset");
      segment.shape.resize(in.count("dimensions", 8));
      for (int64_t &dim : segment.shape)
        dim = in.i64("a dimension");
    }
  }
  return in.finish();
}

Error parseCollectives(SectionReader in, Artifact &artifact) {
  artifact.collectives.resize(in.count("collective steps", 4 + 4 + 8 + 8 + 4));
  for (size_t i = 0; i < artifact.collectives.size() && !in.failed(); ++i) {
    CollectiveStep &step = artifact.collectives[i];
    in.setContext(fmt::format("collective step {}", i));
    step.kind = static_cast<CollectiveKind>(in.u32("the collective kind"));
    step.state = in.u32("the state index");
    step.elementOffset = in.u64("the element offset");
    step.elementCount = in.u64("the element count");
    step.afterLaunch = in.u32("the launch it follows");
  }
  return in.finish();
}

Error parsePowerSgd(SectionReader in, Artifact &artifact) {
  PowerSgdConfig &config = artifact.powerSgd;
  config.rank = in.u32("the PowerSGD rank");
  config.seed = in.u64("the PowerSGD seed");
  config.matrices.resize(in.count("PowerSGD matrices", 4 + 3 * 8));
  for (size_t i = 0; i < config.matrices.size() && !in.failed(); ++i) {
    PowerSgdMatrix &matrix = config.matrices[i];
    in.setContext(fmt::format("PowerSGD matrix {}", i));
    matrix.step = in.u32("the collective step");
    matrix.elementOffset = in.u64("the element offset");
    matrix.rows = in.u64("the row count");
    matrix.cols = in.u64("the column count");
  }
  return in.finish();
}

Error parseShardOptimizer(SectionReader in, Artifact &artifact) {
  ShardOptimizerConfig &config = artifact.shardOptimizer;
  config.shards = in.u32("the shard count");
  config.gradShard = in.u32("the grad.shard state index");
  config.paramsShard = in.u32("the params.shard state index");
  config.squaredNorm = in.u32("the grad.sqnorm state index");
  config.sharded.resize(in.count("sharded optimizer states", 4));
  for (size_t i = 0; i < config.sharded.size() && !in.failed(); ++i)
    config.sharded[i] = in.u32("a sharded state index");
  return in.finish();
}

Error parseZeroedBuffers(SectionReader in, Artifact &artifact) {
  artifact.zeroedBuffers.resize(in.count("zeroed buffers", 4));
  for (size_t i = 0; i < artifact.zeroedBuffers.size() && !in.failed(); ++i)
    artifact.zeroedBuffers[i] = in.u32("a buffer index");
  return in.finish();
}

/// Format 1.9: the host program. Shapes are checked by verifyHostProgram.
bool parseHostDecl(SectionReader &in, std::string &name, bool &isString,
                   DType &dtype, Shape &shape) {
  name = in.string("a name");
  uint32_t code = in.u32("a dtype code");
  uint32_t rank = in.count("dims", 8);
  for (uint32_t d = 0; d < rank && !in.failed(); ++d)
    shape.push_back(in.i64("a dim"));
  if (in.failed())
    return false;
  isString = code == kStringDTypeCode;
  if (!isString) {
    std::optional<DType> known = dtypeFromCode(code);
    if (!known) {
      in.fail(fmt::format("'{}': unknown dtype code {}", name, code));
      return false;
    }
    dtype = *known;
  }
  return true;
}

std::vector<std::string> parseNames(SectionReader &in, std::string_view what) {
  std::vector<std::string> names(in.count(what, 4));
  for (std::string &name : names)
    name = in.string("a name");
  return names;
}

Error parseHostSteps(SectionReader in, Artifact &artifact) {
  HostProgram &host = artifact.host;
  for (auto *decls : {&host.inputs, &host.outputs}) {
    in.setContext(decls == &host.inputs ? "inputs" : "outputs");
    decls->resize(in.count("host tensors", 4 + 4 + 4));
    for (HostTensorDecl &decl : *decls)
      if (!parseHostDecl(in, decl.name, decl.isString, decl.dtype, decl.shape))
        break;
  }
  in.setContext("constants");
  host.constants.resize(in.count("constants", 4 + 4 + 4));
  for (HostConstant &constant : host.constants) {
    HostValue &value = constant.value;
    if (!parseHostDecl(in, constant.name, value.isString, value.dtype,
                       value.shape))
      break;
    std::optional<uint64_t> count = elementCount(value.shape);
    if (!count) {
      in.fail(fmt::format("constant '{}': shape {} is invalid", constant.name,
                          formatShape(value.shape)));
      break;
    }
    if (value.isString) {
      // Each string takes at least its 4-byte length.
      if (*count > (uint64_t(1) << 32)) {
        in.fail(fmt::format("constant '{}': too many strings", constant.name));
        break;
      }
      for (uint64_t i = 0; i < *count && !in.failed(); ++i)
        value.strings.push_back(in.string("a string"));
    } else {
      auto [p, size] = in.bytes("the constant's bytes");
      if (p)
        value.data.assign(p, p + size);
    }
  }
  in.setContext("steps");
  host.steps.resize(in.count("steps", 4 + 4 + 4 + 4 + 4 + 4));
  for (size_t i = 0; i < host.steps.size() && !in.failed(); ++i) {
    HostStep &step = host.steps[i];
    in.setContext(fmt::format("step {}", i));
    step.op = in.string("the op");
    step.node = in.string("the node name");
    step.phase = static_cast<HostPhase>(in.u32("the phase"));
    step.inputs = parseNames(in, "inputs");
    step.outputs = parseNames(in, "outputs");
    step.attributes.resize(in.count("attributes", 4 + 4));
    for (HostAttribute &attribute : step.attributes) {
      attribute.name = in.string("an attribute name");
      attribute.values = parseNames(in, "attribute values");
    }
  }
  in.setContext("");
  host.toDevice = parseNames(in, "device inputs");
  host.fromDevice = parseNames(in, "device outputs");
  host.hiddenOutputs = parseNames(in, "hidden outputs");
  return in.finish();
}

Error parseSymbolicDims(SectionReader in, Artifact &artifact) {
  artifact.symbolicDims.resize(in.count("symbolic dims", 4 + 3 * 8 + 4 + 4));
  for (size_t i = 0; i < artifact.symbolicDims.size() && !in.failed(); ++i) {
    SymbolicDim &dim = artifact.symbolicDims[i];
    in.setContext(fmt::format("symbol {}", i));
    dim.name = in.string("the symbol name");
    dim.min = in.i64("the minimum");
    dim.max = in.i64("the maximum");
    dim.opt = in.i64("the optimum");
    uint32_t separable = in.u32("the separable flag");
    dim.reason = in.string("the reason");
    if (!in.failed() && separable > 1)
      in.fail(fmt::format("separable flag {} is neither 0 nor 1", separable));
    dim.separable = separable == 1;
  }
  for (bool isInput : {true, false}) {
    auto &tensors = isInput ? artifact.inputs : artifact.outputs;
    in.setContext("");
    uint32_t count = in.u32("the tensor count");
    if (!in.failed() && count != tensors.size()) {
      in.fail(fmt::format("{} {} entries for {} signature {}s", count,
                          isInput ? "input" : "output", tensors.size(),
                          isInput ? "input" : "output"));
      break;
    }
    for (size_t i = 0; i < tensors.size() && !in.failed(); ++i) {
      in.setContext(fmt::format("{} '{}'", isInput ? "input" : "output",
                                tensors[i].name));
      tensors[i].symbolicAxes.resize(in.count("symbolic axes", 4 + 4 + 8));
      for (SymbolicAxis &axis : tensors[i].symbolicAxes) {
        axis.dim = in.u32("a dim index");
        axis.symbol = in.u32("a symbol index");
        axis.factor = in.u64("a factor");
      }
    }
  }
  return in.finish();
}

Error parseSizeMasks(SectionReader in, Artifact &artifact) {
  artifact.sizeMasks.resize(in.count("size masks", 4 + 4 + 4 + 8));
  for (size_t i = 0; i < artifact.sizeMasks.size() && !in.failed(); ++i) {
    SizeMask &mask = artifact.sizeMasks[i];
    in.setContext(fmt::format("record {}", i));
    mask.input = in.u32("an input index");
    mask.symbol = in.u32("a symbol index");
    uint32_t kind = in.u32("a kind");
    if (kind > uint32_t(SizeMaskKind::MeanScale))
      in.fail(fmt::format("unknown kind {}", kind));
    mask.kind = static_cast<SizeMaskKind>(kind);
    mask.factor = in.u64("a factor");
  }
  return in.finish();
}

Error parseLaunchScales(SectionReader in, Artifact &artifact) {
  artifact.launchScales.resize(
      in.count("launch scales", 4 + 4 + 4 + 8 + 8));
  for (size_t i = 0; i < artifact.launchScales.size() && !in.failed(); ++i) {
    LaunchScale &scale = artifact.launchScales[i];
    in.setContext(fmt::format("record {}", i));
    scale.launch = in.u32("a launch index");
    scale.symbol = in.u32("a symbol index");
    scale.gridDim = in.u32("a grid dim");
    scale.numerator = in.u64("a numerator");
    scale.denominator = in.u64("a denominator");
  }
  return in.finish();
}

Error parseLaunchGuards(SectionReader in, Artifact &artifact) {
  artifact.launchGuards.resize(in.count("launch guards", 4 + 4 + 8 + 8));
  for (size_t i = 0; i < artifact.launchGuards.size() && !in.failed(); ++i) {
    LaunchGuard &guard = artifact.launchGuards[i];
    in.setContext(fmt::format("record {}", i));
    guard.launch = in.u32("a launch index");
    guard.symbol = in.u32("a symbol index");
    guard.min = static_cast<int64_t>(in.u64("a minimum"));
    guard.max = static_cast<int64_t>(in.u64("a maximum"));
  }
  return in.finish();
}

Error parseControlRegions(SectionReader in, Artifact &artifact) {
  uint32_t count = in.count("control regions", 4 + 4 + 4 + 4 + 8);
  if (!in.failed() && count == 0)
    in.fail("no records (the section is written only when there are "
            "regions)");
  artifact.controlRegions.resize(count);
  for (size_t i = 0; i < artifact.controlRegions.size() && !in.failed(); ++i) {
    ControlRegion &region = artifact.controlRegions[i];
    in.setContext(fmt::format("record {}", i));
    // The kind is checked by verifyArtifact, with the other rules.
    region.kind = static_cast<ControlRegionKind>(in.u32("a kind"));
    region.firstLaunch = in.u32("the first launch");
    region.launchCount = in.u32("the launch count");
    region.flagBuffer = in.u32("the flag buffer");
    region.flagOffset = in.u64("the flag offset");
  }
  return in.finish();
}

Error parseSignatureGroups(SectionReader in, Artifact &artifact) {
  for (auto *groups : {&artifact.inputGroups, &artifact.outputGroups}) {
    in.setContext("");
    groups->resize(in.count("signature groups", 4 + 4 * 4));
    for (size_t i = 0; i < groups->size() && !in.failed(); ++i) {
      SignatureGroup &group = (*groups)[i];
      in.setContext(
          fmt::format("{} group {}",
                      groups == &artifact.inputGroups ? "input" : "output", i));
      group.name = in.string("the group name");
      uint32_t kind = in.u32("the group kind");
      uint32_t present = in.u32("the present flag");
      group.first = in.u32("the first tensor");
      group.count = in.u32("the tensor count");
      if (in.failed())
        break;
      if (kind < 1 || kind > 3)
        in.fail(fmt::format("unknown group kind {}", kind));
      else if (present > 1)
        in.fail(fmt::format("present flag {} is neither 0 nor 1", present));
      group.kind = static_cast<SignatureGroupKind>(kind);
      group.present = present == 1;
    }
  }
  return in.finish();
}

Error parseWeights(SectionReader in, Artifact &artifact) {
  artifact.weights.resize(in.count("weights", kMinTensorBytes + 8));
  for (size_t i = 0; i < artifact.weights.size() && !in.failed(); ++i) {
    Weight &weight = artifact.weights[i];
    in.setContext(fmt::format("weight {}", i));
    readTensor(in, "weight", weight.name, weight.dtype, weight.shape);
    weight.offset = in.u64("the weight offset");
  }
  return in.finish();
}

Error parseKernels(SectionReader in, Artifact &artifact) {
  artifact.kernels.resize(in.count("kernels", kMinKernelBytes));
  for (size_t i = 0; i < artifact.kernels.size() && !in.failed(); ++i) {
    Kernel &kernel = artifact.kernels[i];
    in.setContext(fmt::format("kernel {}", i));
    kernel.name = in.string("the kernel name");
    in.setContext(fmt::format("kernel {} '{}'", i, kernel.name));
    for (Dim3 *dims : {&kernel.grid, &kernel.block}) {
      dims->x = in.u32("the launch geometry");
      dims->y = in.u32("the launch geometry");
      dims->z = in.u32("the launch geometry");
    }
    kernel.dynamicSharedBytes = in.u32("the dynamic shared memory size");
    kernel.params.resize(in.count("parameters", kMinParamBytes));
    for (size_t p = 0; p < kernel.params.size() && !in.failed(); ++p) {
      uint32_t kind = in.u32("a parameter kind");
      kernel.params[p].name = in.string("a parameter name");
      if (!in.failed() && (kind < uint32_t(ParamKind::ArenaPointer) ||
                           kind > uint32_t(ParamKind::TensorMap)))
        in.fail(fmt::format("parameter {} has unknown kind {}", p, kind));
      kernel.params[p].kind = static_cast<ParamKind>(kind);
    }
    auto [ptx, ptxSize] = in.bytes("the PTX");
    if (ptx)
      kernel.ptx.assign(reinterpret_cast<const char *>(ptx), ptxSize);
    kernel.cubinSm = in.u32("the cubin sm");
    auto [cubin, cubinSize] = in.bytes("the cubin");
    if (cubin)
      kernel.cubin.assign(cubin, cubin + cubinSize);
  }
  return in.finish();
}

Error parseLaunches(SectionReader in, Artifact &artifact) {
  artifact.launches.resize(in.count("launches", kMinLaunchBytes));
  for (size_t i = 0; i < artifact.launches.size() && !in.failed(); ++i) {
    Launch &launch = artifact.launches[i];
    in.setContext(fmt::format("launch {}", i));
    launch.kernel = in.u32("the kernel index");
    launch.args.resize(in.count("arguments", 8));
    for (uint64_t &arg : launch.args)
      arg = in.u64("an argument");
  }
  return in.finish();
}

Error parseMemoryPlan(SectionReader in, Artifact &artifact) {
  artifact.memoryPlan.arenaSize = in.u64("the arena size");
  artifact.memoryPlan.buffers.resize(in.count("buffers", kMinBufferBytes));
  for (size_t i = 0; i < artifact.memoryPlan.buffers.size() && !in.failed();
       ++i) {
    ArenaBuffer &buffer = artifact.memoryPlan.buffers[i];
    in.setContext(fmt::format("buffer {}", i));
    buffer.name = in.string("the buffer name");
    buffer.offset = in.u64("the buffer offset");
    buffer.size = in.u64("the buffer size");
    buffer.firstUse = in.u32("the first use");
    buffer.lastUse = in.u32("the last use");
  }
  return in.finish();
}

struct SectionEntry {
  uint32_t kind;
  uint32_t flags;
  uint64_t offset;
  uint64_t size;
  uint32_t checksum;
};

/// Checks the header and returns the section table entries.
Expected<std::vector<SectionEntry>> readLayout(const Blob &image) {
  const uint8_t *file = image.data();
  uint64_t fileSize = image.size();
  if (fileSize == 0)
    return makeError("empty file, not a Kiln artifact");
  size_t magicBytes = std::min<uint64_t>(fileSize, sizeof(kMagic));
  if (std::memcmp(file + kMagicOffset, kMagic, magicBytes) != 0)
    return makeError("not a Kiln artifact (bad magic)");
  if (fileSize < kHeaderSize)
    return makeError("truncated: {} bytes, less than the {}-byte header",
                     fileSize, kHeaderSize);
  // Magic and version sit at the same place in every version, so a newer
  // file is recognised as such before anything else is trusted.
  uint32_t major = loadU32(file + kMajorOffset);
  uint32_t minor = loadU32(file + kMinorOffset);
  if (major > kArtifactFormatMajor)
    return makeError("format version {}.{} is newer than this runtime reads "
                     "({}.x); use a newer kiln-run or recompile the model",
                     major, minor, kArtifactFormatMajor);
  if (major < 1)
    return makeError("format version {}.{} is not a released version", major,
                     minor);
  uint32_t storedHeaderSum = loadU32(file + kHeaderChecksumOffset);
  uint32_t headerSum = crc32c(file, kHeaderChecksumOffset);
  if (storedHeaderSum != headerSum)
    return makeError("header: checksum mismatch (stored {:#010x}, computed "
                     "{:#010x})",
                     storedHeaderSum, headerSum);
  if (loadU32(file + kHeaderSizeOffset) != kHeaderSize)
    return makeError("header: header size {} is not {}",
                     loadU32(file + kHeaderSizeOffset), kHeaderSize);
  uint32_t flags = loadU32(file + kFlagsOffset);
  // Entry points came with 1.3; a file claiming an older minor cannot have
  // them.
  // Entry points came with 1.3, collective steps with 1.5.
  uint32_t knownFlags = 0;
  if (major > 1 || minor >= 3)
    knownFlags |= kHeaderFlagEntryPoints;
  if (major > 1 || minor >= 5)
    knownFlags |= kHeaderFlagCollectives;
  if (major > 1 || minor >= 6)
    knownFlags |= kHeaderFlagZeroedBuffers;
  if (major > 1 || minor >= 9)
    knownFlags |= kHeaderFlagSignatureGroups | kHeaderFlagHostSteps;
  if (major > 1 || minor >= 10)
    knownFlags |= kHeaderFlagSizeMasks;
  if (major > 1 || minor >= 12)
    knownFlags |= kHeaderFlagControlRegions;
  if (flags & ~knownFlags)
    return makeError("header: unknown flags {:#x}", flags & ~knownFlags);
  uint64_t recordedSize = loadU64(file + kFileSizeOffset);
  if (recordedSize > fileSize)
    return makeError("truncated: the header records {} bytes but the file has "
                     "{}",
                     recordedSize, fileSize);
  if (recordedSize < fileSize)
    return makeError("{} unexpected bytes after the end the header records "
                     "({} bytes)",
                     fileSize - recordedSize, recordedSize);

  uint32_t sectionCount = loadU32(file + kSectionCountOffset);
  uint64_t tableOffset = loadU64(file + kSectionTableOffset);
  if (sectionCount > kMaxSections)
    return makeError("section table: {} sections (at most {})", sectionCount,
                     kMaxSections);
  uint64_t tableSize = uint64_t(sectionCount) * kSectionEntrySize;
  if (tableOffset < kHeaderSize || !rangeFits(tableOffset, tableSize, fileSize))
    return makeError("section table: {} bytes at offset {} lie outside the "
                     "file ({} bytes)",
                     tableSize, tableOffset, fileSize);
  uint32_t storedTableSum = loadU32(file + kTableChecksumOffset);
  uint32_t tableSum = crc32c(file + tableOffset, tableSize);
  if (storedTableSum != tableSum)
    return makeError("section table: checksum mismatch (stored {:#010x}, "
                     "computed {:#010x})",
                     storedTableSum, tableSum);

  std::vector<SectionEntry> entries(sectionCount);
  for (uint32_t i = 0; i < sectionCount; ++i) {
    const uint8_t *p = file + tableOffset + uint64_t(i) * kSectionEntrySize;
    SectionEntry &entry = entries[i];
    entry.kind = loadU32(p + kEntryKindOffset);
    entry.flags = loadU32(p + kEntryFlagsOffset);
    entry.offset = loadU64(p + kEntryOffsetOffset);
    entry.size = loadU64(p + kEntrySizeOffset);
    entry.checksum = loadU32(p + kEntryChecksumOffset);
    std::string name =
        entry.kind >= kFirstSectionKind && entry.kind <= kLastSectionKind
            ? fmt::format("section '{}'", sectionName(entry.kind))
            : fmt::format("section of unknown kind {}", entry.kind);
    if (!rangeFits(entry.offset, entry.size, fileSize))
      return makeError("{}: {} bytes at offset {} lie past the end of the file "
                       "({} bytes)",
                       name, entry.size, entry.offset, fileSize);
    if (entry.size != 0 && entry.offset < tableOffset + tableSize &&
        tableOffset < entry.offset + entry.size)
      return makeError("{}: overlaps the section table", name);
    if (entry.size != 0 && entry.offset < kHeaderSize)
      return makeError("{}: overlaps the header", name);
  }
  // No two sections may share bytes.
  std::vector<const SectionEntry *> byOffset;
  for (const SectionEntry &entry : entries)
    if (entry.size != 0)
      byOffset.push_back(&entry);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SectionEntry *a, const SectionEntry *b) {
              return a->offset < b->offset;
            });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i - 1]->offset + byOffset[i - 1]->size > byOffset[i]->offset)
      return makeError("sections '{}' and '{}' overlap",
                       sectionName(byOffset[i - 1]->kind),
                       sectionName(byOffset[i]->kind));
  return entries;
}

Expected<Artifact> parseImage(const Blob &image, const ReadOptions &options) {
  Expected<std::vector<SectionEntry>> layout = readLayout(image);
  if (!layout)
    return layout.takeError();

  const SectionEntry *known[kLastSectionKind + 1] = {};
  for (const SectionEntry &entry : *layout) {
    bool isKnown =
        entry.kind >= kFirstSectionKind && entry.kind <= kLastSectionKind;
    // Unknown kinds come from newer minor versions and are skipped, but only
    // after their checksum proves the file intact.
    if (isKnown) {
      if (known[entry.kind])
        return makeError("section '{}' appears twice", sectionName(entry.kind));
      if (entry.flags != 0)
        return makeError("section '{}': unknown flags {:#x}",
                         sectionName(entry.kind), entry.flags);
      known[entry.kind] = &entry;
    }
    if (entry.kind == uint32_t(SectionKind::WeightData) &&
        !options.verifyWeightChecksum)
      continue;
    uint32_t sum = crc32c(image.data() + entry.offset, entry.size);
    if (sum != entry.checksum)
      return isKnown ? makeError("section '{}': checksum mismatch (stored "
                                 "{:#010x}, computed {:#010x})",
                                 sectionName(entry.kind), entry.checksum, sum)
                     : makeError("section of unknown kind {}: checksum "
                                 "mismatch (stored {:#010x}, computed "
                                 "{:#010x})",
                                 entry.kind, entry.checksum, sum);
  }
  for (uint32_t kind = kFirstSectionKind; kind <= kLastRequiredSectionKind;
       ++kind)
    if (!known[kind])
      return makeError("section '{}' is missing", sectionName(kind));

  Artifact artifact;
  artifact.formatMajor = loadU32(image.data() + kMajorOffset);
  artifact.formatMinor = loadU32(image.data() + kMinorOffset);
  auto reader = [&](SectionKind kind) {
    const SectionEntry *entry = known[static_cast<uint32_t>(kind)];
    return SectionReader(image.data() + entry->offset, entry->size, kind);
  };
  if (Error err = parseMeta(reader(SectionKind::Meta), artifact))
    return err;
  if (Error err = parseSignature(reader(SectionKind::Signature), artifact))
    return err;
  if (Error err = parseWeights(reader(SectionKind::Weights), artifact))
    return err;
  if (Error err = parseKernels(reader(SectionKind::Kernels), artifact))
    return err;
  if (Error err = parseLaunches(reader(SectionKind::Launches), artifact))
    return err;
  if (Error err = parseMemoryPlan(reader(SectionKind::MemoryPlan), artifact))
    return err;
  if (known[uint32_t(SectionKind::WeightOrigins)])
    if (Error err =
            parseWeightOrigins(reader(SectionKind::WeightOrigins), artifact))
      return err;
  if (known[uint32_t(SectionKind::KernelResources)])
    if (Error err = parseKernelResources(
            reader(SectionKind::KernelResources), artifact))
      return err;
  if (known[uint32_t(SectionKind::TensorMaps)])
    if (Error err =
            parseTensorMaps(reader(SectionKind::TensorMaps), artifact))
      return err;

  if (known[uint32_t(SectionKind::SymbolicDims)])
    if (Error err =
            parseSymbolicDims(reader(SectionKind::SymbolicDims), artifact))
      return err;
  if (known[uint32_t(SectionKind::LaunchScales)])
    if (Error err =
            parseLaunchScales(reader(SectionKind::LaunchScales), artifact))
      return err;
  if (known[uint32_t(SectionKind::LaunchGuards)])
    if (Error err =
            parseLaunchGuards(reader(SectionKind::LaunchGuards), artifact))
      return err;

  bool groupsFlag =
      loadU32(image.data() + kFlagsOffset) & kHeaderFlagSignatureGroups;
  if (groupsFlag != (known[uint32_t(SectionKind::SignatureGroups)] != nullptr))
    return makeError(groupsFlag
                         ? "header: the signature-groups flag is set but "
                           "there is no 'signature-groups' section"
                         : "section 'signature-groups' is present but the "
                           "header's signature-groups flag is not set");
  if (groupsFlag)
    if (Error err = parseSignatureGroups(reader(SectionKind::SignatureGroups),
                                         artifact))
      return err;

  bool flagged =
      loadU32(image.data() + kFlagsOffset) & kHeaderFlagEntryPoints;
  if (flagged != (known[uint32_t(SectionKind::Training)] != nullptr))
    return makeError(flagged ? "header: the entry-points flag is set but "
                               "there is no 'training' section"
                             : "section 'training' is present but the "
                               "header's entry-points flag is not set");
  if (known[uint32_t(SectionKind::Training)])
    if (Error err = parseTraining(reader(SectionKind::Training), artifact))
      return err;
  bool collectiveFlag =
      loadU32(image.data() + kFlagsOffset) & kHeaderFlagCollectives;
  if (collectiveFlag != (known[uint32_t(SectionKind::Collectives)] != nullptr))
    return makeError(collectiveFlag
                         ? "header: the collectives flag is set but there is "
                           "no 'collectives' section"
                         : "section 'collectives' is present but the header's "
                           "collectives flag is not set");
  if (known[uint32_t(SectionKind::Collectives)])
    if (Error err =
            parseCollectives(reader(SectionKind::Collectives), artifact))
      return err;
  if (known[uint32_t(SectionKind::PowerSgd)])
    if (Error err = parsePowerSgd(reader(SectionKind::PowerSgd), artifact))
      return err;
  if (known[uint32_t(SectionKind::ShardOptimizer)])
    if (Error err =
            parseShardOptimizer(reader(SectionKind::ShardOptimizer), artifact))
      return err;
  bool zeroedFlag =
      loadU32(image.data() + kFlagsOffset) & kHeaderFlagZeroedBuffers;
  if (zeroedFlag != (known[uint32_t(SectionKind::ZeroedBuffers)] != nullptr))
    return makeError(zeroedFlag
                         ? "header: the zeroed-buffers flag is set but there "
                           "is no 'zeroed-buffers' section"
                         : "section 'zeroed-buffers' is present but the "
                           "header's zeroed-buffers flag is not set");
  if (known[uint32_t(SectionKind::ZeroedBuffers)])
    if (Error err =
            parseZeroedBuffers(reader(SectionKind::ZeroedBuffers), artifact))
      return err;

  bool masksFlag = loadU32(image.data() + kFlagsOffset) & kHeaderFlagSizeMasks;
  if (masksFlag != (known[uint32_t(SectionKind::SizeMasks)] != nullptr))
    return makeError(masksFlag ? "header: the size-masks flag is set but there "
                                 "is no 'size-masks' section"
                               : "section 'size-masks' is present but the "
                                 "header's size-masks flag is not set");
  if (masksFlag)
    if (Error err = parseSizeMasks(reader(SectionKind::SizeMasks), artifact))
      return err;

  bool regionsFlag =
      loadU32(image.data() + kFlagsOffset) & kHeaderFlagControlRegions;
  if (regionsFlag != (known[uint32_t(SectionKind::ControlRegions)] != nullptr))
    return makeError(regionsFlag
                         ? "header: the control-regions flag is set but there "
                           "is no 'control-regions' section"
                         : "section 'control-regions' is present but the "
                           "header's control-regions flag is not set");
  if (regionsFlag)
    if (Error err =
            parseControlRegions(reader(SectionKind::ControlRegions), artifact))
      return err;

  bool hostFlag = loadU32(image.data() + kFlagsOffset) & kHeaderFlagHostSteps;
  if (hostFlag != (known[uint32_t(SectionKind::HostSteps)] != nullptr))
    return makeError(hostFlag ? "header: the host-steps flag is set but there "
                                "is no 'host-steps' section"
                              : "section 'host-steps' is present but the "
                                "header's host-steps flag is not set");
  if (known[uint32_t(SectionKind::HostSteps)])
    if (Error err = parseHostSteps(reader(SectionKind::HostSteps), artifact))
      return err;

  const SectionEntry *data = known[uint32_t(SectionKind::WeightData)];
  if (data->offset % kWeightAlignment != 0)
    return makeError("section 'weight-data': offset {} is not a multiple of "
                     "{}",
                     data->offset, kWeightAlignment);
  artifact.weightData = image.slice(data->offset, data->size);

  if (Error err = verifyArtifact(artifact))
    return err;
  return artifact;
}

} // namespace

Expected<Artifact> parseArtifact(const Blob &image,
                                 std::string_view displayName,
                                 const ReadOptions &options) {
  Expected<Artifact> artifact = parseImage(image, options);
  // Names come from the file: escape what would break the one-line error.
  if (!artifact)
    return Error::failure(printable(artifact.error().message()))
        .withContext(displayName);
  return artifact;
}

Expected<Artifact> readArtifact(const std::string &path,
                                const ReadOptions &options) {
  Expected<Blob> image = mapFile(path);
  if (!image)
    return image.takeError();
  return parseArtifact(*image, path, options);
}

} // namespace kiln::runtime
