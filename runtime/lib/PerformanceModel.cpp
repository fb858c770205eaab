//===- PerformanceModel.cpp - What a launch would cost on a GPU -----------===//
//
// The model (docs/emulator.md, "Performance model"):
//
//   occupancy  resident blocks per SM from warps, registers and shared
//              memory against the target's limits (the occupancy calculator);
//   waves      ceil(blocks / (blocks per SM x SMs));
//   achieved   blocks x warps per block / (waves x SMs x max warps per SM);
//   memory     DRAM bytes (sectors x 32) / (bandwidth x min(1, achieved /
//              occupancy_for_peak_bandwidth));
//   compute    (MMA FLOPs / tensor peak of the MMA type + FMA FLOPs / fp32
//              peak) / min(1, achieved / occupancy_for_peak_compute);
//   issue      warp-instructions / (SMs x schedulers x clock), slowed the
//              same way when fewer warps than schedulers are resident;
//   time       max(memory, compute, issue) + launch overhead.
//
// The target's figures come from TargetTable.h; the reports that use the
// model are ProfileReport.cpp's, their JSON ProfileJson.cpp's.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Profile.h"

#include "Support.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime {

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

namespace {
uint64_t roundUp(uint64_t value, uint64_t unit) {
  return unit ? (value + unit - 1) / unit * unit : value;
}
uint64_t blockCount(const Dim3 &grid) {
  return uint64_t(grid.x) * grid.y * grid.z;
}
uint64_t threadCount(const Dim3 &block) {
  return uint64_t(block.x) * block.y * block.z;
}
} // namespace

Expected<Occupancy> computeOccupancy(const GpuTarget &target,
                                     uint32_t threadsPerBlock,
                                     uint32_t registersPerThread,
                                     uint32_t sharedBytesPerBlock) {
  if (threadsPerBlock == 0 || threadsPerBlock > target.maxThreadsPerBlock)
    return makeError("a block of {} threads does not fit {} (at most {})",
                     threadsPerBlock, target.name, target.maxThreadsPerBlock);
  if (registersPerThread > target.maxRegistersPerThread)
    return makeError("{} registers per thread is more than {} allows ({})",
                     registersPerThread, target.name,
                     target.maxRegistersPerThread);
  if (sharedBytesPerBlock > target.maxSharedBytesPerBlock)
    return makeError("a block needs {} bytes of shared memory; {} allows {}",
                     sharedBytesPerBlock, target.name,
                     target.maxSharedBytesPerBlock);
  Occupancy occupancy;
  occupancy.warpsPerBlock = (threadsPerBlock + 31) / 32;
  struct Limit {
    std::string_view name;
    uint64_t blocks;
  };
  std::vector<Limit> limits;
  limits.push_back({"warps", target.maxWarpsPerSm / occupancy.warpsPerBlock});
  if (registersPerThread > 0) {
    // Registers are allocated per warp, in units of the allocation size.
    uint64_t perWarp =
        roundUp(uint64_t(registersPerThread) * 32, target.registerAllocationUnit);
    uint64_t perBlock = perWarp * occupancy.warpsPerBlock;
    if (perBlock > target.registersPerSm)
      return makeError("a block needs {} registers; an SM of {} has {}",
                       perBlock, target.name, target.registersPerSm);
    limits.push_back({"registers", target.registersPerSm / perBlock});
  }
  uint64_t sharedPerBlock =
      roundUp(uint64_t(sharedBytesPerBlock) + target.reservedSharedBytesPerBlock,
              target.sharedAllocationUnit);
  if (sharedPerBlock > 0)
    limits.push_back(
        {"shared memory", target.sharedBytesPerSm / sharedPerBlock});
  limits.push_back({"blocks", target.maxBlocksPerSm});
  const Limit *tightest = &limits.front();
  for (const Limit &limit : limits)
    if (limit.blocks < tightest->blocks)
      tightest = &limit;
  if (tightest->blocks == 0)
    return makeError("no block fits an SM of {}: limited by {}", target.name,
                     tightest->name);
  occupancy.blocksPerSm = static_cast<uint32_t>(tightest->blocks);
  occupancy.limiter = tightest->name;
  occupancy.theoretical = double(occupancy.blocksPerSm) *
                          occupancy.warpsPerBlock / target.maxWarpsPerSm;
  return occupancy;
}

MmaType mmaTypeOfPtx(std::string_view ptx) {
  for (std::string_view opcode : {"mma.sync", "wgmma.mma_async"}) {
    size_t at = ptx.find(opcode);
    if (at == std::string_view::npos)
      continue;
    // The operand types follow the shape in the same instruction, e.g.
    // mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32.
    std::string_view instruction =
        ptx.substr(at, ptx.find_first_of(" \t", at) - at);
    if (instruction.find(".tf32") != std::string_view::npos)
      return MmaType::TF32;
    if (instruction.find(".bf16") != std::string_view::npos)
      return MmaType::BF16;
    if (instruction.find(".f16") != std::string_view::npos)
      return MmaType::F16;
    if (instruction.find(".s8") != std::string_view::npos ||
        instruction.find(".u8") != std::string_view::npos)
      return MmaType::I8;
  }
  return MmaType::Unknown;
}

std::string_view mmaTypeName(MmaType type) {
  switch (type) {
  case MmaType::F16:
    return "f16";
  case MmaType::BF16:
    return "bf16";
  case MmaType::TF32:
    return "tf32";
  case MmaType::I8:
    return "int8";
  case MmaType::Unknown:
    break;
  }
  return "";
}

namespace {
/// Every additive field of LaunchCounters, for scaling and summing.
constexpr uint64_t LaunchCounters::*kAdditiveCounters[] = {
    &LaunchCounters::threadInstructions,
    &LaunchCounters::warpInstructions,
    &LaunchCounters::fmaInstructions,
    &LaunchCounters::mmaInstructions,
    &LaunchCounters::loadStoreInstructions,
    &LaunchCounters::shuffleInstructions,
    &LaunchCounters::otherInstructions,
    &LaunchCounters::fmaFlops,
    &LaunchCounters::mmaFlops,
    &LaunchCounters::globalAccesses,
    &LaunchCounters::globalBytesRequested,
    &LaunchCounters::globalSectors,
    &LaunchCounters::dramReadSectors,
    &LaunchCounters::dramWriteSectors,
    &LaunchCounters::sharedAccesses,
    &LaunchCounters::sharedBankConflictReplays,
};
} // namespace

LaunchCounters scaleSampledCounters(const LaunchCounters &counters) {
  if (counters.blocksRun == 0 || counters.blocksRun >= counters.blocksTotal)
    return counters;
  LaunchCounters scaled = counters;
  double factor = double(counters.blocksTotal) / double(counters.blocksRun);
  for (uint64_t LaunchCounters::*field : kAdditiveCounters)
    scaled.*field =
        static_cast<uint64_t>(std::llround(double(counters.*field) * factor));
  scaled.blocksRun = counters.blocksTotal;
  return scaled;
}

uint64_t launchFootprintBytes(const Artifact &artifact, size_t index) {
  const Launch &launch = artifact.launches[index];
  const Kernel &kernel = artifact.kernels[launch.kernel];
  uint64_t bytes = 0;
  for (size_t p = 0; p < kernel.params.size() && p < launch.args.size(); ++p) {
    uint64_t offset = launch.args[p];
    if (kernel.params[p].kind == ParamKind::ArenaPointer) {
      // Buffers share offsets over time: the one live at this launch.
      for (const ArenaBuffer &buffer : artifact.memoryPlan.buffers)
        if (buffer.offset == offset && buffer.firstUse <= index &&
            index <= buffer.lastUse) {
          bytes += buffer.size;
          break;
        }
    } else if (kernel.params[p].kind == ParamKind::WeightsPointer) {
      for (const Weight &weight : artifact.weights)
        if (weight.offset == offset) {
          uint64_t elements = 1;
          for (int64_t d : weight.shape)
            elements *= static_cast<uint64_t>(d);
          bytes += elements * dtypeSize(weight.dtype);
          break;
        }
    }
  }
  return bytes;
}

void capDramAtFootprint(LaunchCounters &scaled, uint64_t footprintBytes) {
  uint64_t cap = (footprintBytes + 31) / 32;
  uint64_t total = scaled.dramReadSectors + scaled.dramWriteSectors;
  if (!cap || total <= cap)
    return;
  double shrink = double(cap) / double(total);
  scaled.dramReadSectors =
      static_cast<uint64_t>(std::llround(scaled.dramReadSectors * shrink));
  scaled.dramWriteSectors =
      static_cast<uint64_t>(std::llround(scaled.dramWriteSectors * shrink));
}

void addCounters(LaunchCounters &sum, const LaunchCounters &counters) {
  for (uint64_t LaunchCounters::*field : kAdditiveCounters)
    sum.*field += counters.*field;
  sum.blocksTotal += counters.blocksTotal;
  sum.blocksRun += counters.blocksRun;
}

namespace {
double tensorPeakTflops(const GpuTarget &target, MmaType type) {
  switch (type) {
  case MmaType::F16:
    return target.fp16Tflops;
  case MmaType::TF32:
    return target.tf32Tflops;
  case MmaType::I8:
    return target.int8Tops ? target.int8Tops : 2 * target.bf16Tflops;
  case MmaType::BF16:
  case MmaType::Unknown: // the common case for Kiln's tensor-core kernels
    break;
  }
  return target.bf16Tflops;
}
} // namespace

Expected<LaunchEstimate>
estimateLaunch(const GpuTarget &target, const LaunchCounters &counters,
               const LaunchConfig &config,
               const std::optional<KernelResources> &resources,
               MmaType mmaType) {
  uint32_t registers = resources ? resources->registersPerThread : 0;
  uint64_t shared = uint64_t(config.dynamicSharedBytes) +
                    (resources ? resources->staticSharedBytes : 0);
  Expected<Occupancy> occupancy = computeOccupancy(
      target, static_cast<uint32_t>(threadCount(config.block)), registers,
      static_cast<uint32_t>(std::min<uint64_t>(shared, UINT32_MAX)));
  if (!occupancy)
    return occupancy.takeError();
  LaunchEstimate estimate;
  estimate.occupancy = *occupancy;
  uint64_t blocks =
      counters.blocksTotal ? counters.blocksTotal : blockCount(config.grid);
  uint64_t slots = uint64_t(occupancy->blocksPerSm) * target.smCount;
  estimate.waves = (blocks + slots - 1) / slots;
  estimate.achievedOccupancy =
      estimate.waves == 0
          ? 0
          : double(blocks) * occupancy->warpsPerBlock /
                (double(estimate.waves) * target.smCount *
                 target.maxWarpsPerSm);

  // Too few resident warps cannot hide latency: the rate falls in
  // proportion below the figure the target table gives.
  double achieved = std::max(estimate.achievedOccupancy, 1e-9);
  double bandwidthScale =
      std::min(1.0, achieved / target.occupancyForPeakBandwidth);
  double computeScale = std::min(1.0, achieved / target.occupancyForPeakCompute);
  double issueScale =
      std::min(1.0, achieved * target.maxWarpsPerSm / target.schedulersPerSm);

  double dramBytes =
      double(counters.dramReadSectors + counters.dramWriteSectors) * 32;
  estimate.memorySeconds =
      dramBytes / (target.dramBandwidthGBps * 1e9 * bandwidthScale);
  double tensorPeak = tensorPeakTflops(target, mmaType);
  double mmaSeconds =
      counters.mmaFlops == 0
          ? 0
          : double(counters.mmaFlops) /
                ((tensorPeak > 0 ? tensorPeak : target.fp32Tflops) * 1e12);
  double fmaSeconds = double(counters.fmaFlops) / (target.fp32Tflops * 1e12);
  estimate.computeSeconds = (mmaSeconds + fmaSeconds) / computeScale;
  estimate.issueSeconds =
      double(counters.warpInstructions) /
      (double(target.smCount) * target.schedulersPerSm * target.clockGhz *
       1e9) /
      issueScale;
  estimate.overheadSeconds = target.launchOverheadUs * 1e-6;

  double longest = estimate.memorySeconds;
  estimate.bound = "memory";
  if (estimate.computeSeconds > longest) {
    longest = estimate.computeSeconds;
    estimate.bound = "compute";
  }
  if (estimate.issueSeconds > longest) {
    longest = estimate.issueSeconds;
    estimate.bound = "issue";
  }
  if (estimate.overheadSeconds > longest)
    estimate.bound = "launch";
  estimate.seconds = longest + estimate.overheadSeconds;
  return estimate;
}

StaticEstimate estimateStatic(const GpuTarget &target, uint64_t bytes,
                              uint64_t flops) {
  StaticEstimate estimate;
  estimate.memorySeconds = double(bytes) / (target.dramBandwidthGBps * 1e9);
  estimate.computeSeconds = double(flops) / (target.fp32Tflops * 1e12);
  estimate.overheadSeconds = target.launchOverheadUs * 1e-6;
  double longest = std::max(estimate.memorySeconds, estimate.computeSeconds);
  estimate.bound =
      estimate.memorySeconds >= estimate.computeSeconds ? "memory" : "compute";
  if (estimate.overheadSeconds > longest)
    estimate.bound = "launch";
  estimate.seconds = longest + estimate.overheadSeconds;
  return estimate;
}

} // namespace kiln::runtime
