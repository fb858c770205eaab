//===- KilnRunTest.cpp - The kiln-run binary, end to end without a GPU ----===//
//
// Runs the real binary: every failure must be one line on stderr with exit
// status 1 (the input's fault) or 2 (Kiln's: a kernel that faults), never a
// crash, and host-side problems (artifact, inputs) must be reported before
// the device is looked for.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Version.h"

#include "RuntimeTestUtils.h"

#include <fmt/core.h>
#include <gmock/gmock.h>

#include <dlfcn.h>
#include <sys/wait.h>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

struct RunResult {
  int status = -1; // exit status, or -1 when killed by a signal
  std::string output;
};

RunResult runKilnRun(const std::string &arguments,
                     const std::string &environment = "") {
  std::string command =
      environment + std::string(KILN_RUN_PATH) + " " + arguments + " 2>&1";
  RunResult result;
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    result.output.append(buffer, n);
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool cudaDriverPresent() {
  void *library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library)
    ::dlclose(library);
  return library != nullptr;
}

class KilnRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    model = dir.file("model.kiln");
    ASSERT_EQ(errorOf(writeArtifact(makeAddScaleArtifact(), model)),
              "<success>");
  }
  TempDir dir;
  std::string model;
};

TEST_F(KilnRunTest, HelpAndUsageErrors) {
  RunResult help = runKilnRun("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_THAT(help.output, StartsWith("usage: kiln-run MODEL.kiln"));
  EXPECT_EQ(runKilnRun("").output,
            "kiln-run: error: no model given (see kiln-run --help)\n");
  EXPECT_EQ(runKilnRun("").status, 1);
  EXPECT_EQ(runKilnRun(model + " --frobnicate").output,
            "kiln-run: error: unknown option '--frobnicate' (see kiln-run "
            "--help)\n");
  EXPECT_EQ(
      runKilnRun(model + " --bench x").output,
      "kiln-run: error: --bench expects a non-negative integer, not 'x'\n");
  EXPECT_EQ(runKilnRun(model + " -i x").output,
            "kiln-run: error: -i expects NAME=FILE.npy, not 'x'\n");
}

TEST_F(KilnRunTest, NoDriverIsACleanError) {
  if (cudaDriverPresent())
    GTEST_SKIP() << "a CUDA driver is installed";
  RunResult result = runKilnRun(model + " --random-inputs");
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output,
            "kiln-run: error: no CUDA driver (libcuda.so.1 not found)\n");
  result = runKilnRun(model + " --random-inputs --bench 10 --graph -o " +
                      dir.file("out"));
  EXPECT_EQ(result.status, 1);
  EXPECT_THAT(result.output, HasSubstr("no CUDA driver"));
}

TEST_F(KilnRunTest, StubDriverResolvesEveryEntryPoint) {
  // The toolkit's stub libcuda exports the whole driver API but fails
  // cuInit: reaching that message proves every symbol in the driver table
  // resolved (a misspelt one would say "CUDA driver too old").
  std::string stub = KILN_CUDA_STUB_LIBRARY;
  if (stub.empty() || !std::filesystem::exists(stub))
    GTEST_SKIP() << "no stub libcuda.so in the CUDA toolkit";
  if (cudaDriverPresent())
    GTEST_SKIP() << "a CUDA driver is installed";
  std::filesystem::create_symlink(stub, dir.file("libcuda.so.1"));
  RunResult result = runKilnRun(model + " --random-inputs",
                                "LD_LIBRARY_PATH=" + dir.path + " ");
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output, "kiln-run: error: no CUDA driver (libcuda.so.1 is "
                           "the CUDA toolkit's stub library)\n");
}

TEST_F(KilnRunTest, EmuDeviceRunsWithoutAGpu) {
  // The test artifact's kernels are empty (`ret`), so y stays as allocated.
  RunResult result = runKilnRun(model + " --random-inputs --device emu");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("output 'y': f32 [2, 3]"));
}

TEST_F(KilnRunTest, CorruptArtifact) {
  std::vector<uint8_t> bytes = readBytes(model);
  uint8_t *entry = tableEntryOf(bytes, format::SectionKind::Kernels);
  bytes[format::loadU64(entry + format::kEntryOffsetOffset) + 10] ^= 0x20;
  writeBytes(model, bytes);
  RunResult result = runKilnRun(model + " --random-inputs");
  EXPECT_EQ(result.status, 1);
  EXPECT_THAT(result.output,
              StartsWith("kiln-run: error: " + model +
                         ": section 'kernels': checksum mismatch"));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1);

  bytes.resize(100);
  writeBytes(model, bytes);
  result = runKilnRun(model);
  EXPECT_EQ(result.status, 1);
  EXPECT_THAT(result.output, HasSubstr(": truncated: the header records"));

  result = runKilnRun(dir.file("missing.kiln"));
  EXPECT_EQ(result.status, 1);
  EXPECT_THAT(result.output,
              HasSubstr("cannot open '" + dir.file("missing.kiln") + "'"));
}

TEST_F(KilnRunTest, InputsAreCheckedBeforeTheDevice) {
  RunResult result = runKilnRun(model);
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output,
            "kiln-run: error: input 'x' (f32 [2, 3]) is not given; use -i "
            "x=FILE.npy or --random-inputs\n");

  std::vector<float> wrong(6);
  std::string npy = dir.file("x.npy");
  ASSERT_FALSE(writeNpy(npy, DType::F32, {3, 2}, wrong.data(), 24));
  result = runKilnRun(model + " -i x=" + npy);
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output,
            "kiln-run: error: " + npy +
                ": input 'x': shape [3, 2] does not match the signature's "
                "[2, 3]\n");

  std::vector<double> wide(6);
  ASSERT_FALSE(writeNpy(npy, DType::F64, {2, 3}, wide.data(), 48));
  result = runKilnRun(model + " -i x=" + npy);
  EXPECT_THAT(result.output,
              HasSubstr("input 'x': dtype f64 does not match the signature's "
                        "f32"));

  // float8 bytes ('|V1', read as f8e4m3fn) are named as what they are.
  std::vector<uint8_t> bytes(6);
  ASSERT_FALSE(writeNpy(npy, DType::F8E5M2, {2, 3}, bytes.data(), 6));
  result = runKilnRun(model + " -i x=" + npy);
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output, "kiln-run: error: " + npy +
                               ": input 'x': '|V1' data (float8 bytes) does "
                               "not match the signature's f32\n");

  ASSERT_FALSE(writeNpy(npy, DType::F32, {2, 3}, wrong.data(), 24));
  result = runKilnRun(model + " -i nope=" + npy);
  EXPECT_THAT(result.output,
              HasSubstr("no input named 'nope' (the inputs are 'x')"));
  result = runKilnRun(model + " -i x=" + npy + " -i x=" + npy);
  EXPECT_THAT(result.output, HasSubstr("input 'x' is given twice"));

  writeBytes(npy, {1, 2, 3});
  result = runKilnRun(model + " -i x=" + npy);
  EXPECT_EQ(result.status, 1);
  EXPECT_THAT(result.output, HasSubstr("not a .npy file (bad magic)"));
}

TEST_F(KilnRunTest, VersionNamesTheBuild) {
  RunResult result = runKilnRun("--version");
  EXPECT_EQ(result.status, 0);
  EXPECT_THAT(result.output,
              StartsWith(std::string("kiln-run ") + buildInfo().version +
                         " (commit " + buildInfo().gitCommit + ")\n"));
  EXPECT_THAT(result.output,
              HasSubstr(fmt::format("artifact format {}.{}",
                                    kArtifactFormatMajor,
                                    kArtifactFormatMinor)));
}

TEST_F(KilnRunTest, BenchPrintsThroughputBesideLatency) {
  RunResult result =
      runKilnRun(model + " --random-inputs --device emu --bench 3 --warmup 0");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("  per run: median "));
  // The test model's input x is f32 [2, 3]: batch 2.
  EXPECT_THAT(result.output, HasSubstr(" inferences/s ("));
  EXPECT_THAT(result.output, HasSubstr("samples/s at batch 2, the leading "
                                       "dimension of input 'x')"));
}

TEST_F(KilnRunTest, JsonNeedsTheProfileInAFile) {
  RunResult result =
      runKilnRun(model + " --random-inputs --device emu --json --profile");
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.output, "kiln-run: error: --json replaces the text output: "
                           "write the profile with --profile-json FILE\n");
}

TEST_F(KilnRunTest, KernelFaultIsAnInternalError) {
  // A kernel that stores through a null pointer: the artifact and inputs are
  // valid, so the fault is the compiler's (exit status 2), and the emulator
  // names the kernel.
  Artifact artifact = makeAddScaleArtifact();
  artifact.kernels[1].ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                            ".visible .entry scale() {\n"
                            "  .reg .b64 %rd<2>;\n  .reg .f32 %f<2>;\n"
                            "  mov.u64 %rd1, 8;\n"
                            "  mov.f32 %f1, 0f3F800000;\n"
                            "  st.global.f32 [%rd1], %f1;\n  ret;\n}\n";
  std::string faulty = dir.file("faulty.kiln");
  ASSERT_EQ(errorOf(writeArtifact(artifact, faulty)), "<success>");
  RunResult result = runKilnRun(faulty + " --random-inputs --device emu");
  EXPECT_EQ(result.status, 2) << result.output;
  EXPECT_THAT(result.output, StartsWith("kiln-run: internal error: "));
  EXPECT_THAT(result.output, HasSubstr("scale"));
  EXPECT_THAT(result.output, HasSubstr("this is a Kiln bug"));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
}

TEST_F(KilnRunTest, CheckRacesFlagReportsARaceTheRunOtherwiseHides) {
  // The scale kernel replaced by one whose lane 1 reads the shared word
  // lane 0 wrote, with nothing ordering them (lanes of a warp are not
  // ordered by running together): the emulator computes it either way, the
  // race check reports it (a kernel bug: exit status 2).
  Artifact artifact = makeAddScaleArtifact();
  artifact.kernels[1].ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                            ".visible .entry scale() {\n"
                            "  .reg .pred %p<2>;\n  .reg .b32 %r<4>;\n"
                            "  .shared .align 4 .b8 word[4];\n"
                            "  mov.u32 %r1, %tid.x;\n"
                            "  setp.ne.u32 %p1, %r1, 0;\n"
                            "  @%p1 bra $L_stored;\n"
                            "  st.shared.u32 [word], %r1;\n"
                            "$L_stored:\n"
                            "  setp.ne.u32 %p1, %r1, 1;\n"
                            "  @%p1 bra $L_done;\n"
                            "  ld.shared.u32 %r2, [word];\n"
                            "$L_done:\n  ret;\n}\n";
  std::string racy = dir.file("racy.kiln");
  ASSERT_EQ(errorOf(writeArtifact(artifact, racy)), "<success>");
  RunResult plain = runKilnRun(racy + " --random-inputs --device emu");
  EXPECT_EQ(plain.status, 0) << plain.output;
  RunResult checked =
      runKilnRun(racy + " --random-inputs --device emu --check=races");
  EXPECT_EQ(checked.status, 2) << checked.output;
  EXPECT_THAT(checked.output,
              HasSubstr("kernel 'scale', block (0,0,0), thread (1,0,0), PTX "
                        "line 15 (ld.shared.u32): data race at shared offset "
                        "0: this read and the write of thread (0,0,0) at PTX "
                        "line 11 (st.shared.u32)"));
  EXPECT_EQ(std::count(checked.output.begin(), checked.output.end(), '\n'), 1)
      << checked.output;
  // The environment variable does the same; a name it does not know is a
  // one-line error (status 1) before anything runs.
  EXPECT_EQ(runKilnRun(racy + " --random-inputs --device emu",
                       "KILN_EMU_CHECK=shared,races ")
                .status,
            2);
  RunResult unknown = runKilnRun(racy + " --random-inputs --device emu",
                                 "KILN_EMU_CHECK=race ");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_EQ(unknown.output,
            "kiln-run: error: emu: KILN_EMU_CHECK: unknown check 'race' "
            "(known: races, shared; comma-separated)\n");
}

} // namespace
