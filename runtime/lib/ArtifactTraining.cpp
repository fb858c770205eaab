//===- ArtifactTraining.cpp - Entry points and persistent state -----------===//
//
// Format 1.3's `training` section: the rules verifyArtifact checks for it,
// and combineEntryPoints, which joins the single-function artifacts the
// compiler builds for train_step and eval into one.
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Checksum.h"
#include "kiln/runtime/Training.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace kiln::runtime {

const EntryPoint *Artifact::findEntryPoint(std::string_view name) const {
  for (const EntryPoint &entry : entryPoints)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

const StateTensor *Artifact::findState(std::string_view name) const {
  for (const StateTensor &tensor : state)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

Error verifyTraining(const Artifact &artifact) {
  if (artifact.entryPoints.empty()) {
    if (!artifact.state.empty())
      return makeError("section 'training': {} state tensors but no entry "
                       "points",
                       artifact.state.size());
    return Error::success();
  }
  size_t launches = artifact.launches.size();
  std::vector<int> owner(launches, -1);
  std::set<std::string> names;
  for (size_t e = 0; e < artifact.entryPoints.size(); ++e) {
    const EntryPoint &entry = artifact.entryPoints[e];
    std::string where = fmt::format("section 'training': entry point '{}'",
                                    entry.name);
    if (entry.name.empty() || !names.insert(entry.name).second)
      return makeError("section 'training': entry point {}: the name is "
                       "empty or repeated",
                       e);
    if (!rangeFits(entry.firstLaunch, entry.launchCount, launches))
      return makeError("{}: launches [{}, {}) lie outside the launch list "
                       "({} launches)",
                       where, entry.firstLaunch,
                       uint64_t(entry.firstLaunch) + entry.launchCount,
                       launches);
    for (uint32_t l = entry.firstLaunch;
         l < entry.firstLaunch + entry.launchCount; ++l) {
      if (owner[l] >= 0)
        return makeError("{}: launch {} also belongs to entry point '{}'",
                         where, l, artifact.entryPoints[owner[l]].name);
      owner[l] = static_cast<int>(e);
    }
    for (uint32_t i : entry.inputs)
      if (i >= artifact.inputs.size())
        return makeError("{}: input index {} is out of range ({} inputs)",
                         where, i, artifact.inputs.size());
    for (uint32_t o : entry.outputs)
      if (o >= artifact.outputs.size())
        return makeError("{}: output index {} is out of range ({} outputs)",
                         where, o, artifact.outputs.size());
    for (const StateUpdate &update : entry.updates) {
      if (update.output >= artifact.outputs.size() ||
          update.state >= artifact.state.size())
        return makeError("{}: a state update refers to output {} and state "
                         "{}, out of range",
                         where, update.output, update.state);
      const TensorSignature &from = artifact.outputs[update.output];
      const StateTensor &to = artifact.state[update.state];
      if (from.dtype != to.dtype || from.shape != to.shape)
        return makeError("{}: output '{}' ({} {}) cannot replace state '{}' "
                         "({} {})",
                         where, from.name, dtypeName(from.dtype),
                         formatShape(from.shape), to.name, dtypeName(to.dtype),
                         formatShape(to.shape));
    }
  }
  for (size_t l = 0; l < launches; ++l)
    if (owner[l] < 0)
      return makeError("section 'training': launch {} belongs to no entry "
                       "point",
                       l);

  std::set<std::string> stateNames;
  for (const StateTensor &tensor : artifact.state) {
    std::string where =
        fmt::format("section 'training': state '{}'", tensor.name);
    if (tensor.name.empty() || !stateNames.insert(tensor.name).second)
      return makeError("{}: the name is empty or repeated", where);
    std::optional<uint64_t> bytes = tensorByteSize(tensor.dtype, tensor.shape);
    if (!bytes)
      return makeError("{}: the shape overflows", where);
    if (tensor.buffer >= artifact.memoryPlan.buffers.size())
      return makeError("{}: buffer {} is out of range", where, tensor.buffer);
    const ArenaBuffer &buffer = artifact.memoryPlan.buffers[tensor.buffer];
    if (tensor.arenaOffset < buffer.offset ||
        !rangeFits(tensor.arenaOffset - buffer.offset, *bytes, buffer.size))
      return makeError("{}: {} bytes at arena offset {} lie outside buffer {}",
                       where, *bytes, tensor.arenaOffset, tensor.buffer);
    if (buffer.firstUse != 0 || buffer.lastUse + 1 != std::max<size_t>(launches, 1))
      return makeError("{}: buffer {} is live for launches [{}, {}], not the "
                       "whole launch list: other buffers could reuse its bytes",
                       where, tensor.buffer, buffer.firstUse, buffer.lastUse);
    if (!tensor.initial.empty() && tensor.initial.size() != *bytes)
      return makeError("{}: the initial value has {} bytes, the tensor {}",
                       where, tensor.initial.size(), *bytes);
    uint64_t elements = *bytes / std::max<uint64_t>(dtypeSize(tensor.dtype), 1);
    for (const StateSegment &segment : tensor.segments) {
      std::optional<uint64_t> count = uint64_t(1);
      for (int64_t dim : segment.shape)
        count = dim < 0 || !count ? std::nullopt : checkedMul(*count, dim);
      if (!count || segment.elementOffset > elements ||
          *count > elements - segment.elementOffset)
        return makeError("{}: segment '{}' ({} at element {}) lies outside "
                         "the tensor ({} elements)",
                         where, segment.name, formatShape(segment.shape),
                         segment.elementOffset, elements);
    }
  }
  return Error::success();
}

std::string_view collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduceMean:
    return "all-reduce-mean";
  case CollectiveKind::AllReduceMeanBf16:
    return "all-reduce-mean-bf16";
  case CollectiveKind::AllReduceMeanF16:
    return "all-reduce-mean-f16";
  case CollectiveKind::AllReducePowerSgd:
    return "all-reduce-powersgd";
  case CollectiveKind::ReduceScatterMean:
    return "reduce-scatter-mean";
  case CollectiveKind::AllGather:
    return "all-gather";
  }
  return "unknown";
}

namespace {
/// Section `powersgd` (1.7) against the collective steps: present exactly
/// when a step is all-reduce-powersgd; each matrix inside its step's range,
/// ordered by step and offset, none overlapping the next.
Error verifyPowerSgd(const Artifact &artifact) {
  const PowerSgdConfig &config = artifact.powerSgd;
  bool anyStep = false;
  for (const CollectiveStep &step : artifact.collectives)
    anyStep |= step.kind == CollectiveKind::AllReducePowerSgd;
  if (!anyStep && config.rank == 0 && config.matrices.empty())
    return Error::success();
  if (anyStep != (config.rank != 0))
    return makeError(anyStep ? "section 'collectives': an all-reduce-powersgd "
                               "step but no 'powersgd' section (or rank 0)"
                             : "section 'powersgd' is present but no "
                               "collective step is all-reduce-powersgd");
  for (size_t i = 0; i < config.matrices.size(); ++i) {
    const PowerSgdMatrix &matrix = config.matrices[i];
    std::string where = fmt::format("section 'powersgd': matrix {}", i);
    if (matrix.step >= artifact.collectives.size() ||
        artifact.collectives[matrix.step].kind !=
            CollectiveKind::AllReducePowerSgd)
      return makeError("{}: collective step {} is not an all-reduce-powersgd "
                       "step",
                       where, matrix.step);
    const CollectiveStep &step = artifact.collectives[matrix.step];
    std::optional<uint64_t> elements =
        matrix.rows == 0 || matrix.cols == 0
            ? std::nullopt
            : checkedMul(matrix.rows, matrix.cols);
    if (!elements || matrix.elementOffset < step.elementOffset ||
        matrix.elementOffset - step.elementOffset > step.elementCount ||
        *elements >
            step.elementCount - (matrix.elementOffset - step.elementOffset))
      return makeError("{}: {} x {} at element {} lies outside step {}'s "
                       "elements [{}, {})",
                       where, matrix.rows, matrix.cols, matrix.elementOffset,
                       matrix.step, step.elementOffset,
                       step.elementOffset + step.elementCount);
    if (i > 0) {
      const PowerSgdMatrix &previous = config.matrices[i - 1];
      if (previous.step > matrix.step ||
          (previous.step == matrix.step &&
           previous.elementOffset + previous.rows * previous.cols >
               matrix.elementOffset))
        return makeError("{}: not after matrix {} (matrices are ordered by "
                         "step and offset and do not overlap)",
                         where, i - 1);
    }
  }
  return Error::success();
}
/// The elements of an f32 state tensor.
uint64_t stateElements(const StateTensor &tensor) {
  return *tensorByteSize(tensor.dtype, tensor.shape) / dtypeSize(tensor.dtype);
}

/// Section `shard-optimizer` (1.8) against the state and the collective
/// steps: present exactly when a step is reduce-scatter-mean or all-gather;
/// its shard states f32 vectors of one length S; the steps' ranges inside
/// [0, S); the gradients exactly N x S elements and the weights more than
/// (N - 1) x S and at most N x S.
Error verifyShardOptimizer(const Artifact &artifact) {
  const ShardOptimizerConfig &config = artifact.shardOptimizer;
  bool anyStep = false;
  for (const CollectiveStep &step : artifact.collectives)
    anyStep |= step.kind == CollectiveKind::ReduceScatterMean ||
               step.kind == CollectiveKind::AllGather;
  if (!anyStep && config.shards == 0)
    return Error::success();
  if (anyStep != (config.shards != 0))
    return makeError(anyStep ? "section 'collectives': a reduce-scatter-mean "
                               "or all-gather step but no 'shard-optimizer' "
                               "section (or 0 shards)"
                             : "section 'shard-optimizer' is present but no "
                               "collective step is reduce-scatter-mean or "
                               "all-gather");
  const std::string where = "section 'shard-optimizer'";
  auto shardState = [&](uint32_t index,
                        std::string_view what) -> Expected<uint64_t> {
    if (index >= artifact.state.size())
      return makeError("{}: {} state index {} is out of range ({} state "
                       "tensors)",
                       where, what, index, artifact.state.size());
    const StateTensor &tensor = artifact.state[index];
    if (tensor.dtype != DType::F32 || tensor.shape.size() != 1)
      return makeError("{}: {} state '{}' is {} {}, not an f32 vector", where,
                       what, tensor.name, dtypeName(tensor.dtype),
                       formatShape(tensor.shape));
    return stateElements(tensor);
  };
  Expected<uint64_t> shard = shardState(config.gradShard, "the gradient");
  if (!shard)
    return shard.takeError();
  for (uint32_t index : config.sharded) {
    if (index == config.gradShard || index == config.paramsShard)
      return makeError("{}: a shard of the gradients or weights is listed as "
                       "optimizer state",
                       where);
    Expected<uint64_t> elements = shardState(index, "a sharded");
    if (!elements)
      return elements.takeError();
    if (*elements != *shard)
      return makeError("{}: sharded state '{}' has {} elements, the "
                       "gradient shard {}",
                       where, artifact.state[index].name, *elements, *shard);
  }
  Expected<uint64_t> params = shardState(config.paramsShard, "the weights'");
  if (!params)
    return params.takeError();
  if (config.shards == 0 || *shard == 0 || *params != *shard)
    return makeError("{}: {} shards of {} elements (weights' shard {})", where,
                     config.shards, *shard, *params);
  if (config.squaredNorm != ShardOptimizerConfig::kNone) {
    if (config.squaredNorm >= artifact.state.size() ||
        artifact.state[config.squaredNorm].dtype != DType::F32 ||
        !artifact.state[config.squaredNorm].shape.empty())
      return makeError("{}: the squared-norm state {} is not an f32 scalar",
                       where, config.squaredNorm);
    if (!artifact.findEntryPoint("train_grad_norm"))
      return makeError("{}: a squared-norm state but no train_grad_norm "
                       "entry point",
                       where);
  }
  uint64_t padded = uint64_t(config.shards) * *shard;
  for (size_t i = 0; i < artifact.collectives.size(); ++i) {
    const CollectiveStep &step = artifact.collectives[i];
    if (step.kind != CollectiveKind::ReduceScatterMean &&
        step.kind != CollectiveKind::AllGather)
      return makeError("section 'collectives': step {} is {}, which does not "
                       "combine with ZeRO's reduce-scatter-mean and "
                       "all-gather steps",
                       i, collectiveKindName(step.kind));
    uint64_t elements = stateElements(artifact.state[step.state]);
    bool gather = step.kind == CollectiveKind::AllGather;
    if (gather ? elements <= padded - *shard || elements > padded
               : elements != padded)
      return makeError("section 'collectives': step {} ({}): state '{}' has "
                       "{} elements, not {} shards of {}{}",
                       i, collectiveKindName(step.kind),
                       artifact.state[step.state].name, elements, config.shards,
                       *shard, gather ? " (the last one short)" : "");
    if (step.elementOffset >= *shard ||
        step.elementCount > *shard - step.elementOffset)
      return makeError("section 'collectives': step {} ({}): elements [{}, "
                       "{}) lie outside the shard ({} elements)",
                       i, collectiveKindName(step.kind), step.elementOffset,
                       step.elementOffset + step.elementCount, *shard);
  }
  return Error::success();
}
} // namespace

Error verifyCollectives(const Artifact &artifact) {
  for (size_t i = 0; i < artifact.collectives.size(); ++i) {
    const CollectiveStep &step = artifact.collectives[i];
    std::string where = fmt::format("section 'collectives': step {}", i);
    if (step.kind != CollectiveKind::AllReduceMean &&
        step.kind != CollectiveKind::AllReduceMeanBf16 &&
        step.kind != CollectiveKind::AllReduceMeanF16 &&
        step.kind != CollectiveKind::AllReducePowerSgd &&
        step.kind != CollectiveKind::ReduceScatterMean &&
        step.kind != CollectiveKind::AllGather)
      return makeError("{}: unknown collective kind {}", where,
                       uint32_t(step.kind));
    if (artifact.entryPoints.empty())
      return makeError("{}: the artifact has no entry points", where);
    if (step.state >= artifact.state.size())
      return makeError("{}: state index {} is out of range ({} state "
                       "tensors)",
                       where, step.state, artifact.state.size());
    const StateTensor &tensor = artifact.state[step.state];
    if (tensor.dtype != DType::F32)
      return makeError("{}: state '{}' is {}, collectives reduce f32", where,
                       tensor.name, dtypeName(tensor.dtype));
    uint64_t elements = *tensorByteSize(tensor.dtype, tensor.shape) / 4;
    if (step.elementCount == 0 || step.elementOffset > elements ||
        step.elementCount > elements - step.elementOffset)
      return makeError("{}: elements [{}, {}) lie outside state '{}' ({} "
                       "elements)",
                       where, step.elementOffset,
                       step.elementOffset + step.elementCount, tensor.name,
                       elements);
    if (step.afterLaunch >= artifact.launches.size())
      return makeError("{}: launch {} is out of range ({} launches)", where,
                       step.afterLaunch, artifact.launches.size());
  }
  if (Error err = verifyPowerSgd(artifact))
    return err;
  return verifyShardOptimizer(artifact);
}

std::string stateFingerprint(const Artifact &artifact) {
  std::string text;
  for (const StateTensor &tensor : artifact.state) {
    text += fmt::format("{} {} {};", tensor.name, dtypeName(tensor.dtype),
                        formatShape(tensor.shape));
    for (const StateSegment &segment : tensor.segments)
      text += fmt::format("{}@{}:{};", segment.name, segment.elementOffset,
                          formatShape(segment.shape));
  }
  return fmt::format("{:08x}-{}", crc32c(text.data(), text.size()),
                     artifact.state.size());
}

namespace {

/// Adds `part`'s symbolic dims to `result`'s (both from the module's
/// kiln.dim_ranges, so the same names in the same order). A part that
/// cannot pad a symbol makes it non-separable for the artifact, with the
/// part's reason. Launch scaling is not joined: an entry point runs its
/// compiled grids (Session::runEntryPoint).
Error joinSymbolicDims(Artifact &result, const Artifact &part,
                       const std::string &name) {
  if (part.symbolicDims.empty())
    return Error::success();
  if (result.symbolicDims.empty()) {
    result.symbolicDims = part.symbolicDims;
    for (SymbolicDim &dim : result.symbolicDims)
      if (!dim.separable)
        dim.reason = name + ": " + dim.reason;
    return Error::success();
  }
  if (result.symbolicDims.size() != part.symbolicDims.size())
    return makeError("combineEntryPoints: '{}' has {} symbolic dims, the "
                     "others {}",
                     name, part.symbolicDims.size(),
                     result.symbolicDims.size());
  for (size_t s = 0; s < part.symbolicDims.size(); ++s) {
    SymbolicDim &have = result.symbolicDims[s];
    const SymbolicDim &dim = part.symbolicDims[s];
    if (have.name != dim.name || have.min != dim.min || have.max != dim.max)
      return makeError("combineEntryPoints: '{}' has symbol '{}' {}..{} "
                       "where the others have '{}' {}..{}",
                       name, dim.name, dim.min, dim.max, have.name, have.min,
                       have.max);
    if (have.separable && !dim.separable) {
      have.separable = false;
      have.reason = name + ": " + dim.reason;
    }
  }
  return Error::success();
}

} // namespace

Expected<Artifact> combineEntryPoints(std::vector<EntryPointArtifact> parts,
                                      const std::vector<StateSpec> &specs) {
  if (parts.empty())
    return makeError("combineEntryPoints: no entry points");
  Artifact result;
  const Artifact &first = parts.front().artifact;
  result.compilerVersion = first.compilerVersion;
  result.compilerOptions = first.compilerOptions;
  result.target = first.target;

  // Where each state lives: the first part that reads it.
  struct Placed {
    uint64_t arenaOffset;
    uint32_t buffer;
    const TensorSignature *signature;
  };
  std::map<std::string, Placed> placed;
  // A state no part reads (ZeRO's `grad`, which only the runtime reads)
  // gets a buffer of its own after the parts' arenas; the first part that
  // writes it (output `signature`) copies it there, as for any state.
  std::map<std::string, const TensorSignature *> written;
  std::map<std::string, uint32_t> stateIndex;
  for (size_t s = 0; s < specs.size(); ++s)
    stateIndex[specs[s].name] = static_cast<uint32_t>(s);
  auto stateOf = [](const std::string &name, bool next) -> std::string {
    if (name.compare(0, kStatePrefix.size(), kStatePrefix) != 0)
      return "";
    std::string rest = name.substr(kStatePrefix.size());
    bool hasNext = rest.size() > kNextSuffix.size() &&
                   rest.compare(rest.size() - kNextSuffix.size(),
                                kNextSuffix.size(), kNextSuffix) == 0;
    if (hasNext != next)
      return "";
    return next ? rest.substr(0, rest.size() - kNextSuffix.size()) : rest;
  };

  uint64_t arenaBase = 0;
  uint32_t launchBase = 0;
  std::set<std::string> kernelNames;
  for (EntryPointArtifact &part : parts) {
    const Artifact &a = part.artifact;
    if (!a.entryPoints.empty())
      return makeError("combineEntryPoints: '{}' already has entry points",
                       part.name);
    if (a.strippedWeightBytes != 0)
      return makeError("combineEntryPoints: '{}' has stripped weights",
                       part.name);
    if (a.target != result.target)
      return makeError("combineEntryPoints: '{}' targets {}, not {}",
                       part.name, a.target, result.target);
    std::optional<uint64_t> aligned = alignUp(arenaBase, kArenaAlignment);
    if (!aligned)
      return makeError("combineEntryPoints: the arena overflows");
    arenaBase = *aligned;
    uint64_t weightBase =
        result.weightData.append(a.weightData.data(), a.weightData.size(),
                                 kWeightAlignment);
    uint32_t kernelBase = static_cast<uint32_t>(result.kernels.size());
    // Tensor maps are recipes (the address comes from the launch): copied
    // as they are, renumbered.
    uint64_t tensorMapBase = result.tensorMaps.size();
    result.tensorMaps.insert(result.tensorMaps.end(), a.tensorMaps.begin(),
                             a.tensorMaps.end());
    uint32_t bufferBase =
        static_cast<uint32_t>(result.memoryPlan.buffers.size());

    for (const Weight &weight : a.weights) {
      Weight copy = weight;
      copy.offset += weightBase;
      for (const Weight &known : result.weights)
        if (known.name == copy.name)
          copy.name = part.name + ":" + copy.name;
      result.weights.push_back(std::move(copy));
    }
    for (const InlinedInitializer &inlined : a.inlinedInitializers) {
      bool known = false;
      for (const InlinedInitializer &have : result.inlinedInitializers)
        known |= have.name == inlined.name;
      if (!known)
        result.inlinedInitializers.push_back(inlined);
    }
    for (const Kernel &kernel : a.kernels) {
      if (!kernelNames.insert(kernel.name).second)
        return makeError("combineEntryPoints: kernel '{}' of '{}' has the "
                         "name of another entry point's kernel",
                         kernel.name, part.name);
      result.kernels.push_back(kernel);
    }
    for (const ArenaBuffer &buffer : a.memoryPlan.buffers) {
      ArenaBuffer copy = buffer;
      copy.offset += arenaBase;
      copy.firstUse += launchBase;
      copy.lastUse += launchBase;
      copy.name = part.name + ":" + copy.name;
      result.memoryPlan.buffers.push_back(std::move(copy));
    }
    for (uint32_t zeroed : a.zeroedBuffers)
      result.zeroedBuffers.push_back(zeroed + bufferBase);

    // Arena arguments that point at a state input go to the state's home.
    std::map<uint64_t, uint64_t> retarget;
    EntryPoint entry;
    entry.name = part.name;
    entry.firstLaunch = launchBase;
    entry.launchCount = static_cast<uint32_t>(a.launches.size());
    // kilnc --train --dim: each part's symbols are the module's, in its
    // order; a symbol is separable when every part that has it pads it.
    if (Error err = joinSymbolicDims(result, a, part.name))
      return err;
    // The part's input index -> the combined one (states have none).
    std::vector<std::optional<uint32_t>> inputIndex(a.inputs.size());
    for (const TensorSignature &input : a.inputs) {
      std::string state = stateOf(input.name, false);
      if (!state.empty()) {
        if (!stateIndex.count(state))
          return makeError("combineEntryPoints: '{}' reads state '{}', which "
                           "has no specification",
                           part.name, state);
        auto [it, isNew] = placed.insert(
            {state,
             {input.arenaOffset + arenaBase, input.buffer + bufferBase, &input}});
        if (!isNew) {
          const TensorSignature &home = *it->second.signature;
          if (home.dtype != input.dtype || home.shape != input.shape)
            return makeError("combineEntryPoints: state '{}' is {} {} in one "
                             "entry point and {} {} in '{}'",
                             state, dtypeName(home.dtype),
                             formatShape(home.shape), dtypeName(input.dtype),
                             formatShape(input.shape), part.name);
          retarget[input.arenaOffset] = it->second.arenaOffset;
        }
        continue;
      }
      TensorSignature copy = input;
      copy.name = part.name + ":" + input.name;
      copy.arenaOffset += arenaBase;
      copy.buffer += bufferBase;
      inputIndex[&input - a.inputs.data()] =
          static_cast<uint32_t>(result.inputs.size());
      entry.inputs.push_back(static_cast<uint32_t>(result.inputs.size()));
      result.inputs.push_back(std::move(copy));
    }
    for (const SizeMask &mask : a.sizeMasks) {
      if (mask.input >= inputIndex.size() || !inputIndex[mask.input])
        return makeError("combineEntryPoints: '{}' has a size mask on input "
                         "{}, which is not a batch input",
                         part.name, mask.input);
      SizeMask copy = mask;
      copy.input = *inputIndex[mask.input];
      result.sizeMasks.push_back(copy);
    }
    std::vector<std::pair<uint32_t, std::string>> updates;
    for (const TensorSignature &output : a.outputs) {
      TensorSignature copy = output;
      copy.name = part.name + ":" + output.name;
      copy.arenaOffset += arenaBase;
      copy.buffer += bufferBase;
      uint32_t index = static_cast<uint32_t>(result.outputs.size());
      std::string state = stateOf(output.name, true);
      if (!state.empty())
        updates.push_back({index, state});
      else
        entry.outputs.push_back(index);
      result.outputs.push_back(std::move(copy));
    }
    for (auto &[output, state] : updates) {
      if (!stateIndex.count(state))
        return makeError("combineEntryPoints: '{}' writes state '{}', which "
                         "has no specification",
                         part.name, state);
      entry.updates.push_back({output, stateIndex[state]});
      // The part's own signature: result.outputs may still reallocate.
      for (const TensorSignature &own : a.outputs)
        if (stateOf(own.name, true) == state)
          written.insert({state, &own});
    }

    for (const Launch &launch : a.launches) {
      Launch copy = launch;
      copy.kernel += kernelBase;
      const Kernel &kernel = a.kernels[launch.kernel];
      for (size_t i = 0; i < copy.args.size(); ++i) {
        if (kernel.params[i].kind == ParamKind::ArenaPointer) {
          auto it = retarget.find(copy.args[i]);
          copy.args[i] =
              it != retarget.end() ? it->second : copy.args[i] + arenaBase;
        } else if (kernel.params[i].kind == ParamKind::WeightsPointer) {
          copy.args[i] += weightBase;
        } else if (kernel.params[i].kind == ParamKind::TensorMap) {
          copy.args[i] += tensorMapBase;
        }
      }
      result.launches.push_back(std::move(copy));
    }
    result.entryPoints.push_back(std::move(entry));
    launchBase += static_cast<uint32_t>(a.launches.size());
    arenaBase += a.memoryPlan.arenaSize;
  }
  result.memoryPlan.arenaSize = arenaBase;

  uint32_t lastLaunch = launchBase == 0 ? 0 : launchBase - 1;
  // Each part's arena lies apart from the others', so its zeroed buffers
  // (live for its whole launch list) may span the combined one.
  for (uint32_t zeroed : result.zeroedBuffers) {
    ArenaBuffer &buffer = result.memoryPlan.buffers[zeroed];
    buffer.firstUse = 0;
    buffer.lastUse = lastLaunch;
  }
  for (const StateSpec &spec : specs) {
    auto it = placed.find(spec.name);
    if (it == placed.end()) {
      auto w = written.find(spec.name);
      if (w == written.end())
        return makeError("combineEntryPoints: no entry point reads or "
                         "writes state '{}'",
                         spec.name);
      std::optional<uint64_t> offset =
          alignUp(result.memoryPlan.arenaSize, kArenaAlignment);
      std::optional<uint64_t> bytes =
          tensorByteSize(w->second->dtype, w->second->shape);
      if (!offset || !bytes)
        return makeError("combineEntryPoints: the arena overflows");
      ArenaBuffer home;
      home.name = "state:" + spec.name;
      home.offset = *offset;
      home.size = *bytes;
      result.memoryPlan.buffers.push_back(home);
      result.memoryPlan.arenaSize = *offset + *bytes;
      it =
          placed
              .insert({spec.name,
                       {*offset, uint32_t(result.memoryPlan.buffers.size() - 1),
                        w->second}})
              .first;
    }
    StateTensor tensor;
    tensor.name = spec.name;
    tensor.dtype = it->second.signature->dtype;
    tensor.shape = it->second.signature->shape;
    tensor.arenaOffset = it->second.arenaOffset;
    tensor.buffer = it->second.buffer;
    tensor.initial = spec.initial;
    tensor.segments = spec.segments;
    ArenaBuffer &buffer = result.memoryPlan.buffers[tensor.buffer];
    buffer.firstUse = 0;
    buffer.lastUse = lastLaunch;
    result.state.push_back(std::move(tensor));
  }
  if (Error err = verifyArtifact(result))
    return err.withContext("combineEntryPoints");
  return result;
}

} // namespace kiln::runtime
