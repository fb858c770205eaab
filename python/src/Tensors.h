//===- Tensors.h - Tensors in and out of the kiln Python module -*- C++ -*-===//
//
// Maps DLPack tensors (nanobind ndarrays: numpy, PyTorch, CuPy, JAX, ...) to
// the runtime's dtypes and shapes, and wraps outputs as ndarrays: host ones
// as numpy arrays over the bytes the session read back, device ones as
// DLPack tensors over memory the device allocated (freed with the last
// reference). Errors are thrown as NativeError with a one-line message naming
// the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PYTHON_SRC_TENSORS_H
#define KILN_PYTHON_SRC_TENSORS_H

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Runtime.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace kiln::python {

/// A runtime error, raised in Python as kiln._native.Error (kiln's wrappers
/// turn it into kiln.RuntimeError).
struct NativeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws NativeError when `err` holds a failure.
void throwIfFailed(const runtime::Error &err);

template <typename T> T unwrap(runtime::Expected<T> value) {
  if (!value)
    throwIfFailed(value.takeError());
  return value.take();
}

/// A tensor handed in by the caller (read-only ones too: the runtime only
/// reads inputs).
using InputArray = nanobind::ndarray<nanobind::ro>;

/// What viewInput found in an InputArray.
struct InputView {
  runtime::DType dtype;
  runtime::Shape shape;
  const void *data;
  uint64_t size;
  /// kDLCPU (1) or kDLCUDA (2), as in DLPack.
  int deviceType;
  int deviceId;
};

/// Checks that `array` is dense and row-major with a dtype the runtime knows;
/// errors name input `name`.
InputView viewInput(const std::string &name, const InputArray &array);

/// A host copy of `array` (viewInput's checks, errors naming `name`); an
/// array not in host memory is refused with the message `refusal`.
runtime::NpyArray hostCopy(const std::string &name, const InputArray &array,
                           const std::string &refusal);

/// A numpy array that owns `tensor` (moved in). bf16, which numpy lacks,
/// comes back as uint16 holding the bits (kiln widens it to float32).
nanobind::object hostOutput(runtime::HostTensor tensor);

/// A numpy array of Python str objects (dtype object) in `tensor`'s shape:
/// a STRING output of host steps.
nanobind::object stringOutput(const runtime::HostTensor &tensor);

/// A DLPack tensor (nanobind's ndarray) over `size` bytes at `ptr` on cuda
/// device `deviceId`; `device->deallocate(ptr)` runs when the last
/// reference goes.
nanobind::object deviceOutput(std::shared_ptr<runtime::Device> device,
                              runtime::DevicePtr ptr, runtime::DType dtype,
                              const runtime::Shape &shape, int deviceId);

} // namespace kiln::python

#endif // KILN_PYTHON_SRC_TENSORS_H
