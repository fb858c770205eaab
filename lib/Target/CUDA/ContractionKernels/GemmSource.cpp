//===- GemmSource.cpp - Specialise the CUDA C++ templates for one GEMM ----===//
//
// The source NVRTC compiles is, in order: the element types
// (templates/ElementType.cuh), the shared helpers (templates/Common.cuh), a generated `struct Cfg` of compile-time facts, the
// generated epilogue (`EpilogueArgs` and `kilnEpilogue`), the family's
// template, and generated `extern "C"` entry points whose parameter lists
// hold exactly the operands this problem has. Entry points are plain C
// names so no name-expression lookup is needed after compiling.
//
//===----------------------------------------------------------------------===//

#include "GemmPlan.h"

#include <cmath>
#include <cstdio>

namespace kiln::contraction {
namespace {

#include "ContractionKernelTemplates.inc"

std::string floatLiteral(float v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(v));
  std::string s = text;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s + "f";
}

std::string vectorIndex(const EpilogueVector &v) {
  return v.kind == EpilogueVector::Kind::PerRow ? "row" : "col";
}

/// The statements of kilnEpilogue for the built-in epilogue kinds.
std::string builtinEpilogueBody(const Epilogue &e) {
  std::string s = "  float v = acc;\n";
  if (e.alpha != 1.0f)
    s += "  v *= " + floatLiteral(e.alpha) + ";\n";
  if (e.scale.present())
    s += "  v *= loadAsFloat<" + std::string(elementTypeName(e.scale.type)) +
         ">(ep.scale, " + vectorIndex(e.scale) + ");\n";
  if (e.bias.present())
    s += "  v += loadAsFloat<" + std::string(elementTypeName(e.bias.type)) +
         ">(ep.bias, " + vectorIndex(e.bias) + ");\n";
  if (e.residual) {
    std::string load =
        "loadAsFloat<" + std::string(elementTypeName(e.residualType)) +
        ">(ep.residual, (i64)batch * ep.batchStrideC + (i64)row * "
        "Cfg::LDC + col)";
    s += e.beta == 1.0f
             ? "  v += " + load + ";\n"
             : "  v = fmaf(" + floatLiteral(e.beta) + ", " + load + ", v);\n";
  }
  // outputScale (QuantizeLinear's division) comes after the activation.
  switch (e.activation) {
  case Activation::None:
    break;
  case Activation::Relu: // NaN propagates, as in the generated kernels
    s += "  v = maxNaN(v, 0.0f);\n";
    break;
  case Activation::Gelu:
    s += "  v = 0.5f * v * (1.0f + erff(v * 0.707106781f));\n";
    break;
  case Activation::GeluTanh:
    s += "  v = 0.5f * v * (1.0f + tanhf(0.797884561f * (v + 0.044715f * v * "
         "v * v)));\n";
    break;
  case Activation::Sigmoid:
    s += "  v = 1.0f / (1.0f + expf(-v));\n";
    break;
  case Activation::Tanh:
    s += "  v = tanhf(v);\n";
    break;
  case Activation::Clip:
    s += "  v = minNaN(maxNaN(v, " + floatLiteral(e.clipMin) + "), " +
         floatLiteral(e.clipMax) + ");\n";
    break;
  }
  if (e.outputScale != 1.0f)
    s += "  v = __fdiv_rn(v, " + floatLiteral(e.outputScale) + ");\n";
  return s + "  return v;\n";
}

std::string epilogueSource(const Epilogue &e) {
  std::string s = "struct EpilogueArgs {\n"
                  "  const void *scale = nullptr, *bias = nullptr, "
                  "*residual = nullptr;\n"
                  "  u64 batchStrideC = 0;\n"
                  "  void *aux = nullptr;\n"
                  "  const void *zeroPointB = nullptr;\n";
  if (!e.customOperands.empty())
    s += "  const void *extra[" + std::to_string(e.customOperands.size()) +
         "] = {};\n";
  s += "};\n\n"
       "KILN_INLINE float kilnEpilogue(unsigned batch, int row, int col, "
       "float acc, const EpilogueArgs &ep, int which = 0) {\n"
       "  (void)which;\n";
  if (e.customBody.empty())
    return s + builtinEpilogueBody(e) + "}\n\n";
  for (size_t i = 0; i < e.customOperands.size(); ++i)
    s += "  const void *extra" + std::to_string(i) + " = ep.extra[" +
         std::to_string(i) + "];\n";
  return s + "  (void)batch; (void)row; (void)col;\n" + e.customBody +
         "\n}\n\n";
}

std::string cfgSource(const GemmProblem &p, const GemmConfig &c,
                      const GemmPlan &plan, const Epilogue &e) {
  auto i = [](uint64_t v) { return std::to_string(v); };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::string s = "struct Cfg {\n";
  s += "  static constexpr int BM = " + i(c.blockM) + ", BN = " + i(c.blockN) +
       ", BK = " + i(c.blockK) + ";\n";
  s += "  static constexpr int WTM = " + i(c.warpM) + ", WTN = " + i(c.warpN) +
       ", TM = " + i(c.threadM) + ", TN = " + i(c.threadN) + ";\n";
  s += "  static constexpr int STAGES = " + i(c.stages) +
       ", SPLITK = " + i(c.splitK) + ", THREADS = " + i(c.threads()) + ";\n";
  s += "  static constexpr i64 N = " + i(p.n) + ", K = " + i(p.k) +
       ", BATCH = " + i(p.batch) + ";\n";
  s += "  static constexpr i64 LDA = " + i(p.ldaOrPacked()) +
       ", LDB = " + i(p.ldbOrPacked()) + ", LDC = " + i(p.ldcOrPacked()) +
       ", STRIDE_B = " + i(p.batch > 1 ? p.batchStrideB : 0) + ";\n";
  s += "  static constexpr bool A_K_CONTIG = " + b(plan.aKContiguous) +
       ", B_K_CONTIG = " + b(plan.bKContiguous) +
       ", TF32 = " +
       b(c.family == Family::MmaTf32 || c.family == Family::WgmmaTf32) +
       ", IN_BF16 = " + b(p.inputType == DType::BF16) + ";\n";
  // The fp8 families: e4m3 unless the operand is e5m2.
  const bool fp8 = isFp8(c.family);
  s += "  static constexpr bool FP8 = " + b(fp8) +
       ", A_E5M2 = " + b(fp8 && p.inputType == DType::F8E5M2) +
       ", B_E5M2 = " + b(fp8 && p.inputTypeB == DType::F8E5M2) + ";\n";
  s += "  static constexpr int IN_BYTES = " + i(plan.inBytes) +
       ", OUT_BYTES = " + i(plan.outBytes) +
       ", OUT_CODE = " + elementTypeName(p.outputType) + ";\n";
  // The second output (0: none): stored with C's strides, its own vector
  // width (its buffer is a fresh one: the arena's alignment, at least 16).
  uint32_t auxBytes = e.aux ? dtypeBytes(e.auxType) : 0;
  uint32_t vecAux =
      auxBytes ? vectorElements(auxBytes, p.ldcOrPacked(),
                                p.batch > 1 ? p.batchStrideC : 0, 16)
               : 1;
  s += std::string("  static constexpr int AUX_CODE = ") +
       (e.aux ? elementTypeName(e.auxType) : "kElementNone") +
       ", AUX_BYTES = " + i(auxBytes) +
       ", VEC_AUX = " + i(vecAux) + ";\n";
  s += "  static constexpr int VEC_A = " + i(plan.vecA) +
       ", VEC_B = " + i(plan.vecB) + ", VEC_C = " + i(plan.vecC) + ";\n";
  // The TMA producer (GemmWgmma.cuh): whether each operand's map has a
  // batch dimension (tmaOperandMap).
  s += "  static constexpr bool TMA = " + b(c.tma) +
       ", TMA_A_BATCHED = " + b(p.batch > 1 && p.batchStrideA != 0) +
       ", TMA_B_BATCHED = " + b(p.batch > 1 && p.batchStrideB != 0) + ";\n";
  // The implicit convolution (all 0 for a plain GEMM). The epilogue of a
  // grouped convolution sees the channel across groups as its column.
  const ImplicitConv &cv = p.conv;
  s += "  static constexpr bool CONV = " + b(cv.enabled) + ";\n";
  s += "  static constexpr i64 CONV_H = " + i(cv.h) + ", CONV_W = " + i(cv.w) +
       ", CONV_C = " + i(cv.c) + ", CONV_P = " + i(cv.p) +
       ", CONV_Q = " + i(cv.q) + ";\n";
  s += "  static constexpr int CONV_KW = " + i(cv.kw) +
       ", CONV_SH = " + i(cv.strideH) + ", CONV_SW = " + i(cv.strideW) +
       ", CONV_PH = " + i(cv.padH) + ", CONV_PW = " + i(cv.padW) +
       ", CONV_DH = " + i(cv.dilationH) + ", CONV_DW = " + i(cv.dilationW) +
       ";\n";
  s += "  static constexpr int CONV_CG = " + i(cv.groupChannels) +
       ", CONV_CP = " + i(cv.paddedGroupChannels) + ";\n";
  s += "  static constexpr int EPI_COL_PER_BATCH = " + i(cv.enabled ? p.n : 0) +
       ";\n";
  // The int8 families (GemmInt8.cuh, GemmWgmma.cuh; IntegerEpilogue.cuh):
  // operand signedness and the integer epilogue (all false / neutral for
  // the float families).
  const bool int8 = isInt8(c.family);
  const IntegerEpilogue &q = e.integer;
  s += "  static constexpr bool INT8 = " + b(int8) +
       ", A_U8 = " + b(int8 && p.inputType == DType::U8) +
       ", B_U8 = " + b(int8 && p.inputTypeB == DType::U8) + ";\n";
  s += "  static constexpr bool Q_OFFSET = " + b(int8 && q.offset) +
       ", Q_ROWSUM = " + b(int8 && q.rowSumZeroPointB) +
       ", Q_SCALE_VECTOR = " + b(int8 && q.scaleVector) + ";\n";
  s += "  static constexpr float Q_SCALE = " +
       floatLiteral(int8 ? q.scale : 1.0f) + ";\n";
  s += "  static constexpr int Q_ZP = " +
       std::to_string(int8 ? q.outputZeroPoint : 0) + ";\n";
  s += "  static constexpr int CONV_PAD_BYTE = " +
       std::to_string(int8 && cv.enabled ? (q.paddingValue & 0xFF) : 0) +
       ";\n";
  // The residual block after the requantization (IntegerEpilogue::Residual).
  const IntegerEpilogue::Residual &r = q.residual;
  const bool residual = int8 && r.enabled;
  s += "  static constexpr bool Q_RESIDUAL = " + b(residual) +
       ", RES_U8 = " + b(residual && r.type == DType::U8) +
       ", RES_RELU = " + b(residual && r.relu) + ";\n";
  s += std::string("  static constexpr int Q_MID_CODE = ") +
       elementTypeName(residual ? r.requantizedType : p.outputType) +
       ", RES_ZP = " + std::to_string(residual ? r.zeroPoint : 0) +
       ", SUM_ZP = " + std::to_string(residual ? r.sumZeroPoint : 0) + ";\n";
  s += "  static constexpr float RES_SCALE = " +
       floatLiteral(residual ? r.scale : 1.0f) +
       ", RES_Q_SCALE = " + floatLiteral(residual ? r.requantizedScale : 1.0f) +
       ", SUM_SCALE = " + floatLiteral(residual ? r.sumScale : 1.0f) + ";\n";
  return s + "};\n\n";
}

/// One wgmma statement, `name(d, descA, descB)`: `wgmma.mma_async
/// .m64n<n><shapeK>.<types>` from two shared-memory descriptors into the
/// thread's n/2 accumulators (an inline-PTX statement with one operand per
/// register, written out here because its operand list depends on n).
/// `tail` is what follows scale-d: the float forms' scale and transpose
/// immediates; the integer forms have none.
std::string wgmmaStatement(const std::string &name, uint32_t n,
                           const std::string &shapeK, const std::string &types,
                           bool integer, const std::string &tail) {
  const uint32_t regs = n / 2;
  std::string list;
  for (uint32_t i = 0; i < regs; ++i)
    list += (i ? ", %" : "%") + std::to_string(i);
  std::string s = "KILN_INLINE void " + name + "(" +
                  (integer ? "int" : "float") + " (&d)[" +
                  std::to_string(regs) + "], u64 descA, u64 descB) {\n";
  s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" +
       std::to_string(regs + 2) + ", 0;\\n\"\n";
  s += "    \"wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + shapeK +
       "." + types + " {" + list + "}, %" + std::to_string(regs) + ", %" +
       std::to_string(regs + 1) + ", p" + tail + ";\\n}\"\n    : ";
  for (uint32_t i = 0; i < regs; ++i)
    s += (i ? ", " : "") + std::string(integer ? "\"+r\"(d[" : "\"+f\"(d[") +
         std::to_string(i) + "])";
  s += "\n    : \"l\"(descA), \"l\"(descB), \"r\"(1));\n}\n\n";
  return s;
}

/// The wgmma kernel's MMA, `wgmmaTile`: `m64n<BN>k16` (f16, bf16), `k8`
/// (tf32) or `k32` (e4m3, e5m2 into f32; s8, u8 into s32). The transpose
/// bits say which operand is MN-major; tf32 and the 8-bit types have none
/// (both operands are K-major in shared memory, GemmWgmma.cuh). The int8
/// kernel also gets `wgmmaRowSum`, an m64n8k32 of A against B = ones (its
/// four accumulators a thread are A's row sums, for B's zero points).
std::string wgmmaSource(const GemmProblem &p, const GemmConfig &c,
                        const GemmPlan &plan) {
  const bool tf32 = c.family == Family::WgmmaTf32;
  const bool fp8 = c.family == Family::WgmmaF8;
  const bool int8 = c.family == Family::WgmmaS8;
  auto fp8Name = [](DType t) { return t == DType::F8E5M2 ? "e5m2" : "e4m3"; };
  auto int8Name = [](DType t) { return t == DType::U8 ? "u8" : "s8"; };
  if (int8) {
    std::string a = int8Name(p.inputType);
    return wgmmaStatement("wgmmaTile", c.blockN, "k32",
                          "s32." + a + "." + int8Name(p.inputTypeB), true, "") +
           wgmmaStatement("wgmmaRowSum", 8, "k32", "s32." + a + ".s8", true,
                          "");
  }
  const char *type = tf32                         ? "tf32"
                     : fp8                        ? fp8Name(p.inputType)
                     : p.inputType == DType::BF16 ? "bf16"
                                                  : "f16";
  const char *typeB = fp8 ? fp8Name(p.inputTypeB) : type;
  const char *shapeK = tf32 ? "k8" : fp8 ? "k32" : "k16";
  std::string transpose =
      tf32 || fp8 ? std::string()
                  : std::string(", ") + (plan.aKContiguous ? "0" : "1") + ", " +
                        (plan.bKContiguous ? "0" : "1");
  // GemmWgmma.cuh names wgmmaRowSum under `if constexpr (Cfg::INT8 ...)`,
  // which a non-template function still looks up: a float kernel gets an
  // empty one, never called.
  return wgmmaStatement("wgmmaTile", c.blockN, shapeK,
                        std::string("f32.") + type + "." + typeB, false,
                        ", 1, 1" + transpose) +
         "KILN_INLINE void wgmmaRowSum(int (&)[4], u64, u64) {}\n\n";
}

/// The epilogue's pointer parameters, in kernel-parameter order.
std::vector<std::string> epiloguePointers(const Epilogue &e) {
  if (!e.customBody.empty())
    return e.customOperands;
  std::vector<std::string> names;
  if (e.scale.present())
    names.push_back("scale");
  if (e.bias.present())
    names.push_back("bias");
  if (e.residual)
    names.push_back("residual");
  // The integer epilogue's vectors (the float fields are unset with it).
  if (e.integer.scaleVector)
    names.push_back("scale");
  if (e.integer.offset)
    names.push_back("bias");
  if (e.integer.rowSumZeroPointB)
    names.push_back("zeroPointB");
  if (e.integer.residual.enabled)
    names.push_back("residual");
  return names;
}

/// Why the integer epilogue does not fit the problem and family (empty
/// when it does): it belongs to the int8 families, which have no other
/// epilogue.
std::string integerEpilogueReason(const GemmProblem &p, const GemmConfig &c,
                                  const Epilogue &e) {
  const IntegerEpilogue &q = e.integer;
  bool set = q.offset || q.rowSumZeroPointB || q.scaleVector ||
             q.scale != 1.0f || q.outputZeroPoint != 0 || q.paddingValue != 0 ||
             q.residual.enabled;
  if (!isInt8(c.family))
    return set ? "an integer epilogue needs an int8 family (mma_s8, wgmma_s8)"
               : "";
  if (e.alpha != 1.0f || e.scale.present() || e.bias.present() ||
      e.residual || e.activation != Activation::None ||
      !e.customBody.empty() || e.aux)
    return std::string(familyName(c.family)) +
           " takes only the integer epilogue";
  if (!std::isfinite(q.scale) || !(q.scale > 0))
    return "the requantization scale must be finite and positive";
  if (p.outputType == DType::I32 &&
      (q.scaleVector || q.scale != 1.0f || q.outputZeroPoint != 0))
    return "an i32 output has no requantization (scale, zero point)";
  int aLo = p.inputType == DType::U8 ? 0 : -128;
  if (q.paddingValue < aLo || q.paddingValue > aLo + 255)
    return "the padding value is outside A's type's range";
  int lo = p.outputType == DType::U8 ? 0 : -128;
  int hi = p.outputType == DType::U8 ? 255 : 127;
  const IntegerEpilogue::Residual &r = q.residual;
  if (!r.enabled) {
    if (p.outputType != DType::I32 &&
        (q.outputZeroPoint < lo || q.outputZeroPoint > hi))
      return "the output zero point is outside the output type's range";
    return "";
  }
  auto isByte = [](DType t) { return t == DType::I8 || t == DType::U8; };
  auto inRange = [](DType t, int32_t v) {
    return t == DType::U8 ? v >= 0 && v <= 255 : v >= -128 && v <= 127;
  };
  if (!isByte(p.outputType) || !isByte(r.type) || !isByte(r.requantizedType))
    return "a residual block needs 8-bit outputs and an 8-bit residual";
  for (float v : {r.scale, r.requantizedScale, r.sumScale})
    if (!std::isfinite(v) || !(v > 0))
      return "the residual block's scales must be finite and positive";
  if (!inRange(r.requantizedType, q.outputZeroPoint) ||
      !inRange(r.type, r.zeroPoint) || !inRange(p.outputType, r.sumZeroPoint))
    return "a residual block's zero point is outside its type's range";
  return "";
}

std::string epilogueArgsInit(const Epilogue &e, bool conv) {
  // A convolution's residual is indexed by the channel across groups.
  std::string s = std::string("  EpilogueArgs ep;\n  ep.batchStrideC = ") +
                  (conv ? "0" : "batchStrideC") + ";\n";
  if (e.aux)
    s += "  ep.aux = aux;\n";
  if (!e.customBody.empty()) {
    for (size_t i = 0; i < e.customOperands.size(); ++i)
      s += "  ep.extra[" + std::to_string(i) + "] = " + e.customOperands[i] +
           ";\n";
    return s;
  }
  for (const std::string &name : epiloguePointers(e))
    s += "  ep." + name + " = " + name + ";\n";
  return s;
}

} // namespace

std::string generatedEpilogue(const Epilogue &e) {
  return epilogueSource(e);
}

std::string generatedEpilogueInit(const Epilogue &e) {
  return epilogueArgsInit(e, /*conv=*/true);
}

runtime::TensorMapRecord tmaOperandMap(const GemmProblem &p,
                                       const GemmConfig &c, bool isA) {
  GemmPlan plan = planGemm(p, c);
  bool kMajor = isA ? plan.aKContiguous : plan.bKContiguous;
  uint64_t mn = isA ? p.m : p.n;
  uint64_t ld = isA ? p.ldaOrPacked() : p.ldbOrPacked();
  uint64_t batchStride = isA ? p.batchStrideA : p.batchStrideB;
  uint64_t bytes = plan.inBytes;
  runtime::TensorMapRecord map;
  map.dtype = p.inputType;
  // K-major: rows of K (a 128-byte swizzle row of 64 elements) by the
  // tile's M or N rows, one copy. MN-major: 64 M or N elements by 64 K
  // rows, one copy per 64-element block (GemmWgmma.cuh's MnMajorTile).
  map.globalDims[0] = kMajor ? p.k : mn;
  map.globalDims[1] = kMajor ? mn : p.k;
  map.globalStrides[0] = ld * bytes;
  map.boxDims[0] = 64;
  map.boxDims[1] = kMajor ? (isA ? c.blockM : c.blockN) : 64;
  map.rank = 2;
  if (p.batch > 1 && batchStride != 0) {
    map.rank = 3;
    map.globalDims[2] = p.batch;
    map.globalStrides[1] = batchStride * bytes;
    map.boxDims[2] = 1;
  }
  map.swizzle = 3;     // CU_TENSOR_MAP_SWIZZLE_128B
  map.l2Promotion = 2; // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  map.oobFill = 0;     // zeros past M, N and K: ragged tiles add nothing
  return map;
}

std::vector<KernelParameter> gemmMainParameters(const GemmProblem &p,
                                                const Epilogue &e,
                                                const GemmConfig &c) {
  using K = KernelParameter::Kind;
  std::vector<KernelParameter> params = {{K::Pointer, "A"}, {K::Pointer, "B"}};
  params.push_back({K::Pointer, "C"});
  if (e.aux)
    params.push_back({K::Pointer, "aux"});
  for (const std::string &name : epiloguePointers(e))
    params.push_back({K::Pointer, name});
  // Split-K (SplitKReduce.cuh): the fp32 partials, then the per-tile
  // semaphores, the last pointers (kiln-lower-kernel-calls passes the
  // semaphores after the call's own operands).
  if (c.splitK > 1) {
    params.push_back({K::Pointer, "workspace"});
    params.push_back({K::Pointer, "semaphores"});
  }
  params.push_back({K::U32, "M"});
  params.push_back({K::U64, "batchStrideA"});
  params.push_back({K::U64, "batchStrideC"});
  if (c.tma)
    for (bool isA : {true, false}) {
      KernelParameter map{K::TensorMap, isA ? "tensorMapA" : "tensorMapB"};
      map.tensorMap = tmaOperandMap(p, c, isA);
      map.tensorMap.addressParam = isA ? 0 : 1; // "A", "B"
      params.push_back(std::move(map));
    }
  return params;
}

runtime::Expected<std::string>
generateGemmSource(const GemmProblem &p, const GemmConfig &c, const Epilogue &e,
                   const GenerateOptions &options) {
  if (std::string why = unsupportedReason(p, c); !why.empty())
    return runtime::Error::failure("GEMM " + c.describe() + ": " + why);
  for (float v : {e.alpha, e.beta, e.clipMin, e.clipMax, e.outputScale})
    if (!std::isfinite(v))
      return runtime::Error::failure("epilogue constants must be finite");
  if (!(e.outputScale > 0))
    return runtime::Error::failure("the output scale must be positive");
  if (e.outputScale != 1.0f && !e.customBody.empty())
    return runtime::Error::failure(
        "an output scale belongs to the built-in epilogue, not a custom body");
  if (std::string why = integerEpilogueReason(p, c, e); !why.empty())
    return runtime::Error::failure("GEMM " + c.describe() + ": " + why);
  if (!e.customBody.empty() && (e.scale.present() || e.bias.present() ||
                                e.residual || e.activation != Activation::None))
    return runtime::Error::failure(
        "a custom epilogue body replaces the built-in epilogue kinds");
  GemmPlan plan = planGemm(p, c);
  if (e.aux && e.customBody.empty())
    return runtime::Error::failure(
        "a second output needs a custom epilogue body (its value)");
  if (e.aux && (!dtypeBytes(e.auxType) || dtypeBytes(e.auxType) > plan.outBytes))
    return runtime::Error::failure(
        "the second output's type must be f32, bf16 or f16 and no wider "
        "than C's");
  if (plan.sharedBytes > maxSharedBytesPerBlock(options.smVersion))
    return runtime::Error::failure(
        "GEMM " + c.describe() + ": needs " + std::to_string(plan.sharedBytes) +
        " bytes of shared memory, more than sm_" +
        std::to_string(options.smVersion) + " gives a block");

  std::string s = "// Generated by Kiln: " + c.describe() + "\n";
  s += kElementTypeTemplate;
  s += kCommonTemplate;
  s += "\n";
  s += cfgSource(p, c, plan, e);
  s += epilogueSource(e);
  // Every kernel has the split-K path (behind Cfg::SPLITK), so every
  // kernel needs the last split's helpers.
  s += kSplitKReduceTemplate;
  s += "\n";
  bool simt = c.family == Family::SimtF32;
  bool wgmma = isWgmma(c.family);
  bool int8 = c.family == Family::MmaS8;
  s += simt ? kGemmSimtTemplate : kGemmTensorCoreTemplate;
  s += "\n";
  // The int8 epilogue; every wgmma kernel names it (under if constexpr).
  if (isInt8(c.family) || wgmma) {
    s += kIntegerEpilogueTemplate;
    s += "\n";
  }
  if (int8) {
    // The int8 kernel reuses the mma.sync template's loaders and tiles.
    s += kGemmInt8Template;
    s += "\n";
  }
  if (wgmma) {
    // The wgmma kernel reuses the mma.sync template's loaders and stores.
    s += wgmmaSource(p, c, plan);
    s += kSm90Template;
    s += "\n";
    s += kGemmWgmmaTemplate;
    s += "\n";
  }
  const char *ns = simt ? "simt" : wgmma ? "wg" : int8 ? "i8" : "tc";

  auto paramList = [](const std::vector<KernelParameter> &params) {
    std::string list;
    for (const KernelParameter &param : params) {
      if (!list.empty())
        list += ", ";
      switch (param.kind) {
      case KernelParameter::Kind::Pointer:
        list += (param.name == "C" || param.name == "aux" ||
                 param.name == "workspace" || param.name == "semaphores")
                    ? "void *__restrict__ "
                    : "const void *__restrict__ ";
        break;
      case KernelParameter::Kind::U32:
        list += "u32 ";
        break;
      case KernelParameter::Kind::U64:
        list += "u64 ";
        break;
      case KernelParameter::Kind::TensorMap:
        list += "const __grid_constant__ wg::TensorMap ";
        break;
      }
      list += param.name;
    }
    return list;
  };

  // wgmma: one block an SM, so setmaxnreg has the whole register file.
  std::string launchBounds = "__launch_bounds__(" +
                             std::to_string(c.threads()) +
                             (wgmma ? ", 1)" : ")");
  s += "extern \"C\" __global__ void " + launchBounds + " " + options.name +
       "(" + paramList(gemmMainParameters(p, e, c)) + ") {\n";
  s += epilogueArgsInit(e, p.conv.enabled);
  s += std::string("  ") + ns +
       "::gemm(A, B, C, " +
       (c.splitK > 1 ? "(float *)workspace" : "nullptr") +
       ", M, batchStrideA, batchStrideC, ep" +
       // The semaphores (split-K) come before the tensor maps (TMA); the
       // int8 kernel takes neither.
       (c.splitK > 1 ? ", (unsigned *)semaphores"
        : c.tma      ? ", nullptr"
                     : "") +
       (c.tma ? ", &tensorMapA, &tensorMapB" : "") + ");\n}\n";
  return s;
}

} // namespace kiln::contraction
