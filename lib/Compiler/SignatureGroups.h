//===- SignatureGroups.h - Sequence/optional groups into the artifact -*- C++
//-*-===//
//
// The importer records how sequence and optional graph inputs and outputs
// became tensors (kSignatureGroupsAttrName on the module); the artifact
// carries that as its signature groups (format 1.9), which the runtime uses
// to bind a sequence as a list of tensors.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_SIGNATUREGROUPS_H
#define KILN_LIB_COMPILER_SIGNATUREGROUPS_H

#include "kiln/runtime/Artifact.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Error.h"

namespace kiln {

/// Fills artifact.inputGroups and outputGroups from the importer's record
/// (null: nothing to fill), locating each group's tensors in the signature
/// by name. An error means the compiler lost or reordered a tensor.
llvm::Error attachSignatureGroups(mlir::DictionaryAttr groups,
                                  runtime::Artifact &artifact);

} // namespace kiln

#endif // KILN_LIB_COMPILER_SIGNATUREGROUPS_H
