//===- SignatureGroups.h - Sequence and optional inputs/outputs -*- C++ -*-===//
//
// A model's sequence and optional graph inputs and outputs are fixed sets of
// signature tensors in the artifact (kilnc --sequence NAME=N, --absent
// NAME); Artifact::inputGroups and outputGroups say which (format 1.9,
// docs/artifact-format.md "signature-groups"). These functions check the
// groups and what a caller binds to them. docs/runtime.md "Sequences and
// optionals".
//
// Stability: as Runtime.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIGNATUREGROUPS_H
#define KILN_RUNTIME_SIGNATUREGROUPS_H

#include "kiln/runtime/Artifact.h"

#include <string_view>

namespace kiln::runtime {

/// Checks the groups against the signature: names, kinds, that each group's
/// tensors are the signature's [first, first + count) and are named as
/// SignatureGroup says, and that groups do not overlap.
Error verifySignatureGroups(const Artifact &artifact);

/// Checks that `count` tensors may be bound to input `name` as a sequence:
/// it is a sequence (or a present optional sequence) of exactly `count`
/// tensors. Errors name the input and the compiled length.
Error checkSequenceInput(const Artifact &artifact, std::string_view name,
                         size_t count);

/// Checks that input `name` may be bound to one tensor: it is a signature
/// tensor, and not a sequence or an absent optional (errors say how to bind
/// those instead).
Error checkTensorInputName(const Artifact &artifact, std::string_view name);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_SIGNATUREGROUPS_H
