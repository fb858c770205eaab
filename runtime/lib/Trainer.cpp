//===- Trainer.cpp - Datasets, batches and validation for training --------===//
//
// The pieces of a training loop that kiln-train and kiln.Trainer share
// (kiln/runtime/Trainer.h).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Trainer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

namespace kiln::runtime {

Expected<BatchSignature> batchSignature(const TrainingSession &session,
                                        const std::string &model) {
  BatchSignature sig;
  std::vector<const TensorSignature *> train = session.entryInputs("train_step");
  std::vector<const TensorSignature *> eval = session.entryInputs("eval");
  for (const TensorSignature *input : train) {
    bool inEval = false;
    for (const TensorSignature *e : eval)
      inEval |= entryLocalName(e->name) == entryLocalName(input->name);
    (inEval ? sig.data : sig.labels) = input;
  }
  if (train.size() != 2 || !sig.data || !sig.labels)
    return Error::failure(model + ": a training loop needs a train_step with one "
                                  "data input and one labels input");
  sig.dataName = entryLocalName(sig.data->name);
  sig.labelsName = entryLocalName(sig.labels->name);
  if (sig.data->shape.empty() || sig.labels->shape.empty() ||
      sig.data->shape[0] != sig.labels->shape[0])
    return Error::failure(model + ": the data and labels inputs must share a "
                                  "leading batch dimension");
  sig.batch = static_cast<uint64_t>(sig.data->shape[0]);
  sig.minBatch = sig.batch;
  // kilnc --train --dim N=lo..hi with --labels y:N:...: both follow one
  // separable symbol on dim 0.
  auto batchSymbol = [&](const TensorSignature &t) -> std::optional<uint32_t> {
    for (const SymbolicAxis &axis : t.symbolicAxes)
      if (axis.dim == 0 && axis.factor == 1)
        return axis.symbol;
    return std::nullopt;
  };
  std::optional<uint32_t> symbol = batchSymbol(*sig.data);
  const std::vector<SymbolicDim> &dims = session.artifact().symbolicDims;
  if (symbol && batchSymbol(*sig.labels) == symbol && *symbol < dims.size() &&
      dims[*symbol].separable)
    sig.minBatch = static_cast<uint64_t>(dims[*symbol].min);
  std::vector<const TensorSignature *> outputs = session.entryOutputs("eval");
  if (outputs.size() == 1) {
    sig.evalOutput = outputs[0];
    sig.evalOutputName = entryLocalName(outputs[0]->name);
  }
  return sig;
}

namespace {

/// Checks a file against a batch input's dtype and per-sample shape.
Error checkAgainst(const std::string &path, const NpyArray &array,
                   const TensorSignature &input, const std::string &what) {
  Shape sample(input.shape.begin() + 1, input.shape.end());
  Shape given(array.shape.empty() ? array.shape.begin()
                                  : array.shape.begin() + 1,
              array.shape.end());
  if (array.dtype != input.dtype)
    return Error::failure(fmt::format("{}: {} are {}, the model's '{}' is {}",
                                      path, what, dtypeName(array.dtype),
                                      entryLocalName(input.name),
                                      dtypeName(input.dtype)));
  if (array.shape.empty() || given != sample)
    return Error::failure(fmt::format(
        "{}: {} have shape {}, the model's '{}' needs N x {} (batch {})", path,
        what, formatShape(array.shape), entryLocalName(input.name),
        formatShape(sample), input.shape[0]));
  return Error::success();
}

Error checkFinite(const std::string &path, const NpyArray &array) {
  if (array.dtype != DType::F32 && array.dtype != DType::F64)
    return Error::success();
  uint64_t count = array.data.size() / dtypeSize(array.dtype);
  for (uint64_t i = 0; i < count; ++i) {
    double v;
    if (array.dtype == DType::F32) {
      float f;
      std::memcpy(&f, array.data.data() + i * 4, 4);
      v = f;
    } else {
      std::memcpy(&v, array.data.data() + i * 8, 8);
    }
    if (!std::isfinite(v))
      return Error::failure(fmt::format(
          "{}: element {} (sample {}) is {}: the data must be finite", path,
          i, i / (count / array.shape[0]), v));
  }
  return Error::success();
}

/// Integer class labels must index the eval output's classes.
Error checkLabelRange(const std::string &path, const NpyArray &labels,
                      const BatchSignature &sig) {
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    return Error::success();
  int64_t classes = -1;
  if (sig.evalOutput && sig.evalOutput->shape.size() == 2)
    classes = sig.evalOutput->shape[1];
  uint64_t count = labels.data.size() / dtypeSize(labels.dtype);
  for (uint64_t i = 0; i < count; ++i) {
    int64_t v;
    if (labels.dtype == DType::I64) {
      std::memcpy(&v, labels.data.data() + i * 8, 8);
    } else {
      int32_t w;
      std::memcpy(&w, labels.data.data() + i * 4, 4);
      v = w;
    }
    if (v < 0 || (classes >= 0 && v >= classes))
      return Error::failure(fmt::format(
          "{}: label {} at index {} is out of range (the model has {} "
          "classes: 0 to {})",
          path, v, i, classes, classes - 1));
  }
  return Error::success();
}

} // namespace

Error checkDataset(Dataset &set, const BatchSignature &sig,
                   const std::string &dataPath,
                   const std::string &labelsPath) {
  if (Error err = checkAgainst(dataPath, set.data, *sig.data, "the inputs"))
    return err;
  if (Error err =
          checkAgainst(labelsPath, set.labels, *sig.labels, "the labels"))
    return err;
  if (set.data.shape[0] != set.labels.shape[0])
    return Error::failure(fmt::format("{}: {} labels for {} samples in {}",
                                      labelsPath, set.labels.shape[0],
                                      set.data.shape[0], dataPath));
  if (Error err = checkFinite(dataPath, set.data))
    return err;
  if (Error err = checkFinite(labelsPath, set.labels))
    return err;
  if (Error err = checkLabelRange(labelsPath, set.labels, sig))
    return err;
  set.count = static_cast<uint64_t>(set.data.shape[0]);
  return Error::success();
}

HostTensor gatherSamples(const NpyArray &array,
                         const std::vector<uint64_t> &indices,
                         const TensorSignature &input) {
  HostTensor tensor;
  tensor.dtype = input.dtype;
  tensor.shape = input.shape;
  tensor.shape[0] =
      static_cast<int64_t>(indices.size()); // a smaller last batch
  uint64_t sampleBytes = array.data.size() / array.shape[0];
  tensor.data.resize(sampleBytes * indices.size());
  for (size_t i = 0; i < indices.size(); ++i)
    std::memcpy(tensor.data.data() + i * sampleBytes,
                array.data.data() + indices[i] * sampleBytes, sampleBytes);
  return tensor;
}

BatchShare lastShare(uint64_t samples, uint64_t rank, uint64_t ranks) {
  uint64_t base = samples / ranks, extra = samples % ranks;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::vector<uint64_t> epochOrder(uint64_t count, uint64_t seed,
                                 uint64_t epoch) {
  std::vector<uint64_t> order(count);
  for (uint64_t i = 0; i < count; ++i)
    order[i] = i;
  std::mt19937_64 rng(seed * 1000003ULL + epoch);
  for (uint64_t i = count; i > 1; --i) {
    uint64_t j = rng() % i;
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

Expected<Metric> validate(TrainingSession &session, const Dataset &val,
                          const BatchSignature &sig) {
  if (!sig.evalOutput)
    return Error::failure("eval has more than one output: no validation "
                          "metric");
  const TensorSignature &out = *sig.evalOutput;
  bool classify = (val.labels.dtype == DType::I64 ||
                   val.labels.dtype == DType::I32) &&
                  out.shape.size() == 2 && out.dtype == DType::F32;
  uint64_t correct = 0;
  double squared = 0;
  uint64_t seen = 0;
  for (uint64_t start = 0; start < val.count; start += sig.batch) {
    std::vector<uint64_t> indices;
    for (uint64_t i = 0; i < sig.batch; ++i)
      indices.push_back(std::min(start + i, val.count - 1)); // pad the last
    if (Error err = session.bindBatch(sig.dataName,
                                      gatherSamples(val.data, indices, *sig.data)))
      return err;
    if (Error err = session.evaluate())
      return err;
    Expected<HostTensor> y = session.readEvalOutput(sig.evalOutputName);
    if (!y)
      return y.takeError();
    const float *values = reinterpret_cast<const float *>(y->data.data());
    uint64_t valid = std::min(sig.batch, val.count - start);
    for (uint64_t i = 0; i < valid; ++i) {
      uint64_t sample = start + i;
      if (classify) {
        int64_t classes = out.shape[1];
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c)
          if (values[i * classes + c] > values[i * classes + best])
            best = c;
        int64_t label;
        if (val.labels.dtype == DType::I64) {
          std::memcpy(&label, val.labels.data.data() + sample * 8, 8);
        } else {
          int32_t w;
          std::memcpy(&w, val.labels.data.data() + sample * 4, 4);
          label = w;
        }
        correct += best == label;
      } else if (val.labels.dtype == DType::F32 &&
                 y->data.size() == val.labels.data.size() / val.count *
                                       sig.batch) {
        uint64_t per = y->data.size() / 4 / sig.batch;
        const float *labels =
            reinterpret_cast<const float *>(val.labels.data.data());
        for (uint64_t k = 0; k < per; ++k) {
          double d = values[i * per + k] - labels[sample * per + k];
          squared += d * d;
        }
        seen += per;
      }
    }
  }
  if (classify)
    return Metric{"val_accuracy", double(correct) / double(val.count)};
  return Metric{"val_mse", seen ? squared / double(seen) : 0};
}

} // namespace kiln::runtime
