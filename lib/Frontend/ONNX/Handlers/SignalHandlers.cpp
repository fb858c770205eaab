//===- SignalHandlers.cpp - ONNX signal processing ops --------------------===//
//
// DFT and STFT are matrix products with constant twiddle matrices: one
// kiln.matmul of [..., (re | im) x L] with [[C, -S], [S, C]] (cosines and
// sines computed in f64 at compile time), so a transform reaches the
// tensor-core templates; O(L^2) work per transform, which suits the frame
// sizes of audio front ends, not long FFTs. The window functions and
// MelWeightMatrix depend only on their (compile-time) sizes and become
// constants computed in f64.
//
//===----------------------------------------------------------------------===//

#include "Composer.h"
#include "RuntimeAxes.h"
#include "WindowAttrs.h"

#include <cmath>

using namespace mlir;

namespace kiln::onnx_frontend {
namespace {

/// A scalar integer input that must be a compile-time constant, or, with
/// `declaredLength`, may be a graph input that output 0's declared length
/// fixes (a window's size; NodeImporter::constantOrDeclaredInts).
FailureOr<int64_t> constantScalarInt(NodeImporter &n, size_t i, StringRef what,
                                     bool declaredLength = false) {
  FailureOr<SmallVector<int64_t>> values =
      declaredLength
          ? n.constantOrDeclaredInts(
                i, what,
                [](ArrayRef<int64_t> declared)
                    -> std::optional<SmallVector<int64_t>> {
                  if (declared.size() != 1)
                    return std::nullopt;
                  return SmallVector<int64_t>(declared);
                })
          : n.constantInts(i, what);
  if (failed(values))
    return failure();
  if (values->size() != 1)
    return n.fail(Twine(what) + " must hold one value, got " +
                  Twine(values->size()));
  return values->front();
}

/// The element type named by an `output_datatype` attribute (FLOAT by
/// default); floats only.
FailureOr<Type> outputDatatype(NodeImporter &n) {
  int64_t code = n.intAttr("output_datatype", 1);
  Type type = convertElementType(static_cast<int32_t>(code), n.context());
  if (!type)
    return n.fail("output_datatype " +
                  onnxTypeName(static_cast<int32_t>(code)) +
                  " is not a supported element type");
  return type;
}

//===----------------------------------------------------------------------===//
// Windows and the mel filter bank
//===----------------------------------------------------------------------===//

/// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or
/// size - 1 (symmetric).
template <int kind> LogicalResult importWindow(NodeImporter &n) {
  if (failed(n.checkArity(1, 1)))
    return failure();
  // A size given at run time: the declared output's length, guarded.
  FailureOr<int64_t> size =
      constantScalarInt(n, 0, "size", /*declaredLength=*/true);
  FailureOr<Type> type = outputDatatype(n);
  if (failed(size) || failed(type))
    return failure();
  if (*size < 0)
    return n.fail("size " + Twine(*size) + " is negative");
  bool periodic = n.intAttr("periodic", 1) != 0;
  double period = static_cast<double>(periodic ? *size : *size - 1);
  double a0, a1, a2 = 0;
  if (kind == 0) { // Hann
    a0 = 0.5;
    a1 = 0.5;
  } else if (kind == 1) { // Hamming: alpha = 25 / 46
    a0 = 25.0 / 46.0;
    a1 = 1 - a0;
  } else { // Blackman
    a0 = 0.42;
    a1 = 0.5;
    a2 = 0.08;
  }
  SmallVector<double> values;
  for (int64_t i = 0; i < *size; ++i) {
    double t = 2 * M_PI * static_cast<double>(i) / period;
    values.push_back(a0 - a1 * std::cos(t) + a2 * std::cos(2 * t));
  }
  Composer c(n);
  if (values.empty())
    values.push_back(0.0);
  return bindComposed(c, c.constant(RankedTensorType::get({*size}, *type),
                                    values));
}

/// The triangular mel filters of ONNX's reference, step by step (bin edges
/// floored to FFT bins).
LogicalResult importMelWeightMatrix(NodeImporter &n) {
  if (failed(n.checkArity(5, 5)))
    return failure();
  FailureOr<int64_t> melBins = constantScalarInt(n, 0, "num_mel_bins");
  FailureOr<int64_t> dftLength = constantScalarInt(n, 1, "dft_length");
  FailureOr<int64_t> sampleRate = constantScalarInt(n, 2, "sample_rate");
  FailureOr<SmallVector<double>> lower =
      n.constantFloats(3, "lower_edge_hertz");
  FailureOr<SmallVector<double>> upper =
      n.constantFloats(4, "upper_edge_hertz");
  FailureOr<Type> type = outputDatatype(n);
  if (failed(melBins) || failed(dftLength) || failed(sampleRate) ||
      failed(lower) || failed(upper) || failed(type))
    return failure();
  if (*melBins < 1 || *dftLength < 1 || *sampleRate < 1 ||
      lower->size() != 1 || upper->size() != 1)
    return n.fail("expects positive num_mel_bins, dft_length and sample_rate "
                  "and scalar edge frequencies");
  int64_t spectrumBins = *dftLength / 2 + 1;
  auto toMel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  double lowMel = toMel(lower->front()), highMel = toMel(upper->front());
  double step = (highMel - lowMel) / static_cast<double>(*melBins + 2);
  SmallVector<int64_t> edges;
  for (int64_t i = 0; i < *melBins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (i * step + lowMel) / 2595) - 1);
    edges.push_back(static_cast<int64_t>(
        std::floor((*dftLength + 1) * hz / static_cast<double>(*sampleRate))));
  }
  SmallVector<double> values(spectrumBins * *melBins, 0.0);
  auto at = [&](int64_t bin, int64_t mel) -> double & {
    return values[bin * *melBins + mel];
  };
  for (int64_t i = 0; i < *melBins; ++i) {
    int64_t left = edges[i], center = edges[i + 1], right = edges[i + 2];
    if (left < 0 || right >= spectrumBins || center < left || right < center)
      return n.fail("mel filter " + Twine(i) + " spans bins [" + Twine(left) +
                    ", " + Twine(right) + "], outside the spectrum's " +
                    Twine(spectrumBins) + " bins");
    if (center == left)
      at(center, i) = 1;
    else
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / (center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / (right - center);
  }
  Composer c(n);
  return bindComposed(
      c, c.constant(RankedTensorType::get({spectrumBins, *melBins}, *type),
                    values));
}

//===----------------------------------------------------------------------===//
// DFT, STFT
//===----------------------------------------------------------------------===//

/// The DFT of `x` ([..., complex] with the last dim 1 (real) or 2 (re, im))
/// along `axis` (< rank - 1), the signal cut or zero-padded to `length`,
/// keeping `length / 2 + 1` bins when `onesided`; inverse scales by
/// 1 / length. Result [..., bins at axis, ..., 2].
Value dft(Composer &c, Value x, int64_t axis, int64_t length, bool inverse,
          bool onesided) {
  if (!x)
    return {};
  NodeImporter &n = c.importer();
  RankedTensorType type = typeOf(x);
  Type elementType = type.getElementType();
  int64_t rank = type.getRank();
  int64_t parts = type.getShape().back();
  int64_t have = type.getDimSize(axis);
  // Fit the signal to `length`.
  if (have > length) {
    x = c.sliceAxis(x, axis, 0, length);
  } else if (have < length) {
    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    high[axis] = length - have;
    x = c.make<PadOp>(
        x, {n.named("mode", PadModeAttr::get(n.context(), PadMode::Constant)),
            n.namedArray("low", low), n.namedArray("high", high)});
  }
  // [..., L, ..., parts] -> [others..., parts, L] -> [others..., parts * L].
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(rank - 1);
  perm.push_back(axis);
  Value moved = c.transpose(x, perm);
  if (!moved)
    return {};
  SmallVector<int64_t> others;
  for (int64_t d : ArrayRef<int64_t>(perm).drop_back(2))
    others.push_back(type.getDimSize(d));
  SmallVector<int64_t> flatShape(others);
  flatShape.push_back(parts * length);
  Value rows = c.reshape(moved, flatShape);

  // Twiddles: out_re[k] = sum re[l] cos + s * im[l] sin, out_im[k] = sum
  // im[l] cos - s * re[l] sin, with s = 1 forward (e^-i) and -1 inverse.
  int64_t bins = onesided ? length / 2 + 1 : length;
  double sign = inverse ? -1.0 : 1.0;
  double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  SmallVector<double> matrix(parts * length * 2 * bins);
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t l = 0; l < length; ++l)
      for (int64_t k = 0; k < bins; ++k) {
        // Reduce l * k mod length first: exact angles for large indices.
        double angle = 2 * M_PI * static_cast<double>((l * k) % length) /
                       static_cast<double>(length);
        double cosv = std::cos(angle) * scale, sinv = std::sin(angle) * scale;
        int64_t row = p * length + l;
        double toRe = p == 0 ? cosv : sign * sinv;
        double toIm = p == 0 ? -sign * sinv : cosv;
        matrix[row * 2 * bins + k] = toRe;
        matrix[row * 2 * bins + bins + k] = toIm;
      }
  Value twiddles = c.constant(
      RankedTensorType::get({parts * length, 2 * bins}, elementType), matrix);
  Value spectrum = c.make<MatmulOp>({rows, twiddles}); // [others..., 2 * bins]
  // [others..., 2, bins] -> back to [..., bins at axis, ..., 2].
  SmallVector<int64_t> splitShape(others);
  splitShape.push_back(2);
  splitShape.push_back(bins);
  Value split = c.reshape(spectrum, splitShape);
  // Position of each result dim in `split`: the others keep their order,
  // the bins go to `axis`, the (re, im) pair last.
  SmallVector<int64_t> back;
  int64_t other = 0;
  for (int64_t d = 0; d < rank - 1; ++d)
    back.push_back(d == axis ? rank - 1 : other++);
  back.push_back(rank - 2);
  return c.transpose(split, back);
}

/// DFT-17 takes the axis as an attribute (default 1), DFT-20 as an optional
/// input (default -2); both count it in the rank that includes the trailing
/// complex dimension.
LogicalResult importDFT(NodeImporter &n) {
  if (failed(n.checkArity(1, 3)))
    return failure();
  RankedTensorType type = n.inputType(0);
  int64_t rank = type.getRank();
  if (rank < 2 || (type.getShape().back() != 1 && type.getShape().back() != 2))
    return n.fail("expects [..., signal..., 1 or 2], got shape " +
                  formatInts(type.getShape()));
  if (!isa<FloatType>(type.getElementType()))
    return n.fail("expects a floating-point signal");
  bool inverse = n.intAttr("inverse", 0) != 0;
  bool onesided = n.intAttr("onesided", 0) != 0;
  if (onesided && type.getShape().back() == 2 && !inverse)
    return n.fail("onesided needs a real input ([..., 1])");
  std::optional<int64_t> givenLength;
  if (n.hasInput(1)) {
    FailureOr<int64_t> value = constantScalarInt(n, 1, "dft_length");
    if (failed(value))
      return failure();
    givenLength = *value;
  }
  // An axis given at run time (DFT-20): each signal axis whose transform
  // has the declared output shape is built, and the input picks one on
  // the device, as CumSum's axis.
  std::optional<SmallVector<int64_t>> declared = n.declaredOutputShape(0);
  if (n.opset() >= 20 && n.canGuardInput(2) &&
      n.inputType(2).getNumElements() == 1 && declared && !givenLength) {
    SmallVector<AxesChoice> choices;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      SmallVector<int64_t> shape(type.getShape());
      shape[d] = onesided ? shape[d] / 2 + 1 : shape[d];
      shape.back() = 2;
      if (shape == *declared && type.getDimSize(d) >= 1)
        choices.push_back({{d}, {}});
    }
    if (!choices.empty())
      return bind(n, selectByRuntimeAxes(
                         n, 2, "axis", type.getShape(), choices,
                         /*noopWithEmptyAxes=*/false,
                         [&](ArrayRef<int64_t> axis) -> FailureOr<Value> {
                           Composer c(n);
                           Value y = dft(c, n.input(0), axis.front(),
                                         type.getDimSize(axis.front()), inverse,
                                         onesided);
                           if (c.failed())
                             return failure();
                           return y;
                         }));
  }
  int64_t axis = n.opset() < 20 ? n.intAttr("axis", 1) : -2;
  if (n.opset() >= 20 && n.hasInput(2)) {
    FailureOr<int64_t> value = constantScalarInt(n, 2, "axis");
    if (failed(value))
      return failure();
    axis = *value;
  }
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank - 1)
    return n.fail("axis " + Twine(axis) + " is not a signal dimension of an "
                  "input of rank " + Twine(rank));
  int64_t length = givenLength.value_or(type.getDimSize(axis));
  if (length < 1)
    return n.fail("dft_length " + Twine(length) + " must be positive");
  Composer c(n);
  return bindComposed(c, dft(c, n.input(0), axis, length, inverse, onesided));
}

/// Frames [N, frames, frame_length, parts] gathered with constant indices,
/// times the window, then a DFT along the frame.
LogicalResult importSTFT(NodeImporter &n) {
  if (failed(n.checkArity(2, 4)))
    return failure();
  RankedTensorType type = n.inputType(0);
  if (type.getRank() != 3 ||
      (type.getDimSize(2) != 1 && type.getDimSize(2) != 2))
    return n.fail("expects a signal [batch, length, 1 or 2], got shape " +
                  formatInts(type.getShape()));
  FailureOr<int64_t> step = constantScalarInt(n, 1, "frame_step");
  if (failed(step))
    return failure();
  int64_t frameLength = -1;
  if (n.hasInput(3)) {
    FailureOr<int64_t> value = constantScalarInt(n, 3, "frame_length");
    if (failed(value))
      return failure();
    frameLength = *value;
  } else if (n.hasInput(2)) {
    frameLength = n.inputType(2).getDimSize(0);
  } else {
    frameLength = type.getDimSize(1);
  }
  int64_t signalLength = type.getDimSize(1);
  if (*step < 1 || frameLength < 1 || frameLength > signalLength)
    return n.fail("frame_step " + Twine(*step) + " and frame_length " +
                  Twine(frameLength) + " do not fit a signal of " +
                  Twine(signalLength));
  if (n.hasInput(2) && (n.inputType(2).getRank() != 1 ||
                        n.inputType(2).getDimSize(0) != frameLength))
    return n.fail("window must have frame_length (" + Twine(frameLength) +
                  ") elements");
  bool onesided = n.intAttr("onesided", 1) != 0;
  if (onesided && type.getDimSize(2) == 2)
    return n.fail("onesided needs a real signal ([batch, length, 1])");
  int64_t frames = 1 + (signalLength - frameLength) / *step;
  Composer c(n);
  Type i64 = n.builder().getI64Type();
  SmallVector<double> indices;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < frameLength; ++t)
      indices.push_back(static_cast<double>(f * *step + t));
  Value index =
      c.constant(RankedTensorType::get({frames, frameLength}, i64), indices);
  Value framed = c.make<GatherOp>({n.input(0), index}, {n.namedI64("axis", 1)});
  if (n.hasInput(2)) {
    Value window = c.cast(n.input(2), type.getElementType());
    framed = c.make<MulOp>({framed, c.reshape(window, {frameLength, 1})});
  }
  return bindComposed(c, dft(c, framed, 2, frameLength, /*inverse=*/false,
                             onesided));
}

} // namespace

void registerSignalHandlers(SmallVectorImpl<Handler> &handlers) {
  constexpr const char *sizeLimit = "size: " KILN_FIXED_BY_DECLARED_SHAPE;
  handlers.append({
      {"HannWindow", 17, importWindow<0>, sizeLimit},
      {"HammingWindow", 17, importWindow<1>, sizeLimit},
      {"BlackmanWindow", 17, importWindow<2>, sizeLimit},
      {"MelWeightMatrix", 17, importMelWeightMatrix,
       "every input must be a compile-time constant"},
      {"DFT", 17, importDFT,
       "dft_length must be a compile-time constant; O(L^2) matrix product"},
      {"DFT", 20, importDFT,
       "dft_length and axis must be compile-time constants; O(L^2) matrix "
       "product"},
      {"STFT", 17, importSTFT,
       "frame_step and frame_length must be compile-time constants"},
  });
}

} // namespace kiln::onnx_frontend
