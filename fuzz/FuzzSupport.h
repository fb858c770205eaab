//===- FuzzSupport.h - Checks shared by the fuzz targets --------*- C++ -*-===//
//
// Bad input must give a one-line error (docs/reliability.md): a message with
// a newline, or an empty one, stops the fuzzer like a crash.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUZZ_FUZZSUPPORT_H
#define KILN_FUZZ_FUZZSUPPORT_H

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::fuzz {

inline void checkOneLineError(const std::string &message) {
  if (message.empty() || message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "error message is not one line: '%s'\n",
                 message.c_str());
    std::abort();
  }
}

} // namespace kiln::fuzz

#endif // KILN_FUZZ_FUZZSUPPORT_H
