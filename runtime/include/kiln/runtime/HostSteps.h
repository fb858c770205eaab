//===- HostSteps.h - Steps that run on the host, between launches -*- C++ -*-===//
//
// Format 1.9, section `host-steps`: ONNX nodes on STRING tensors (Cast to
// and from numbers, Identity, Equal, StringConcat, StringSplit,
// RegexFullMatch, StringNormalizer, Reshape/Squeeze/Unsqueeze, and
// ai.onnx.ml's LabelEncoder from strings) and nodes whose output shape
// depends on their data (NonZero, Compress, Unique, NonMaxSuppression,
// with the Gather, Transpose, Slice and Cast that follow them) have no GPU
// kernel. The compiler moves them out of the device graph into a host
// program; a session runs its `before` steps before the first launch and
// its `after` steps after the last one, whatever the device (cuda or emu).
// Strings live in host storage the session owns; a numeric value crosses to
// the device through a signature input the host writes (`toDevice`) and
// back through a signature output the host reads (`fromDevice`).
//
// Stability: mirrors the file format (docs/artifact-format.md), as
// Artifact.h's non-signature fields.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HOSTSTEPS_H
#define KILN_RUNTIME_HOSTSTEPS_H

#include "kiln/runtime/DType.h"
#include "kiln/runtime/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// The dtype code a host value of strings has in the `host-steps` section
/// (only there: signature tensors and weights are never strings).
constexpr uint32_t kStringDTypeCode = 18;

/// A tensor on the host: numbers (dtype, C-order bytes) or UTF-8 strings.
struct HostValue {
  bool isString = false;
  /// Meaningless when isString.
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;
  std::vector<std::string> strings;
};

/// "string" or the dtype's name.
std::string describeHostType(bool isString, DType dtype);

/// A value the host program declares: a user input it takes or a user
/// output it gives. A dim of -1 is known only at run time (StringSplit's
/// widest split, StringNormalizer's kept words).
struct HostTensorDecl {
  std::string name;
  bool isString = true;
  DType dtype = DType::F32;
  Shape shape;
};

/// A node attribute as text: ints in decimal, strings as they are.
struct HostAttribute {
  std::string name;
  std::vector<std::string> values;
};

enum class HostPhase : uint32_t {
  /// Before the first launch: it reads user inputs and constants only.
  Before = 0,
  /// After the last launch: it may read device outputs.
  After = 1,
};

struct HostStep {
  /// The ONNX op type: Cast, Identity, Equal, StringConcat, ...
  std::string op;
  /// The ONNX node's name (may be empty) for messages.
  std::string node;
  HostPhase phase = HostPhase::Before;
  /// Value names; an empty name is an absent optional input.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<HostAttribute> attributes;

  const HostAttribute *findAttribute(std::string_view name) const;
  /// "node 'n' (Op)", or "unnamed node producing 'y' (Op)".
  std::string describe() const;
};

struct HostConstant {
  std::string name;
  HostValue value;
};

struct HostProgram {
  std::vector<HostTensorDecl> inputs;
  std::vector<HostTensorDecl> outputs;
  std::vector<HostConstant> constants;
  std::vector<HostStep> steps;
  /// Signature inputs a `before` step computes (the user does not bind them).
  std::vector<std::string> toDevice;
  /// Signature outputs an `after` step reads; those that are not graph
  /// outputs are hidden from the user.
  std::vector<std::string> fromDevice;
  std::vector<std::string> hiddenOutputs;

  bool empty() const { return steps.empty() && inputs.empty(); }
  const HostTensorDecl *findInput(std::string_view name) const;
  const HostTensorDecl *findOutput(std::string_view name) const;
  bool writesDeviceInput(std::string_view name) const;
  bool hidesDeviceOutput(std::string_view name) const;
};

/// The ops a host step may be, sorted.
const std::vector<std::string_view> &hostStepOps();

/// Checks one step on its own: a known op, its input and output counts, its
/// attributes (RegexFullMatch's pattern compiles under RE2; a Cast's `to`
/// is a type the host converts). Errors name the node. The compiler calls
/// this on each step it makes, so a bad pattern fails at compile time.
Error verifyHostStep(const HostStep &step);

/// Runs one step: reads its inputs from `values`, writes its outputs there.
/// Errors name the node (and the element, for a string Cast cannot parse).
Error runHostStep(const HostStep &step,
                  std::map<std::string, HostValue, std::less<>> &values);

/// Whether RegexFullMatch is available (this build found RE2).
bool haveRegexSupport();

} // namespace kiln::runtime

#endif // KILN_RUNTIME_HOSTSTEPS_H
