//===- ScalarToCpp.cpp - Scalar arith/math ops as CUDA C++ ----------------===//
//
// Each op is one statement; the C++ for an op is what the generated kernels'
// lowering of the same op gives (arith.maximumf and minimumf are PTX's
// max.NaN/min.NaN through Common.cuh's maxNaN/minNaN, the math ops CUDA's
// libdevice functions, which MLIR's NVVM lowering of math also calls).
//
//===----------------------------------------------------------------------===//

#include "ScalarToCpp.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace kiln::templates {

std::string floatLiteral(double v) {
  if (std::isnan(v))
    return "__int_as_float(0x7fc00000)";
  if (std::isinf(v))
    return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.9gf", static_cast<float>(v));
  std::string s = buffer;
  // "1f" is not a literal; "1.f" and "1e+30f" are.
  if (s.find_first_of(".e") == std::string::npos)
    s.insert(s.size() - 1, ".");
  return s;
}

namespace {

/// The C++ type holding a scalar of `type`, or "" when there is none.
std::string cppType(Type type) {
  if (type.isF32() || type.isBF16() || type.isF16())
    return "float";
  if (type.isInteger(1))
    return "bool";
  if (type.isInteger(32))
    return "u32";
  return "";
}

const char *unaryFunction(Operation *op) {
  return llvm::TypeSwitch<Operation *, const char *>(op)
      .Case([](math::AbsFOp) { return "fabsf"; })
      .Case([](math::ExpOp) { return "expf"; })
      .Case([](math::Exp2Op) { return "exp2f"; })
      .Case([](math::ExpM1Op) { return "expm1f"; })
      .Case([](math::LogOp) { return "logf"; })
      .Case([](math::Log1pOp) { return "log1pf"; })
      .Case([](math::Log2Op) { return "log2f"; })
      .Case([](math::SqrtOp) { return "sqrtf"; })
      .Case([](math::RsqrtOp) { return "rsqrtf"; })
      .Case([](math::TanhOp) { return "tanhf"; })
      .Case([](math::ErfOp) { return "erff"; })
      .Case([](math::SinOp) { return "sinf"; })
      .Case([](math::CosOp) { return "cosf"; })
      .Case([](math::TanOp) { return "tanf"; })
      .Case([](math::AsinOp) { return "asinf"; })
      .Case([](math::AcosOp) { return "acosf"; })
      .Case([](math::AtanOp) { return "atanf"; })
      .Case([](math::SinhOp) { return "sinhf"; })
      .Case([](math::CoshOp) { return "coshf"; })
      .Case([](math::AsinhOp) { return "asinhf"; })
      .Case([](math::AcoshOp) { return "acoshf"; })
      .Case([](math::AtanhOp) { return "atanhf"; })
      .Case([](math::FloorOp) { return "floorf"; })
      .Case([](math::CeilOp) { return "ceilf"; })
      .Case([](math::RoundEvenOp) { return "rintf"; })
      .Case([](math::RoundOp) { return "roundf"; })
      .Case([](math::TruncOp) { return "truncf"; })
      .Default([](Operation *) { return nullptr; });
}

/// `a OP b` for a float comparison, false or true on NaN as the predicate
/// says (C++'s <, <=, >, >=, == are the ordered ones, != the unordered).
std::optional<std::string> compare(arith::CmpFPredicate predicate,
                                   const std::string &a, const std::string &b) {
  using P = arith::CmpFPredicate;
  auto both = [&](const char *op) { return a + " " + op + " " + b; };
  switch (predicate) {
  case P::AlwaysFalse:
    return std::string("false");
  case P::AlwaysTrue:
    return std::string("true");
  case P::OEQ:
    return both("==");
  case P::OGT:
    return both(">");
  case P::OGE:
    return both(">=");
  case P::OLT:
    return both("<");
  case P::OLE:
    return both("<=");
  case P::ONE:
    return "(" + a + " < " + b + " || " + a + " > " + b + ")";
  case P::ORD:
    return "(" + a + " == " + a + " && " + b + " == " + b + ")";
  case P::UEQ:
    return "!(" + a + " < " + b + " || " + a + " > " + b + ")";
  case P::UGT:
    return "!(" + a + " <= " + b + ")";
  case P::UGE:
    return "!(" + a + " < " + b + ")";
  case P::ULT:
    return "!(" + a + " >= " + b + ")";
  case P::ULE:
    return "!(" + a + " > " + b + ")";
  case P::UNE:
    return both("!=");
  case P::UNO:
    return "(" + a + " != " + a + " || " + b + " != " + b + ")";
  }
  return std::nullopt;
}

std::optional<std::string> compare(arith::CmpIPredicate predicate,
                                   const std::string &a, const std::string &b) {
  using P = arith::CmpIPredicate;
  auto s = [&](const char *op) {
    return "(int)" + a + " " + op + " (int)" + b;
  };
  auto u = [&](const char *op) { return a + " " + op + " " + b; };
  switch (predicate) {
  case P::eq:
    return u("==");
  case P::ne:
    return u("!=");
  case P::slt:
    return s("<");
  case P::sle:
    return s("<=");
  case P::sgt:
    return s(">");
  case P::sge:
    return s(">=");
  case P::ult:
    return u("<");
  case P::ule:
    return u("<=");
  case P::ugt:
    return u(">");
  case P::uge:
    return u(">=");
  }
  return std::nullopt;
}

} // namespace

LogicalResult ScalarPrinter::print(Operation *op, std::string &why) {
  auto fail = [&](const Twine &message) {
    why = (op->getName().getStringRef() + " " + message).str();
    return failure();
  };
  if (op->getNumResults() != 1)
    return fail("has no C++ form in an epilogue");
  Value result = op->getResult(0);
  Type type = result.getType();
  std::string resultType = cppType(type);
  if (resultType.empty()) {
    llvm::raw_string_ostream os(why);
    os << op->getName() << " computes " << type
       << ", which an epilogue does not hold";
    return failure();
  }
  SmallVector<std::string> in;
  for (Value operand : op->getOperands()) {
    auto it = names.find(operand);
    if (it == names.end())
      return fail("reads a value defined outside its scalar body");
    if (cppType(operand.getType()).empty())
      return fail("reads a type an epilogue does not hold");
    in.push_back(it->second);
  }
  bool isBool = type.isInteger(1);
  auto binary = [&](const char *op) { return in[0] + " " + op + " " + in[1]; };
  auto call = [&](const char *fn) {
    std::string s = std::string(fn) + "(";
    for (size_t i = 0; i < in.size(); ++i)
      s += (i ? ", " : "") + in[i];
    return s + ")";
  };
  std::optional<std::string> expr =
      llvm::TypeSwitch<Operation *, std::optional<std::string>>(op)
          .Case([&](arith::ConstantOp constant) -> std::optional<std::string> {
            Attribute value = constant.getValue();
            if (auto f = dyn_cast<FloatAttr>(value))
              return floatLiteral(f.getValueAsDouble());
            if (auto i = dyn_cast<IntegerAttr>(value)) {
              if (isBool)
                return std::string(i.getValue().isZero() ? "false" : "true");
              return std::to_string(i.getValue().getZExtValue()) + "u";
            }
            return std::nullopt;
          })
          .Case([&](arith::AddFOp) { return binary("+"); })
          .Case([&](arith::SubFOp) { return binary("-"); })
          .Case([&](arith::MulFOp) { return binary("*"); })
          .Case([&](arith::DivFOp) { return binary("/"); })
          .Case([&](arith::RemFOp) { return call("fmodf"); })
          .Case([&](arith::NegFOp) { return "-" + in[0]; })
          .Case([&](arith::MaximumFOp) { return call("maxNaN"); })
          .Case([&](arith::MinimumFOp) { return call("minNaN"); })
          .Case([&](arith::MaxNumFOp) { return call("fmaxf"); })
          .Case([&](arith::MinNumFOp) { return call("fminf"); })
          .Case([&](math::PowFOp) { return call("powf"); })
          .Case([&](math::FmaOp) { return call("fmaf"); })
          .Case([&](math::CopySignOp) { return call("copysignf"); })
          .Case([&](math::Atan2Op) { return call("atan2f"); })
          .Case([&](arith::CmpFOp cmp) {
            return compare(cmp.getPredicate(), in[0], in[1]);
          })
          .Case([&](arith::CmpIOp cmp) {
            return compare(cmp.getPredicate(), in[0], in[1]);
          })
          .Case([&](arith::SelectOp) {
            return "(" + in[0] + ") ? " + in[1] + " : " + in[2];
          })
          // Between float widths: held as float, rounded below.
          .Case([&](arith::ExtFOp) { return in[0]; })
          .Case([&](arith::TruncFOp) { return in[0]; })
          .Case([&](arith::BitcastOp cast) -> std::optional<std::string> {
            if (cast.getIn().getType().isF32() && type.isInteger(32))
              return "__float_as_uint(" + in[0] + ")";
            if (cast.getIn().getType().isInteger(32) && type.isF32())
              return "__uint_as_float(" + in[0] + ")";
            return std::nullopt;
          })
          .Case([&](arith::UIToFPOp) -> std::optional<std::string> {
            if (!op->getOperand(0).getType().isInteger(1))
              return std::nullopt;
            return "(" + in[0] + " ? 1.0f : 0.0f)";
          })
          .Case([&](arith::AndIOp) {
            return isBool ? binary("&&") : binary("&");
          })
          .Case([&](arith::OrIOp) { return isBool ? binary("||") : binary("|"); })
          .Case([&](arith::XOrIOp) {
            return isBool ? binary("!=") : binary("^");
          })
          .Case([&](arith::AddIOp) -> std::optional<std::string> {
            if (isBool)
              return std::nullopt;
            return binary("+");
          })
          .Case([&](arith::ShRUIOp) -> std::optional<std::string> {
            if (isBool)
              return std::nullopt;
            return binary(">>");
          })
          .Default([&](Operation *) -> std::optional<std::string> {
            if (const char *fn = unaryFunction(op))
              return call(fn);
            return std::nullopt;
          });
  if (!expr)
    return fail("has no C++ form in an epilogue");
  std::string name = "v" + std::to_string(nextName++);
  body += "  " + resultType + " " + name + " = " + *expr + ";\n";
  // bf16 and f16 arithmetic rounds each result to its type.
  if (type.isBF16())
    body += "  " + name + " = bf16ToFloat(floatToBf16(" + name + "));\n";
  if (type.isF16())
    body += "  " + name + " = f16ToFloat(floatToF16(" + name + "));\n";
  names[result] = name;
  return success();
}

} // namespace kiln::templates
