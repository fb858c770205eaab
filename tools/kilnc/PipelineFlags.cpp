//===- PipelineFlags.cpp - kilnc's flags for PipelineOptions ---------------===//
//
// One cl::opt per line of include/kiln/Pipelines/PipelineOptions.def: the
// flag's name, help text, group and "(default: ...)" all come from there,
// so a new pipeline option needs no edit here.
//
//===----------------------------------------------------------------------===//

#include "Flags.h"
#include "OptionCategories.h"

#include "llvm/Support/CommandLine.h"

#include <deque>
#include <string>

namespace cl = llvm::cl;

namespace kiln::kilnc {
namespace {

/// Help texts live as long as the options.
const char *withDefault(const char *help, const std::string &value) {
  static std::deque<std::string> texts;
  texts.push_back(std::string(help) + " (default: " +
                  (value.empty() ? "none" : value) + ")");
  return texts.back().c_str();
}
std::string defaultText(bool value) { return value ? "true" : "false"; }
std::string defaultText(const std::string &value) { return value; }
std::string defaultText(unsigned value) { return std::to_string(value); }

cl::OptionCategory &groupCategory(llvm::StringRef group) {
  return group.starts_with("Passes") ? passCategory() : codegenCategory();
}
/// A group ending in "Hidden" is listed by --help-hidden only.
cl::OptionHidden groupVisibility(llvm::StringRef group) {
  return group.ends_with("Hidden") ? cl::Hidden : cl::NotHidden;
}

#define KILN_PIPELINE_OPTION(FIELD, FLAG, TYPE, DEFAULT, GROUP, VALUES,        \
                             METAVAR, HELP)                                    \
  cl::opt<TYPE> FIELD##Flag(                                                   \
      FLAG, cl::desc(withDefault(HELP, defaultText(TYPE(DEFAULT)))),           \
      cl::value_desc(METAVAR), cl::init(DEFAULT),                              \
      cl::cat(groupCategory(#GROUP)), groupVisibility(#GROUP));
#include "kiln/Pipelines/PipelineOptions.def"

} // namespace

void readPipelineFlags(PipelineOptions &options) {
#define KILN_PIPELINE_OPTION(FIELD, FLAG, TYPE, DEFAULT, GROUP, VALUES,       \
                             METAVAR, HELP)                                   \
  options.FIELD = FIELD##Flag;
#include "kiln/Pipelines/PipelineOptions.def"
}

std::vector<std::string>
rewriteDeprecatedFlags(llvm::ArrayRef<std::string> args,
                       const std::function<void(const llvm::Twine &)> &warn) {
  std::vector<std::string> rewritten;
  for (const std::string &arg : args) {
    llvm::StringRef text(arg);
    llvm::StringRef dashes = text.starts_with("--") ? "--"
                             : text.starts_with("-") ? "-"
                                                     : "";
    llvm::StringRef name = text.drop_front(dashes.size()).split('=').first;
    std::string replaced = arg;
#define KILN_DEPRECATED_FLAG(OLD, NEW)                                        \
  if (!dashes.empty() && name == OLD) {                                       \
    warn(llvm::Twine("--") + OLD + " is deprecated: use --" + NEW);          \
    replaced = "--" NEW + text.drop_front(dashes.size() + name.size()).str(); \
  }
#include "kiln/Pipelines/PipelineOptions.def"
    rewritten.push_back(std::move(replaced));
  }
  return rewritten;
}

} // namespace kiln::kilnc
