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
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

/// One element of raw little-endian bytes of type `element`, as a double.
std::optional<double> elementAt(ArrayRef<char> bytes, Type element, int64_t i) {
  auto read = [&](auto zero) -> std::optional<double> {
    using T = decltype(zero);
    if (static_cast<size_t>(i + 1) * sizeof(T) > bytes.size())
      return std::nullopt;
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  };
  if (element.isF32())
    return read(float());
  if (element.isF64())
    return read(double());
  if (element.isInteger(32))
    return read(int32_t());
  if (element.isUnsignedInteger(8))
    return read(uint8_t());
  if (element.isInteger(8))
    return read(int8_t());
  return std::nullopt;
}

/// The values of a constant operand that is one value or one per column
/// (`columns` of them along its last dimension, every other dimension 1),
/// seen through reshapes and casts from integers (which keep the values):
/// a kiln.constant or a constant global. Nothing for anything else.
std::optional<std::vector<double>> columnValues(Value v, int64_t columns) {
  while (true) {
    if (auto reshape = v.getDefiningOp<kiln::ReshapeOp>()) {
      v = reshape.getInput();
    } else if (auto cast = v.getDefiningOp<kiln::CastOp>();
               cast &&
               isa<IntegerType>(getElementTypeOrSelf(cast.getInput()))) {
      v = cast.getInput();
    } else {
      break;
    }
  }
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  int64_t count = type.getNumElements();
  if (count != 1 && count != columns)
    return std::nullopt;
  // Along the last dimension only: [K][1] values with K == N are per row.
  if (count != 1 && type.getRank() > 0 && type.getShape().back() != count)
    return std::nullopt;
  Attribute value;
  if (auto constant = v.getDefiningOp<kiln::ConstantOp>()) {
    value = constant.getValue();
  } else if (auto load = v.getDefiningOp<ml_program::GlobalLoadConstOp>()) {
    auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
        load, load.getGlobalAttr());
    if (!global || global.getIsMutable() || !global.getValue())
      return std::nullopt;
    value = *global.getValue();
  } else {
    return std::nullopt;
  }
  Type element = type.getElementType();
  std::vector<double> values;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.isSplat()) {
      std::optional<double> one = splatValue(v);
      if (!one)
        return std::nullopt;
      return std::vector<double>{*one};
    }
    ArrayRef<char> raw = dense.getRawData();
    for (int64_t i = 0; i < count; ++i)
      if (std::optional<double> x = elementAt(raw, element, i))
        values.push_back(*x);
      else
        return std::nullopt;
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    for (int64_t i = 0; i < count; ++i)
      if (std::optional<double> x = elementAt(blob->getData(), element, i))
        values.push_back(*x);
      else
        return std::nullopt;
  } else {
    return std::nullopt;
  }
  return values;
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

/// One operand of the matmul: storage bytes, zero point, (QDQ) scale;
/// one value, or (B only) one per column.
struct QuantizedOperand {
  Value bytes;
  Type storage;
  std::vector<double> zeroPoints{0.0};
  std::vector<double> scales; // QDQ form only
};

/// Matches `[mul(...,scale)] <- [sub(..., zp)] <- cast(bytes)`; `floatForm`
/// asks for the scale (a dequantize), else there is none (integer form).
/// `columns` is B's N (its scale and zero point may be one per column), 1
/// for A. On failure, `why` says what did not fit.
std::optional<QuantizedOperand> matchOperand(Value v, bool floatForm,
                                             int64_t columns, StringRef what,
                                             std::string &why) {
  QuantizedOperand q;
  StringRef shape =
      columns == 1 ? "one constant" : "one constant or one per column";
  if (floatForm) {
    auto mul = v.getDefiningOp<kiln::MulOp>();
    std::optional<std::vector<double>> scales =
        mul ? columnValues(mul.getRhs(), columns) : std::nullopt;
    if (!scales) {
      why = (what + " is not dequantized by " + shape + " scale").str();
      return std::nullopt;
    }
    q.scales = *scales;
    v = mul.getLhs();
  }
  if (auto sub = v.getDefiningOp<kiln::SubOp>()) {
    std::optional<std::vector<double>> zps =
        columnValues(sub.getRhs(), columns);
    if (!zps) {
      why = (what + "'s zero point is not " + shape +
             (columns == 1 ? " (per row zero points are not matched yet)" : ""))
                .str();
      return std::nullopt;
    }
    q.zeroPoints = *zps;
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
    int64_t columns = rhsType.getShape().back();
    std::optional<QuantizedOperand> a =
        matchOperand(matmul.getLhs(), floatForm, 1, "A", why);
    std::optional<QuantizedOperand> b =
        a ? matchOperand(matmul.getRhs(), floatForm, columns, "B", why)
          : std::nullopt;
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
    std::vector<float> multipliers{1.0f};
    if (r && floatForm) {
      multipliers.clear();
      if (!isF32Value(a->scales[0]) || !isF32Value(r->scale))
        return fallback("a scale is not an f32 value");
      for (double bScale : b->scales) {
        if (!isF32Value(bScale))
          return fallback("a scale is not an f32 value");
        float ab =
            static_cast<float>(a->scales[0]) * static_cast<float>(bScale);
        multipliers.push_back(ab / static_cast<float>(r->scale));
      }
    } else if (r) {
      if (!isF32Value(r->scale))
        return fallback("the requantize scale is not an f32 value");
      multipliers = {static_cast<float>(r->scale)};
    }
    for (float m : multipliers)
      if (!(m > 0) || !std::isfinite(m))
        return fallback("the requantize scale is not finite and positive");
    std::string form = floatForm ? "QDQ"
                       : r       ? "QLinearMatMul"
                                 : "MatMulInteger";
    InFlightDiagnostic remark = matmul.emitRemark();
    auto scientific = [](float v) {
      return llvm::formatv("{0:e}", static_cast<double>(v)).str();
    };
    remark << "int8 kernel (" << form << "): A " << typeName(a->storage)
           << " zero point " << static_cast<int64_t>(a->zeroPoints[0]) << ", B "
           << typeName(b->storage) << " constant, zero point ";
    const std::vector<double> &zb = b->zeroPoints;
    if (std::all_of(zb.begin(), zb.end(), [&](double z) { return z == zb[0]; }))
      remark << static_cast<int64_t>(zb[0]);
    else
      remark << "per column";
    if (r) {
      remark << ", scale ";
      if (multipliers.size() == 1) {
        remark << scientific(multipliers[0]);
      } else {
        auto [lo, hi] =
            std::minmax_element(multipliers.begin(), multipliers.end());
        remark << "per column (" << multipliers.size() << ", "
               << scientific(*lo) << " to " << scientific(*hi) << ")";
      }
      remark << " (f32), output " << typeName(r->storage) << " zero point "
             << static_cast<int64_t>(r->zeroPoint);
    } else
      remark << ", output i32";
  }
};

} // namespace
