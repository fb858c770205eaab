//===- Nvrtc.cpp - dlopen libnvrtc and compile CUDA C++ to PTX ------------===//
//
// The handful of NVRTC entry points Kiln calls are declared here with their
// C ABI (an int result, an opaque program pointer), so that building Kiln
// needs no nvrtc.h and running it needs NVRTC only when a kernel is compiled.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/Nvrtc.h"

#include <chrono>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

using kiln::runtime::Error;
using kiln::runtime::Expected;

namespace kiln::nvrtc {
namespace {

using Program = struct OpaqueProgram *;
using Result = int; // nvrtcResult; 0 is NVRTC_SUCCESS.

struct Library {
  const char *(*getErrorString)(Result) = nullptr;
  Result (*version)(int *, int *) = nullptr;
  Result (*createProgram)(Program *, const char *, const char *, int,
                          const char *const *, const char *const *) = nullptr;
  Result (*destroyProgram)(Program *) = nullptr;
  Result (*compileProgram)(Program, int, const char *const *) = nullptr;
  Result (*getPTXSize)(Program, size_t *) = nullptr;
  Result (*getPTX)(Program, char *) = nullptr;
  Result (*getProgramLogSize)(Program, size_t *) = nullptr;
  Result (*getProgramLog)(Program, char *) = nullptr;
  std::string loadError;
};

Library loadLibrary() {
  Library lib;
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("KILN_NVRTC_LIBRARY"); env && *env)
    candidates.push_back(env);
  else
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                  "/usr/local/cuda/lib64/libnvrtc.so"};
  void *handle = nullptr;
  for (const std::string &name : candidates)
    if ((handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
      break;
  if (!handle) {
    std::string tried;
    for (const std::string &name : candidates)
      tried += (tried.empty() ? "" : ", ") + name;
    lib.loadError = "NVRTC not found (tried " + tried +
                    "); the contraction kernels need the CUDA Toolkit's "
                    "libnvrtc.so (set KILN_NVRTC_LIBRARY to its path)";
    return lib;
  }
  // The library stays open for the life of the process.
  std::string missing;
  auto resolve = [&](auto &member, const char *symbol) {
    void *address = ::dlsym(handle, symbol);
    if (!address && missing.empty())
      missing = symbol;
    member =
        reinterpret_cast<std::remove_reference_t<decltype(member)>>(address);
  };
  resolve(lib.getErrorString, "nvrtcGetErrorString");
  resolve(lib.version, "nvrtcVersion");
  resolve(lib.createProgram, "nvrtcCreateProgram");
  resolve(lib.destroyProgram, "nvrtcDestroyProgram");
  resolve(lib.compileProgram, "nvrtcCompileProgram");
  resolve(lib.getPTXSize, "nvrtcGetPTXSize");
  resolve(lib.getPTX, "nvrtcGetPTX");
  resolve(lib.getProgramLogSize, "nvrtcGetProgramLogSize");
  resolve(lib.getProgramLog, "nvrtcGetProgramLog");
  if (!missing.empty())
    lib.loadError = "the NVRTC library lacks " + missing;
  return lib;
}

const Library &library() {
  static std::once_flag once;
  static Library lib;
  std::call_once(once, [] { lib = loadLibrary(); });
  return lib;
}

std::string describe(const Library &lib, Result result) {
  const char *text = lib.getErrorString ? lib.getErrorString(result) : nullptr;
  return std::string(text ? text : "unknown NVRTC error") + " (" +
         std::to_string(result) + ")";
}

} // namespace

Error available() {
  const Library &lib = library();
  if (!lib.loadError.empty())
    return Error::failure(lib.loadError);
  return Error::success();
}

Expected<std::string> version() {
  if (Error err = available())
    return err;
  int major = 0, minor = 0;
  const Library &lib = library();
  if (Result r = lib.version(&major, &minor))
    return Error::failure("nvrtcVersion: " + describe(lib, r));
  return std::to_string(major) + "." + std::to_string(minor);
}

Expected<CompileResult> compileToPtx(const std::string &source,
                                     const std::string &name,
                                     const std::vector<std::string> &options) {
  if (Error err = available())
    return err;
  const Library &lib = library();
  Program program = nullptr;
  std::string fileName = name + ".cu";
  if (Result r = lib.createProgram(&program, source.c_str(), fileName.c_str(),
                                   0, nullptr, nullptr))
    return Error::failure("nvrtcCreateProgram (" + name +
                          "): " + describe(lib, r));
  struct Destroy {
    const Library &lib;
    Program &program;
    ~Destroy() { lib.destroyProgram(&program); }
  } destroy{lib, program};

  std::vector<const char *> args;
  for (const std::string &option : options)
    args.push_back(option.c_str());
  auto start = std::chrono::steady_clock::now();
  Result compiled =
      lib.compileProgram(program, static_cast<int>(args.size()), args.data());
  CompileResult result;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  size_t logSize = 0;
  if (lib.getProgramLogSize(program, &logSize) == 0 && logSize > 1) {
    result.log.resize(logSize);
    if (lib.getProgramLog(program, result.log.data()) != 0)
      result.log.clear();
    while (!result.log.empty() &&
           (result.log.back() == '\0' || result.log.back() == '\n'))
      result.log.pop_back();
  }
  if (compiled)
    return Error::failure("NVRTC could not compile kernel " + name + ": " +
                          describe(lib, compiled) + "\n" + result.log);
  size_t ptxSize = 0;
  if (Result r = lib.getPTXSize(program, &ptxSize))
    return Error::failure("nvrtcGetPTXSize (" + name +
                          "): " + describe(lib, r));
  result.ptx.resize(ptxSize);
  if (Result r = lib.getPTX(program, result.ptx.data()))
    return Error::failure("nvrtcGetPTX (" + name + "): " + describe(lib, r));
  while (!result.ptx.empty() && result.ptx.back() == '\0')
    result.ptx.pop_back();
  return result;
}

} // namespace kiln::nvrtc
