//===- kiln-opt.cpp - Run kiln and upstream passes on .mlir text
//------------===//
//
// The opt tool for lit: every kiln dialect and pass, and the upstream dialects
// and passes Kiln's pipelines use, so any pipeline stage can be replayed;
// plus the test-only passes of test/lib, which kilnc does not link.
//
//===----------------------------------------------------------------------===//

#include "kiln/Pipelines/Pipelines.h"
#include "kiln/runtime/Version.h"
#include "TestPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << kiln::runtime::versionLine("kiln-opt") << "\n";
  });
  kiln::registerPipelinePasses();
  kiln::test::registerKilnTestPasses();
  mlir::DialectRegistry registry;
  kiln::registerPipelineDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
