//===- SignatureGroups.cpp - Sequence/optional groups into the artifact ---===//
//
// See SignatureGroups.h. The artifact's verifier checks what is filled in
// here (names, order, counts) again, at compile time and at load.
//
//===----------------------------------------------------------------------===//

#include "SignatureGroups.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace kiln {

namespace {

llvm::Error attachSide(ArrayAttr entries,
                       const std::vector<runtime::TensorSignature> &tensors,
                       std::vector<runtime::SignatureGroup> &groups,
                       llvm::StringRef side) {
  // The attribute may come from a hand-written .mlir file: check its form.
  auto malformed = [&]() {
    return llvm::createStringError(
        ("kiln.signature_groups: an " + side +
         " group is not {name, kind, present, elements}")
            .str());
  };
  if (!entries)
    return malformed();
  for (Attribute attr : entries) {
    auto entry = dyn_cast<DictionaryAttr>(attr);
    auto nameAttr = entry ? entry.getAs<StringAttr>("name") : nullptr;
    auto kindAttr = entry ? entry.getAs<StringAttr>("kind") : nullptr;
    auto presentAttr = entry ? entry.getAs<BoolAttr>("present") : nullptr;
    auto elements = entry ? entry.getAs<ArrayAttr>("elements") : nullptr;
    if (!nameAttr || !kindAttr || !presentAttr || !elements ||
        !llvm::all_of(elements, llvm::IsaPred<StringAttr>))
      return malformed();
    runtime::SignatureGroup group;
    group.name = nameAttr.str();
    StringRef kind = kindAttr.getValue();
    if (kind == "sequence")
      group.kind = runtime::SignatureGroupKind::Sequence;
    else if (kind == "optional")
      group.kind = runtime::SignatureGroupKind::Optional;
    else if (kind == "optional-sequence")
      group.kind = runtime::SignatureGroupKind::OptionalSequence;
    else
      return malformed();
    group.present = presentAttr.getValue();
    group.count = elements.size();
    for (auto [i, element] : llvm::enumerate(elements)) {
      StringRef name = cast<StringAttr>(element).getValue();
      auto it = llvm::find_if(tensors, [&](const runtime::TensorSignature &t) {
        return t.name == name;
      });
      if (it == tensors.end())
        return llvm::createStringError((side + " '" + name + "' of '" +
                                        group.name +
                                        "' is not in the artifact's signature")
                                           .str());
      if (i == 0)
        group.first = static_cast<uint32_t>(it - tensors.begin());
    }
    groups.push_back(std::move(group));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error attachSignatureGroups(DictionaryAttr groups,
                                  runtime::Artifact &artifact) {
  if (!groups)
    return llvm::Error::success();
  if (llvm::Error err =
          attachSide(groups.getAs<ArrayAttr>("inputs"), artifact.inputs,
                     artifact.inputGroups, "input"))
    return err;
  return attachSide(groups.getAs<ArrayAttr>("outputs"), artifact.outputs,
                    artifact.outputGroups, "output");
}

} // namespace kiln
