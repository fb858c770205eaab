//===- Bindings.h - What the kiln._native binding files share ---*- C++ -*-===//
//
// NativeModule.cpp binds artifacts and inference sessions, Training.cpp
// training sessions; both hand artifacts around as PyArtifact.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_SRC_BINDINGS_H
#define KILN_PYTHON_SRC_BINDINGS_H

#include "kiln/runtime/Artifact.h"

#include <nanobind/nanobind.h>

#include <memory>
#include <vector>

namespace kiln::python {

/// A compiled model, shared by the sessions made from it.
struct PyArtifact {
  std::shared_ptr<const runtime::Artifact> artifact;
};

/// [(name, dtype name, shape tuple)] of signature tensors.
nanobind::list signatureList(const std::vector<const runtime::TensorSignature *> &tensors);

/// Adds TrainingSession, epoch_order and export_onnx to the module.
void bindTraining(nanobind::module_ &m);

} // namespace kiln::python

#endif // KILN_PYTHON_SRC_BINDINGS_H
