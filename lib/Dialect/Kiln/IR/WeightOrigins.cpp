//===- WeightOrigins.cpp - Which initializer each weight came from --------===//

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {
namespace {
constexpr llvm::StringLiteral kOriginAttr =
    KilnDialect::OriginAttrHelper::getNameStr();
constexpr llvm::StringLiteral kOriginsAttr =
    KilnDialect::WeightOriginsAttrHelper::getNameStr();

StringRef blobKey(Attribute value) {
  auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(value);
  return resource ? resource.getRawHandle().getKey() : StringRef();
}

void printList(llvm::raw_ostream &os, ArrayRef<int64_t> values) {
  llvm::interleave(values, os, ",");
}
} // namespace

std::string getWeightOrigin(ml_program::GlobalOp global) {
  auto origin = global->getAttrOfType<StringAttr>(kOriginAttr);
  return origin ? origin.getValue().str() : "";
}

void setWeightOrigin(ml_program::GlobalOp global, StringRef origin) {
  if (!origin.empty())
    global->setAttr(kOriginAttr, StringAttr::get(global.getContext(), origin));
}

std::string getBlobOrigin(ModuleOp module, Attribute value) {
  StringRef key = blobKey(value);
  auto origins = module->getAttrOfType<DictionaryAttr>(kOriginsAttr);
  if (key.empty() || !origins)
    return "";
  auto origin = origins.getAs<StringAttr>(key);
  return origin ? origin.getValue().str() : "";
}

void setBlobOrigin(ModuleOp module, Attribute value, StringRef origin) {
  StringRef key = blobKey(value);
  if (key.empty() || origin.empty())
    return;
  NamedAttrList origins;
  if (auto existing = module->getAttrOfType<DictionaryAttr>(kOriginsAttr))
    origins.assign(existing.getValue());
  origins.set(key, StringAttr::get(module.getContext(), origin));
  module->setAttr(kOriginsAttr, origins.getDictionary(module.getContext()));
}

std::string initializerOrigin(StringRef name, RankedTensorType type) {
  if (name.empty() || name.contains('\n') || !type.hasStaticShape())
    return "";
  std::string origin;
  llvm::raw_string_ostream os(origin);
  // The runtime's dtype names (kiln/runtime/DType.h): MLIR's, except bool,
  // the unsigned integers and the float8 types (MLIR's `f8E4M3FN` is the
  // runtime's `f8e4m3fn`).
  Type element = type.getElementType();
  os << "initializer ";
  if (element.isInteger(1)) {
    os << "bool";
  } else if (element.isUnsignedInteger()) {
    os << 'u' << element.getIntOrFloatBitWidth();
  } else {
    std::string name;
    llvm::raw_string_ostream(name) << element;
    os << (isa<FloatType>(element) && element.getIntOrFloatBitWidth() == 8
               ? llvm::StringRef(name).lower()
               : name);
  }
  os << ' ';
  llvm::interleave(type.getShape(), os, "x");
  if (type.getRank() == 0)
    os << "scalar";
  os << ' ' << name;
  return origin;
}

std::string appendOriginStep(StringRef origin, StringRef step,
                             ArrayRef<int64_t> values, ArrayRef<int64_t> more) {
  if (origin.empty())
    return "";
  std::string result = origin.str();
  llvm::raw_string_ostream os(result);
  os << '\n' << step;
  if (!values.empty() || step == "reshape" || step == "transpose") {
    os << ' ';
    printList(os, values);
  }
  if (!more.empty()) {
    os << ' ';
    printList(os, more);
  }
  return result;
}

} // namespace kiln
