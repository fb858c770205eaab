//===- SymbolicDims.cpp - Run-time sizes of symbolic dims -----------------===//
//
// Checks of the sizes a caller gives (against the ranges and against each
// other), the box copies that pad inputs to the compiled shape and slice
// outputs back, and verifyArtifact's rules for section `symbolic-dims`.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/SymbolicDims.h"

#include "Support.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace kiln::runtime {

SymbolSizes compiledSizes(const Artifact &artifact) {
  SymbolSizes sizes;
  for (const SymbolicDim &dim : artifact.symbolicDims)
    sizes.push_back(dim.max);
  return sizes;
}

Shape shapeAt(const TensorSignature &tensor, const SymbolSizes &sizes) {
  Shape shape = tensor.shape;
  for (const SymbolicAxis &axis : tensor.symbolicAxes)
    if (axis.symbol < sizes.size() && axis.dim < shape.size())
      shape[axis.dim] = sizes[axis.symbol] * static_cast<int64_t>(axis.factor);
  return shape;
}

namespace {

const SymbolicAxis *axisAt(const TensorSignature &tensor, size_t dim) {
  for (const SymbolicAxis &axis : tensor.symbolicAxes)
    if (axis.dim == dim)
      return &axis;
  return nullptr;
}

} // namespace

std::string describeShape(const Artifact &artifact,
                          const TensorSignature &tensor) {
  if (tensor.symbolicAxes.empty())
    return formatShape(tensor.shape);
  std::string text = "[", ranges;
  for (size_t i = 0; i < tensor.shape.size(); ++i) {
    if (i)
      text += ", ";
    const SymbolicAxis *axis = axisAt(tensor, i);
    if (!axis) {
      text += std::to_string(tensor.shape[i]);
      continue;
    }
    const SymbolicDim &symbol = artifact.symbolicDims[axis->symbol];
    text += axis->factor == 1 ? symbol.name
                              : fmt::format("{}*{}", symbol.name, axis->factor);
    std::string range =
        fmt::format("{} in {}..{}{}", symbol.name, symbol.min, symbol.max,
                    symbol.separable ? "" : ", runs the maximum only");
    if (ranges.find(range) == std::string::npos)
      ranges += (ranges.empty() ? "" : "; ") + range;
  }
  return text + "] (" + ranges + ")";
}

Error checkInputShape(const Artifact &artifact, const TensorSignature &input,
                      const Shape &shape) {
  if (shape.size() != input.shape.size())
    return makeError("input '{}': shape {} does not match the signature's {}",
                     input.name, formatShape(shape),
                     describeShape(artifact, input));
  for (size_t i = 0; i < shape.size(); ++i) {
    const SymbolicAxis *axis = axisAt(input, i);
    if (!axis) {
      if (shape[i] != input.shape[i])
        return makeError("input '{}': shape {} does not match the "
                         "signature's {} (dim {} is fixed at {})",
                         input.name, formatShape(shape),
                         describeShape(artifact, input), i, input.shape[i]);
      continue;
    }
    const SymbolicDim &symbol = artifact.symbolicDims[axis->symbol];
    if (shape[i] < symbol.min || shape[i] > symbol.max)
      return makeError("input '{}': dim {} (symbol '{}') is {}, outside its "
                       "range {}..{}",
                       input.name, i, symbol.name, shape[i], symbol.min,
                       symbol.max);
    if (!symbol.separable && shape[i] != symbol.max)
      return makeError("input '{}': dim {} (symbol '{}') is {}, but this "
                       "artifact runs {} = {} only: '{}' is not separable "
                       "({})",
                       input.name, i, symbol.name, shape[i], symbol.name,
                       symbol.max, symbol.name, symbol.reason);
  }
  return Error::success();
}

Expected<SymbolSizes>
resolveSizes(const Artifact &artifact,
             const std::vector<std::optional<Shape>> &inputShapes) {
  SymbolSizes sizes = compiledSizes(artifact);
  // Which input (and dim) set each symbol first, for the error.
  std::vector<std::pair<size_t, uint32_t>> setBy(sizes.size(), {SIZE_MAX, 0});
  for (size_t i = 0; i < artifact.inputs.size() && i < inputShapes.size();
       ++i) {
    if (!inputShapes[i])
      continue;
    const TensorSignature &input = artifact.inputs[i];
    for (const SymbolicAxis &axis : input.symbolicAxes) {
      int64_t value = (*inputShapes[i])[axis.dim];
      auto &[first, firstDim] = setBy[axis.symbol];
      if (first == SIZE_MAX) {
        first = i;
        firstDim = axis.dim;
        sizes[axis.symbol] = value;
        continue;
      }
      if (sizes[axis.symbol] != value)
        return makeError("inputs '{}' and '{}' disagree on symbol '{}': '{}' "
                         "has {} (dim {}), '{}' has {} (dim {})",
                         artifact.inputs[first].name, input.name,
                         artifact.symbolicDims[axis.symbol].name,
                         artifact.inputs[first].name, sizes[axis.symbol],
                         firstDim, input.name, value, axis.dim);
    }
  }
  return sizes;
}

void forEachBoxRun(
    const Shape &srcShape, const Shape &dstShape, uint64_t elementSize,
    const std::function<void(uint64_t, uint64_t, uint64_t)> &copy) {
  size_t rank = srcShape.size();
  Shape box(rank);
  for (size_t i = 0; i < rank; ++i) {
    box[i] = std::min(srcShape[i], dstShape[i]);
    if (box[i] <= 0)
      return;
  }
  if (rank == 0)
    return copy(0, 0, elementSize);
  // Merge the trailing dims where the box spans both tensors fully: each
  // run is then as long as it can be.
  size_t inner = rank - 1;
  uint64_t runElements = static_cast<uint64_t>(box[inner]);
  while (inner > 0 && srcShape[inner] == dstShape[inner] &&
         box[inner] == srcShape[inner]) {
    --inner;
    runElements *= static_cast<uint64_t>(box[inner]);
  }
  // Element strides of each tensor.
  std::vector<uint64_t> srcStride(rank, 1), dstStride(rank, 1);
  for (size_t i = rank - 1; i > 0; --i) {
    srcStride[i - 1] = srcStride[i] * static_cast<uint64_t>(srcShape[i]);
    dstStride[i - 1] = dstStride[i] * static_cast<uint64_t>(dstShape[i]);
  }
  std::vector<int64_t> index(inner, 0);
  while (true) {
    uint64_t src = 0, dst = 0;
    for (size_t i = 0; i < inner; ++i) {
      src += static_cast<uint64_t>(index[i]) * srcStride[i];
      dst += static_cast<uint64_t>(index[i]) * dstStride[i];
    }
    copy(src * elementSize, dst * elementSize, runElements * elementSize);
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < box[d])
        break;
      index[d] = 0;
      if (d == 0)
        return;
    }
    if (inner == 0)
      return;
  }
}

void copyBox(const void *src, const Shape &srcShape, void *dst,
             const Shape &dstShape, uint64_t elementSize) {
  const auto *from = static_cast<const uint8_t *>(src);
  auto *to = static_cast<uint8_t *>(dst);
  forEachBoxRun(srcShape, dstShape, elementSize,
                [&](uint64_t srcOffset, uint64_t dstOffset, uint64_t bytes) {
                  std::memcpy(to + dstOffset, from + srcOffset, bytes);
                });
}

Error verifySymbolicDims(const Artifact &artifact) {
  const std::vector<SymbolicDim> &symbols = artifact.symbolicDims;
  for (size_t s = 0; s < symbols.size(); ++s) {
    const SymbolicDim &symbol = symbols[s];
    if (symbol.name.empty() || hasControlCharacter(symbol.name) ||
        hasControlCharacter(symbol.reason))
      return makeError("section 'symbolic-dims': symbol {} has an empty name "
                       "or a control character in its name or reason",
                       s);
    for (size_t t = 0; t < s; ++t)
      if (symbols[t].name == symbol.name)
        return makeError("section 'symbolic-dims': symbol '{}' appears twice",
                         symbol.name);
    if (symbol.min < 1 || symbol.min > symbol.opt || symbol.opt > symbol.max)
      return makeError("section 'symbolic-dims': symbol '{}': range {}..{} "
                       "(opt {}) needs 1 <= min <= opt <= max",
                       symbol.name, symbol.min, symbol.max, symbol.opt);
    if (!symbol.separable && symbol.reason.empty())
      return makeError("section 'symbolic-dims': symbol '{}' is not "
                       "separable but gives no reason",
                       symbol.name);
  }
  for (bool isInput : {true, false}) {
    const auto &tensors = isInput ? artifact.inputs : artifact.outputs;
    for (const TensorSignature &tensor : tensors) {
      std::string what = fmt::format("section 'symbolic-dims': {} '{}'",
                                     isInput ? "input" : "output", tensor.name);
      int64_t previous = -1;
      std::vector<bool> symbolSeen(symbols.size(), false);
      for (const SymbolicAxis &axis : tensor.symbolicAxes) {
        if (axis.dim >= tensor.shape.size() || int64_t(axis.dim) <= previous)
          return makeError("{}: dim {} is out of range (rank {}) or out of "
                           "order",
                           what, axis.dim, tensor.shape.size());
        previous = axis.dim;
        if (axis.symbol >= symbols.size())
          return makeError("{}: dim {}: symbol {} is out of range (the "
                           "artifact has {} symbolic dims)",
                           what, axis.dim, axis.symbol, symbols.size());
        if (symbolSeen[axis.symbol])
          return makeError("{}: symbol '{}' is on two dims", what,
                           symbols[axis.symbol].name);
        symbolSeen[axis.symbol] = true;
        if (axis.factor == 0 || (isInput && axis.factor != 1))
          return makeError("{}: dim {}: factor {} (an input's is 1, an "
                           "output's at least 1)",
                           what, axis.dim, axis.factor);
        const SymbolicDim &symbol = symbols[axis.symbol];
        uint64_t compiled = 0;
        if (__builtin_mul_overflow(static_cast<uint64_t>(symbol.max),
                                   axis.factor, &compiled) ||
            compiled != static_cast<uint64_t>(tensor.shape[axis.dim]))
          return makeError("{}: dim {} is {}, not the maximum of '{}' ({}) "
                           "times {}",
                           what, axis.dim, tensor.shape[axis.dim], symbol.name,
                           symbol.max, axis.factor);
      }
    }
  }
  return Error::success();
}

uint32_t scaledBlocks(const LaunchScale &scale, int64_t size,
                      uint32_t compiled) {
  // size <= max and the verifier bounds numerator and denominator below
  // 2^32, so the product fits (max is at most 2^31 when it scales).
  unsigned __int128 work =
      static_cast<unsigned __int128>(std::max<int64_t>(size, 1)) *
      scale.numerator;
  unsigned __int128 blocks =
      (work + scale.denominator - 1) / scale.denominator;
  return static_cast<uint32_t>(
      std::clamp<unsigned __int128>(blocks, 1, compiled));
}

namespace {
uint32_t &gridAxis(Dim3 &grid, uint32_t dim) {
  return dim == 0 ? grid.x : dim == 1 ? grid.y : grid.z;
}
} // namespace

Dim3 launchGridAt(const Artifact &artifact, uint32_t launch,
                  const SymbolSizes &sizes) {
  Dim3 grid = artifact.kernels[artifact.launches[launch].kernel].grid;
  const std::vector<LaunchScale> &scales = artifact.launchScales;
  auto it = std::lower_bound(
      scales.begin(), scales.end(), launch,
      [](const LaunchScale &scale, uint32_t l) { return scale.launch < l; });
  if (it == scales.end() || it->launch != launch || it->symbol >= sizes.size())
    return grid;
  uint32_t &axis = gridAxis(grid, it->gridDim);
  axis = scaledBlocks(*it, sizes[it->symbol], axis);
  return grid;
}

namespace {
/// The checks a per-launch record of a symbol shares (launch-scales,
/// launch-guards): its launch in range and after the previous record's,
/// its symbol in range. `what` names the record in messages.
Error checkLaunchRecord(const Artifact &artifact, const std::string &what,
                        uint32_t launch, std::optional<uint32_t> previous,
                        uint32_t symbol) {
  if (launch >= artifact.launches.size())
    return makeError("{}: the launch is out of range (the artifact has {} "
                     "launches)",
                     what, artifact.launches.size());
  if (previous && launch <= *previous)
    return makeError("{}: launches are not in increasing order (after "
                     "launch {})",
                     what, *previous);
  if (symbol >= artifact.symbolicDims.size())
    return makeError("{}: symbol {} is out of range (the artifact has {} "
                     "symbolic dims)",
                     what, symbol, artifact.symbolicDims.size());
  return Error::success();
}
} // namespace

Error verifyLaunchScales(const Artifact &artifact) {
  const std::vector<LaunchScale> &scales = artifact.launchScales;
  for (size_t i = 0; i < scales.size(); ++i) {
    const LaunchScale &scale = scales[i];
    std::string what =
        fmt::format("section 'launch-scales': record {} (launch {})", i,
                    scale.launch);
    if (Error err = checkLaunchRecord(
            artifact, what, scale.launch,
            i > 0 ? std::optional<uint32_t>(scales[i - 1].launch)
                  : std::nullopt,
            scale.symbol))
      return err;
    const SymbolicDim &symbol = artifact.symbolicDims[scale.symbol];
    if (!symbol.separable)
      return makeError("{}: symbol '{}' is not separable: its launches run "
                       "the compiled grid",
                       what, symbol.name);
    if (scale.gridDim > 2)
      return makeError("{}: grid dim {} is not 0 (x), 1 (y) or 2 (z)", what,
                       scale.gridDim);
    constexpr uint64_t kLimit = uint64_t(1) << 32;
    if (scale.numerator == 0 || scale.denominator == 0 ||
        scale.numerator >= kLimit || scale.denominator >= kLimit ||
        symbol.max >= int64_t(kLimit >> 1))
      return makeError("{}: blocks = ceil({} * {} / {}) needs a numerator "
                       "and a denominator in 1..2^32-1 and a maximum below "
                       "2^31",
                       what, symbol.name, scale.numerator, scale.denominator);
    Dim3 grid = artifact.kernels[artifact.launches[scale.launch].kernel].grid;
    uint32_t compiled = gridAxis(grid, scale.gridDim);
    unsigned __int128 atMax =
        (static_cast<unsigned __int128>(symbol.max) * scale.numerator +
         scale.denominator - 1) /
        scale.denominator;
    if (atMax != compiled)
      return makeError("{}: at {} = {} it gives {} blocks along grid dim {}, "
                       "not the kernel's compiled {}",
                       what, symbol.name, symbol.max,
                       static_cast<uint64_t>(atMax), scale.gridDim, compiled);
  }
  return Error::success();
}

Error verifyLaunchGuards(const Artifact &artifact) {
  const std::vector<LaunchGuard> &guards = artifact.launchGuards;
  for (size_t i = 0; i < guards.size(); ++i) {
    const LaunchGuard &guard = guards[i];
    std::string what = fmt::format(
        "section 'launch-guards': record {} (launch {})", i, guard.launch);
    if (Error err = checkLaunchRecord(
            artifact, what, guard.launch,
            i > 0 ? std::optional<uint32_t>(guards[i - 1].launch)
                  : std::nullopt,
            guard.symbol))
      return err;
    if (guard.min < 0 || guard.min > guard.max)
      return makeError("{}: sizes {}..{} of '{}' are not a range", what,
                       guard.min, guard.max,
                       artifact.symbolicDims[guard.symbol].name);
  }
  return Error::success();
}

bool launchRunsAt(const Artifact &artifact, uint32_t launch,
                  const SymbolSizes &sizes) {
  const std::vector<LaunchGuard> &guards = artifact.launchGuards;
  auto it = std::lower_bound(
      guards.begin(), guards.end(), launch,
      [](const LaunchGuard &guard, uint32_t l) { return guard.launch < l; });
  if (it == guards.end() || it->launch != launch || it->symbol >= sizes.size())
    return true;
  int64_t size = sizes[it->symbol];
  return size >= it->min && size <= it->max;
}

std::vector<uint32_t> launchesAt(const Artifact &artifact,
                                 const SymbolSizes &sizes) {
  std::vector<uint32_t> launches;
  for (uint32_t i = 0; i < artifact.launches.size(); ++i)
    if (launchRunsAt(artifact, i, sizes))
      launches.push_back(i);
  return launches;
}

Error verifySizeMasks(const Artifact &artifact) {
  const std::vector<SizeMask> &masks = artifact.sizeMasks;
  for (size_t i = 0; i < masks.size(); ++i) {
    const SizeMask &mask = masks[i];
    std::string what =
        fmt::format("section 'size-masks': record {} (input {})", i,
                    mask.input);
    if (mask.input >= artifact.inputs.size())
      return makeError("{}: the input is out of range (the signature has {} "
                       "inputs)",
                       what, artifact.inputs.size());
    if (i > 0 && mask.input <= masks[i - 1].input)
      return makeError("{}: inputs are not in increasing order (after input "
                       "{})",
                       what, masks[i - 1].input);
    if (mask.symbol >= artifact.symbolicDims.size())
      return makeError("{}: symbol {} is out of range (the artifact has {} "
                       "symbolic dims)",
                       what, mask.symbol, artifact.symbolicDims.size());
    const SymbolicDim &symbol = artifact.symbolicDims[mask.symbol];
    const TensorSignature &input = artifact.inputs[mask.input];
    constexpr uint64_t kLimit = uint64_t(1) << 32;
    if (mask.factor == 0 || mask.factor >= kLimit)
      return makeError("{}: factor {} is not in 1..2^32-1", what, mask.factor);
    if (mask.kind == SizeMaskKind::MeanScale) {
      if (input.dtype != DType::F32 || !input.shape.empty() ||
          mask.factor != 1)
        return makeError("{}: a mean scale is an f32 scalar with factor 1, "
                         "not {} {} with factor {}",
                         what, dtypeName(input.dtype),
                         formatShape(input.shape), mask.factor);
    } else if (mask.kind != SizeMaskKind::AdditiveMask &&
               mask.kind != SizeMaskKind::KeepMask) {
      return makeError("{}: unknown kind {}", what,
                       static_cast<uint32_t>(mask.kind));
    }
    bool floating = input.dtype == DType::F32 || input.dtype == DType::F16 ||
                    input.dtype == DType::BF16;
    if (mask.kind != SizeMaskKind::MeanScale &&
        (!floating || input.shape.size() != 1 ||
        input.shape[0] != symbol.max * static_cast<int64_t>(mask.factor) ||
         !input.symbolicAxes.empty()))
      return makeError("{}: input '{}' is {} {}, not an f32, f16 or bf16 "
                       "vector of {} * {} elements",
                       what, input.name, dtypeName(input.dtype),
                       formatShape(input.shape), symbol.name, mask.factor);
    if (artifact.host.writesDeviceInput(input.name))
      return makeError("{}: input '{}' is also computed by a host step", what,
                       input.name);
    for (const LaunchScale &scale : artifact.launchScales)
      if (scale.symbol == mask.symbol)
        return makeError("{}: symbol '{}' has launch scales, but a masked "
                         "symbol's padded slices must be computed (launch "
                         "{})",
                         what, symbol.name, scale.launch);
  }
  return Error::success();
}

void fillSizeMask(const Artifact &artifact, const SizeMask &mask, int64_t size,
                  std::vector<uint8_t> &bytes) {
  const TensorSignature &input = artifact.inputs[mask.input];
  if (mask.kind == SizeMaskKind::MeanScale) {
    const SymbolicDim &symbol = artifact.symbolicDims[mask.symbol];
    float scale = static_cast<float>(static_cast<double>(symbol.max) /
                                     static_cast<double>(std::max<int64_t>(
                                         size, 1)));
    bytes.resize(sizeof(float));
    std::memcpy(bytes.data(), &scale, sizeof(float));
    return;
  }
  uint64_t length = static_cast<uint64_t>(input.shape[0]);
  uint64_t valid = std::min<uint64_t>(
      length, static_cast<uint64_t>(std::max<int64_t>(size, 0)) * mask.factor);
  uint64_t elementSize = dtypeSize(input.dtype);
  bytes.assign(length * elementSize, 0);
  // An additive mask is 0 then -inf (sign, all-ones exponent, zero
  // mantissa); a keep mask 1 then 0.
  bool keep = mask.kind == SizeMaskKind::KeepMask;
  uint32_t f32 = keep ? 0x3F800000u : 0xFF800000u;
  uint16_t half = input.dtype == DType::F16 ? (keep ? 0x3C00u : 0xFC00u)
                                            : (keep ? 0x3F80u : 0xFF80u);
  uint64_t first = keep ? 0 : valid, last = keep ? valid : length;
  for (uint64_t i = first; i < last; ++i) {
    if (elementSize == 4)
      std::memcpy(bytes.data() + i * 4, &f32, 4);
    else
      std::memcpy(bytes.data() + i * 2, &half, 2);
  }
}

} // namespace kiln::runtime
