//===- AttentionSource.cpp - Specialise and compile the attention kernel --===//
//
// The source NVRTC compiles is: the shared helpers (templates/Common.cuh), a
// generated `struct Cfg` of compile-time facts, the generated score and
// output bodies (kilnScore, kilnOutput), templates/Attention.cuh (and for
// the sm_90a variant the two generated wgmma instructions and
// templates/AttentionWgmma.cuh), and one `extern "C"` entry point whose
// parameters are Q, K, V, O and the bodies' extra pointers.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include "kiln/Target/CUDA/AttentionKernels.h"
#include "kiln/Target/CUDA/Nvrtc.h"

namespace kiln::contraction {
namespace {

#include "ContractionKernelTemplates.inc"

bool tensorCores(const AttentionProblem &p) {
  return p.inputType != DType::F32;
}

uint64_t nextPowerOfTwo(uint64_t v) {
  uint64_t r = 8;
  while (r < v)
    r *= 2;
  return r;
}

/// Elements one copy may move: a whole 16-byte chunk when the base and
/// every row start are aligned to it, else the largest piece they allow.
uint32_t copyVector(uint32_t elemBytes, uint32_t align,
                    const AttentionStrides &s, uint64_t headStrideUsed) {
  uint32_t vec = 16 / elemBytes;
  auto fits = [&](uint32_t v) {
    uint64_t bytes = uint64_t(v) * elemBytes;
    return align % bytes == 0 && s.row % v == 0 && s.outer % v == 0 &&
           headStrideUsed % v == 0 && s.offset % v == 0;
  };
  while (vec > 1 && !fits(vec))
    vec /= 2;
  return vec;
}

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/// The wgmma kernel's tiles: Q/K rows and V rows are whole 64-column
/// (128-byte) swizzle blocks.
uint64_t wgmmaQkWidth(const AttentionProblem &p) {
  return roundUp(p.headDim, 64);
}
uint64_t wgmmaValueWidth(const AttentionProblem &p) {
  return roundUp(p.valueDim, 64);
}
/// 1024 bytes to align the tiles, Q, the ring, two mbarriers a stage.
uint64_t wgmmaSharedBytes(const AttentionProblem &p, uint32_t blockM,
                          uint32_t stages) {
  uint64_t q = uint64_t(blockM) * wgmmaQkWidth(p) * 2;
  uint64_t stage = 64 * (wgmmaQkWidth(p) + wgmmaValueWidth(p)) * 2;
  return 1024 + q + stages * stage + 16 * stages;
}

struct AttentionPlan {
  uint32_t elemBytes = 2, outBytes = 4;
  uint64_t dPadded = 0, dvPadded = 0;
  uint32_t vecQ = 1, vecK = 1, vecV = 1;
  uint32_t sharedBytes = 0;
};

AttentionPlan planAttention(const AttentionProblem &p,
                            const AttentionConfig &c) {
  AttentionPlan plan;
  plan.elemBytes = dtypeBytes(p.inputType);
  plan.outBytes = dtypeBytes(p.outputType);
  plan.dPadded = nextPowerOfTwo(p.headDim);
  plan.dvPadded = nextPowerOfTwo(p.valueDim);
  plan.vecQ = copyVector(plan.elemBytes, p.alignQ, p.q, p.q.head);
  plan.vecK = copyVector(plan.elemBytes, p.alignK, p.k, p.k.head);
  plan.vecV = copyVector(plan.elemBytes, p.alignV, p.v, p.v.head);
  if (c.wgmma) {
    plan.sharedBytes =
        static_cast<uint32_t>(wgmmaSharedBytes(p, c.blockM, c.stages));
    return plan;
  }
  uint64_t q = uint64_t(c.blockM) * plan.dPadded * plan.elemBytes;
  uint64_t stage =
      uint64_t(c.blockN) * (plan.dPadded + plan.dvPadded) * plan.elemBytes;
  plan.sharedBytes = static_cast<uint32_t>(q + 2 * stage);
  return plan;
}

std::string bodySource(const std::string &fn, const std::string &args,
                       const std::string &body,
                       const std::vector<std::string> &operands) {
  std::string s = "struct " + args + " {\n";
  s += "  const void *extra[" + std::to_string(std::max<size_t>(1, operands.size())) +
       "] = {};\n};\n\n";
  s += "KILN_INLINE float " + fn +
       "(unsigned batch, int row, int col, float acc, const " + args +
       " &ep) {\n";
  for (size_t i = 0; i < operands.size(); ++i)
    s += "  const void *extra" + std::to_string(i) + " = ep.extra[" +
         std::to_string(i) + "];\n";
  s += "  (void)batch; (void)row; (void)col; (void)ep;\n";
  s += body.empty() ? "  return acc;" : body;
  return s + "\n}\n\n";
}

/// The wgmma kernel's two instructions (inline PTX with one operand per
/// accumulator, written out here because the lists depend on N):
/// wgmmaScores, S (m64n64k16, 32 accumulators) += Q K^T from two K-major
/// descriptors, `accumulate` 0 for the first k16 step; wgmmaValues, O
/// (m64n<NV>k16) += P V with P's four A registers and V's MN-major
/// (transposed) descriptor.
std::string wgmmaInstructions(const AttentionProblem &p) {
  const char *type = p.inputType == DType::BF16 ? "bf16" : "f16";
  auto operands = [](uint32_t n) {
    std::string list;
    for (uint32_t i = 0; i < n; ++i)
      list += (i ? ", %" : "%") + std::to_string(i);
    return list;
  };
  auto outputs = [](uint32_t n) {
    std::string s;
    for (uint32_t i = 0; i < n; ++i)
      s += (i ? ", " : "") + std::string("\"+f\"(d[") + std::to_string(i) +
           "])";
    return s;
  };
  std::string s = "KILN_INLINE void wgmmaScores(float (&d)[32], u64 descA, "
                  "u64 descB, u32 accumulate) {\n";
  s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %34, 0;\\n\"\n";
  s += std::string("    \"wgmma.mma_async.sync.aligned.m64n64k16.f32.") +
       type + "." + type + " {" + operands(32) +
       "}, %32, %33, p, 1, 1, 0, 0;\\n}\"\n    : " + outputs(32) +
       "\n    : \"l\"(descA), \"l\"(descB), \"r\"(accumulate));\n}\n\n";
  const uint32_t nv = static_cast<uint32_t>(wgmmaValueWidth(p));
  const uint32_t regs = nv / 2;
  auto r = [&](uint32_t k) { return "%" + std::to_string(regs + k); };
  s += "KILN_INLINE void wgmmaValues(float (&d)[" + std::to_string(regs) +
       "], const u32 (&a)[4], u64 descB) {\n";
  s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + r(5) +
       ", 0;\\n\"\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(nv) +
       "k16.f32." + type + "." + type + " {" + operands(regs) + "}, {" + r(0) +
       ", " + r(1) + ", " + r(2) + ", " + r(3) + "}, " + r(4) +
       ", p, 1, 1, 1;\\n}\"\n    : " + outputs(regs) +
       "\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), "
       "\"l\"(descB), \"r\"(1));\n}\n\n";
  return s;
}

std::vector<KernelParameter> attentionParameters(const AttentionBodies &b) {
  using K = KernelParameter::Kind;
  std::vector<KernelParameter> params = {{K::Pointer, "Q"},
                                         {K::Pointer, "K"},
                                         {K::Pointer, "V"},
                                         {K::Pointer, "C"}};
  for (size_t i = 0; i < b.scoreOperands.size(); ++i)
    params.push_back({K::Pointer, "score" + std::to_string(i)});
  for (size_t i = 0; i < b.outputOperands.size(); ++i)
    params.push_back({K::Pointer, "out" + std::to_string(i)});
  return params;
}

} // namespace

std::string AttentionConfig::describe(const AttentionProblem &p) const {
  return std::string(wgmma            ? "attn_wgmma_f16 "
                     : tensorCores(p) ? "attn_mma_f16 "
                                      : "attn_simt_f32 ") +
         std::to_string(blockM) + "x" + std::to_string(blockN) + " w" +
         std::to_string(warps) +
         (wgmma ? " s" + std::to_string(stages) : std::string()) + " d" +
         std::to_string(p.headDim) + (p.causalSkip ? " causal" : "");
}

std::string wgmmaUnsupportedReason(const AttentionProblem &p) {
  if (!tensorCores(p))
    return "f32 inputs";
  return "";
}

std::string unsupportedReason(const AttentionProblem &p) {
  if (p.seqQ == 0 || p.seqK == 0 || p.headDim == 0 || p.valueDim == 0 ||
      p.outer == 0 || p.heads == 0)
    return "an empty dimension";
  if (p.keyHeadGroup == 0 || p.valueHeadGroup == 0 ||
      p.heads % p.keyHeadGroup != 0 || p.heads % p.valueHeadGroup != 0)
    return "query heads are not a multiple of the key/value heads";
  if (p.headDim > 256 || p.valueDim > 256)
    return "head dimension above 256";
  if (p.seqQ > (1u << 30) || p.seqK > (1u << 30) ||
      p.outer * p.heads > 65535)
    return "more than 65535 (batch, head) pairs or 2^30 rows";
  if (p.inputType != DType::F32 && p.inputType != DType::BF16 &&
      p.inputType != DType::F16)
    return "inputs are not f32, bf16 or f16";
  if (tensorCores(p) && (p.headDim % 16 != 0 || p.valueDim % 16 != 0))
    return "a 16-bit head dimension that is not a multiple of 16";
  if (!dtypeBytes(p.outputType))
    return "the output is not f32, bf16 or f16";
  return "";
}

AttentionConfig pickAttentionConfig(const AttentionProblem &p,
                                    uint32_t smVersion, bool wgmma) {
  AttentionConfig c;
  if (smVersion == 90 && wgmma && unsupportedReason(p).empty() &&
      wgmmaUnsupportedReason(p).empty()) {
    // A consumer warpgroup per 64 query rows, two unless one covers the
    // queries or the head is wider than 128 (two consumers' 128 O
    // accumulators a thread would spill at 224 registers; one has 255);
    // 64-key tiles in the deepest ring (up to 4) that fits.
    c.wgmma = true;
    c.blockM = p.seqQ > 64 && std::max(p.headDim, p.valueDim) <= 128 ? 128 : 64;
    c.blockN = 64;
    c.warps = 4 * (c.blockM / 64 + 1);
    c.stages = 4;
    while (c.stages > 2 &&
           wgmmaSharedBytes(p, c.blockM, c.stages) > maxSharedBytesPerBlock(90))
      --c.stages;
    return c;
  }
  if (tensorCores(p)) {
    // A warp per 16 query rows; a 256-wide head keeps 128 accumulators a
    // thread for O, so its key tile is halved to stay in registers.
    c.warps = 4;
    c.blockM = 64;
    c.blockN = std::max(p.headDim, p.valueDim) > 128 ? 32 : 64;
  } else {
    // Lane j scores key j: 32-key tiles; 4 query rows a warp.
    c.warps = 4;
    c.blockM = 16;
    c.blockN = 32;
  }
  return c;
}

runtime::Expected<std::string>
generateAttentionSource(const AttentionProblem &p, const AttentionConfig &c,
                        const AttentionBodies &bodies,
                        const GenerateOptions &options) {
  if (std::string why = unsupportedReason(p); !why.empty())
    return runtime::Error::failure("attention: " + why);
  if (c.wgmma) {
    std::string why = wgmmaUnsupportedReason(p);
    if (why.empty() && options.smVersion != 90)
      why = "wgmma needs sm_90, not sm_" + std::to_string(options.smVersion);
    if (why.empty() && (c.blockN != 64 || (c.blockM != 64 && c.blockM != 128) ||
                        c.warps != 4 * (c.blockM / 64 + 1) || c.stages < 2))
      why = "block 64 or 128 x 64 keys, a producer warpgroup and a ring of "
            "two stages or more";
    if (!why.empty())
      return runtime::Error::failure("attention " + c.describe(p) + ": " + why);
  }
  AttentionPlan plan = planAttention(p, c);
  if (plan.sharedBytes > maxSharedBytesPerBlock(options.smVersion))
    return runtime::Error::failure(
        "attention " + c.describe(p) + ": needs " +
        std::to_string(plan.sharedBytes) + " bytes of shared memory");
  auto i = [](uint64_t v) { return std::to_string(v); };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::string s = "// Generated by Kiln: " + c.describe(p) + "\n";
  s += "#define KILN_ATTN_TENSOR_CORES " + std::string(tensorCores(p) ? "1" : "0") +
       "\n";
  s += "#define KILN_ATTN_WGMMA " + std::string(c.wgmma ? "1" : "0") + "\n";
  s += kElementTypeTemplate;
  s += kCommonTemplate;
  s += "\nstruct Cfg {\n";
  s += "  static constexpr int BM = " + i(c.blockM) + ", BN = " + i(c.blockN) +
       ", WARPS = " + i(c.warps) + ", THREADS = " + i(c.warps * 32) + ";\n";
  s += "  static constexpr int D = " + i(p.headDim) + ", DV = " + i(p.valueDim) +
       ", DP = " + i(plan.dPadded) + ", DVP = " + i(plan.dvPadded) + ";\n";
  s += "  static constexpr i64 SQ = " + i(p.seqQ) + ", SK = " + i(p.seqK) +
       ", HEADS = " + i(p.heads) + ", K_GROUP = " + i(p.keyHeadGroup) +
       ", V_GROUP = " + i(p.valueHeadGroup) + ";\n";
  s += "  static constexpr i64 Q_SO = " + i(p.q.outer) + ", Q_SH = " +
       i(p.q.head) + ", Q_SI = " + i(p.q.row) + ";\n";
  s += "  static constexpr i64 K_SO = " + i(p.k.outer) + ", K_SH = " +
       i(p.k.head) + ", K_SI = " + i(p.k.row) + ";\n";
  s += "  static constexpr i64 V_SO = " + i(p.v.outer) + ", V_SH = " +
       i(p.v.head) + ", V_SI = " + i(p.v.row) + ";\n";
  s += "  static constexpr int EB = " + i(plan.elemBytes) +
       ", OUT_BYTES = " + i(plan.outBytes) +
       ", OUT_CODE = " + elementTypeName(p.outputType) + ";\n";
  s += "  static constexpr bool BF16 = " + b(p.inputType == DType::BF16) +
       ";\n";
  s += "  static constexpr int VEC_Q = " + i(plan.vecQ) + ", VEC_K = " +
       i(plan.vecK) + ", VEC_V = " + i(plan.vecV) + ";\n";
  s += "  static constexpr int CONSUMERS = " + i(c.blockM / 64) +
       ", STAGES = " + i(c.stages) + ", DQK = " + i(wgmmaQkWidth(p)) +
       ", NV = " + i(wgmmaValueWidth(p)) + ";\n";
  s += "  static constexpr bool CAUSAL_SKIP = " + b(p.causalSkip) + ";\n";
  s += "  static constexpr i64 CAUSAL_OFFSET = " +
       std::to_string(p.causalOffset) + ";\n};\n\n";
  s += bodySource("kilnScore", "ScoreArgs", bodies.score, bodies.scoreOperands);
  s += bodySource("kilnOutput", "OutputArgs", bodies.output,
                  bodies.outputOperands);
  s += kAttentionTemplate;
  s += "\n";
  if (c.wgmma) {
    s += wgmmaInstructions(p);
    s += kSm90Template;
    s += "\n";
    s += kAttentionWgmmaTemplate;
    s += "\n";
  }

  std::string list;
  for (const KernelParameter &param : attentionParameters(bodies))
    list += std::string(list.empty() ? "" : ", ") +
            (param.name == "C" ? "void *__restrict__ "
                               : "const void *__restrict__ ") +
            param.name;
  // wgmma: one block an SM, so setmaxnreg has the whole register file.
  s += "extern \"C\" __global__ void __launch_bounds__(" +
       i(c.warps * 32) + (c.wgmma ? ", 1" : "") + ") " + options.name + "(" +
       list + ") {\n";
  // Operands that start inside their buffer (slices of a fused Q/K/V
  // projection): the base moves once, every stride stays.
  for (auto [name, strides] : {std::pair{"Q", &p.q}, std::pair{"K", &p.k},
                               std::pair{"V", &p.v}})
    if (strides->offset)
      s += std::string("  ") + name + " = (const char *)" + name + " + " +
           std::to_string(strides->offset * plan.elemBytes) + ";\n";
  s += "  ScoreArgs sa;\n";
  for (size_t k = 0; k < bodies.scoreOperands.size(); ++k)
    s += "  sa.extra[" + i(k) + "] = score" + i(k) + ";\n";
  s += "  OutputArgs oa;\n";
  for (size_t k = 0; k < bodies.outputOperands.size(); ++k)
    s += "  oa.extra[" + i(k) + "] = out" + i(k) + ";\n";
  s += std::string("  ") + (c.wgmma ? "wga" : tensorCores(p) ? "tc" : "simt") +
       "::attention(Q, K, V, C, sa, oa);\n}\n";
  return s;
}

runtime::Expected<GemmKernels>
generateAttention(const AttentionProblem &p, const AttentionConfig &c,
                  const AttentionBodies &bodies,
                  const GenerateOptions &options) {
  runtime::Expected<GemmKernels> kernels =
      specializeAttention(p, c, bodies, options);
  if (!kernels)
    return kernels;
  if (runtime::Error err = compileKernels(*kernels, options.name))
    return err;
  return kernels;
}

runtime::Expected<GemmKernels>
specializeAttention(const AttentionProblem &p, const AttentionConfig &c,
                    const AttentionBodies &bodies,
                    const GenerateOptions &options) {
  if (options.smVersion != 80 && options.smVersion != 90)
    return runtime::Error::failure(
        "attention kernels target sm_80 or sm_90, not sm_" +
        std::to_string(options.smVersion));
  runtime::Expected<std::string> source =
      generateAttentionSource(p, c, bodies, options);
  if (!source)
    return source.takeError();
  AttentionPlan plan = planAttention(p, c);
  GemmKernels result;
  result.source = source.take();
  // wgmma and setmaxnreg exist only in sm_90a (the arch-specific ISA).
  result.nvrtcOptions = templateNvrtcOptions(options.smVersion, c.wgmma);
  GemmKernel kernel;
  kernel.name = options.name;
  kernel.block = {c.warps * 32, 1, 1};
  kernel.grid = {static_cast<uint32_t>((p.seqQ + c.blockM - 1) / c.blockM),
                 static_cast<uint32_t>(p.outer * p.heads), 1};
  kernel.dynamicSharedBytes = plan.sharedBytes;
  kernel.params = attentionParameters(bodies);
  result.kernels.push_back(std::move(kernel));
  return result;
}

} // namespace kiln::contraction
