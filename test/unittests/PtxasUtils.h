//===- PtxasUtils.h - Running ptxas from the kernel tests -------*- C++ -*-===//
//
// The generated-kernel tests (contraction, attention, depthwise) check that
// every PTX they generate assembles for its target with the CUDA Toolkit's
// ptxas ($KILN_PTXAS, else /usr/local/cuda/bin/ptxas or /usr/bin/ptxas).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNITTESTS_PTXASUTILS_H
#define KILN_TEST_UNITTESTS_PTXASUTILS_H

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

namespace kiln::testing {

/// ptxas's path; empty when there is none.
inline std::string ptxasPath() {
  if (const char *env = std::getenv("KILN_PTXAS"); env && *env)
    return env;
  for (const char *path : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (::access(path, X_OK) == 0)
      return path;
  return "";
}

/// "" when ptxas accepts the PTX for `arch` ("sm_90"), else its output.
/// PTX for the arch-specific sm_90a ISA (wgmma kernels) is assembled for
/// sm_90a when `arch` is sm_90.
inline std::string runPtxas(const std::string &ptx, const std::string &arch) {
  std::string target = arch;
  if (arch == "sm_90" && ptx.find(".target sm_90a") != std::string::npos)
    target = "sm_90a";
  char dir[] = "/tmp/kiln-ptxas-XXXXXX";
  if (!::mkdtemp(dir))
    return "cannot create a temporary directory";
  std::string base = dir;
  std::ofstream(base + "/k.ptx") << ptx;
  std::string command = ptxasPath() + " -arch=" + target + " " + base +
                        "/k.ptx -o " + base + "/k.cubin > " + base +
                        "/log 2>&1";
  int rc = std::system(command.c_str());
  std::string log;
  if (rc != 0) {
    std::ifstream in(base + "/log");
    log.assign(std::istreambuf_iterator<char>(in), {});
    if (log.empty())
      log = "ptxas failed";
  }
  std::system(("rm -rf " + base).c_str());
  return log;
}

} // namespace kiln::testing

#endif // KILN_TEST_UNITTESTS_PTXASUTILS_H
