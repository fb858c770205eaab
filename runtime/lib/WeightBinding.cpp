//===- WeightBinding.cpp - Strip an artifact's weights, bind new ones -----===//
//
// Each weight that came from an ONNX initializer carries its origin: the
// initializer and the compile-time steps that turned it into the weight
// (docs/artifact-format.md, "Weight origins"). stripWeights leaves those
// weights' bytes out of an artifact; bindWeights rebuilds them from new
// initializer values by replaying the steps, so one compiled artifact runs
// with any weights of the same shapes (the weights stay out of the
// compiler's output, and can be swapped without recompiling).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Artifact.h"

#include "FloatConversion.h"
#include "Support.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <numeric>

namespace kiln::runtime {
namespace {

/// A dense tensor in C order.
struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;
};

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos)
      return parts;
    start = end + 1;
  }
}

/// "0,2,3,1" (separator ',') or "64x3x7x7" (separator 'x'); an empty text
/// or "scalar" is the empty list.
Expected<std::vector<int64_t>> parseList(std::string_view text,
                                         char separator) {
  std::vector<int64_t> values;
  if (text.empty() || text == "scalar")
    return values;
  for (std::string_view part : split(text, separator)) {
    int64_t value = 0;
    auto [end, ec] =
        std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || end != part.data() + part.size() || value < 0)
      return makeError("'{}' is not a list of non-negative integers", text);
    values.push_back(value);
  }
  return values;
}

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

int64_t elementCount(const Shape &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<>());
}

/// Calls `copy(target, source)` for every element of `shape` in C order, with
/// `source(coords)` the element to read (-1: none, the padding).
template <typename SourceFn, typename CopyFn>
void forEachElement(const Shape &shape, SourceFn source, CopyFn copy) {
  std::vector<int64_t> coords(shape.size(), 0);
  int64_t count = elementCount(shape);
  for (int64_t target = 0; target < count; ++target) {
    copy(target, source(coords));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coords[d] < shape[d])
        break;
      coords[d] = 0;
    }
  }
}

Error transpose(Tensor &t, const std::vector<int64_t> &perm) {
  size_t rank = t.shape.size();
  std::vector<bool> used(rank, false);
  for (int64_t p : perm) {
    if (perm.size() != rank || p >= int64_t(rank) || used[p])
      return makeError("transpose {} is not a permutation of {} dimensions",
                       formatShape(perm), rank);
    used[p] = true;
  }
  Shape shape(rank);
  for (size_t d = 0; d < rank; ++d)
    shape[d] = t.shape[perm[d]];
  std::vector<int64_t> inStrides = rowMajorStrides(t.shape);
  uint64_t width = dtypeSize(t.dtype);
  std::vector<uint8_t> bytes(t.bytes.size());
  forEachElement(
      shape,
      [&](const std::vector<int64_t> &coords) {
        int64_t source = 0;
        for (size_t d = 0; d < rank; ++d)
          source += coords[d] * inStrides[perm[d]];
        return source;
      },
      [&](int64_t target, int64_t source) {
        std::memcpy(&bytes[target * width], &t.bytes[source * width], width);
      });
  t.shape = std::move(shape);
  t.bytes = std::move(bytes);
  return Error::success();
}

Error pad(Tensor &t, const std::vector<int64_t> &low,
          const std::vector<int64_t> &high) {
  size_t rank = t.shape.size();
  if (low.size() != rank || high.size() != rank)
    return makeError("pad {} {} does not have {} dimensions", formatShape(low),
                     formatShape(high), rank);
  Shape shape(rank);
  for (size_t d = 0; d < rank; ++d)
    shape[d] = t.shape[d] + low[d] + high[d];
  std::vector<int64_t> inStrides = rowMajorStrides(t.shape);
  uint64_t width = dtypeSize(t.dtype);
  // Zero fill: all-zero bytes are +0 in every dtype.
  std::vector<uint8_t> bytes(elementCount(shape) * width, 0);
  forEachElement(
      shape,
      [&](const std::vector<int64_t> &coords) -> int64_t {
        int64_t source = 0;
        for (size_t d = 0; d < rank; ++d) {
          int64_t in = coords[d] - low[d];
          if (in < 0 || in >= t.shape[d])
            return -1;
          source += in * inStrides[d];
        }
        return source;
      },
      [&](int64_t target, int64_t source) {
        if (source >= 0)
          std::memcpy(&bytes[target * width], &t.bytes[source * width], width);
      });
  t.shape = std::move(shape);
  t.bytes = std::move(bytes);
  return Error::success();
}

Error convert(Tensor &t, std::string_view to) {
  if (t.dtype != DType::F32)
    return makeError("convert {} needs f32 values, not {}", to,
                     dtypeName(t.dtype));
  size_t count = t.bytes.size() / 4;
  std::vector<uint32_t> bits(count);
  std::memcpy(bits.data(), t.bytes.data(), t.bytes.size());
  if (to == "tf32") {
    for (uint32_t &b : bits)
      b = roundToTf32Bits(b);
    std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
    return Error::success();
  }
  if (to != "bf16" && to != "f16")
    return makeError("convert to '{}' is not supported", to);
  std::vector<uint16_t> narrow(count);
  for (size_t i = 0; i < count; ++i)
    narrow[i] = to == "bf16" ? f32BitsToBf16(bits[i]) : f32BitsToF16(bits[i]);
  t.dtype = to == "bf16" ? DType::BF16 : DType::F16;
  t.bytes.resize(count * 2);
  std::memcpy(t.bytes.data(), narrow.data(), t.bytes.size());
  return Error::success();
}

/// The initializer an origin starts from: dtype, shape and name.
struct OriginSource {
  DType dtype;
  Shape shape;
  std::string name;
};

Expected<OriginSource> parseSource(std::string_view line) {
  std::vector<std::string_view> words = split(line, ' ');
  if (words.size() < 4 || words[0] != "initializer")
    return makeError("'{}' does not start with 'initializer DTYPE SHAPE NAME'",
                     line);
  std::optional<DType> dtype = parseDType(words[1]);
  if (!dtype)
    return makeError("unknown dtype '{}'", words[1]);
  Expected<std::vector<int64_t>> shape = parseList(words[2], 'x');
  if (!shape)
    return shape.takeError();
  size_t nameStart = words[0].size() + words[1].size() + words[2].size() + 3;
  return OriginSource{*dtype, *shape, std::string(line.substr(nameStart))};
}

/// Loads the initializer an origin's `initializer` line names.
Expected<Tensor> loadSource(std::string_view line,
                            const InitializerSource &load) {
  Expected<OriginSource> from = parseSource(line);
  if (!from)
    return from.takeError();
  Expected<std::optional<NpyArray>> loaded = load(from->name);
  if (!loaded)
    return loaded.error().withContext(
        fmt::format("initializer '{}'", from->name));
  if (!*loaded)
    return makeError("no value given for initializer '{}'", from->name);
  NpyArray *values = &**loaded;
  if (values->dtype != from->dtype || values->shape != from->shape)
    return makeError("initializer '{}' is {} {}, but the artifact was "
                     "compiled for {} {}",
                     from->name, dtypeName(values->dtype),
                     formatShape(values->shape), dtypeName(from->dtype),
                     formatShape(from->shape));
  return Tensor{values->dtype, values->shape, std::move(values->data)};
}

/// `concat AXIS`: every tensor on the stack, in order, joined along AXIS
/// (kiln-fuse-sibling-contractions' concatenated weights).
Error concat(std::vector<Tensor> &stack, const std::vector<int64_t> &axisList) {
  if (axisList.size() != 1)
    return makeError("concat needs one axis");
  size_t axis = static_cast<size_t>(axisList[0]);
  const Tensor &first = stack.front();
  if (axis >= first.shape.size())
    return makeError("concat axis {} of a {}-dimensional tensor", axis,
                     first.shape.size());
  Shape shape = first.shape;
  shape[axis] = 0;
  for (const Tensor &t : stack) {
    bool same = t.dtype == first.dtype && t.shape.size() == shape.size();
    for (size_t d = 0; same && d < shape.size(); ++d)
      same = d == axis || t.shape[d] == first.shape[d];
    if (!same)
      return makeError("concat of {} {} and {} {} along axis {}",
                       dtypeName(first.dtype), formatShape(first.shape),
                       dtypeName(t.dtype), formatShape(t.shape), axis);
    shape[axis] += t.shape[axis];
  }
  // Each part contributes a run of (its extent from `axis` on) elements per
  // index of the dimensions before `axis`.
  size_t elementBytes = first.bytes.size() /
                        std::max<int64_t>(1, elementCount(first.shape));
  int64_t outer = 1;
  for (size_t d = 0; d < axis; ++d)
    outer *= shape[d];
  Tensor out{first.dtype, shape, {}};
  out.bytes.reserve(elementCount(shape) * elementBytes);
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &t : stack) {
      size_t run = t.bytes.size() / outer;
      const uint8_t *src = t.bytes.data() + o * run;
      out.bytes.insert(out.bytes.end(), src, src + run);
    }
  stack.clear();
  stack.push_back(std::move(out));
  return Error::success();
}

/// Replays `weight`'s origin on the initializer's values. An origin is a
/// stack program: each `initializer` line pushes a tensor, `concat` joins
/// the whole stack into one, every other step changes the top one.
Expected<Tensor> rebuild(const Weight &weight, const InitializerSource &load) {
  std::vector<std::string_view> lines = split(weight.origin, '\n');
  std::vector<Tensor> stack;
  Expected<Tensor> source = loadSource(lines[0], load);
  if (!source)
    return source.takeError();
  stack.push_back(std::move(*source));
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string_view> words = split(lines[i], ' ');
    std::string_view step = words[0];
    if (step == "initializer") {
      Expected<Tensor> next = loadSource(lines[i], load);
      if (!next)
        return next.takeError();
      stack.push_back(std::move(*next));
      continue;
    }
    Tensor &t = stack.back();
    if (step == "convert" && words.size() == 2) {
      if (Error err = convert(t, words[1]))
        return err;
      continue;
    }
    auto list = [&](size_t index) -> Expected<std::vector<int64_t>> {
      return parseList(index < words.size() ? words[index] : "", ',');
    };
    Expected<std::vector<int64_t>> first = list(1), second = list(2);
    if (!first)
      return first.takeError();
    if (!second)
      return second.takeError();
    Error err = Error::success();
    if (step == "transpose") {
      err = transpose(t, *first);
    } else if (step == "pad") {
      err = pad(t, *first, *second);
    } else if (step == "reshape") {
      if (elementCount(*first) != elementCount(t.shape))
        err = makeError("reshape {} does not keep the {} elements of {}",
                        formatShape(*first), elementCount(t.shape),
                        formatShape(t.shape));
      else
        t.shape = *first;
    } else if (step == "concat") {
      err = concat(stack, *first);
    } else {
      err = makeError("unknown step '{}'", lines[i]);
    }
    if (err)
      return err;
  }
  if (stack.size() != 1)
    return makeError("the origin leaves {} tensors, not one (a missing "
                     "concat)",
                     stack.size());
  Tensor &t = stack.back();
  if (t.dtype != weight.dtype || t.shape != weight.shape)
    return makeError("the origin makes {} {}, not the weight's {} {}",
                     dtypeName(t.dtype), formatShape(t.shape),
                     dtypeName(weight.dtype), formatShape(weight.shape));
  return std::move(t);
}

uint64_t byteSize(const Weight &weight) {
  return *tensorByteSize(weight.dtype, weight.shape);
}

} // namespace

Error stripWeights(Artifact &artifact) {
  if (Error err = verifyArtifact(artifact))
    return err;
  if (artifact.strippedWeightBytes != 0)
    return Error::success();
  // New layout: weights without an origin first (their bytes stay), then
  // the others; each weight keeps its relative order.
  std::vector<size_t> order(artifact.weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return artifact.weights[a].origin.empty() &&
           !artifact.weights[b].origin.empty();
  });
  std::vector<uint64_t> newOffset(artifact.weights.size());
  uint64_t end = 0, kept = 0;
  for (size_t i : order) {
    end = *alignUp(end, kWeightAlignment); // verified: no overflow
    newOffset[i] = end;
    end += byteSize(artifact.weights[i]);
    if (artifact.weights[i].origin.empty())
      kept = end;
  }
  // Launch arguments point into a weight (its start, or inside it): they
  // move with it. Weights never overlap, so the containing one is unique.
  for (Launch &launch : artifact.launches) {
    const Kernel &kernel = artifact.kernels[launch.kernel];
    for (size_t a = 0; a < launch.args.size(); ++a) {
      if (kernel.params[a].kind != ParamKind::WeightsPointer)
        continue;
      uint64_t offset = launch.args[a];
      auto weight = std::find_if(
          artifact.weights.begin(), artifact.weights.end(),
          [&](const Weight &w) {
            return offset >= w.offset && offset < w.offset + byteSize(w);
          });
      if (weight == artifact.weights.end())
        return makeError("launch of kernel '{}': argument {} points at weight "
                         "offset {}, inside no weight",
                         kernel.name, a, offset);
      launch.args[a] = newOffset[weight - artifact.weights.begin()] +
                       (offset - weight->offset);
    }
  }
  Blob data;
  for (size_t i : order) {
    Weight &weight = artifact.weights[i];
    if (!weight.origin.empty())
      continue;
    const uint8_t *bytes = artifact.weightData.data() + weight.offset;
    if (data.append(bytes, byteSize(weight), kWeightAlignment) != newOffset[i])
      return makeError("weight '{}': the stripped layout is inconsistent",
                       weight.name);
  }
  for (size_t i = 0; i < artifact.weights.size(); ++i)
    artifact.weights[i].offset = newOffset[i];
  artifact.weightData = std::move(data);
  artifact.strippedWeightBytes = end - kept;
  if (artifact.weightData.size() != kept)
    return makeError("the kept weights take {} bytes, expected {}",
                     artifact.weightData.size(), kept);
  return verifyArtifact(artifact);
}

Error bindWeights(Artifact &artifact, const InitializerSource &source) {
  for (const InlinedInitializer &inlined : artifact.inlinedInitializers) {
    Expected<std::optional<NpyArray>> given = source(inlined.name);
    if (!given)
      return given.error().withContext(
          fmt::format("initializer '{}'", inlined.name));
    if (!*given)
      continue;
    if ((*given)->dtype != inlined.dtype || (*given)->shape != inlined.shape)
      return makeError("initializer '{}' was compiled into the kernels as a "
                       "constant of {} {}; the value given is {} {}",
                       inlined.name, dtypeName(inlined.dtype),
                       formatShape(inlined.shape), dtypeName((*given)->dtype),
                       formatShape((*given)->shape));
    if ((*given)->data != inlined.bytes)
      return makeError("initializer '{}' ({} {}) was compiled into the "
                       "kernels as a constant and cannot be rebound: its new "
                       "value differs (recompile with it)",
                       inlined.name, dtypeName(inlined.dtype),
                       formatShape(inlined.shape));
  }
  uint64_t total = artifact.weightData.size() + artifact.strippedWeightBytes;
  std::vector<uint8_t> data(total, 0);
  if (!artifact.weightData.empty())
    std::memcpy(data.data(), artifact.weightData.data(),
                artifact.weightData.size());
  for (const Weight &weight : artifact.weights) {
    if (weight.origin.empty())
      continue;
    Expected<Tensor> rebuilt = rebuild(weight, source);
    if (!rebuilt)
      return rebuilt.error().withContext(
          fmt::format("binding weight '{}'", weight.name));
    std::memcpy(data.data() + weight.offset, rebuilt->bytes.data(),
                rebuilt->bytes.size());
  }
  artifact.weightData = Blob::fromVector(std::move(data));
  artifact.strippedWeightBytes = 0;
  return verifyArtifact(artifact);
}

} // namespace kiln::runtime
