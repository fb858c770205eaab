//===- TrainingShard.cpp - ZeRO stage 1: the sharded update and its state -===//
//
// kilnc --shard-optimizer=N: train_update runs on one rank's shard of the
// flat state (S elements). Between the entry points this file moves the
// data: the gradient buckets are reduce-scattered into `grad.shard`, the
// shards' squared norms summed into `grad.sqnorm`, the rank's slice of
// `params` copied into `params.shard`, and after the update the shards
// all-gathered into `params`. Checkpoints hold the optimizer state whole:
// every rank gathers it, rank 0 writes it, and each rank takes its shard
// back on load. docs/runtime.md "ZeRO stage 1".
//
//===----------------------------------------------------------------------===//

#include "Support.h"

#include "kiln/runtime/Training.h"

#include <algorithm>
#include <cstring>

namespace kiln::runtime {

namespace {
constexpr std::string_view kTrainStep = "train_step";
constexpr std::string_view kTrainGradNorm = "train_grad_norm";
constexpr std::string_view kTrainUpdate = "train_update";

uint64_t elementsOf(const StateTensor &tensor) {
  return *tensorByteSize(tensor.dtype, tensor.shape) / dtypeSize(tensor.dtype);
}

float *floats(HostTensor &tensor) {
  return reinterpret_cast<float *>(tensor.data.data());
}

HostTensor zerosLike(const StateTensor &tensor) {
  HostTensor result;
  result.dtype = tensor.dtype;
  result.shape = tensor.shape;
  result.data.assign(*tensorByteSize(tensor.dtype, tensor.shape), 0);
  return result;
}
} // namespace

bool TrainingSession::shardsOptimizer() const {
  return artifact().shardOptimizer.shards != 0;
}

int TrainingSession::worldRank() const {
  return communicator ? communicator->rank() : 0;
}

int TrainingSession::worldSize() const {
  return communicator ? communicator->size() : 1;
}

Error TrainingSession::checkWorldSize() const {
  uint32_t shards = artifact().shardOptimizer.shards;
  if (shards == 0 || uint64_t(worldSize()) == shards)
    return Error::success();
  return makeError("the artifact shards the optimizer over {} ranks "
                   "(kilnc --shard-optimizer={}), but the job has {}: "
                   "recompile with --shard-optimizer={}",
                   shards, shards, worldSize(), worldSize());
}

uint64_t TrainingSession::shardElements() const {
  return elementsOf(artifact().state[artifact().shardOptimizer.gradShard]);
}

uint64_t TrainingSession::weightElements() const {
  const Artifact &a = artifact();
  for (const CollectiveStep &step : a.collectives)
    if (step.kind == CollectiveKind::AllGather)
      return elementsOf(a.state[step.state]);
  return 0;
}

Error TrainingSession::stepSharded() {
  if (Error err = checkWorldSize())
    return err;
  const Artifact &a = artifact();
  const ShardOptimizerConfig &config = a.shardOptimizer;
  const uint64_t shard = shardElements();
  const uint64_t ranks = config.shards;
  const uint64_t rank = worldRank();
  if (Error err = session->runEntryPoint(kTrainStep))
    return err;

  // Each bucket is the same columns [offset, offset + count) of every
  // rank's shard of the padded gradients: packed rank after rank, it is
  // what reduceScatterMean takes.
  HostTensor gradShard = zerosLike(a.state[config.gradShard]);
  std::map<uint32_t, HostTensor> full;
  auto fullState = [&](uint32_t index) -> Expected<HostTensor *> {
    auto it = full.find(index);
    if (it == full.end()) {
      Expected<HostTensor> value = session->readState(a.state[index].name);
      if (!value)
        return value.takeError();
      it = full.emplace(index, value.take()).first;
    }
    return &it->second;
  };
  std::vector<float> buffer;
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveStep &step = a.collectives[i];
    if (step.kind != CollectiveKind::ReduceScatterMean)
      continue;
    Expected<HostTensor *> grad = fullState(step.state);
    if (!grad)
      return grad.takeError();
    const float *source = floats(**grad);
    float *target = floats(gradShard) + step.elementOffset;
    buffer.resize(ranks * step.elementCount);
    for (uint64_t r = 0; r < ranks; ++r)
      std::memcpy(buffer.data() + r * step.elementCount,
                  source + r * shard + step.elementOffset,
                  step.elementCount * sizeof(float));
    if (ranks == 1) {
      std::memcpy(target, buffer.data(), step.elementCount * sizeof(float));
      continue;
    }
    // An unequal batch share (setBatchShare) weights this rank's part.
    if (batchWeight != 1)
      for (float &v : buffer)
        v = float(v * batchWeight);
    std::string what =
        fmt::format("gradient bucket {} ({} x {} elements of state '{}')", i,
                    ranks, step.elementCount, a.state[step.state].name);
    if (Error err = communicator->reduceScatterMean(buffer.data(), target,
                                                    step.elementCount, what))
      return err;
  }
  if (Error err = writeState(a.state[config.gradShard].name, gradShard))
    return err;

  // Clipping and loss scaling need the norm of the whole gradient: each
  // rank's part, summed in rank order in f32 (the same sum on every rank).
  if (config.squaredNorm != ShardOptimizerConfig::kNone) {
    if (Error err = session->runEntryPoint(kTrainGradNorm))
      return err;
    const std::string &name = a.state[config.squaredNorm].name;
    Expected<HostTensor> part = session->readState(name);
    if (!part)
      return part.takeError();
    std::vector<float> parts(ranks);
    std::memcpy(parts.data(), part->data.data(), sizeof(float));
    if (ranks > 1)
      if (Error err = communicator->allGather(
              part->data.data(), sizeof(float), parts.data(),
              "the shards' squared gradient norms"))
        return err;
    float sum = 0;
    for (float value : parts)
      sum += value;
    std::memcpy(part->data.data(), &sum, sizeof(float));
    if (Error err = writeState(name, *part))
      return err;
  }

  // This rank's slice of the weights, zeros past their end.
  uint32_t paramsIndex = 0;
  for (const CollectiveStep &step : a.collectives)
    if (step.kind == CollectiveKind::AllGather)
      paramsIndex = step.state;
  Expected<HostTensor *> params = fullState(paramsIndex);
  if (!params)
    return params.takeError();
  const uint64_t total = elementsOf(a.state[paramsIndex]);
  HostTensor paramsShard = zerosLike(a.state[config.paramsShard]);
  if (rank * shard < total)
    std::memcpy(floats(paramsShard), floats(**params) + rank * shard,
                std::min(shard, total - rank * shard) * sizeof(float));
  if (Error err = writeState(a.state[config.paramsShard].name, paramsShard))
    return err;

  if (Error err = session->runEntryPoint(kTrainUpdate))
    return err;

  // Every rank's updated shard back into the whole weights.
  Expected<HostTensor> updated =
      session->readState(a.state[config.paramsShard].name);
  if (!updated)
    return updated.takeError();
  float *weights = floats(**params);
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveStep &step = a.collectives[i];
    if (step.kind != CollectiveKind::AllGather)
      continue;
    const float *mine = floats(*updated) + step.elementOffset;
    buffer.resize(ranks * step.elementCount);
    if (ranks == 1)
      std::memcpy(buffer.data(), mine, step.elementCount * sizeof(float));
    else if (Error err = communicator->allGather(
                 mine, step.elementCount * sizeof(float), buffer.data(),
                 fmt::format("weight bucket {} ({} x {} elements of state "
                             "'{}')",
                             i, ranks, step.elementCount,
                             a.state[step.state].name)))
      return err;
    for (uint64_t r = 0; r < ranks; ++r) {
      uint64_t start = r * shard + step.elementOffset;
      if (start >= total)
        continue;
      std::memcpy(weights + start, buffer.data() + r * step.elementCount,
                  std::min(step.elementCount, total - start) * sizeof(float));
    }
  }
  return writeState(a.state[paramsIndex].name, **params);
}

bool TrainingSession::isTransientShardState(uint32_t index) const {
  const ShardOptimizerConfig &config = artifact().shardOptimizer;
  return config.shards != 0 &&
         (index == config.gradShard || index == config.paramsShard ||
          index == config.squaredNorm);
}

bool TrainingSession::isShardedState(uint32_t index) const {
  const std::vector<uint32_t> &sharded = artifact().shardOptimizer.sharded;
  return std::find(sharded.begin(), sharded.end(), index) != sharded.end();
}

Expected<HostTensor> TrainingSession::gatherShardedState(uint32_t index) {
  const StateTensor &tensor = artifact().state[index];
  Expected<HostTensor> mine = session->readState(tensor.name);
  if (!mine)
    return mine.takeError();
  const uint64_t shard = shardElements();
  const uint64_t total = weightElements();
  HostTensor whole;
  whole.dtype = DType::F32;
  whole.data.resize(artifact().shardOptimizer.shards * shard * sizeof(float));
  if (worldSize() == 1)
    std::memcpy(whole.data.data(), mine->data.data(), mine->data.size());
  else if (Error err = communicator->allGather(
               mine->data.data(), mine->data.size(), whole.data.data(),
               fmt::format("optimizer state '{}'", tensor.name)))
    return err;
  whole.data.resize(total * sizeof(float));
  whole.shape = {int64_t(total)};
  return whole;
}

Expected<HostTensor> TrainingSession::shardOfCheckpointTensor(
    uint32_t index, const HostTensor &whole, const std::string &path) {
  const StateTensor &tensor = artifact().state[index];
  const uint64_t shard = shardElements();
  const uint64_t total = weightElements();
  if (whole.dtype != DType::F32 || whole.shape != Shape{int64_t(total)})
    return makeError("{}: tensor '{}{}' is {} {}, the whole optimizer state "
                     "is f32 [{}]",
                     path, kStatePrefix, tensor.name, dtypeName(whole.dtype),
                     formatShape(whole.shape), total);
  HostTensor mine = zerosLike(tensor);
  uint64_t start = uint64_t(worldRank()) * shard;
  if (start < total)
    std::memcpy(mine.data.data(), whole.data.data() + start * sizeof(float),
                std::min(shard, total - start) * sizeof(float));
  return mine;
}

} // namespace kiln::runtime
