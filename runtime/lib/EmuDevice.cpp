//===- EmuDevice.cpp - The PTX emulator device (slot) ---------------------===//
//
// The `emu` device will run the artifact's PTX on the CPU (see section 4 of
// the architecture). Until the emulator lands, asking for it is an error.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Device.h"

#include "Support.h"

namespace kiln::runtime {

Expected<std::unique_ptr<Device>> createEmuDevice() {
  return makeError("emu device not available yet");
}

} // namespace kiln::runtime
