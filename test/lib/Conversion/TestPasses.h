//===- TestPasses.h - Passes for Kiln's tests only -----------------------===//
//
// kiln-test-launch-to-loops and any later test-only pass. kiln-opt calls
// registerKilnTestPasses(); kilnc never links this library.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_LIB_CONVERSION_TESTPASSES_H
#define KILN_TEST_LIB_CONVERSION_TESTPASSES_H

#include "mlir/Pass/Pass.h"

namespace kiln::test {

#define GEN_PASS_DECL
#include "TestPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "TestPasses.h.inc"

} // namespace kiln::test

#endif // KILN_TEST_LIB_CONVERSION_TESTPASSES_H
