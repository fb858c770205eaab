//===- RecurrenceSource.cpp - Specialise the persistent recurrence kernel -===//
//
// The source NVRTC compiles is: templates/ElementType.cuh, Common.cuh, a
// generated `struct Cfg` and the cell's three activations (act0..act2, the
// op's names and alpha/beta written out), templates/Recurrence.cuh and one
// `extern "C"` entry point with `__cluster_dims__` on sm_90.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/RecurrenceKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace kiln::contraction {
namespace {

#include "ContractionKernelTemplates.inc"

/// `v` exactly: a hexadecimal float literal (a constant expression), or
/// its bits for an infinity or NaN.
std::string floatLiteral(float v) {
  char text[48];
  if (std::isfinite(v)) {
    std::snprintf(text, sizeof text, "(%af)", static_cast<double>(v));
  } else {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(text, sizeof text, "__int_as_float(0x%08x)", bits);
  }
  return text;
}

/// `return ...;` of activation `a` on `x`; empty for an unknown name.
std::string activationBody(const RecurrentActivation &a) {
  std::string alpha = floatLiteral(a.alpha), beta = floatLiteral(a.beta);
  const std::string &n = a.name;
  if (n == "relu")
    return "return maxNaN(x, 0.0f);";
  if (n == "tanh")
    return "return tanhf(x);";
  if (n == "sigmoid")
    return "return 1.0f / (1.0f + expf(-x));";
  if (n == "softsign")
    return "return x / (1.0f + fabsf(x));";
  if (n == "softplus")
    return "return x > 20.0f ? x : log1pf(expf(x));";
  if (n == "leakyrelu")
    return "return x >= 0.0f ? x : " + alpha + " * x;";
  if (n == "thresholdedrelu")
    return "return x > " + alpha + " ? x : 0.0f;";
  if (n == "elu")
    return "return x >= 0.0f ? x : " + alpha + " * expm1f(x);";
  if (n == "hardsigmoid")
    return "return minNaN(maxNaN(" + alpha + " * x + " + beta +
           ", 0.0f), 1.0f);";
  if (n == "affine")
    return "return " + alpha + " * x + " + beta + ";";
  if (n == "scaledtanh")
    return "return " + alpha + " * tanhf(" + beta + " * x);";
  return "";
}

uint64_t activationCount(RecurrentCell cell) {
  return cell == RecurrentCell::Rnn ? 1 : cell == RecurrentCell::Gru ? 2 : 3;
}

const char *cellName(RecurrentCell cell) {
  return cell == RecurrentCell::Rnn   ? "rnn"
         : cell == RecurrentCell::Gru ? "gru"
                                      : "lstm";
}

/// Batch entries one thread accumulates at once (registers per row).
uint32_t batchTile(const RecurrenceConfig &c) {
  return std::min<uint32_t>(c.batchChunk, 16);
}

std::vector<KernelParameter> recurrenceParameters(const RecurrenceProblem &p) {
  using K = KernelParameter::Kind;
  std::vector<KernelParameter> params = {
      {K::Pointer, "X"}, {K::Pointer, "R"}, {K::Pointer, "H0"}};
  if (p.cell == RecurrentCell::Lstm)
    params.push_back({K::Pointer, "C0"});
  if (p.peepholes)
    params.push_back({K::Pointer, "P"});
  if (p.sequenceLens)
    params.push_back({K::Pointer, "L"});
  if (p.resetBias)
    params.push_back({K::Pointer, "RB"});
  params.push_back({K::Pointer, "Y"});
  params.push_back({K::Pointer, "YH"});
  if (p.cell == RecurrentCell::Lstm)
    params.push_back({K::Pointer, "YC"});
  return params;
}

uint32_t align16(uint64_t bytes) {
  return static_cast<uint32_t>((bytes + 15) / 16 * 16);
}

} // namespace

uint64_t recurrenceUnitsPerBlock(const RecurrenceProblem &p,
                                 const RecurrenceConfig &c) {
  return (p.hidden + c.blocks - 1) / c.blocks;
}

RecurrenceSharedLayout recurrenceLayout(const RecurrenceProblem &p,
                                        const RecurrenceConfig &c) {
  RecurrenceSharedLayout l;
  uint64_t u = recurrenceUnitsPerBlock(p, c);
  uint32_t elem = dtypeBytes(p.type);
  // The kSplit lanes of a row read kSplit consecutive elements, the rows
  // of a warp one stride apart: a stride of kSplit words modulo 32 (f32;
  // for 16-bit elements, max(2, kSplit) elements modulo 64) puts every lane
  // of a warp on its own bank, or on a word another lane reads too.
  uint64_t modulus = elem == 4 ? 32 : 64;
  uint64_t target = elem == 4 ? c.kSplit : std::max<uint32_t>(2, c.kSplit);
  l.weightStride = static_cast<uint32_t>(
      p.hidden + (target + modulus - p.hidden % modulus) % modulus);
  uint32_t at = 0;
  if (c.recurrentWeightsShared) {
    l.weights = at;
    at += align16(p.gates() * u * l.weightStride * elem);
  }
  l.hidden = at;
  const uint64_t rows = c.batchChunk;
  at += align16(2 * p.hidden * rows * 4);
  l.gates = at;
  at += align16(p.gates() * u * rows * 4);
  l.cell = at;
  at += align16(u * rows * 4);
  l.resetHidden = at;
  if (p.cell == RecurrentCell::Gru && !p.linearBeforeReset)
    at += align16(p.hidden * rows * 4);
  l.total = at;
  return l;
}

RecurrenceConfig pickRecurrenceConfig(const RecurrenceProblem &p,
                                      uint32_t smVersion,
                                      uint32_t maxSharedBytes) {
  RecurrenceConfig c;
  c.blocks = 1;
  if (smVersion >= 90)
    while (c.blocks < 8 && c.blocks * 2 <= p.hidden)
      c.blocks *= 2;
  uint64_t rows = p.gates() * recurrenceUnitsPerBlock(p, c);
  c.kSplit = 1;
  while (c.kSplit < 8 && rows * c.kSplit * 2 <= 512 && c.kSplit * 2 <= p.hidden)
    c.kSplit *= 2;
  c.threads = recurrenceThreads(p, c.blocks, c.kSplit);
  // Up to 16 batch rows a cluster (more clusters, on more SMs, for a larger
  // batch); R in shared memory when it fits beside the chunk's state, else
  // in global memory; fewer rows a chunk while even the state does not fit.
  c.batchChunk = static_cast<uint32_t>(std::min<uint64_t>(p.batch, 16));
  while (true) {
    c.recurrentWeightsShared = true;
    if (recurrenceLayout(p, c).total <= maxSharedBytes)
      break;
    c.recurrentWeightsShared = false;
    if (recurrenceLayout(p, c).total <= maxSharedBytes || c.batchChunk == 1)
      break;
    c.batchChunk = (c.batchChunk + 1) / 2;
  }
  return c;
}

uint64_t recurrenceChunks(const RecurrenceProblem &p,
                          const RecurrenceConfig &c) {
  return (p.batch + c.batchChunk - 1) / std::max<uint32_t>(c.batchChunk, 1);
}

uint32_t recurrenceThreads(const RecurrenceProblem &p, uint32_t blocks,
                           uint32_t kSplit) {
  RecurrenceConfig c;
  c.blocks = blocks;
  uint64_t rows = p.gates() * recurrenceUnitsPerBlock(p, c) * kSplit;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>((rows + 31) / 32 * 32, 64, 1024));
}

std::string recurrenceUnsupportedReason(const RecurrenceProblem &p,
                                        const RecurrenceConfig &c,
                                        uint32_t smVersion,
                                        uint32_t maxSharedBytes) {
  if (smVersion != 80 && smVersion != 90)
    return "the recurrence kernel targets sm_80 or sm_90, not sm_" +
           std::to_string(smVersion);
  if (p.type != DType::F32 && p.type != DType::F16 && p.type != DType::BF16)
    return "the recurrence kernel reads f32, f16 or bf16";
  if (!p.steps || !p.batch || !p.hidden)
    return "an empty dimension";
  if (p.steps > (1u << 30) || p.batch > (1u << 20) || p.hidden > 65536 ||
      p.steps * p.batch * p.gates() * p.hidden > (uint64_t(1) << 40))
    return "sizes past the kernel's indexing";
  if (c.batchChunk < 1 || c.batchChunk > p.batch)
    return "a batch chunk must hold 1 to B rows";
  if (recurrenceChunks(p, c) * c.blocks > 65535)
    return "more than 65535 blocks";
  if (p.activations.size() != activationCount(p.cell))
    return std::string("a ") + cellName(p.cell) + " cell takes " +
           std::to_string(activationCount(p.cell)) + " activations";
  for (const RecurrentActivation &a : p.activations)
    if (activationBody(a).empty())
      return "unknown activation '" + a.name + "'";
  if (c.blocks != 1 && smVersion < 90)
    return "a cluster of blocks needs sm_90";
  if (c.blocks < 1 || c.blocks > 8 || (c.blocks & (c.blocks - 1)) ||
      c.blocks > p.hidden)
    return "blocks must be a power of two from 1 to min(8, H)";
  if (c.kSplit < 1 || c.kSplit > 8 || (c.kSplit & (c.kSplit - 1)))
    return "the k split must be 1, 2, 4 or 8";
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32)
    return "threads must be a multiple of 32 up to 1024";
  uint32_t total = recurrenceLayout(p, c).total;
  if (total > maxSharedBytes)
    return "the state needs " + std::to_string(total) +
           " bytes of shared memory per block, more than the " +
           std::to_string(maxSharedBytes) + " available";
  return "";
}

std::string describeRecurrence(const RecurrenceProblem &p,
                               const RecurrenceConfig &c) {
  std::string s = std::string("persistent ") + cellName(p.cell) + ", ";
  uint64_t chunks = recurrenceChunks(p, c);
  std::string n = std::to_string(chunks);
  if (c.blocks > 1)
    s += (chunks > 1 ? n + " clusters of " : std::string("cluster of ")) +
         std::to_string(c.blocks) + " x ";
  else
    s += chunks > 1 ? n + " blocks x " : std::string("1 block x ");
  s += std::to_string(c.threads) + " threads";
  if (c.kSplit > 1)
    s += " (k split " + std::to_string(c.kSplit) + ")";
  if (recurrenceChunks(p, c) > 1)
    s += ", " + std::to_string(c.batchChunk) + " batch rows a " +
         (c.blocks > 1 ? "cluster" : "block");
  s += ", R in ";
  s += c.recurrentWeightsShared ? "shared memory" : "global memory";
  return s;
}

runtime::Expected<std::string>
generateRecurrenceSource(const RecurrenceProblem &p, const RecurrenceConfig &c,
                         const GenerateOptions &options) {
  // The layout's own budget was checked by the caller against the chip.
  if (std::string why =
          recurrenceUnsupportedReason(p, c, options.smVersion, UINT32_MAX);
      !why.empty())
    return runtime::Error::failure("recurrence: " + why);
  auto i = [](uint64_t v) { return std::to_string(v); };
  auto flag = [](bool v) { return v ? "true" : "false"; };
  RecurrenceSharedLayout l = recurrenceLayout(p, c);
  std::string s = "// Generated by Kiln: " + describeRecurrence(p, c) + "\n";
  s += kElementTypeTemplate;
  s += kCommonTemplate;
  s += "\nstruct Cfg {\n";
  s += "  static constexpr int T = " + i(p.steps) + ", B = " + i(c.batchChunk) +
       ", BATCH = " + i(p.batch) + ", H = " + i(p.hidden) +
       ", G = " + i(p.gates()) + ", U = " + i(recurrenceUnitsPerBlock(p, c)) +
       ";\n";
  s += "  static constexpr int BLOCKS = " + i(c.blocks) +
       ", THREADS = " + i(c.threads) + ", KSPLIT = " + i(c.kSplit) +
       ", BATCH_TILE = " + i(batchTile(c)) +
       ", CELL = " + i(static_cast<int>(p.cell)) + ";\n";
  s += "  static constexpr int IN_CODE = " +
       std::string(elementTypeName(p.type)) + ";\n";
  s += std::string("  static constexpr bool REVERSE = ") + flag(p.reverse) +
       ", LBR = " + flag(p.linearBeforeReset) +
       ", INPUT_FORGET = " + flag(p.inputForget) +
       ", PEEP = " + flag(p.peepholes) + ", LENS = " + flag(p.sequenceLens) +
       ", RBIAS = " + flag(p.resetBias) +
       ", R_SHARED = " + flag(c.recurrentWeightsShared) +
       ", HAS_CLIP = " + flag(p.clip.has_value()) + ";\n";
  s += "  static constexpr float CLIP = " + floatLiteral(p.clip.value_or(0)) +
       ";\n";
  s += "  static constexpr i64 X_OFF = " + i(p.offsetX) +
       ", R_OFF = " + i(p.offsetR) + ", H0_OFF = " + i(p.offsetH0) +
       ", C0_OFF = " + i(p.offsetC0) + ", P_OFF = " + i(p.offsetP) +
       ", L_OFF = " + i(p.offsetLens) + ", RB_OFF = " + i(p.offsetResetBias) +
       ";\n";
  s += "  static constexpr int WSTRIDE = " + i(l.weightStride) +
       ", SM_WEIGHTS = " + i(l.weights) + ", SM_HIDDEN = " + i(l.hidden) +
       ", SM_GATES = " + i(l.gates) + ", SM_CELL = " + i(l.cell) +
       ", SM_RH = " + i(l.resetHidden) + ", SM_TOTAL = " + i(l.total) +
       ";\n};\n\n";
  for (size_t k = 0; k < 3; ++k) {
    const RecurrentActivation &a =
        p.activations[std::min(k, p.activations.size() - 1)];
    s += "KILN_INLINE float act" + i(k) + "(float x) { " + activationBody(a) +
         " }\n";
  }
  s += kRecurrenceTemplate;
  s += "\n";
  std::string list;
  for (const KernelParameter &param : recurrenceParameters(p)) {
    bool output = param.name == "Y" || param.name == "YH" || param.name == "YC";
    list += std::string(list.empty() ? "" : ", ") +
            (output ? "void *__restrict__ " : "const void *__restrict__ ") +
            param.name;
  }
  s += "extern \"C\" __global__ void __launch_bounds__(" + i(c.threads) + ")";
  if (c.blocks > 1)
    s += " __cluster_dims__(" + i(c.blocks) + ", 1, 1)";
  s += "\n" + options.name + "(" + list + ") {\n";
  auto arg = [&](const char *name, bool present) {
    return present ? std::string(name) : std::string("nullptr");
  };
  bool lstm = p.cell == RecurrentCell::Lstm;
  s += "  kiln_rnn::recurrence(X, R, H0, " + arg("C0", lstm) + ", " +
       arg("P", p.peepholes) + ", " +
       (p.sequenceLens ? "(const int *)L" : "nullptr") + ", " +
       arg("RB", p.resetBias) + ", Y, YH, " + arg("YC", lstm) + ");\n}\n";
  return s;
}

runtime::Expected<GemmKernels>
specializeRecurrence(const RecurrenceProblem &p, const RecurrenceConfig &c,
                     const GenerateOptions &options) {
  runtime::Expected<std::string> source =
      generateRecurrenceSource(p, c, options);
  if (!source)
    return source.takeError();
  GemmKernels result;
  result.source = source.take();
  result.nvrtcOptions = templateNvrtcOptions(options.smVersion, false);
  GemmKernel kernel;
  kernel.name = options.name;
  kernel.block = {c.threads, 1, 1};
  kernel.grid = {static_cast<uint32_t>(c.blocks * recurrenceChunks(p, c)), 1,
                 1};
  kernel.dynamicSharedBytes = recurrenceLayout(p, c).total;
  kernel.params = recurrenceParameters(p);
  result.kernels.push_back(std::move(kernel));
  return result;
}

runtime::Expected<GemmKernels>
generateRecurrence(const RecurrenceProblem &p, const RecurrenceConfig &c,
                   const GenerateOptions &options) {
  runtime::Expected<GemmKernels> kernels = specializeRecurrence(p, c, options);
  if (!kernels)
    return kernels;
  if (runtime::Error err = compileKernels(*kernels, options.name))
    return err;
  return kernels;
}

} // namespace kiln::contraction
