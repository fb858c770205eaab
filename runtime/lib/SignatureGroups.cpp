//===- SignatureGroups.cpp - Sequence and optional inputs/outputs ---------===//
//
// The checks of SignatureGroups.h, and the group lookups of Artifact.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/SignatureGroups.h"

#include "Support.h"

#include <set>

namespace kiln::runtime {

std::string_view signatureGroupKindName(SignatureGroupKind kind) {
  switch (kind) {
  case SignatureGroupKind::Sequence:
    return "sequence";
  case SignatureGroupKind::Optional:
    return "optional";
  case SignatureGroupKind::OptionalSequence:
    return "optional-sequence";
  }
  return "unknown";
}

std::string sequenceElementName(std::string_view name, size_t index) {
  return fmt::format("{}[{}]", name, index);
}

namespace {

const SignatureGroup *findGroup(const std::vector<SignatureGroup> &groups,
                                std::string_view name) {
  for (const SignatureGroup &group : groups)
    if (group.name == name)
      return &group;
  return nullptr;
}

Error verifyGroups(const std::vector<SignatureGroup> &groups,
                   const std::vector<TensorSignature> &tensors,
                   std::string_view side) {
  std::set<std::string_view> names;
  uint64_t end = 0; // groups come in signature order, without overlap
  for (const SignatureGroup &group : groups) {
    if (group.name.empty())
      return makeError("section 'signature-groups': an {} group has no name",
                       side);
    if (!names.insert(group.name).second)
      return makeError("section 'signature-groups': {} group '{}' appears "
                       "twice",
                       side, group.name);
    auto fail = [&](const std::string &why) {
      return makeError("section 'signature-groups': {} group '{}' ({}): {}",
                       side, group.name, signatureGroupKindName(group.kind),
                       why);
    };
    if (!group.present && group.kind == SignatureGroupKind::Sequence)
      return fail("a sequence cannot be absent");
    if (!group.present && group.count != 0)
      return fail(fmt::format("absent, but it has {} tensors", group.count));
    if (group.present && group.kind == SignatureGroupKind::Optional &&
        group.count != 1)
      return fail(fmt::format("a present optional tensor has 1 tensor, not {}",
                              group.count));
    if (uint64_t(group.first) + group.count > tensors.size())
      return fail(fmt::format("tensors {}..{} lie past the signature's {} {}s",
                              group.first, uint64_t(group.first) + group.count,
                              tensors.size(), side));
    if (group.count != 0 && group.first < end)
      return fail("its tensors overlap the previous group's");
    for (uint32_t i = 0; i < group.count; ++i) {
      std::string expected =
          group.isSequence() ? sequenceElementName(group.name, i) : group.name;
      if (tensors[group.first + i].name != expected)
        return fail(fmt::format("{} {} is '{}', not '{}'", side,
                                group.first + i, tensors[group.first + i].name,
                                expected));
    }
    if (group.count != 0)
      end = uint64_t(group.first) + group.count;
  }
  return Error::success();
}

} // namespace

const SignatureGroup *Artifact::findInputGroup(std::string_view name) const {
  return findGroup(inputGroups, name);
}

const SignatureGroup *Artifact::findOutputGroup(std::string_view name) const {
  return findGroup(outputGroups, name);
}

Error verifySignatureGroups(const Artifact &artifact) {
  if (Error err = verifyGroups(artifact.inputGroups, artifact.inputs, "input"))
    return err;
  return verifyGroups(artifact.outputGroups, artifact.outputs, "output");
}

Error checkSequenceInput(const Artifact &artifact, std::string_view name,
                         size_t count) {
  const SignatureGroup *group = artifact.findInputGroup(name);
  if (!group || !group->isSequence()) {
    if (group)
      return makeError("input '{}' is an optional tensor, not a sequence: "
                       "bind one tensor",
                       name);
    return makeError("input '{}' is not a sequence input of the artifact",
                     name);
  }
  if (!group->present)
    return makeError("input '{}' is an optional compiled absent (kilnc "
                     "--absent {}): it takes no tensors",
                     name, name);
  if (group->count != count)
    return makeError("input '{}' is a sequence of {} tensors (kilnc "
                     "--sequence {}={}); {} given",
                     name, group->count, name, group->count, count);
  return Error::success();
}

Error checkTensorInputName(const Artifact &artifact, std::string_view name) {
  if (const SignatureGroup *group = artifact.findInputGroup(name)) {
    if (!group->present)
      return makeError("input '{}' is an optional compiled absent (kilnc "
                       "--absent {}): it takes no tensor",
                       name, name);
    if (group->isSequence())
      return makeError("input '{}' is a sequence of {} tensors: bind it as a "
                       "list (its tensors are {}[0] ... {}[{}])",
                       name, group->count, name, name,
                       group->count == 0 ? 0 : group->count - 1);
  }
  return Error::success();
}

} // namespace kiln::runtime
