//===- Tensors.cpp - Tensors in and out of the kiln Python module ---------===//

#include "Tensors.h"

#include <fmt/core.h>
#include <fmt/format.h>

#include <optional>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;
using namespace kiln::runtime;

namespace kiln::python {

void throwIfFailed(const Error &err) {
  if (err)
    throw NativeError(err.message());
}

namespace {

using nb::dlpack::dtype_code;

std::optional<DType> fromDLPack(nb::dlpack::dtype type) {
  if (type.lanes != 1)
    return std::nullopt;
  auto code = static_cast<dtype_code>(type.code);
  switch (code) {
  case dtype_code::Float:
    return type.bits == 32   ? std::optional(DType::F32)
           : type.bits == 16 ? std::optional(DType::F16)
           : type.bits == 64 ? std::optional(DType::F64)
                             : std::nullopt;
  case dtype_code::Bfloat:
    return type.bits == 16 ? std::optional(DType::BF16) : std::nullopt;
  case dtype_code::Int:
    return type.bits == 8    ? std::optional(DType::I8)
           : type.bits == 16 ? std::optional(DType::I16)
           : type.bits == 32 ? std::optional(DType::I32)
           : type.bits == 64 ? std::optional(DType::I64)
                             : std::nullopt;
  case dtype_code::UInt:
    return type.bits == 8    ? std::optional(DType::U8)
           : type.bits == 16 ? std::optional(DType::U16)
           : type.bits == 32 ? std::optional(DType::U32)
           : type.bits == 64 ? std::optional(DType::U64)
                             : std::nullopt;
  case dtype_code::Bool:
    return type.bits == 8 ? std::optional(DType::Bool) : std::nullopt;
  default:
    return std::nullopt;
  }
}

nb::dlpack::dtype toDLPack(DType type) {
  auto make = [](dtype_code code, uint8_t bits) {
    nb::dlpack::dtype result;
    result.code = static_cast<uint8_t>(code);
    result.bits = bits;
    result.lanes = 1;
    return result;
  };
  uint8_t bits = static_cast<uint8_t>(dtypeSize(type) * 8);
  if (type == DType::Bool)
    return make(dtype_code::Bool, 8);
  if (type == DType::BF16)
    return make(dtype_code::Bfloat, 16);
  if (isFloatDType(type))
    return make(dtype_code::Float, bits);
  return make(isSignedIntDType(type) ? dtype_code::Int : dtype_code::UInt,
              bits);
}

std::vector<size_t> sizesOf(const Shape &shape) {
  return std::vector<size_t>(shape.begin(), shape.end());
}

} // namespace

InputView viewInput(const std::string &name, const InputArray &array) {
  InputView view;
  std::optional<DType> dtype = fromDLPack(array.dtype());
  if (!dtype)
    throw NativeError(fmt::format(
        "input '{}': DLPack dtype (code {}, {} bits, {} lanes) is not one "
        "the runtime knows",
        name, array.dtype().code, array.dtype().bits, array.dtype().lanes));
  view.dtype = *dtype;
  for (size_t i = 0; i < array.ndim(); ++i)
    view.shape.push_back(static_cast<int64_t>(array.shape(i)));
  int64_t expectedStride = 1;
  for (size_t i = array.ndim(); i-- > 0;) {
    // A dimension of extent 1 may carry any stride.
    if (array.shape(i) != 1 && array.stride(i) != expectedStride)
      throw NativeError(fmt::format(
          "input '{}': the tensor is not contiguous and row-major (stride "
          "{} in dimension {}); pass a contiguous copy",
          name, array.stride(i), i));
    expectedStride *= static_cast<int64_t>(array.shape(i));
  }
  view.data = array.data();
  view.size = array.nbytes();
  view.deviceType = array.device_type();
  view.deviceId = array.device_id();
  return view;
}

NpyArray hostCopy(const std::string &name, const InputArray &array,
                  const std::string &refusal) {
  InputView view = viewInput(name, array);
  if (view.deviceType != nb::device::cpu::value)
    throw NativeError(refusal);
  NpyArray copy;
  copy.dtype = view.dtype;
  copy.shape = view.shape;
  const auto *bytes = static_cast<const uint8_t *>(view.data);
  copy.data.assign(bytes, bytes + view.size);
  return copy;
}

nb::object hostOutput(HostTensor tensor) {
  auto *owned = new HostTensor(std::move(tensor));
  nb::capsule owner(
      owned, [](void *p) noexcept { delete static_cast<HostTensor *>(p); });
  std::vector<size_t> shape = sizesOf(owned->shape);
  nb::dlpack::dtype type = owned->dtype == DType::BF16 ? nb::dtype<uint16_t>()
                                                       : toDLPack(owned->dtype);
  nb::ndarray<nb::numpy> array(owned->data.data(), shape.size(), shape.data(),
                               owner, nullptr, type, nb::device::cpu::value);
  return nb::cast(std::move(array));
}

nb::object stringOutput(const HostTensor &tensor) {
  nb::list texts;
  for (const std::string &text : tensor.strings)
    texts.append(nb::str(text.c_str(), text.size()));
  nb::list shape;
  for (int64_t dim : tensor.shape)
    shape.append(dim);
  nb::module_ numpy = nb::module_::import_("numpy");
  return numpy.attr("array")(texts, "dtype"_a = "object").attr("reshape")(
      nb::tuple(shape));
}

nb::object deviceOutput(std::shared_ptr<Device> device, DevicePtr ptr,
                        DType dtype, const Shape &outputShape, int deviceId) {
  struct Owned {
    std::shared_ptr<Device> device;
    DevicePtr ptr;
  };
  auto *owned = new Owned{std::move(device), ptr};
  nb::capsule owner(owned, [](void *p) noexcept {
    auto *o = static_cast<Owned *>(p);
    // Nothing can be reported from a deleter; the memory is gone either way.
    (void)o->device->deallocate(o->ptr);
    delete o;
  });
  std::vector<size_t> shape = sizesOf(outputShape);
  nb::ndarray<> array(reinterpret_cast<void *>(ptr), shape.size(), shape.data(),
                      owner, nullptr, toDLPack(dtype), nb::device::cuda::value,
                      deviceId);
  return nb::cast(std::move(array));
}

} // namespace kiln::python
