//===- HostRunner.cpp - A session's host storage and host steps -----------===//
//
// Binding checks and the phase loop; the steps themselves are in
// HostSteps.cpp and HostStringOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "HostRunner.h"

#include "Support.h"

namespace kiln::runtime {

Error HostRunner::bind(std::string_view name, HostValue value) {
  const HostTensorDecl *decl = program.findInput(name);
  if (!decl)
    return makeError("no host input named '{}'", name);
  if (decl->isString != value.isString ||
      (!decl->isString && decl->dtype != value.dtype))
    return makeError("input '{}': dtype {} does not match the signature's {}",
                     name, describeHostType(value.isString, value.dtype),
                     describeHostType(decl->isString, decl->dtype));
  if (value.shape != decl->shape)
    return makeError("input '{}': shape {} does not match the signature's {}",
                     name, formatShape(value.shape), formatShape(decl->shape));
  uint64_t count = elementCount(value.shape).value_or(0);
  bool sized = value.isString
                   ? value.strings.size() == count
                   : value.data.size() == count * dtypeSize(value.dtype);
  if (!sized)
    return makeError("input '{}': the data does not fill shape {}", name,
                     formatShape(value.shape));
  bound[std::string(name)] = std::move(value);
  return Error::success();
}

Error HostRunner::start() {
  values.clear();
  for (const HostTensorDecl &decl : program.inputs) {
    auto it = bound.find(decl.name);
    if (it == bound.end())
      return makeError("input '{}' is not bound", decl.name);
    values[decl.name] = it->second;
  }
  for (const HostConstant &constant : program.constants)
    values[constant.name] = constant.value;
  return Error::success();
}

Error HostRunner::runPhase(HostPhase phase) {
  for (const HostStep &step : program.steps)
    if (step.phase == phase)
      if (Error err = runHostStep(step, values))
        return err.withContext("host step");
  return Error::success();
}

const HostValue *HostRunner::find(std::string_view name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

} // namespace kiln::runtime
