//===- OptionCategories.h - The groups of kilnc's command-line options ----===//
//
// Every kilnc option belongs to one of these categories (cl::cat); --help
// lists them (LLVM sorts them by name) and hides LLVM's own options. An
// option without a cl::cat of these is hidden too, so every new option
// names one (test/tools/kilnc/help.test also checks that each shows its
// default). A new option block picks the category that says what it
// changes; a new category is declared here and added to allCategories().
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILNC_OPTIONCATEGORIES_H
#define KILN_TOOLS_KILNC_OPTIONCATEGORIES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"

namespace kiln::kilnc {

/// The model and what fixes its shapes.
llvm::cl::OptionCategory &inputCategory();
/// Graph passes: layout, precision, fusion.
llvm::cl::OptionCategory &passCategory();
/// Kernel code generation: the target, kernel families.
llvm::cl::OptionCategory &codegenCategory();
/// What is written, and where.
llvm::cl::OptionCategory &outputCategory();
/// Training and differentiation: --train, losses, optimizer, --gradients.
llvm::cl::OptionCategory &trainingCategory();
/// Progress, timing, statistics.
llvm::cl::OptionCategory &diagnosticsCategory();

/// Every category above (for cl::HideUnrelatedOptions).
llvm::ArrayRef<const llvm::cl::OptionCategory *> allCategories();

} // namespace kiln::kilnc

#endif // KILN_TOOLS_KILNC_OPTIONCATEGORIES_H
