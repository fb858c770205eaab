//===- HostDataOps.cpp - Host steps on numbers: data-dependent shapes -----===//
//
// The ops whose output shape depends on the data, which no kernel of a
// static plan can write: NonZero, Compress, Unique and NonMaxSuppression
// (detectors end in it), with the indexing and data movement that follow
// them (Gather, Transpose, Slice) and Cast between number types. The
// compiler moves them to the host when their data is not a constant
// (HostPartition.cpp); their results are graph outputs or feed further
// host steps. Numbers keep their dtype's bytes; strings go through Gather,
// Transpose, Slice, Compress and Unique as well.
//
// Every op that picks elements computes the flat index of each output
// element in its input and copies through `pick`, so bytes and strings
// share one path.
//
//===----------------------------------------------------------------------===//

#include "HostDataOps.h"

#include "HostStringOps.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <queue>
#include <type_traits>

namespace kiln::runtime {
Expected<std::vector<int64_t>> intsAttribute(const HostStep &step,
                                             std::string_view name) {
  std::vector<int64_t> out;
  if (const HostAttribute *attribute = step.findAttribute(name))
    for (const std::string &text : attribute->values) {
      char *end = nullptr;
      long long value = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0')
        return stepError(step, fmt::format("attribute '{}' holds '{}', not "
                                           "an integer",
                                           name, printable(text)));
      out.push_back(value);
    }
  return out;
}

namespace {

using Values = std::map<std::string, HostValue, std::less<>>;

const HostValue &inputOf(const HostStep &step, const Values &values,
                         size_t i) {
  return values.find(step.inputs[i])->second;
}

bool hasInput(const HostStep &step, size_t i) {
  return i < step.inputs.size() && !step.inputs[i].empty();
}

/// An integer attribute (its text from the file: strtoll, no exception).
Expected<int64_t> intAttribute(const HostStep &step, std::string_view name,
                               int64_t fallback) {
  const HostAttribute *attribute = step.findAttribute(name);
  if (!attribute || attribute->values.empty())
    return fallback;
  const std::string &text = attribute->values[0];
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    return stepError(step, fmt::format("attribute '{}' ('{}') is not an "
                                       "integer",
                                       name, printable(text)));
  return static_cast<int64_t>(value);
}

/// The integers of an int32 or int64 tensor.
Expected<std::vector<int64_t>> integers(const HostStep &step,
                                        const HostValue &value,
                                        std::string_view what) {
  Expected<std::vector<int64_t>> out = integersOf(value, what);
  if (!out)
    return stepError(step, out.error().message());
  return out;
}

/// One float of a float scalar (or one-element) tensor.
Expected<float> floatScalar(const HostStep &step, const HostValue &value,
                            std::string_view what) {
  if (value.isString || value.dtype != DType::F32 ||
      elementCount(value.shape).value_or(0) != 1)
    return stepError(step, fmt::format("{} must be one float, not {} {}",
                                       what,
                                       describeHostType(value.isString,
                                                        value.dtype),
                                       formatShape(value.shape)));
  float v;
  std::memcpy(&v, value.data.data(), 4);
  return v;
}

/// An axis in [-rank, rank) made non-negative.
Expected<int64_t> normalizeAxis(const HostStep &step, int64_t axis,
                                int64_t rank) {
  if (axis < -rank || axis >= rank)
    return stepError(step, fmt::format("axis {} is out of range for rank {}",
                                       axis, rank));
  return axis < 0 ? axis + rank : axis;
}

uint64_t product(const Shape &shape, size_t from, size_t to) {
  uint64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= static_cast<uint64_t>(shape[d]);
  return n;
}

/// The value whose element k is `in`'s element `flat[k]`, of `shape`.
HostValue pick(const HostValue &in, const std::vector<uint64_t> &flat,
               Shape shape) {
  HostValue out;
  out.isString = in.isString;
  out.dtype = in.dtype;
  out.shape = std::move(shape);
  if (in.isString) {
    out.strings.reserve(flat.size());
    for (uint64_t i : flat)
      out.strings.push_back(in.strings[i]);
    return out;
  }
  uint64_t size = dtypeSize(in.dtype);
  out.data.resize(flat.size() * size);
  for (size_t k = 0; k < flat.size(); ++k)
    std::memcpy(out.data.data() + k * size, in.data.data() + flat[k] * size,
                size);
  return out;
}

HostValue int64Tensor(Shape shape, const std::vector<int64_t> &values) {
  HostValue out;
  out.dtype = DType::I64;
  out.shape = std::move(shape);
  out.data.resize(values.size() * 8);
  if (!values.empty())
    std::memcpy(out.data.data(), values.data(), values.size() * 8);
  return out;
}

/// Whether element i is not zero: -0.0 is zero, NaN is not (numpy's
/// nonzero; the bits below the sign).
bool isNonzero(const HostValue &v, uint64_t i) {
  if (v.isString)
    return !v.strings[i].empty();
  uint64_t size = dtypeSize(v.dtype);
  const uint8_t *p = v.data.data() + i * size;
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);
  if (isFloatDType(v.dtype))
    bits &= ~(uint64_t(1) << (8 * size - 1));
  return bits != 0;
}

/// Calls `f` with a value of the C++ type of a numeric dtype (f32, f64,
/// the integer types; bool as uint8_t); returns false for the others.
template <typename F> bool withNumericType(DType type, F &&f) {
  switch (type) {
  case DType::F32:
    f(float());
    return true;
  case DType::F64:
    f(double());
    return true;
  case DType::I8:
    f(int8_t());
    return true;
  case DType::I16:
    f(int16_t());
    return true;
  case DType::I32:
    f(int32_t());
    return true;
  case DType::I64:
    f(int64_t());
    return true;
  case DType::U8:
  case DType::Bool:
    f(uint8_t());
    return true;
  case DType::U16:
    f(uint16_t());
    return true;
  case DType::U32:
    f(uint32_t());
    return true;
  case DType::U64:
    f(uint64_t());
    return true;
  default:
    return false;
  }
}

/// Element i as a double (for ordering; exact for every integer the
/// double holds, and ties between larger ones are broken by `sameBits`).
double asDouble(const HostValue &v, uint64_t i) {
  const uint8_t *p = v.data.data() + i * dtypeSize(v.dtype);
  double out = 0;
  withNumericType(v.dtype, [&](auto tag) {
    decltype(tag) x;
    std::memcpy(&x, p, sizeof x);
    out = static_cast<double>(x);
  });
  return out;
}

/// Three-way comparison of elements i and j of one value: numbers by
/// value (-0.0 equals 0.0; NaN equals NaN and is above every number, as
/// numpy sorts), 64-bit integers exactly, strings by bytes.
int compareElements(const HostValue &v, uint64_t i, uint64_t j) {
  if (v.isString)
    return v.strings[i].compare(v.strings[j]) < 0   ? -1
           : v.strings[i].compare(v.strings[j]) > 0 ? 1
                                                    : 0;
  if (v.dtype == DType::I64 || v.dtype == DType::U64) {
    uint64_t a, b;
    std::memcpy(&a, v.data.data() + 8 * i, 8);
    std::memcpy(&b, v.data.data() + 8 * j, 8);
    if (v.dtype == DType::I64) {
      auto sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
      return sa < sb ? -1 : sa > sb ? 1 : 0;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }
  double a = asDouble(v, i), b = asDouble(v, j);
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb)
    return na == nb ? 0 : na ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

bool numericDType(DType type) {
  return type == DType::F32 || type == DType::F64 || type == DType::I8 ||
         type == DType::I16 || type == DType::I32 || type == DType::I64 ||
         type == DType::U8 || type == DType::U16 || type == DType::U32 ||
         type == DType::U64 || type == DType::Bool;
}

//===- The ops -----------------------------------------------------------===//

/// NonZero: int64 [rank, count], the coordinates of each nonzero element
/// in C order (a scalar has one coordinate, 0).
Error runNonZero(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  if (!in.isString && !numericDType(in.dtype))
    return stepError(step, fmt::format("input of {} is not supported on the "
                                       "host",
                                       dtypeName(in.dtype)));
  uint64_t count = elementCount(in.shape).value_or(0);
  size_t rank = std::max<size_t>(in.shape.size(), 1);
  std::vector<uint64_t> hits;
  for (uint64_t i = 0; i < count; ++i)
    if (isNonzero(in, i))
      hits.push_back(i);
  std::vector<int64_t> out(rank * hits.size(), 0);
  for (size_t k = 0; k < hits.size(); ++k) {
    uint64_t rest = hits[k];
    for (size_t d = in.shape.size(); d-- > 0;) {
      out[d * hits.size() + k] =
          static_cast<int64_t>(rest % static_cast<uint64_t>(in.shape[d]));
      rest /= static_cast<uint64_t>(in.shape[d]);
    }
  }
  values[step.outputs[0]] = int64Tensor(
      {static_cast<int64_t>(rank), static_cast<int64_t>(hits.size())}, out);
  return Error::success();
}

/// Compress: the slices along `axis` (or the elements of the flattened
/// input, without one) whose condition is true; a condition shorter than
/// the axis drops the rest.
Error runCompress(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  const HostValue &cond = inputOf(step, values, 1);
  if (cond.isString || cond.dtype != DType::Bool || cond.shape.size() != 1)
    return stepError(step, fmt::format("condition must be a 1-D bool "
                                       "tensor, not {} {}",
                                       describeHostType(cond.isString,
                                                        cond.dtype),
                                       formatShape(cond.shape)));
  const HostAttribute *axisAttribute = step.findAttribute("axis");
  Shape shape = in.shape;
  int64_t axis = 0;
  if (!axisAttribute) {
    shape = {static_cast<int64_t>(elementCount(in.shape).value_or(0))};
  } else {
    Expected<int64_t> given = intAttribute(step, "axis", 0);
    if (!given)
      return given.takeError();
    Expected<int64_t> normal =
        normalizeAxis(step, *given, static_cast<int64_t>(shape.size()));
    if (!normal)
      return normal.takeError();
    axis = *normal;
  }
  uint64_t outer = product(shape, 0, axis);
  uint64_t inner = product(shape, axis + 1, shape.size());
  int64_t dim = shape[axis];
  std::vector<int64_t> kept;
  for (int64_t j = 0; j < std::min<int64_t>(dim, cond.shape[0]); ++j)
    if (cond.data[j])
      kept.push_back(j);
  std::vector<uint64_t> flat;
  flat.reserve(outer * kept.size() * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (int64_t j : kept)
      for (uint64_t i = 0; i < inner; ++i)
        flat.push_back((o * dim + j) * inner + i);
  shape[axis] = static_cast<int64_t>(kept.size());
  values[step.outputs[0]] = pick(in, flat, shape);
  return Error::success();
}

/// Gather along `axis`; negative indices count from the end.
Error runGather(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  Expected<std::vector<int64_t>> indices =
      integers(step, inputOf(step, values, 1), "indices");
  if (!indices)
    return indices.takeError();
  Expected<int64_t> given = intAttribute(step, "axis", 0);
  if (!given)
    return given.takeError();
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank == 0)
    return stepError(step, "data must have rank 1 or more");
  Expected<int64_t> axis = normalizeAxis(step, *given, rank);
  if (!axis)
    return axis.takeError();
  int64_t dim = in.shape[*axis];
  uint64_t outer = product(in.shape, 0, *axis);
  uint64_t inner = product(in.shape, *axis + 1, in.shape.size());
  std::vector<uint64_t> flat;
  flat.reserve(outer * indices->size() * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (int64_t index : *indices) {
      if (index < -dim || index >= dim)
        return stepError(step, fmt::format("index {} is out of range for "
                                           "dim {} of size {}",
                                           index, *axis, dim));
      uint64_t j = static_cast<uint64_t>(index < 0 ? index + dim : index);
      for (uint64_t i = 0; i < inner; ++i)
        flat.push_back((o * dim + j) * inner + i);
    }
  const Shape &indexShape = inputOf(step, values, 1).shape;
  Shape shape(in.shape.begin(), in.shape.begin() + *axis);
  shape.insert(shape.end(), indexShape.begin(), indexShape.end());
  shape.insert(shape.end(), in.shape.begin() + *axis + 1, in.shape.end());
  values[step.outputs[0]] = pick(in, flat, shape);
  return Error::success();
}

/// The flat input index of each element of a strided view: dim d of the
/// output has `count[d]` elements starting at `start[d]`, `step[d]` apart.
std::vector<uint64_t> stridedIndices(const Shape &in, const Shape &start,
                                     const Shape &stride, const Shape &count) {
  uint64_t total = elementCount(count).value_or(0);
  std::vector<uint64_t> flat;
  flat.reserve(total);
  std::vector<int64_t> position(count.size(), 0);
  for (uint64_t k = 0; k < total; ++k) {
    uint64_t index = 0;
    for (size_t d = 0; d < in.size(); ++d)
      index = index * static_cast<uint64_t>(in[d]) +
              static_cast<uint64_t>(start[d] + position[d] * stride[d]);
    flat.push_back(index);
    for (size_t d = count.size(); d-- > 0;) {
      if (++position[d] < count[d])
        break;
      position[d] = 0;
    }
  }
  return flat;
}

/// Transpose by `perm` (reversed dims without one).
Error runTranspose(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  size_t rank = in.shape.size();
  Expected<std::vector<int64_t>> permOr = intsAttribute(step, "perm");
  if (!permOr)
    return permOr.takeError();
  std::vector<int64_t> perm = permOr.take();
  if (perm.empty())
    for (size_t d = rank; d-- > 0;)
      perm.push_back(static_cast<int64_t>(d));
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank)
    return stepError(step, fmt::format("perm has {} entries for rank {}",
                                       perm.size(), rank));
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p])
      return stepError(step, fmt::format("perm entry {} is out of range or "
                                         "repeated",
                                         p));
    seen[p] = true;
  }
  // Output dim d walks input dim perm[d].
  // Strides in uint64 (they wrap, harmlessly, only for empty tensors).
  Shape shape(rank);
  std::vector<uint64_t> strideOf(rank, 1);
  for (size_t d = rank; d-- > 1;)
    strideOf[d - 1] = strideOf[d] * static_cast<uint64_t>(in.shape[d]);
  for (size_t d = 0; d < rank; ++d)
    shape[d] = in.shape[perm[d]];
  uint64_t total = elementCount(shape).value_or(0);
  std::vector<uint64_t> flat;
  flat.reserve(total);
  std::vector<int64_t> position(rank, 0);
  for (uint64_t k = 0; k < total; ++k) {
    uint64_t index = 0;
    for (size_t d = 0; d < rank; ++d)
      index += static_cast<uint64_t>(position[d]) * strideOf[perm[d]];
    flat.push_back(index);
    for (size_t d = rank; d-- > 0;) {
      if (++position[d] < shape[d])
        break;
      position[d] = 0;
    }
  }
  values[step.outputs[0]] = pick(in, flat, shape);
  return Error::success();
}

} // namespace

Expected<SliceWindow> sliceWindow(const Shape &shape,
                                  std::vector<int64_t> starts,
                                  std::vector<int64_t> ends,
                                  std::vector<int64_t> axes,
                                  std::vector<int64_t> steps) {
  int64_t rank = static_cast<int64_t>(shape.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return makeError("starts, ends, axes and steps differ in length");
  SliceWindow window{Shape(rank, 0), Shape(rank, 1), shape};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    if (axes[i] < -rank || axes[i] >= rank)
      return makeError("axis {} is out of range for rank {}", axes[i], rank);
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (seen[axis])
      return makeError("axis {} is repeated", axes[i]);
    seen[axis] = true;
    int64_t dim = shape[axis], s = steps[i];
    if (s == 0)
      return makeError("a step is 0");
    s = std::max(s, -std::numeric_limits<int64_t>::max()); // -s exists
    auto clampTo = [](int64_t v, int64_t lo, int64_t hi) {
      return std::max(lo, std::min(v, hi));
    };
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t &count = window.count[axis];
    if (s > 0) {
      b = clampTo(b, 0, dim);
      e = clampTo(e, 0, dim);
      count = e > b ? (e - b - 1) / s + 1 : 0;
    } else {
      b = clampTo(b, 0, dim - 1);
      e = clampTo(e, -1, dim - 1);
      count = b > e ? (b - e - 1) / -s + 1 : 0;
    }
    window.start[axis] = b;
    window.stride[axis] = s;
  }
  return window;
}

namespace {

/// Slice (opset 10's inputs starts, ends, axes, steps; opset 1's
/// attributes), with ONNX's clamping of starts and ends.
Error runSlice(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  std::vector<int64_t> starts, ends, axes, steps;
  auto read = [&](size_t i, std::string_view name,
                  std::vector<int64_t> &out) -> Error {
    Expected<std::vector<int64_t>> v =
        hasInput(step, i)
            ? integers(step, inputOf(step, values, i), std::string(name))
            : intsAttribute(step, name);
    if (!v)
      return v.takeError();
    out = v.take();
    return Error::success();
  };
  if (Error err = read(1, "starts", starts))
    return err;
  if (Error err = read(2, "ends", ends))
    return err;
  if (Error err = read(3, "axes", axes))
    return err;
  if (hasInput(step, 4)) {
    if (Error err = read(4, "steps", steps))
      return err;
  }
  Expected<SliceWindow> window =
      sliceWindow(in.shape, std::move(starts), std::move(ends), std::move(axes),
                  std::move(steps));
  if (!window)
    return stepError(step, window.error().message());
  const auto &[start, stride, count] = *window;
  values[step.outputs[0]] =
      pick(in, stridedIndices(in.shape, start, stride, count), count);
  return Error::success();
}

/// Unique: the distinct elements (or slices along `axis`), sorted or in
/// order of first occurrence, with each one's first index, each input
/// item's index among them, and the counts (numpy.unique's four results).
Error runUnique(const HostStep &step, Values &values) {
  const HostValue &in = inputOf(step, values, 0);
  if (!in.isString && !numericDType(in.dtype))
    return stepError(step, fmt::format("input of {} is not supported on the "
                                       "host",
                                       dtypeName(in.dtype)));
  Expected<int64_t> sorted = intAttribute(step, "sorted", 1);
  if (!sorted)
    return sorted.takeError();
  // Items: the elements, or the slices along the axis.
  Shape shape = in.shape;
  int64_t axis = -1;
  if (step.findAttribute("axis")) {
    Expected<int64_t> given = intAttribute(step, "axis", 0);
    if (!given)
      return given.takeError();
    Expected<int64_t> normal =
        normalizeAxis(step, *given, static_cast<int64_t>(shape.size()));
    if (!normal)
      return normal.takeError();
    axis = *normal;
  }
  uint64_t items, outer = 1, inner = 1;
  if (axis < 0) {
    items = elementCount(in.shape).value_or(0);
  } else {
    items = static_cast<uint64_t>(shape[axis]);
    outer = product(shape, 0, axis);
    inner = product(shape, axis + 1, shape.size());
  }
  auto element = [&](uint64_t item, uint64_t k) {
    // Element k (in C order) of item `item`'s slice.
    uint64_t o = k / inner, i = k % inner;
    return (o * items + item) * inner + i;
  };
  uint64_t slice = outer * inner;
  auto compareItems = [&](uint64_t a, uint64_t b) {
    for (uint64_t k = 0; k < slice; ++k)
      if (int c = compareElements(in, element(a, k), element(b, k)))
        return c;
    return 0;
  };
  std::vector<uint64_t> order(items);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return compareItems(a, b) < 0;
  });
  // Groups of equal items, in sorted order; each starts at its first
  // occurrence (the sort is stable).
  std::vector<uint64_t> firsts, counts(0), groupOf(items);
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compareItems(order[k - 1], order[k]) != 0) {
      firsts.push_back(order[k]);
      counts.push_back(0);
    }
    groupOf[order[k]] = firsts.size() - 1;
    ++counts.back();
  }
  // Output order: sorted, or by first occurrence.
  std::vector<uint64_t> rank(firsts.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (*sorted == 0)
    std::sort(rank.begin(), rank.end(),
              [&](uint64_t a, uint64_t b) { return firsts[a] < firsts[b]; });
  std::vector<uint64_t> position(firsts.size());
  for (size_t k = 0; k < rank.size(); ++k)
    position[rank[k]] = k;
  std::vector<int64_t> indices, inverse(items), countsOut;
  for (uint64_t g : rank) {
    indices.push_back(static_cast<int64_t>(firsts[g]));
    countsOut.push_back(static_cast<int64_t>(counts[g]));
  }
  for (uint64_t item = 0; item < items; ++item)
    inverse[item] = static_cast<int64_t>(position[groupOf[item]]);
  std::vector<uint64_t> flat;
  Shape yShape;
  if (axis < 0) {
    for (uint64_t g : rank)
      flat.push_back(firsts[g]);
    yShape = {static_cast<int64_t>(rank.size())};
  } else {
    yShape = shape;
    yShape[axis] = static_cast<int64_t>(rank.size());
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t g : rank)
        for (uint64_t i = 0; i < inner; ++i)
          flat.push_back((o * items + firsts[g]) * inner + i);
  }
  int64_t u = static_cast<int64_t>(rank.size());
  values[step.outputs[0]] = pick(in, flat, yShape);
  if (step.outputs.size() > 1 && !step.outputs[1].empty())
    values[step.outputs[1]] = int64Tensor({u}, indices);
  if (step.outputs.size() > 2 && !step.outputs[2].empty())
    values[step.outputs[2]] =
        int64Tensor({static_cast<int64_t>(items)}, inverse);
  if (step.outputs.size() > 3 && !step.outputs[3].empty())
    values[step.outputs[3]] = int64Tensor({u}, countsOut);
  return Error::success();
}

/// A box's corners (x_min, y_min, x_max, y_max), from [y1, x1, y2, x2]
/// (either diagonal) or [x_center, y_center, width, height].
struct Corners {
  float x0, y0, x1, y1;
};

Corners cornersOf(const float *box, bool centered) {
  if (centered) {
    float hw = box[2] / 2, hh = box[3] / 2;
    return {box[0] - hw, box[1] - hh, box[0] + hw, box[1] + hh};
  }
  return {std::min(box[1], box[3]), std::min(box[0], box[2]),
          std::max(box[1], box[3]), std::max(box[0], box[2])};
}

/// Whether the two boxes overlap by more than `threshold` (intersection
/// over union), as onnxruntime decides it: boxes of no area never
/// suppress.
bool suppresses(const Corners &a, const Corners &b, float threshold) {
  float ix0 = std::max(a.x0, b.x0), iy0 = std::max(a.y0, b.y0);
  float ix1 = std::min(a.x1, b.x1), iy1 = std::min(a.y1, b.y1);
  float intersection = std::max(0.0f, ix1 - ix0) * std::max(0.0f, iy1 - iy0);
  if (intersection <= 0)
    return false;
  float areaA = (a.x1 - a.x0) * (a.y1 - a.y0);
  float areaB = (b.x1 - b.x0) * (b.y1 - b.y0);
  float unionArea = areaA + areaB - intersection;
  if (areaA <= 0 || areaB <= 0 || unionArea <= 0)
    return false;
  return intersection / unionArea > threshold;
}

/// NonMaxSuppression: for each batch and class, the boxes scoring above
/// score_threshold, highest first (the lower index first among equal
/// scores), each kept unless it overlaps a kept one by more than
/// iou_threshold, at most max_output_boxes_per_class (0, the default,
/// keeps none; below 0 counts as 0). int64 [selected, 3]: batch, class,
/// box.
Error runNonMaxSuppression(const HostStep &step, Values &values) {
  const HostValue &boxes = inputOf(step, values, 0);
  const HostValue &scores = inputOf(step, values, 1);
  for (const HostValue *v : {&boxes, &scores})
    if (v->isString || v->dtype != DType::F32 || v->shape.size() != 3)
      return stepError(step, fmt::format("boxes and scores must be 3-D float "
                                         "tensors, got {} {}",
                                         describeHostType(v->isString,
                                                          v->dtype),
                                         formatShape(v->shape)));
  int64_t batches = boxes.shape[0], count = boxes.shape[1];
  int64_t classes = scores.shape[1];
  if (boxes.shape[2] != 4 || scores.shape[0] != batches ||
      scores.shape[2] != count)
    return stepError(step, fmt::format("boxes {} and scores {} are not "
                                       "[batch, boxes, 4] and [batch, "
                                       "classes, boxes]",
                                       formatShape(boxes.shape),
                                       formatShape(scores.shape)));
  int64_t maxPerClass = 0;
  if (hasInput(step, 2)) {
    Expected<std::vector<int64_t>> v = integers(
        step, inputOf(step, values, 2), "max_output_boxes_per_class");
    if (!v)
      return v.takeError();
    if (v->size() != 1)
      return stepError(step, "max_output_boxes_per_class must hold one "
                             "value");
    maxPerClass = std::max<int64_t>((*v)[0], 0);
  }
  float iou = 0;
  if (hasInput(step, 3)) {
    Expected<float> v =
        floatScalar(step, inputOf(step, values, 3), "iou_threshold");
    if (!v)
      return v.takeError();
    iou = *v;
    if (!(iou >= 0 && iou <= 1))
      return stepError(step, fmt::format("iou_threshold {} is not in [0, 1]",
                                         iou));
  }
  bool hasScoreThreshold = hasInput(step, 4);
  float scoreThreshold = 0;
  if (hasScoreThreshold) {
    Expected<float> v =
        floatScalar(step, inputOf(step, values, 4), "score_threshold");
    if (!v)
      return v.takeError();
    scoreThreshold = *v;
  }
  Expected<int64_t> centered = intAttribute(step, "center_point_box", 0);
  if (!centered)
    return centered.takeError();

  const float *boxData = reinterpret_cast<const float *>(boxes.data.data());
  const float *scoreData = reinterpret_cast<const float *>(scores.data.data());
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<Corners> corners(count);
    for (int64_t i = 0; i < count; ++i)
      corners[i] = cornersOf(boxData + (b * count + i) * 4, *centered == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float *s = scoreData + (b * classes + c) * count;
      std::vector<int64_t> candidates;
      for (int64_t i = 0; i < count; ++i)
        if (!hasScoreThreshold || s[i] > scoreThreshold)
          candidates.push_back(i);
      // NaN scores (kept without a threshold) sort last.
      auto key = [&](int64_t i) {
        return std::isnan(s[i]) ? -std::numeric_limits<float>::infinity()
                                : s[i];
      };
      std::stable_sort(
          candidates.begin(), candidates.end(),
          [&](int64_t x, int64_t y) { return key(x) > key(y); });
      std::vector<int64_t> kept;
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= maxPerClass)
          break;
        bool keep = std::none_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(corners[i], corners[k], iou);
        });
        if (keep)
          kept.push_back(i);
      }
      for (int64_t i : kept)
        selected.insert(selected.end(), {b, c, i});
    }
  }
  values[step.outputs[0]] = int64Tensor(
      {static_cast<int64_t>(selected.size() / 3), 3}, selected);
  return Error::success();
}

} // namespace

/// Integer values of a numeric host tensor (Reshape's shape, axes).
Expected<std::vector<int64_t>> integersOf(const HostValue &value,
                                          std::string_view what) {
  if (value.isString ||
      (value.dtype != DType::I64 && value.dtype != DType::I32))
    return makeError("{} must be int64 or int32, not {}", what,
                     describeHostType(value.isString, value.dtype));
  std::vector<int64_t> out;
  uint64_t count = elementCount(value.shape).value_or(0);
  for (uint64_t i = 0; i < count; ++i) {
    if (value.dtype == DType::I64) {
      int64_t v;
      std::memcpy(&v, value.data.data() + 8 * i, 8);
      out.push_back(v);
    } else {
      int32_t v;
      std::memcpy(&v, value.data.data() + 4 * i, 4);
      out.push_back(v);
    }
  }
  return out;
}

bool isHostDataOp(std::string_view op) {
  return op == "NonZero" || op == "Compress" || op == "Unique" ||
         op == "NonMaxSuppression" || op == "Gather" || op == "Transpose" ||
         op == "Slice";
}

Error verifyDataOpAttributes(const HostStep &step) {
  if (step.op == "Unique") {
    Expected<int64_t> sorted = intAttribute(step, "sorted", 1);
    if (!sorted)
      return sorted.takeError();
    if (*sorted != 0 && *sorted != 1)
      return stepError(step, fmt::format("sorted is {}, not 0 or 1", *sorted));
  }
  if (step.op == "NonMaxSuppression") {
    Expected<int64_t> centered = intAttribute(step, "center_point_box", 0);
    if (!centered)
      return centered.takeError();
    if (*centered != 0 && *centered != 1)
      return stepError(step, fmt::format("center_point_box is {}, not 0 or 1",
                                         *centered));
  }
  for (std::string_view name : {"axis", "perm", "starts", "ends", "axes"})
    if (step.findAttribute(name)) {
      Expected<std::vector<int64_t>> ints = intsAttribute(step, name);
      if (!ints)
        return ints.takeError();
    }
  return Error::success();
}

Error runDataOp(const HostStep &step, Values &values) {
  if (step.op == "NonZero")
    return runNonZero(step, values);
  if (step.op == "Compress")
    return runCompress(step, values);
  if (step.op == "Unique")
    return runUnique(step, values);
  if (step.op == "NonMaxSuppression")
    return runNonMaxSuppression(step, values);
  if (step.op == "Gather")
    return runGather(step, values);
  if (step.op == "Transpose")
    return runTranspose(step, values);
  if (step.op == "Slice")
    return runSlice(step, values);
  return stepError(step, "not an op the host runs");
}

Expected<HostValue> castNumbers(const HostStep &step, const HostValue &in,
                                DType to) {
  if (!numericDType(in.dtype) || !numericDType(to))
    return stepError(step, fmt::format("cast from {} to {} is not supported "
                                       "on the host",
                                       dtypeName(in.dtype), dtypeName(to)));
  uint64_t count = elementCount(in.shape).value_or(0);
  HostValue out;
  out.dtype = to;
  out.shape = in.shape;
  uint64_t size = dtypeSize(to), inSize = dtypeSize(in.dtype);
  out.data.resize(count * size);
  bool fromFloat = isFloatDType(in.dtype);
  bool fromUnsigned = !fromFloat && !isSignedIntDType(in.dtype);
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t *p = out.data.data() + i * size;
    // An integer input as 64 bits (sign- or zero-extended), exactly.
    int64_t whole = 0;
    if (!fromFloat) {
      if (fromUnsigned) {
        uint64_t bits = 0;
        std::memcpy(&bits, in.data.data() + i * inSize, inSize);
        whole = static_cast<int64_t>(bits);
      } else {
        whole = static_cast<int64_t>(asDouble(in, i));
        if (in.dtype == DType::I64)
          std::memcpy(&whole, in.data.data() + i * 8, 8);
      }
    }
    double v = fromFloat ? asDouble(in, i) : 0.0;
    auto store = [&](auto tag) {
      using T = decltype(tag);
      T x;
      if constexpr (std::is_floating_point_v<T>) {
        x = fromFloat       ? static_cast<T>(v)
            : fromUnsigned ? static_cast<T>(static_cast<uint64_t>(whole))
                           : static_cast<T>(whole);
      } else if (!fromFloat) {
        x = static_cast<T>(whole); // integers wrap, as numpy's astype
      } else if (std::isnan(v)) {
        x = 0;
      } else if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
        x = std::numeric_limits<T>::lowest();
      } else if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
        x = std::numeric_limits<T>::max();
      } else {
        x = static_cast<T>(v);
      }
      std::memcpy(p, &x, sizeof x);
    };
    if (to == DType::Bool)
      *p = isNonzero(in, i) ? 1 : 0;
    else
      withNumericType(to, store);
  }
  return out;
}

} // namespace kiln::runtime
