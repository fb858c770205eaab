//===- FuseQuantized.cpp - Find quantized matmuls the int8 kernel can run -===//
//
// kiln-fuse-quantized (issue 26, stage 2): recognises the compositions the
// importer writes for QLinearMatMul, MatMulInteger and QDQ
// (DequantizeLinear -> MatMul -> QuantizeLinear) around a kiln.matmul with
// a constant weight, and reports for each whether the int8 GEMM kernel
// (Family::MmaS8, include/kiln/Target/CUDA/ContractionKernels.h) could run
// it and with which parameters, or why it stays on the exact fallback.
// This stage only recognises and reports (one remark per chain):
// nothing rewrites the chain yet, so every quantized op still runs on the
// fallback lowering (docs/architecture.md, "Quantized models").
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <optional>
#include <string>

namespace kiln {
#define GEN_PASS_DEF_FUSEQUANTIZEDPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The one value of a constant that holds a single value (any shape), as a
/// double.
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<kiln::ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  Type element = dense.getElementType();
  if (isa<FloatType>(element))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (auto integer = dyn_cast<IntegerType>(element)) {
    APInt value = dense.getSplatValue<APInt>();
    // Two branches: one conditional expression would make both unsigned.
    if (integer.isUnsigned())
      return static_cast<double>(value.getZExtValue());
    return static_cast<double>(value.getSExtValue());
  }
  return std::nullopt;
}

/// The 8-bit storage type a value was cast from, or null.
Type byteSource(Value v, Value *source) {
  auto cast = v.getDefiningOp<kiln::CastOp>();
  if (!cast)
    return nullptr;
  auto type = dyn_cast<IntegerType>(getElementTypeOrSelf(cast.getInput()));
  if (!type || type.getWidth() != 8)
    return nullptr;
  *source = cast.getInput();
  return type;
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

/// One operand of the matmul: storage bytes, zero point, (QDQ) scale.
struct QuantizedOperand {
  Value bytes;
  Type storage;
  double zeroPoint = 0;
  std::optional<double> scale; // QDQ form only
};

/// Matches `[mul(...,scale)] <- [sub(..., zp)] <- cast(bytes)`; `floatForm`
/// asks for the scale (a dequantize), else there is none (integer form).
/// On failure, `why` says what did not fit.
std::optional<QuantizedOperand> matchOperand(Value v, bool floatForm,
                                             StringRef what, std::string &why) {
  QuantizedOperand q;
  if (floatForm) {
    auto mul = v.getDefiningOp<kiln::MulOp>();
    std::optional<double> scale = mul ? splatValue(mul.getRhs()) : std::nullopt;
    if (!scale) {
      why = (what + " is not dequantized by one constant scale").str();
      return std::nullopt;
    }
    q.scale = scale;
    v = mul.getLhs();
  }
  if (auto sub = v.getDefiningOp<kiln::SubOp>()) {
    std::optional<double> zp = splatValue(sub.getRhs());
    if (!zp) {
      why = (what + "'s zero point is not one constant (per row or per "
                    "column zero points are not matched yet)")
                .str();
      return std::nullopt;
    }
    q.zeroPoint = *zp;
    v = sub.getLhs();
  }
  q.storage = byteSource(v, &q.bytes);
  if (!q.storage) {
    why = (what + " is not an int8 or uint8 tensor cast up").str();
    return std::nullopt;
  }
  return q;
}

/// The requantization after the matmul: `[cast] -> mul/div scale -> round
/// -> add zp -> clip -> cast to 8 bits`.
struct Requantize {
  double scale = 1; // multiplier (QOperator) or divisor (QDQ)
  double zeroPoint = 0;
  Type storage;
};

std::optional<Requantize> matchRequantize(Value acc, bool floatForm,
                                          std::string &why) {
  auto single = [](Value v) -> Operation * {
    return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  };
  Value v = acc;
  Requantize r;
  Operation *next = single(v);
  if (!floatForm) {
    auto widen = dyn_cast_or_null<kiln::CastOp>(next);
    if (!widen)
      return std::nullopt; // MatMulInteger: the i32 product is the output
    v = widen.getResult();
    next = single(v);
    auto mul = dyn_cast_or_null<kiln::MulOp>(next);
    std::optional<double> scale =
        mul && mul.getLhs() == v ? splatValue(mul.getRhs()) : std::nullopt;
    if (!scale) {
      why = "the requantize scale is not one constant";
      return std::nullopt;
    }
    r.scale = *scale;
    v = mul.getResult();
  } else {
    auto div = dyn_cast_or_null<kiln::DivOp>(next);
    std::optional<double> scale =
        div && div.getLhs() == v ? splatValue(div.getRhs()) : std::nullopt;
    if (!scale) {
      why = "the product is not quantized by one constant scale";
      return std::nullopt;
    }
    r.scale = *scale;
    v = div.getResult();
  }
  auto round = dyn_cast_or_null<kiln::RoundOp>(single(v));
  auto add = round ? dyn_cast_or_null<kiln::AddOp>(single(round.getResult()))
                   : nullptr;
  std::optional<double> zp = add ? splatValue(add.getRhs()) : std::nullopt;
  auto clip =
      zp ? dyn_cast_or_null<kiln::ClipOp>(single(add.getResult())) : nullptr;
  auto narrow =
      clip ? dyn_cast_or_null<kiln::CastOp>(single(clip.getResult())) : nullptr;
  auto storage =
      narrow ? dyn_cast<IntegerType>(getElementTypeOrSelf(narrow.getResult()))
             : nullptr;
  if (!storage || storage.getWidth() != 8) {
    why = "the product is not requantized to int8 or uint8 (round, zero "
          "point, clip, cast)";
    return std::nullopt;
  }
  r.zeroPoint = *zp;
  r.storage = storage;
  return r;
}

/// Whether `v` is exactly an f32 value.
bool isF32Value(double v) {
  return static_cast<double>(static_cast<float>(v)) == v;
}

struct FuseQuantizedPass
    : kiln::impl::FuseQuantizedPassBase<FuseQuantizedPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](kiln::MatmulOp matmul) { visit(matmul); });
  }

  void visit(kiln::MatmulOp matmul) {
    Type element = getElementTypeOrSelf(matmul.getType());
    bool integerForm = element.isInteger(32);
    bool floatForm = element.isF32();
    if (!integerForm && !floatForm)
      return;
    std::string why;
    auto fallback = [&](const std::string &reason) {
      matmul.emitRemark() << "int8 fallback: " << reason;
    };
    auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(matmul.getRhs().getType());
    std::optional<QuantizedOperand> a =
        matchOperand(matmul.getLhs(), floatForm, "A", why);
    std::optional<QuantizedOperand> b =
        a ? matchOperand(matmul.getRhs(), floatForm, "B", why) : std::nullopt;
    if (!a || !b) {
      // A float matmul whose A is not dequantized is no quantized chain.
      if (integerForm || a)
        fallback(why);
      return;
    }
    if (!b->bytes.getDefiningOp<ml_program::GlobalLoadConstOp>())
      return fallback("B is not a constant weight (the kernel stores "
                      "weights [N][K] at compile time)");
    if (rhsType.getRank() != 2 || lhsType.getRank() < 2)
      return fallback("B is not a [K][N] matrix");
    std::optional<Requantize> r =
        matchRequantize(matmul.getResult(), floatForm, why);
    if (!r && !why.empty())
      return fallback(why);
    if (floatForm && !r)
      return fallback("the product is not quantized");
    // The kernel's one f32 multiplier: onnxruntime's (a * b) / y in f32
    // for QDQ (what its QDQ -> QLinearMatMul fusion computes); the
    // importer's f32 product for QLinearMatMul, carried in f64.
    double multiplier = 1;
    if (r && floatForm) {
      if (!isF32Value(*a->scale) || !isF32Value(*b->scale) ||
          !isF32Value(r->scale))
        return fallback("a scale is not an f32 value");
      float ab = static_cast<float>(*a->scale) * static_cast<float>(*b->scale);
      multiplier = ab / static_cast<float>(r->scale);
    } else if (r) {
      if (!isF32Value(r->scale))
        return fallback("the requantize scale is not an f32 value");
      multiplier = r->scale;
    }
    if (!(multiplier > 0) || !std::isfinite(multiplier))
      return fallback("the requantize scale is not finite and positive");
    std::string form = floatForm ? "QDQ"
                       : r       ? "QLinearMatMul"
                                 : "MatMulInteger";
    InFlightDiagnostic remark = matmul.emitRemark();
    remark << "int8 kernel (" << form << "): A " << typeName(a->storage)
           << " zero point " << static_cast<int64_t>(a->zeroPoint) << ", B "
           << typeName(b->storage) << " constant, zero point "
           << static_cast<int64_t>(b->zeroPoint);
    if (r)
      remark << ", scale "
             << llvm::formatv("{0:e}", static_cast<double>(
                                           static_cast<float>(multiplier)))
                    .str()
             << " (f32), output " << typeName(r->storage) << " zero point "
             << static_cast<int64_t>(r->zeroPoint);
    else
      remark << ", output i32";
  }
};

} // namespace
