//===- NpyFuzzer.cpp - libFuzzer target: .npy bytes -> parseNpy -----------===//
//
// Any bytes must give an array or an error, never a crash; an array that
// parses must re-encode to the same elements (encodeNpy, or
// encodeNpyStrings for a NumPy '<U' string array, then parseNpy).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Npy.h"

#include "FuzzSupport.h"

#include <cstdio>
#include <cstdlib>

using namespace kiln::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Expected<NpyArray> array = parseNpy(data, size, "fuzz.npy");
  if (!array) {
    kiln::fuzz::checkOneLineError(array.error().message());
    return 0;
  }
  Expected<std::vector<uint8_t>> encoded =
      array->isString
          ? encodeNpyStrings(array->shape, array->strings)
          : encodeNpy(array->dtype, array->shape, array->data.data(),
                      array->data.size());
  if (!encoded) {
    std::fprintf(stderr, "a parsed array does not re-encode: %s\n",
                 encoded.error().message().c_str());
    std::abort();
  }
  Expected<NpyArray> again =
      parseNpy(encoded->data(), encoded->size(), "fuzz-reencoded.npy");
  if (!again || again->isString != array->isString ||
      again->dtype != array->dtype || again->shape != array->shape ||
      again->data != array->data || again->strings != array->strings) {
    std::fprintf(stderr, "re-encoded array differs\n");
    std::abort();
  }
  return 0;
}
