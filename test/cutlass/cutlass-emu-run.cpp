//===- cutlass-emu-run.cpp - Run a launch file's kernel on the emulator ---===//
//
// The emulator half of the CUTLASS harness (docs/emulator.md, "Checked
// against CUTLASS"): parses nvcc's PTX, places each input file's bytes at
// the device address the host program baked into the kernel's Params, runs
// the kernel with the grid, block and dynamic shared memory of the launch
// file (LaunchFile.h) through emu::runKernel, and writes the chosen
// buffers back to files. Test code: the runtime library does not know it.
//
//   cutlass-emu-run --ptx K.ptx --launch L.txt --in ADDR=FILE...
//                   [--out ADDR=FILE...] [--check-shared] [--workers N]
//
// Errors are one line on stderr and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "emu/PtxInterpreter.h"
#include "emu/PtxParser.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace kiln::runtime;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "cutlass-emu-run: %s\n", message.c_str());
  std::exit(1);
}

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read '" + path + "'");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct LaunchFile {
  std::string kernel;
  Dim3 grid, block, cluster;
  uint32_t shared = 0;
  std::vector<uint8_t> params;
};

Dim3 readDims(std::istringstream &line, const std::string &path,
              const char *key) {
  Dim3 dims;
  if (!(line >> dims.x >> dims.y >> dims.z) || !dims.x || !dims.y || !dims.z)
    fail(path + ": '" + key + "' needs three positive numbers");
  return dims;
}

LaunchFile readLaunch(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail("cannot read '" + path + "'");
  LaunchFile launch;
  std::string text;
  bool sawParams = false;
  while (std::getline(in, text)) {
    std::istringstream line(text);
    std::string key;
    line >> key;
    if (key == "kernel")
      line >> launch.kernel;
    else if (key == "grid")
      launch.grid = readDims(line, path, "grid");
    else if (key == "block")
      launch.block = readDims(line, path, "block");
    else if (key == "cluster")
      launch.cluster = readDims(line, path, "cluster");
    else if (key == "shared")
      line >> launch.shared;
    else if (key == "params") {
      std::string hex;
      line >> hex;
      if (hex.size() % 2)
        fail(path + ": 'params' has an odd number of hex digits");
      for (size_t i = 0; i < hex.size(); i += 2)
        launch.params.push_back(
            static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
      sawParams = true;
    } else if (!key.empty())
      fail(path + ": unknown item '" + key + "'");
  }
  if (launch.kernel.empty() || !sawParams)
    fail(path + ": needs 'kernel' and 'params'");
  return launch;
}

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%#llx",
                static_cast<unsigned long long>(value));
  return text;
}

/// "ADDR=FILE" with ADDR in any base strtoull reads (0x...).
std::pair<uint64_t, std::string> splitBinding(const std::string &arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    fail("'" + arg + "' is not ADDR=FILE");
  char *end = nullptr;
  uint64_t address = std::strtoull(arg.c_str(), &end, 0);
  if (end != arg.c_str() + eq)
    fail("'" + arg.substr(0, eq) + "' is not an address");
  return {address, arg.substr(eq + 1)};
}

} // namespace

int main(int argc, char **argv) {
  std::string ptxPath, launchPath;
  std::map<uint64_t, std::string> inputs, outputs;
  bool checkShared = false;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ptx")
      ptxPath = value();
    else if (arg == "--launch")
      launchPath = value();
    else if (arg == "--in")
      inputs.insert(splitBinding(value()));
    else if (arg == "--out")
      outputs.insert(splitBinding(value()));
    else if (arg == "--check-shared")
      checkShared = true;
    else if (arg == "--workers")
      workers = static_cast<unsigned>(std::max(1, std::atoi(value().c_str())));
    else
      fail("unknown argument '" + arg + "'");
  }
  if (ptxPath.empty() || launchPath.empty())
    fail("usage: cutlass-emu-run --ptx K.ptx --launch L.txt --in ADDR=FILE... "
         "[--out ADDR=FILE...] [--check-shared] [--workers N]");

  LaunchFile launch = readLaunch(launchPath);
  std::vector<uint8_t> ptxBytes = readFile(ptxPath);
  Expected<emu::Module> parsed = emu::parsePtx(std::string_view(
      reinterpret_cast<const char *>(ptxBytes.data()), ptxBytes.size()));
  if (!parsed)
    fail(ptxPath + ": " + parsed.error().message());
  emu::Module &module = *parsed;
  auto kernel = std::find_if(
      module.kernels.begin(), module.kernels.end(),
      [&](const emu::Kernel &k) { return k.name == launch.kernel; });
  if (kernel == module.kernels.end())
    fail(ptxPath + ": no entry named '" + launch.kernel + "'");
  if (launch.params.size() != kernel->paramBytes)
    fail(launchPath + ": " + std::to_string(launch.params.size()) +
         " parameter bytes, but '" + launch.kernel + "' takes " +
         std::to_string(kernel->paramBytes));

  // Global memory: the inputs at their addresses, then the module's
  // .global variables above every input.
  std::map<uint64_t, std::vector<uint8_t>> buffers;
  uint64_t top = 0x10000;
  for (const auto &[address, path] : inputs) {
    std::vector<uint8_t> bytes = readFile(path);
    top = std::max(top, address + bytes.size());
    buffers[address] = std::move(bytes);
  }
  std::vector<uint64_t> globalAddresses;
  for (const emu::GlobalVar &var : module.globals) {
    top = (top + 0xffff) & ~uint64_t(0xffff);
    globalAddresses.push_back(top);
    buffers[top] = var.init;
    top += std::max<uint64_t>(var.size, 1);
  }
  for (emu::Constant &constant : kernel->constants)
    if (constant.globalVar >= 0)
      constant.value = globalAddresses[constant.globalVar];
  std::vector<emu::MemoryRegion> regions;
  uint64_t end = 0;
  for (auto &[address, bytes] : buffers) {
    if (address < end)
      fail("the buffer at " + hex(address) + " overlaps the one before it");
    regions.push_back({address, bytes.size(), bytes.data()});
    end = address + bytes.size();
  }
  for (const auto &[address, path] : outputs)
    if (!inputs.count(address))
      fail("--out " + hex(address) + " is not an --in buffer");

  emu::LaunchSpec spec;
  spec.grid = launch.grid;
  spec.block = launch.block;
  spec.cluster = launch.cluster;
  // Every launch file names a cluster shape (CUTLASS launches its sm_90
  // kernels with a cluster attribute; %is_explicit_cluster reads 1).
  spec.explicitCluster = true;
  spec.dynamicSharedBytes = launch.shared;
  spec.params = launch.params.data();
  spec.paramBytes = launch.params.size();
  spec.memory = &regions;
  spec.workers = workers;
  spec.checkSharedReads = checkShared;
  spec.maxWarpInstructionsPerBlock = 2000000000ull;
  emu::LaunchStats stats;
  auto start = std::chrono::steady_clock::now();
  Error err = emu::runKernel(*kernel, spec, &stats);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (err)
    fail(err.message());
  for (const auto &[address, path] : outputs) {
    const std::vector<uint8_t> &bytes = buffers[address];
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out)
      fail("cannot write '" + path + "'");
  }
  std::printf("%s: grid %u x %u x %u, block %u, %u bytes of shared memory, "
              "%llu thread-instructions in %.2f s\n",
              launch.kernel.c_str(), launch.grid.x, launch.grid.y,
              launch.grid.z, launch.block.x, launch.shared,
              static_cast<unsigned long long>(stats.threadInstructions),
              seconds);
  return 0;
}
