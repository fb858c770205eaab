//===- PtxParserFuzzer.cpp - libFuzzer target: PTX text -> parsePtx -------===//
//
// The emulator's parser on arbitrary text: a module or an error naming a
// line, never a crash.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "emu/PtxParser.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  kiln::runtime::Expected<kiln::runtime::emu::Module> module =
      kiln::runtime::emu::parsePtx(text);
  if (!module)
    kiln::fuzz::checkOneLineError(module.error().message());
  return 0;
}
