//===- SafetensorsFuzzer.cpp - libFuzzer target: checkpoint bytes ---------===//
//
// parseSafetensors (runtime/lib/Checkpoint.cpp) on arbitrary bytes: a
// checkpoint or an error naming the file, never a crash. A checkpoint that
// parses must hold tensors whose byte sizes match their dtype and shape.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Training.h"

#include "FuzzSupport.h"

#include <cstdio>
#include <cstdlib>

using namespace kiln::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Expected<Checkpoint> checkpoint =
      parseSafetensors(data, size, "fuzz.safetensors");
  if (!checkpoint) {
    kiln::fuzz::checkOneLineError(checkpoint.error().message());
    return 0;
  }
  for (const auto &[name, tensor] : checkpoint->tensors) {
    std::optional<uint64_t> bytes = tensorByteSize(tensor.dtype, tensor.shape);
    if (!bytes || *bytes != tensor.data.size()) {
      std::fprintf(stderr, "tensor '%s' holds %zu bytes for its shape\n",
                   name.c_str(), tensor.data.size());
      std::abort();
    }
  }
  return 0;
}
