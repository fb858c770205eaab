//===- SessionThreadsTest.cpp - Sessions on several host threads ----------===//
//
// What the runtime promises threads (Runtime.h): one artifact may be shared
// by sessions on several threads, each with its own device; one session is
// not thread-safe, so callers that share one (the Python package, which
// releases the GIL) hold a lock around each call. The emu device runs each
// launch's blocks on several host threads as well. These are the tests
// `scripts/test.sh --sanitize=thread` runs (docs/reliability.md
// "Sanitizers"): under ThreadSanitizer a data race in any of these paths is
// a failure; without it they still check every output element.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Runtime.h"

#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace kiln::runtime;
using namespace kiln::runtime::test;

namespace {

constexpr uint32_t kElements = 1024;
constexpr uint32_t kBlock = 128;

/// y = 2 x + 1 over f32 [1024], one element per thread, 8 blocks: written
/// here in PTX so that the emulator runs real loads and stores on the
/// session's arena.
Artifact makeTwicePlusOneArtifact() {
  Artifact artifact;
  artifact.compilerVersion = "kilnc test";
  artifact.compilerOptions = "--test";
  artifact.target = "sm_80";
  uint64_t bytes = kElements * sizeof(float);
  std::vector<LiveBuffer> live = {{bytes, 0, 0}, {bytes, 0, 0}};
  Expected<MemoryPlan> plan = planMemory(live, kArenaAlignment);
  EXPECT_TRUE(plan.hasValue());
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  const char *names[] = {"x", "y"};
  for (size_t i = 0; i < live.size(); ++i)
    artifact.memoryPlan.buffers.push_back(
        {names[i], plan->offsets[i], bytes, 0, 0});
  uint64_t x = plan->offsets[0], y = plan->offsets[1];
  artifact.inputs.push_back({"x", DType::F32, {kElements}, x, 0, {}});
  artifact.outputs.push_back({"y", DType::F32, {kElements}, y, 1, {}});
  Kernel kernel;
  kernel.name = "twice_plus_one";
  kernel.ptx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry twice_plus_one(.param .u64 px, .param .u64 py, .param .u32 pn)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [px];
  ld.param.u64 %rd2, [py];
  ld.param.u32 %r1, [pn];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.u32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  fma.rn.f32 %f2, %f1, 0f40000000, 0f3F800000;
  st.global.f32 [%rd5], %f2;
DONE:
  ret;
}
)";
  kernel.grid = {kElements / kBlock, 1, 1};
  kernel.block = {kBlock, 1, 1};
  kernel.params = {{ParamKind::ArenaPointer, "x"},
                   {ParamKind::ArenaPointer, "y"},
                   {ParamKind::Scalar32, "n"}};
  artifact.kernels = {kernel};
  artifact.launches = {{0, {x, y, kElements}}};
  return artifact;
}

/// Input `seed`: distinct values per thread and run, exact in f32 (small
/// integers and halves), so 2x + 1 is exact and compared with ==.
std::vector<float> inputFor(unsigned seed) {
  std::vector<float> x(kElements);
  for (uint32_t i = 0; i < kElements; ++i)
    x[i] =
        static_cast<float>(static_cast<int>((i * 7 + seed * 13) % 257) - 128) *
        0.5f;
  return x;
}

/// Runs `session` on input `seed` and checks every element of y against
/// 2x + 1 computed here. Returns the number of wrong elements.
unsigned runAndCheck(Session &session, unsigned seed) {
  std::vector<float> x = inputFor(seed);
  if (session.bindInput("x", DType::F32, {kElements}, x.data(),
                        x.size() * sizeof(float)))
    return kElements;
  if (session.run())
    return kElements;
  std::vector<float> y(kElements);
  if (session.readOutput("y", y.data(), y.size() * sizeof(float)))
    return kElements;
  unsigned wrong = 0;
  for (uint32_t i = 0; i < kElements; ++i)
    wrong += y[i] != 2 * x[i] + 1;
  return wrong;
}

std::unique_ptr<Session> emuSession(std::shared_ptr<const Artifact> artifact) {
  Expected<std::unique_ptr<Device>> device = createDevice("emu");
  EXPECT_TRUE(device) << errorOf(device);
  if (!device)
    return nullptr;
  Expected<std::unique_ptr<Session>> session = Session::create(
      std::move(artifact), std::shared_ptr<Device>(device.take()));
  EXPECT_TRUE(session) << errorOf(session);
  return session ? session.take() : nullptr;
}

TEST(SessionThreadsTest, EmuRunsBlocksOnSeveralThreads) {
  // Four emulator threads for eight blocks, whatever the machine has.
  ::setenv("KILN_EMU_THREADS", "4", /*overwrite=*/1);
  std::unique_ptr<Session> session =
      emuSession(std::make_shared<const Artifact>(makeTwicePlusOneArtifact()));
  ::unsetenv("KILN_EMU_THREADS");
  ASSERT_TRUE(session);
  for (unsigned run = 0; run < 3; ++run)
    EXPECT_EQ(runAndCheck(*session, run), 0u) << "run " << run;
}

TEST(SessionThreadsTest, ThreadsShareOneArtifact) {
  // One artifact, read by four sessions (each with its own emu device) on
  // four threads at once.
  auto artifact = std::make_shared<const Artifact>(makeTwicePlusOneArtifact());
  constexpr unsigned kThreads = 4, kRuns = 5;
  std::vector<unsigned> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::unique_ptr<Session> session = emuSession(artifact);
      if (!session) {
        wrong[t] = kElements;
        return;
      }
      for (unsigned run = 0; run < kRuns; ++run)
        wrong[t] += runAndCheck(*session, t * kRuns + run);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (unsigned t = 0; t < kThreads; ++t)
    EXPECT_EQ(wrong[t], 0u) << "thread " << t;
}

TEST(SessionThreadsTest, OneSessionUnderALockFromTwoThreads) {
  // The Python package's pattern: one session, a mutex around each
  // bind/run/read sequence, the calls coming from several threads.
  std::unique_ptr<Session> session =
      emuSession(std::make_shared<const Artifact>(makeTwicePlusOneArtifact()));
  ASSERT_TRUE(session);
  std::mutex busy;
  std::vector<unsigned> wrong(2, 0);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (unsigned run = 0; run < 5; ++run) {
        std::lock_guard<std::mutex> lock(busy);
        wrong[t] += runAndCheck(*session, 100 + t * 5 + run);
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(wrong[0] + wrong[1], 0u);
}

} // namespace
