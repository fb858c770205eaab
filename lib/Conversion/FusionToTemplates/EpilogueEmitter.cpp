//===- EpilogueEmitter.cpp - A fusion region's epilogue as CUDA C++ -------===//
//
// Values are floats in registers (the accumulator is fp32). Each op's
// element-level meaning is built from ScalarSemantics.h, the same arith and
// math ops the linalg lowering puts in the generated kernel's body, on a
// scratch block, and printed as C++ by ScalarToCpp: one definition of each
// op, so a fused epilogue computes what the generated kernel computes, NaN,
// infinities, -0 and subnormals included, and bf16/f16 values round where
// the generated kernel's arithmetic rounds them.
// test/Target/CUDA/epilogue-special-values.test runs every op both ways.
//
//===----------------------------------------------------------------------===//

#include "EpilogueEmitter.h"
#include "ScalarToCpp.h"

#include "kiln/Conversion/KilnToLinalg/ScalarSemantics.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace kiln::templates {

namespace {

std::optional<runtime::DType> dtypeOf(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (element.isF32())
    return runtime::DType::F32;
  if (element.isBF16())
    return runtime::DType::BF16;
  if (element.isF16())
    return runtime::DType::F16;
  return std::nullopt;
}

/// Builds `op`'s element-level IR (ScalarSemantics.h) on a scratch block
/// whose arguments are the operands' element types, bound to the C++
/// expressions `in`, and prints it into `body`. Returns the result's C++
/// expression.
FailureOr<std::string> emitScalarBody(Operation *op, ArrayRef<std::string> in,
                                      std::string &body, unsigned &nextName,
                                      std::string &why) {
  Location loc = op->getLoc();
  auto cast = dyn_cast<CastOp>(op);
  // tf32 has no storage type: a tf32 value is held as the f32 it rounds to,
  // so the cast back to f32 is the value itself.
  if (cast && getElementTypeOrSelf(cast.getInput().getType()).isTF32())
    return in.front();
  Block scratch;
  SmallVector<Value> args;
  for (Value operand : op->getOperands()) {
    Type type = getElementTypeOrSelf(operand.getType());
    if (!type.isF32() && !type.isBF16() && !type.isF16() &&
        !type.isInteger(1)) {
      llvm::raw_string_ostream os(why);
      os << op->getName() << " reads " << type
         << " (an epilogue holds f32, bf16, f16 and i1)";
      return failure();
    }
    args.push_back(scratch.addArgument(type, loc));
  }
  // The scratch block has no parent region to take the context from.
  OpBuilder b(op->getContext());
  b.setInsertionPointToEnd(&scratch);
  Value result =
      cast && getElementTypeOrSelf(cast.getType()).isTF32()
          ? buildRoundToTf32(b, loc, args.front())
          : buildScalar(op, b, loc, args);
  if (!result) {
    why = (op->getName().getStringRef() + " has no epilogue form").str();
    return failure();
  }
  ScalarPrinter printer(body, nextName);
  for (auto [arg, expr] : llvm::zip(args, in))
    printer.bind(arg, expr);
  for (Operation &scalar : scratch)
    if (failed(printer.print(&scalar, why)))
      return failure();
  return printer.nameOf(result);
}

/// The value of a splat constant, if `v` is one.
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

} // namespace

std::optional<Triangle> constantTriangle(Value condition, ArrayRef<int64_t> shape) {
  auto constant = condition.getDefiningOp<ConstantOp>();
  auto dense = constant ? dyn_cast<DenseElementsAttr>(constant.getValue())
                        : DenseElementsAttr();
  if (!dense || !dense.getElementType().isInteger(1) || shape.size() < 2)
    return std::nullopt;
  ArrayRef<int64_t> own = dense.getType().getShape();
  if (own.size() < 2 || own.size() > shape.size())
    return std::nullopt;
  for (size_t k = 0; k + 2 < own.size(); ++k)
    if (own[k] != 1)
      return std::nullopt;
  int64_t rows = own[own.size() - 2], cols = own.back();
  if (rows != shape[shape.size() - 2] || cols != shape.back())
    return std::nullopt;
  SmallVector<bool> bits;
  if (dense.isSplat())
    return std::nullopt;
  for (bool b : dense.getValues<bool>())
    bits.push_back(b);
  auto at = [&](int64_t i, int64_t j) { return bits[i * cols + j]; };
  for (bool upper : {false, true}) {
    // A row with some but not all keys true fixes k.
    std::optional<int64_t> k;
    for (int64_t i = 0; i < rows && !k; ++i) {
      int64_t count = 0;
      for (int64_t j = 0; j < cols; ++j)
        count += at(i, j);
      if (count > 0 && count < cols)
        k = upper ? cols - count - i : count - 1 - i;
    }
    if (!k)
      return std::nullopt;
    bool ok = true;
    for (int64_t i = 0; i < rows && ok; ++i)
      for (int64_t j = 0; j < cols && ok; ++j)
        ok = at(i, j) == (upper ? j - i >= *k : j - i <= *k);
    if (ok)
      return Triangle{upper, *k};
  }
  return std::nullopt;
}

namespace {

class Emitter {
public:
  Emitter(Value acc, const OutputIndexing &indexing,
          const llvm::DenseMap<Value, Value> &substitutions, std::string &why)
      : indexing(indexing), substitutions(substitutions), why(why) {
    names[acc] = "acc";
  }

  LogicalResult emitOp(Operation *op);
  LogicalResult addBias(Value acc, Value bias);
  FailureOr<std::string> nameOf(Value v) const {
    auto it = names.find(v);
    if (it == names.end())
      return failure();
    return it->second;
  }
  std::string body;
  SmallVector<Value> operands;

private:
  FailureOr<std::string> use(Value v);
  FailureOr<std::string> load(Value tensor);
  std::string coordinate(unsigned dim);
  LogicalResult fail(Operation *op, const Twine &message) {
    why = (op->getName().getStringRef() + " " + message).str();
    return failure();
  }

  const OutputIndexing &indexing;
  const llvm::DenseMap<Value, Value> &substitutions;
  std::string &why;
  llvm::DenseMap<Value, std::string> names;
  llvm::DenseMap<unsigned, std::string> coordinates;
  unsigned nextName = 0;
};

/// The expression of coordinate `dim` of the result (computed once).
std::string Emitter::coordinate(unsigned dim) {
  if (auto it = coordinates.find(dim); it != coordinates.end())
    return it->second;
  ArrayRef<int64_t> shape = indexing.shape;
  unsigned rank = shape.size();
  std::string name = "d" + std::to_string(dim);
  if (dim == rank - 1) {
    body += "  const long long " + name + " = col;\n";
  } else if (dim == rank - 2 && !indexing.batchFoldedIntoRows) {
    body += "  const long long " + name + " = row;\n";
  } else {
    // Dimensions [0, last) linearised in `row` (folded) or [0, rank - 2) in
    // `batch`: peel the faster-varying ones off.
    unsigned end = indexing.batchFoldedIntoRows ? rank - 1 : rank - 2;
    long long inner = 1;
    for (unsigned d = dim + 1; d < end; ++d)
      inner *= shape[d];
    std::string linear = indexing.batchFoldedIntoRows ? "(long long)row"
                                                      : "(long long)batch";
    body += "  const long long " + name + " = (" + linear + " / " +
            std::to_string(inner) + "LL) % " + std::to_string(shape[dim]) +
            "LL;\n";
  }
  coordinates[dim] = name;
  return name;
}

/// A region input read at the element the broadcast maps the point to.
FailureOr<std::string> Emitter::load(Value tensor) {
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  std::optional<runtime::DType> dtype = type ? dtypeOf(type) : std::nullopt;
  // A select's condition: i1 tensors hold a byte per element.
  bool boolean = type && type.getElementType().isInteger(1);
  if (boolean)
    dtype = runtime::DType::Bool;
  if (!dtype) {
    llvm::raw_string_ostream os(why);
    os << "an epilogue operand of type " << tensor.getType()
       << " (only f32, bf16 and f16 tensors are read)";
    return failure();
  }
  ArrayRef<int64_t> shape = indexing.shape;
  ArrayRef<int64_t> own = type.getShape();
  if (own.size() > shape.size()) {
    why = "an epilogue operand of higher rank than the result";
    return failure();
  }
  // Numpy broadcasting: right-aligned; a dimension of 1 does not move.
  std::string index;
  long long stride = 1;
  for (int64_t i = own.size() - 1; i >= 0; --i) {
    unsigned dim = shape.size() - own.size() + i;
    if (own[i] != 1) {
      if (own[i] != shape[dim]) {
        why = "an epilogue operand that does not broadcast to the result";
        return failure();
      }
      std::string term = coordinate(dim);
      if (stride != 1)
        term += " * " + std::to_string(stride) + "LL";
      index = index.empty() ? term : index + " + " + term;
    }
    stride *= own[i];
  }
  if (index.empty())
    index = "0";
  std::string pointer = "extra" + std::to_string(operands.size());
  operands.push_back(tensor);
  switch (*dtype) {
  case runtime::DType::Bool:
    return "(float)((const unsigned char *)" + pointer + ")[" + index + "]";
  case runtime::DType::F32:
    return "((const float *)" + pointer + ")[" + index + "]";
  case runtime::DType::BF16:
    return "bf16ToFloat(((const u16 *)" + pointer + ")[" + index + "])";
  default:
    return "f16ToFloat(((const u16 *)" + pointer + ")[" + index + "])";
  }
}

FailureOr<std::string> Emitter::use(Value v) {
  if (auto it = substitutions.find(v); it != substitutions.end())
    v = it->second;
  if (auto it = names.find(v); it != names.end())
    return it->second;
  if (std::optional<double> splat = splatValue(v))
    return floatLiteral(*splat);
  FailureOr<std::string> loaded = load(v);
  if (failed(loaded))
    return failure();
  // A tensor read twice is loaded once.
  std::string name = "x" + std::to_string(nextName++);
  body += "  const float " + name + " = " + *loaded + ";\n";
  names[v] = name;
  return name;
}

/// acc + bias, as the value of `acc` (an f32 accumulator: no rounding).
LogicalResult Emitter::addBias(Value acc, Value bias) {
  FailureOr<std::string> b = use(bias);
  if (failed(b))
    return failure();
  std::string name = "v" + std::to_string(nextName++);
  body += "  float " + name + " = acc + " + *b + ";\n";
  names[acc] = name;
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  if (auto select = dyn_cast<SelectOp>(op)) {
    // A constant triangle is an index comparison, as a causal mask is.
    ArrayRef<int64_t> shape = indexing.shape;
    std::optional<Triangle> tri =
        shape.size() >= 2 ? constantTriangle(select.getCondition(), shape)
                          : std::nullopt;
    std::string condition;
    if (tri) {
      std::string i = coordinate(shape.size() - 2),
                  j = coordinate(shape.size() - 1);
      condition = j + " - " + i + (tri->upper ? " >= " : " <= ") +
                  std::to_string(tri->k) + "LL";
    } else {
      // Any other condition is read from memory.
      FailureOr<std::string> c = use(select.getCondition());
      if (failed(c))
        return failure();
      condition = *c + " != 0.0f";
    }
    FailureOr<std::string> a = use(select.getTrueValue());
    if (failed(a))
      return failure();
    FailureOr<std::string> b = use(select.getFalseValue());
    if (failed(b))
      return failure();
    std::string name = "v" + std::to_string(nextName++);
    body += "  float " + name + " = (" + condition + ") ? " + *a + " : " +
            *b + ";\n";
    names[op->getResult(0)] = name;
    return success();
  }
  // Batch norm's vectors run along its channel dimension, which the
  // right-aligned broadcast of a 1-D operand only reaches when it is last.
  if (auto norm = dyn_cast<BatchNormOp>(op);
      norm && norm.getDataFormat() != DataFormat::ChannelsLast &&
      norm.getType().getRank() > 2)
    return fail(op, "in nchw (its channels are not the last dimension)");
  SmallVector<std::string> in;
  for (Value operand : op->getOperands()) {
    FailureOr<std::string> s = use(operand);
    if (failed(s))
      return failure();
    // A select's condition is read as a float; the scalar body wants i1.
    if (getElementTypeOrSelf(operand.getType()).isInteger(1))
      *s = "(" + *s + " != 0.0f)";
    in.push_back(*s);
  }
  FailureOr<std::string> value = emitScalarBody(op, in, body, nextName, why);
  if (failed(value))
    return failure();
  names[op->getResult(0)] = *value;
  return success();
}

} // namespace

bool hasEpilogueForm(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0 ||
      !(op->hasTrait<OpTrait::Elementwise>() || isBroadcastingElementwise(op) ||
        isa<SelectOp, BatchNormOp>(op)))
    return false;
  // The ops whose scalar body prints: a dry run on placeholder operands.
  SmallVector<std::string> in;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    in.push_back("a" + std::to_string(i));
  std::string body, why;
  unsigned nextName = 0;
  return succeeded(emitScalarBody(op, in, body, nextName, why));
}

bool isSplatConstant(Value v) { return splatValue(v).has_value(); }

FailureOr<EmittedEpilogue>
emitEpilogue(Value acc, ArrayRef<Operation *> ops, Value result,
             const OutputIndexing &indexing,
             const llvm::DenseMap<Value, Value> &substitutions,
             Value accBias, std::string &why, Value auxResult) {
  std::optional<runtime::DType> outputType = dtypeOf(result.getType());
  std::optional<runtime::DType> auxType =
      auxResult ? dtypeOf(auxResult.getType()) : std::nullopt;
  if (!outputType || (auxResult && !auxType)) {
    why = "the region's result type is not f32, bf16 or f16";
    return failure();
  }
  Emitter emitter(acc, indexing, substitutions, why);
  if (accBias && failed(emitter.addBias(acc, accBias)))
    return failure();
  for (Operation *op : ops)
    if (failed(emitter.emitOp(op)))
      return failure();
  FailureOr<std::string> value = emitter.nameOf(result);
  FailureOr<std::string> auxValue =
      auxResult ? emitter.nameOf(auxResult) : FailureOr<std::string>(std::string());
  if (failed(value) || failed(auxValue)) {
    why = "the region's result is not computed by its epilogue";
    return failure();
  }
  EmittedEpilogue out;
  out.body = emitter.body + "  return " +
             (auxResult ? "which == 1 ? " + *auxValue + " : " : "") + *value +
             ";";
  out.operands = emitter.operands;
  out.outputType = *outputType;
  out.auxType = auxType;
  return out;
}

} // namespace kiln::templates
