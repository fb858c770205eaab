//===- run_model.cpp - Load a .kiln artifact and run it -------------------===//
//
//   run_model MODEL.kiln DEVICE OUTDIR [NAME=INPUT.npy ...]
//
// Runs a compiled model on DEVICE (cuda, cuda:N or emu) with its inputs from
// .npy files and writes each output to OUTDIR/<name>.npy. Uses only the
// stable runtime API (Runtime.h, Npy.h); errors are values, never exceptions.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Runtime.h"

#include <cstdio>
#include <memory>
#include <string>

using namespace kiln::runtime;

static int fail(const Error &err) {
  std::fprintf(stderr, "run_model: %s\n", err.message().c_str());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: run_model MODEL.kiln DEVICE OUTDIR "
                         "[NAME=INPUT.npy ...]\n");
    return 1;
  }
  Expected<Artifact> artifact = readArtifact(argv[1]);
  if (!artifact)
    return fail(artifact.error());
  Expected<std::unique_ptr<Device>> device = createDevice(argv[2]);
  if (!device)
    return fail(device.error());
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::make_shared<const Artifact>(artifact.take()), device.take());
  if (!session)
    return fail(session.error());

  for (int i = 4; i < argc; ++i) {
    std::string binding = argv[i];
    size_t equals = binding.find('=');
    Expected<NpyArray> array = readNpy(binding.substr(equals + 1));
    if (!array)
      return fail(array.error());
    if (Error err = (*session)->bindInput(
            binding.substr(0, equals), array->dtype, array->shape,
            array->data.data(), array->data.size()))
      return fail(err);
  }
  if (Error err = (*session)->run())
    return fail(err);

  for (const TensorSignature &output : (*session)->artifact().outputs) {
    Expected<HostTensor> tensor = (*session)->readOutput(output.name);
    if (!tensor)
      return fail(tensor.error());
    std::string path = std::string(argv[3]) + "/" + output.name + ".npy";
    if (Error err = writeNpy(path, tensor->dtype, tensor->shape,
                             tensor->data.data(), tensor->data.size()))
      return fail(err);
    std::printf("%s: %s %s -> %s\n", output.name.c_str(),
                std::string(dtypeName(tensor->dtype)).c_str(),
                formatShape(tensor->shape).c_str(), path.c_str());
  }
  return 0;
}
