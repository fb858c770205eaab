//===- ProfileTest.cpp - The performance model, reports and NVML ----------===//
//
// Expectations are worked out by hand from the H200 figures of
// runtime/targets/gpus.ini (132 SMs, 3861 GB/s, 67 fp32 / 989 bf16 / 494
// tf32 TFLOP/s, 4 schedulers at 1.98 GHz, 64 warps / 32 blocks / 64 Ki
// registers / 228 KiB shared per SM, 2.5 us per launch), so a change to
// the table or the model shows up here.
//
//===----------------------------------------------------------------------===//

#include "Nvml.h"
#include "RuntimeTestUtils.h"

#include "kiln/runtime/Profile.h"

#include <gmock/gmock.h>
#include <nlohmann/json.hpp>

#include <cmath>

using namespace kiln::runtime;
using namespace kiln::runtime::test;
using ::testing::HasSubstr;

namespace {

GpuTarget h200() {
  Expected<std::vector<GpuTarget>> table = loadTargetTable();
  EXPECT_TRUE(table) << errorOf(table);
  Expected<GpuTarget> target = findTarget(*table, "sm_90-h200");
  EXPECT_TRUE(target) << errorOf(target);
  return *target;
}

//===----------------------------------------------------------------------===//
// The target table
//===----------------------------------------------------------------------===//

TEST(ProfileTest, BuiltinTableHasTheH200AndA100) {
  GpuTarget target = h200();
  EXPECT_EQ(target.sm, 90u);
  EXPECT_EQ(target.smCount, 132u);
  EXPECT_DOUBLE_EQ(target.dramBandwidthGBps, 3861); // measured copy
  EXPECT_DOUBLE_EQ(target.bf16Tflops, 989);
  EXPECT_DOUBLE_EQ(target.tf32Tflops, 494);
  EXPECT_DOUBLE_EQ(target.fp32Tflops, 67);
  Expected<std::vector<GpuTarget>> table = loadTargetTable();
  ASSERT_TRUE(table);
  Expected<GpuTarget> a100 = findTarget(*table, "sm_80");
  ASSERT_TRUE(a100) << errorOf(a100);
  EXPECT_EQ(a100->name, "sm_80-a100");
  EXPECT_EQ(a100->smCount, 108u);
}

TEST(ProfileTest, FindTargetByArtifactTarget) {
  Expected<std::vector<GpuTarget>> table = loadTargetTable();
  ASSERT_TRUE(table);
  Expected<GpuTarget> target = findTarget(*table, "sm_90a");
  ASSERT_TRUE(target) << errorOf(target);
  EXPECT_EQ(target->name, "sm_90-h200");
  EXPECT_EQ(errorOf(findTarget(*table, "sm_86")),
            "no performance figures for 'sm_86' in the target table "
            "(runtime/targets/gpus.ini has sm_90-h200, sm_80-a100); pick one "
            "with --perf-target");
}

std::string minimalTable(const std::string &extra = "",
                         const std::string &drop = "") {
  std::string text = "[t]\n";
  for (const char *key :
       {"sm", "sm_count", "dram_bandwidth_gbps", "bf16_tflops", "fp16_tflops",
        "tf32_tflops", "fp32_tflops", "schedulers_per_sm", "clock_ghz",
        "registers_per_sm", "register_allocation_unit",
        "max_registers_per_thread", "shared_bytes_per_sm",
        "max_shared_bytes_per_block", "shared_allocation_unit",
        "reserved_shared_bytes_per_block", "max_warps_per_sm",
        "max_blocks_per_sm", "max_threads_per_block",
        "occupancy_for_peak_bandwidth", "occupancy_for_peak_compute",
        "launch_overhead_us"})
    if (drop != key)
      text += std::string(key) + " = 1 # comment\n";
  return text + extra;
}

TEST(ProfileTest, TableErrorsNameTheLine) {
  // int8_tops is optional (0: twice bf16's peak).
  Expected<std::vector<GpuTarget>> minimal =
      parseTargetTable(minimalTable(), "t.ini");
  ASSERT_TRUE(minimal) << errorOf(minimal);
  EXPECT_EQ(minimal->front().int8Tops, 0.0);
  Expected<std::vector<GpuTarget>> withInt8 =
      parseTargetTable(minimalTable("int8_tops = 1979\n"), "t.ini");
  ASSERT_TRUE(withInt8) << errorOf(withInt8);
  EXPECT_EQ(withInt8->front().int8Tops, 1979.0);
  EXPECT_EQ(errorOf(parseTargetTable(minimalTable("colour = 3\n"), "t.ini")),
            "t.ini:24: unknown key 'colour'");
  EXPECT_EQ(errorOf(parseTargetTable(minimalTable("sm = 2\n"), "t.ini")),
            "t.ini:24: 'sm' is given twice for 't'");
  EXPECT_EQ(errorOf(parseTargetTable(minimalTable("", "sm_count"), "t.ini")),
            "t.ini: target 't' has no 'sm_count'");
  EXPECT_EQ(
      errorOf(parseTargetTable("[t]\nsm = ninety\n", "t.ini")),
      "t.ini:2: 'ninety' is not a non-negative number");
  EXPECT_EQ(errorOf(parseTargetTable("[t]\nsm = 9.5\n", "t.ini")),
            "t.ini:2: 'sm' needs a whole number, not '9.5'");
  EXPECT_EQ(errorOf(parseTargetTable("sm = 90\n", "t.ini")),
            "t.ini:1: a key before the first [target] section");
  EXPECT_EQ(errorOf(parseTargetTable("[t]\njunk\n", "t.ini")),
            "t.ini:2: expected 'key = value'");
  // What inih (the INI reader) finds on its own is named the same way.
  EXPECT_EQ(errorOf(parseTargetTable("[t\nsm = 90\n", "t.ini")),
            "t.ini:1: a section header is '[name]'");
  EXPECT_EQ(errorOf(parseTargetTable(
                "[t]\ndescription = " + std::string(300, 'x') + "\n", "t.ini")),
            "t.ini:2: a line is at most 198 characters");
  EXPECT_EQ(errorOf(parseTargetTable(minimalTable() + "[u]\nsm = 1\n[t]\n"
                                                      "sm = 2\n",
                                     "t.ini")),
            "t.ini:27: target 't' appears twice");
}

TEST(ProfileTest, BuiltinTableIsTheGpusFigures) {
  // runtime/targets/gpus.ini as embedded; the figures are NVIDIA's
  // (H200 and A100 datasheets, the CUDA C++ Programming Guide's table per
  // compute capability).
  const std::vector<GpuTarget> &table = builtinTargetTable();
  ASSERT_GE(table.size(), 2u);
  Expected<GpuTarget> h200 = findTarget(table, "sm_90");
  ASSERT_TRUE(h200) << errorOf(h200);
  EXPECT_EQ(h200->name, "sm_90-h200");
  EXPECT_EQ(h200->smCount, 132u);
  EXPECT_EQ(h200->maxSharedBytesPerBlock, 227u * 1024);
  Expected<GpuTarget> a100 = findTarget(table, "sm_80");
  ASSERT_TRUE(a100) << errorOf(a100);
  EXPECT_EQ(a100->smCount, 108u);
  EXPECT_EQ(a100->maxSharedBytesPerBlock, 163u * 1024);
}

//===----------------------------------------------------------------------===//
// Occupancy
//===----------------------------------------------------------------------===//

TEST(ProfileTest, OccupancyLimitedByWarps) {
  // 256 threads = 8 warps: 64 / 8 = 8 blocks; 32 registers: 1024 per warp,
  // 8192 per block, 65536 / 8192 = 8 blocks too (warps are checked first).
  Expected<Occupancy> occupancy = computeOccupancy(h200(), 256, 32, 0);
  ASSERT_TRUE(occupancy) << errorOf(occupancy);
  EXPECT_EQ(occupancy->warpsPerBlock, 8u);
  EXPECT_EQ(occupancy->blocksPerSm, 8u);
  EXPECT_EQ(occupancy->limiter, "warps");
  EXPECT_DOUBLE_EQ(occupancy->theoretical, 1.0);
}

TEST(ProfileTest, OccupancyLimitedByRegisters) {
  // 64 registers x 32 lanes = 2048 per warp, 16384 per 8-warp block: 4.
  Expected<Occupancy> a = computeOccupancy(h200(), 256, 64, 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->blocksPerSm, 4u);
  EXPECT_EQ(a->limiter, "registers");
  EXPECT_DOUBLE_EQ(a->theoretical, 0.5);
  // 40 registers: 1280 per warp (a multiple of 256), 5120 per 4-warp
  // block, 65536 / 5120 = 12.8 -> 12 blocks = 48 warps.
  Expected<Occupancy> b = computeOccupancy(h200(), 128, 40, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->blocksPerSm, 12u);
  EXPECT_EQ(b->limiter, "registers");
  EXPECT_DOUBLE_EQ(b->theoretical, 0.75);
  // 33 registers round up to 1280 per warp as well (1056 -> 1280).
  Expected<Occupancy> c = computeOccupancy(h200(), 128, 33, 0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->blocksPerSm, 12u);
}

TEST(ProfileTest, OccupancyLimitedBySharedMemoryAndBlocks) {
  // 48 KiB + the 1 KiB the SM reserves per block = 50176 bytes (a multiple
  // of 128): 233472 / 50176 = 4.65 -> 4 blocks of 4 warps.
  Expected<Occupancy> shared = computeOccupancy(h200(), 128, 0, 49152);
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->blocksPerSm, 4u);
  EXPECT_EQ(shared->limiter, "shared memory");
  EXPECT_DOUBLE_EQ(shared->theoretical, 0.25);
  // One-warp blocks: 32 blocks per SM at most = 32 of 64 warps.
  Expected<Occupancy> blocks = computeOccupancy(h200(), 32, 0, 0);
  ASSERT_TRUE(blocks);
  EXPECT_EQ(blocks->blocksPerSm, 32u);
  EXPECT_EQ(blocks->limiter, "blocks");
  EXPECT_DOUBLE_EQ(blocks->theoretical, 0.5);
}

TEST(ProfileTest, OccupancyOfABlockThatCannotFit) {
  EXPECT_EQ(errorOf(computeOccupancy(h200(), 1024, 255, 0)),
            "a block needs 262144 registers; an SM of sm_90-h200 has 65536");
  EXPECT_EQ(errorOf(computeOccupancy(h200(), 2048, 0, 0)),
            "a block of 2048 threads does not fit sm_90-h200 (at most 1024)");
  EXPECT_EQ(errorOf(computeOccupancy(h200(), 128, 0, 240000)),
            "a block needs 240000 bytes of shared memory; sm_90-h200 allows "
            "232448");
}

//===----------------------------------------------------------------------===//
// Estimates
//===----------------------------------------------------------------------===//

LaunchConfig config(uint32_t blocks, uint32_t threads, uint32_t shared = 0) {
  return {Dim3{blocks, 1, 1}, Dim3{threads, 1, 1}, shared};
}

TEST(ProfileTest, MemoryBoundLaunch) {
  // 13200 blocks of 256 threads, 32 registers: 8 blocks per SM, 1056 per
  // wave, 13 waves; achieved = 13200 x 8 / (13 x 132 x 64) = 0.9615.
  LaunchCounters counters;
  counters.blocksTotal = counters.blocksRun = 13200;
  counters.dramReadSectors = 3125000; // 100 MB
  counters.dramWriteSectors = 3125000;
  counters.fmaFlops = 1000000000;
  counters.warpInstructions = 10000000;
  Expected<LaunchEstimate> estimate =
      estimateLaunch(h200(), counters, config(13200, 256),
                     KernelResources{32, 0, 0, 0, 0}, MmaType::Unknown);
  ASSERT_TRUE(estimate) << errorOf(estimate);
  EXPECT_EQ(estimate->waves, 13u);
  EXPECT_NEAR(estimate->achievedOccupancy, 105600.0 / 109824.0, 1e-12);
  EXPECT_NEAR(estimate->memorySeconds, 200e6 / 3861e9, 1e-15); // 51.80 us
  EXPECT_NEAR(estimate->computeSeconds, 1e9 / 67e12, 1e-15);   // 14.93 us
  EXPECT_NEAR(estimate->issueSeconds, 1e7 / (132 * 4 * 1.98e9), 1e-15);
  EXPECT_EQ(estimate->bound, "memory");
  EXPECT_NEAR(estimate->seconds * 1e6, 51.8001 + 2.5, 1e-4);
}

TEST(ProfileTest, OneSmallBlockCannotUseTheGpu) {
  // One 4-warp block: achieved = 4 / (132 x 64); the bandwidth scales by
  // achieved / 0.25, issue by achieved x 64 / 4 (one SM's schedulers).
  LaunchCounters counters;
  counters.blocksTotal = counters.blocksRun = 1;
  counters.dramReadSectors = 32; // 1 KiB
  counters.warpInstructions = 1000;
  Expected<LaunchEstimate> estimate = estimateLaunch(
      h200(), counters, config(1, 128), std::nullopt, MmaType::Unknown);
  ASSERT_TRUE(estimate) << errorOf(estimate);
  double achieved = 4.0 / (132 * 64);
  EXPECT_EQ(estimate->waves, 1u);
  EXPECT_NEAR(estimate->achievedOccupancy, achieved, 1e-15);
  EXPECT_NEAR(estimate->memorySeconds, 1024 / (3861e9 * achieved / 0.25),
              1e-18);
  EXPECT_NEAR(estimate->issueSeconds,
              1000 / (132 * 4 * 1.98e9) / (achieved * 64 / 4), 1e-18);
  // Both well under the 2.5 us launch overhead.
  EXPECT_EQ(estimate->bound, "launch");
}

TEST(ProfileTest, MmaFlopsRunAtTheirTypesPeak) {
  LaunchCounters counters;
  counters.blocksTotal = counters.blocksRun = 132 * 8;
  counters.mmaFlops = 494000000000ull; // 1 ms at 494 TFLOP/s
  auto computeFor = [&](MmaType type) {
    Expected<LaunchEstimate> estimate =
        estimateLaunch(h200(), counters, config(132 * 8, 256), std::nullopt,
                       type);
    EXPECT_TRUE(estimate);
    return estimate->computeSeconds;
  };
  EXPECT_NEAR(computeFor(MmaType::TF32), 1e-3, 1e-12);
  EXPECT_NEAR(computeFor(MmaType::BF16), 494.0 / 989.0 * 1e-3, 1e-12);
  // Unknown type: bf16, the common case.
  EXPECT_NEAR(computeFor(MmaType::Unknown), 494.0 / 989.0 * 1e-3, 1e-12);
}

TEST(ProfileTest, SampledCountsScaleToTheGrid) {
  LaunchCounters counters;
  counters.blocksTotal = 100;
  counters.blocksRun = 10;
  counters.threadInstructions = 55;
  counters.dramReadSectors = 7;
  counters.globalBytesRequested = 3;
  LaunchCounters scaled = scaleSampledCounters(counters);
  EXPECT_EQ(scaled.threadInstructions, 550u);
  EXPECT_EQ(scaled.dramReadSectors, 70u);
  EXPECT_EQ(scaled.globalBytesRequested, 30u);
  EXPECT_EQ(scaled.blocksRun, 100u);
  EXPECT_EQ(scaled.blocksTotal, 100u);
  // Unsampled counts are unchanged.
  counters.blocksRun = 100;
  EXPECT_EQ(scaleSampledCounters(counters).threadInstructions, 55u);
}

TEST(ProfileTest, SampledDramIsCappedAtTheFootprint) {
  // Launch 1 reads a 1000-byte weight and the 4096-byte arena buffer live
  // at offset 0 then (another buffer at offset 0 lived for launch 0 only),
  // and writes the 512-byte buffer at 4096: 5608 bytes, 176 sectors.
  Artifact artifact;
  Kernel kernel;
  kernel.name = "k";
  kernel.params = {{ParamKind::WeightsPointer}, {ParamKind::ArenaPointer},
                   {ParamKind::ArenaPointer}, {ParamKind::Scalar32}};
  artifact.kernels.push_back(kernel);
  artifact.weights.push_back({"w", DType::F32, {250}, 64, ""});
  artifact.memoryPlan.buffers = {{"old", 0, 8192, 0, 0},
                                 {"x", 0, 4096, 1, 1},
                                 {"y", 4096, 512, 1, 1}};
  artifact.launches = {{0, {64, 0, 4096, 7}}, {0, {64, 0, 4096, 7}}};
  EXPECT_EQ(launchFootprintBytes(artifact, 1), 5608u);
  EXPECT_EQ(launchFootprintBytes(artifact, 0), 1000u + 8192u);

  LaunchCounters scaled;
  scaled.dramReadSectors = 300;
  scaled.dramWriteSectors = 100;
  capDramAtFootprint(scaled, 5608);
  EXPECT_EQ(scaled.dramReadSectors, 132u); // 176 * 3/4
  EXPECT_EQ(scaled.dramWriteSectors, 44u); // 176 * 1/4
  // Under the footprint nothing changes.
  scaled.dramReadSectors = 10;
  scaled.dramWriteSectors = 5;
  capDramAtFootprint(scaled, 5608);
  EXPECT_EQ(scaled.dramReadSectors, 10u);
  EXPECT_EQ(scaled.dramWriteSectors, 5u);
}

TEST(ProfileTest, StaticRoofline) {
  StaticEstimate memory = estimateStatic(h200(), 386100000, 0); // 100 us
  EXPECT_NEAR(memory.memorySeconds, 100e-6, 1e-15);
  EXPECT_EQ(memory.bound, "memory");
  EXPECT_NEAR(memory.seconds, 102.5e-6, 1e-15);
  StaticEstimate compute = estimateStatic(h200(), 0, 67000000000ull); // 1 ms
  EXPECT_EQ(compute.bound, "compute");
  EXPECT_NEAR(compute.computeSeconds, 1e-3, 1e-15);
  EXPECT_EQ(estimateStatic(h200(), 1024, 0).bound, "launch");
}

TEST(ProfileTest, MmaTypeFromPtx) {
  EXPECT_EQ(mmaTypeOfPtx("\tmma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                         "\t{%f1, %f2}, ..."),
            MmaType::TF32);
  EXPECT_EQ(mmaTypeOfPtx("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32\t"
                         "{...}"),
            MmaType::BF16);
  EXPECT_EQ(mmaTypeOfPtx("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                         "..."),
            MmaType::F16);
  EXPECT_EQ(mmaTypeOfPtx("fma.rn.f32 %f1, %f2, %f3, %f4;"), MmaType::Unknown);
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

/// makeAddScaleArtifact's two launches, as an emu device would report them.
std::vector<LaunchProfile> addScaleProfiles(const Artifact &artifact) {
  std::vector<LaunchProfile> profiles;
  for (const Launch &launch : artifact.launches) {
    const Kernel &kernel = artifact.kernels[launch.kernel];
    LaunchProfile profile;
    profile.kernel = kernel.name;
    profile.config = {kernel.grid, kernel.block, kernel.dynamicSharedBytes};
    profile.stream = 1;
    profile.counters.blocksTotal = profile.counters.blocksRun = 1;
    profile.counters.threadInstructions = 60;
    profile.counters.warpInstructions = 10;
    profile.counters.loadStoreInstructions = 18;
    profile.counters.otherInstructions = 42;
    profile.counters.globalAccesses = 3;
    profile.counters.globalBytesRequested = 72;
    profile.counters.globalSectors = 3; // 72 of 96 bytes: 75%
    profile.counters.dramReadSectors = 2;
    profile.counters.dramWriteSectors = 1;
    profiles.push_back(profile);
  }
  return profiles;
}

TEST(ProfileTest, EmuProfileRowsAndTotal) {
  Artifact artifact = makeAddScaleArtifact();
  Expected<ProfileReport> report =
      profileFromCounters(artifact, addScaleProfiles(artifact), h200());
  ASSERT_TRUE(report) << errorOf(report);
  ASSERT_EQ(report->kernels.size(), 2u);
  const KernelProfile &addBias = report->kernels[0];
  EXPECT_EQ(addBias.kernel, "add_bias");
  EXPECT_EQ(addBias.launches, 1u);
  ASSERT_TRUE(addBias.resources.has_value());
  EXPECT_EQ(addBias.resources->registersPerThread, 12u);
  ASSERT_TRUE(addBias.estimatedSeconds.has_value());
  // A 6-thread block's traffic is nothing next to the launch overhead.
  EXPECT_EQ(addBias.bound, "launch");
  EXPECT_GT(*addBias.estimatedSeconds, 2.5e-6);
  EXPECT_EQ(report->total.launches, 2u);
  EXPECT_EQ(report->total.counters.threadInstructions, 120u);
  EXPECT_EQ(report->total.counters.dramReadSectors, 4u);
  EXPECT_NEAR(*report->total.estimatedSeconds,
              *addBias.estimatedSeconds + *report->kernels[1].estimatedSeconds,
              1e-15);
  // The slices are laid end to end.
  ASSERT_EQ(report->launches.size(), 2u);
  EXPECT_DOUBLE_EQ(report->launches[0].startMicros, 0);
  EXPECT_DOUBLE_EQ(report->launches[1].startMicros,
                   report->launches[0].durationMicros);
  EXPECT_EQ(*report->launches[0].dramBytes, 96u);

  std::string table = formatProfileTable(*report);
  EXPECT_THAT(table, HasSubstr("estimate for sm_90-h200"));
  EXPECT_THAT(table, HasSubstr("add_bias"));
  EXPECT_THAT(table, HasSubstr("75%")); // coalescing
  EXPECT_THAT(table, HasSubstr("total"));
}

TEST(ProfileTest, EmuProfileNeedsOneRecordPerLaunch) {
  Artifact artifact = makeAddScaleArtifact();
  std::vector<LaunchProfile> profiles = addScaleProfiles(artifact);
  profiles.pop_back();
  EXPECT_EQ(errorOf(profileFromCounters(artifact, profiles, h200())),
            "profile: the device recorded 1 launches for a launch list of 2");
  profiles = addScaleProfiles(artifact);
  profiles[1].kernel = "other";
  EXPECT_EQ(errorOf(profileFromCounters(artifact, profiles, h200())),
            "profile: launch 1 ran kernel 'other' where the launch list has "
            "'scale'");
}

TEST(ProfileTest, ProfileJsonReadsBack) {
  Artifact artifact = makeAddScaleArtifact();
  Expected<ProfileReport> report =
      profileFromCounters(artifact, addScaleProfiles(artifact), h200());
  ASSERT_TRUE(report);
  std::string json = profileToJson(*report);
  EXPECT_THAT(json, HasSubstr("\"coalescing_efficiency\": 0.75"));
  Expected<ProfileReport> back = parseProfileJson(json, "p.json");
  ASSERT_TRUE(back) << errorOf(back);
  ASSERT_EQ(back->kernels.size(), 2u);
  EXPECT_EQ(back->target, "sm_90-h200");
  EXPECT_EQ(back->kernels[0].kernel, "add_bias");
  EXPECT_EQ(back->kernels[0].counters.globalSectors, 3u);
  EXPECT_EQ(back->kernels[0].resources->registersPerThread, 12u);
  EXPECT_NEAR(*back->kernels[0].estimatedSeconds,
              *report->kernels[0].estimatedSeconds, 1e-12);
  ASSERT_EQ(back->launches.size(), 2u);
  EXPECT_EQ(back->launches[1].kernel, "scale");
  EXPECT_EQ(back->launches[1].launch, 1u);
  EXPECT_EQ(errorOf(parseProfileJson("{\"format\": \"x\"}", "p.json")),
            "p.json: not a kiln-run --profile-json file");
  // Malformed JSON: nlohmann's message, naming the file, line and column.
  EXPECT_EQ(errorOf(parseProfileJson("{\"format\": ", "p.json")),
            "p.json: not valid JSON: parse error at line 1, column 12: "
            "syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(errorOf(parseProfileJson("{\"format\": \"kiln-profile\", "
                                     "\"version\": 1, \"kernels\": [3]}",
                                     "p.json")),
            "p.json: a kernel entry without a name");
}

TEST(ProfileTest, MeasuredProfileTakesEstimatesFromAnEmuProfile) {
  Artifact artifact = makeAddScaleArtifact();
  BenchmarkResult bench;
  bench.runMilliseconds = {1, 1, 1};
  bench.kernels = {{"add_bias", 1, {0.010, 0.030, 0.020}},
                   {"scale", 1, {0.005, 0.005, 0.007}}};
  bench.launches = {{0, 0.020}, {0.021, 0.007}};
  DeviceInfo info;
  info.kind = "cuda";
  info.name = "NVIDIA H200";
  Expected<ProfileReport> measured =
      profileFromBenchmark(artifact, bench, info);
  ASSERT_TRUE(measured) << errorOf(measured);
  EXPECT_NEAR(*measured->kernels[0].measuredSeconds, 20e-6, 1e-12); // median
  EXPECT_NEAR(*measured->total.measuredSeconds, 25e-6, 1e-12);
  EXPECT_FALSE(measured->kernels[0].estimatedSeconds.has_value());
  EXPECT_DOUBLE_EQ(measured->launches[1].startMicros, 21);

  Expected<ProfileReport> estimated = parseProfileJson(
      profileToJson(*profileFromCounters(artifact, addScaleProfiles(artifact),
                                         h200())),
      "e.json");
  ASSERT_TRUE(estimated);
  ASSERT_EQ(errorOf(mergeEstimates(*measured, *estimated)), "<success>");
  EXPECT_TRUE(measured->kernels[0].estimatedSeconds.has_value());
  EXPECT_TRUE(measured->total.estimatedSeconds.has_value());
  EXPECT_EQ(*measured->launches[0].dramBytes, 96u);
  EXPECT_THAT(formatProfileTable(*measured),
              HasSubstr("median of 3 runs; estimate for sm_90-h200"));

  estimated->kernels[1].kernel = "gemm";
  EXPECT_EQ(errorOf(mergeEstimates(*measured, *estimated)),
            "the estimate has no kernel 'scale': it was made for another "
            "model");
}

TEST(ProfileTest, TraceHasASlicePerLaunchAndATrackPerStream) {
  Artifact artifact = makeAddScaleArtifact();
  std::vector<LaunchProfile> profiles = addScaleProfiles(artifact);
  profiles[1].stream = 2;
  Expected<ProfileReport> report =
      profileFromCounters(artifact, profiles, h200());
  ASSERT_TRUE(report);
  nlohmann::json trace = nlohmann::json::parse(traceToJson(*report));
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  std::vector<nlohmann::json> slices, tracks;
  for (const nlohmann::json &event : trace["traceEvents"]) {
    if (event["ph"] == "X")
      slices.push_back(event);
    else if (event["name"] == "thread_name")
      tracks.push_back(event);
  }
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]["name"], "add_bias");
  EXPECT_EQ(slices[0]["cat"], "kernel");
  EXPECT_EQ(slices[0]["ts"], 0.0);
  EXPECT_EQ(slices[1]["tid"], 2);
  // Laid end to end: the second starts where the first ends.
  EXPECT_DOUBLE_EQ(slices[1]["ts"].get<double>(),
                   slices[0]["dur"].get<double>());
  EXPECT_EQ(slices[0]["args"]["grid"], nlohmann::json::array({1, 1, 1}));
  EXPECT_EQ(slices[0]["args"]["block"], nlohmann::json::array({6, 1, 1}));
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[1]["tid"], 2);
  EXPECT_EQ(tracks[1]["args"]["name"], "stream 2");
}

TEST(ProfileTest, WriteTextFileIsAtomicAndChecksFirst) {
  TempDir dir;
  std::string path = dir.file("trace.json");
  EXPECT_EQ(errorOf(checkWritable(path)), "<success>");
  EXPECT_TRUE(dir.entries().empty()); // the probe leaves nothing
  EXPECT_EQ(errorOf(writeTextFile(path, "{}\n")), "<success>");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"trace.json"});
  EXPECT_THAT(errorOf(checkWritable(dir.file("missing/trace.json"))),
              HasSubstr("cannot create a temporary file in"));
}

//===----------------------------------------------------------------------===//
// NVML
//===----------------------------------------------------------------------===//

TEST(ProfileTest, NvmlMissingSaysSo) {
  EXPECT_EQ(errorOf(loadNvmlFrom("libnvidia-ml-kiln-test-missing.so.1")),
            "no NVML (libnvidia-ml-kiln-test-missing.so.1 not found)");
  Expected<const NvmlLibrary *> nvml = loadNvml();
  if (nvml)
    GTEST_SKIP() << "NVML is installed here";
  EXPECT_THAT(errorOf(nvml), HasSubstr("NVML"));
}

} // namespace
