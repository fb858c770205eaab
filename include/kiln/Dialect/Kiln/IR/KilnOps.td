//===- KilnOps.td - All kiln ops, by family ----------------*- tablegen -*-===//

#ifndef KILN_DIALECT_KILN_IR_KILNOPS_TD
#define KILN_DIALECT_KILN_IR_KILNOPS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"
include "kiln/Dialect/Kiln/IR/KilnKernelAttrs.td"
include "kiln/Dialect/Kiln/IR/KilnElementwiseOps.td"
include "kiln/Dialect/Kiln/IR/KilnContractionOps.td"
include "kiln/Dialect/Kiln/IR/KilnReductionOps.td"
include "kiln/Dialect/Kiln/IR/KilnDataMovementOps.td"
include "kiln/Dialect/Kiln/IR/KilnIndexingOps.td"
include "kiln/Dialect/Kiln/IR/KilnImageOps.td"
include "kiln/Dialect/Kiln/IR/KilnStructureOps.td"
include "kiln/Dialect/Kiln/IR/KilnRandomOps.td"
include "kiln/Dialect/Kiln/IR/KilnAutodiffOps.td"

#endif // KILN_DIALECT_KILN_IR_KILNOPS_TD
