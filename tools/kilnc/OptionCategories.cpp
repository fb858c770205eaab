//===- OptionCategories.cpp - The groups of kilnc's command-line options --===//
//
// Function-local statics, so options in any file can name a category during
// static initialisation without depending on the order files initialise in.
//
//===----------------------------------------------------------------------===//

#include "OptionCategories.h"

namespace cl = llvm::cl;

namespace kiln::kilnc {

cl::OptionCategory &inputCategory() {
  static cl::OptionCategory category("Input", "The model and its shapes");
  return category;
}

cl::OptionCategory &passCategory() {
  static cl::OptionCategory category(
      "Passes", "Graph passes: layout, precision, fusion");
  return category;
}

cl::OptionCategory &codegenCategory() {
  static cl::OptionCategory category("Codegen",
                                     "Kernel code generation and the target");
  return category;
}

cl::OptionCategory &outputCategory() {
  static cl::OptionCategory category("Output", "What kilnc writes, and where");
  return category;
}

cl::OptionCategory &trainingCategory() {
  static cl::OptionCategory category(
      "Training", "Training steps (--train) and gradients (--gradients)");
  return category;
}

cl::OptionCategory &diagnosticsCategory() {
  static cl::OptionCategory category("Diagnostics",
                                     "Progress, timing and statistics");
  return category;
}

llvm::ArrayRef<const cl::OptionCategory *> allCategories() {
  static const cl::OptionCategory *categories[] = {
      &inputCategory(), &passCategory(), &codegenCategory(), &outputCategory(),
      &trainingCategory(), &diagnosticsCategory()};
  return categories;
}

} // namespace kiln::kilnc
