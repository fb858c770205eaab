//===- KilnOps.cpp - Generated op definitions
//-------------------------------===//
//
// Only the ODS-generated code lives here; verifiers, type inference and folders
// are in one file per op family (ElementwiseOps.cpp, ContractionOps.cpp, ...).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
