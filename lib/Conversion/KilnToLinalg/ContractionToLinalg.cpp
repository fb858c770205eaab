//===- ContractionToLinalg.cpp - Contraction kiln ops to linalg ------------------------===//

#include "LoweringUtils.h"

#include "kiln/Conversion/KilnToLinalg/KilnToLinalg.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::lowering;

void kiln::populateContractionToLinalgPatterns(RewritePatternSet &patterns) {}
