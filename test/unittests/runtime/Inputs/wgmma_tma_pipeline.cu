// The emulator's end-to-end sm_90 fixture (EmuNvrtcPipelineTest.cpp): a
// warp-specialized 64x64 bf16 GEMM tile in the style of CUTLASS's sm90
// kernels, written with inline PTX. Warpgroup 0 is the producer (one
// elected thread issues TMA loads with an L2 cache hint into a 2-stage
// ring guarded by full/empty mbarriers); warpgroup 1 consumes each stage
// with four wgmma m64n64k16 steps (128B-swizzled K-major descriptors) and
// stores D (row-major, ld = N) at the end.
//
// Regenerate the .ptx beside it with:
//   nvcc -arch=sm_90a -ptx wgmma_tma_pipeline.cu -o wgmma_tma_pipeline.ptx
#include <cuda.h>
#include <cstdint>

namespace {

constexpr int kStages = 2;
constexpr int kTileK = 64;
constexpr int kTileBytes = 64 * kTileK * 2;

__device__ inline uint32_t smem(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void barInit(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(bar)),
               "r"(count));
}

__device__ inline void barWait(uint64_t *bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred P1;\n"
               "LAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\n"
               "bra LAB_WAIT;\n"
               "DONE:\n"
               "}\n" ::"r"(smem(bar)),
               "r"(parity)
               : "memory");
}

__device__ inline void barArrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(
                   smem(bar))
               : "memory");
}

__device__ inline void barExpectTx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   smem(bar)),
               "r"(bytes)
               : "memory");
}

__device__ inline void tmaLoad(void *dst, const CUtensorMap *map,
                               uint64_t *bar, int c0, int c1) {
  uint64_t policy = 0x1000000000000000ull; // EVICT_NORMAL-like hint
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4}], [%2], "
               "%5;" ::"r"(smem(dst)),
               "l"(map), "r"(smem(bar)), "r"(c0), "r"(c1), "l"(policy)
               : "memory");
}

__device__ inline uint64_t descriptor(const void *p) {
  uint64_t d = (smem(p) & 0x3FFFF) >> 4;
  d |= uint64_t(1) << 16;           // LBO (unused for swizzled K-major)
  d |= uint64_t(1024 >> 4) << 32;   // SBO: 8 rows of 128 bytes
  d |= uint64_t(1) << 62;           // 128-byte swizzle
  return d;
}

__device__ inline void wgmma64(float (&d)[32], uint64_t a, uint64_t b,
                               int scaleD) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
      "%29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
        "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scaleD));
}

} // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_tile(const __grid_constant__ CUtensorMap mapA,
              const __grid_constant__ CUtensorMap mapB, float *out, int k) {
  __shared__ alignas(1024) uint8_t tiles[kStages][2][kTileBytes];
  __shared__ alignas(8) uint64_t full[kStages], empty[kStages];
  const int warpgroup = threadIdx.x / 128;
  const int steps = k / kTileK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barInit(&full[s], 1);
      barInit(&empty[s], 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    uint32_t leader;
    asm volatile("{\n.reg .pred P;\nelect.sync _|P, 0xffffffff;\n"
                 "selp.b32 %0, 1, 0, P;\n}\n"
                 : "=r"(leader));
    if (threadIdx.x / 32 == 0 && leader) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&mapA) : "memory");
      for (int i = 0; i < steps; ++i) {
        int s = i % kStages;
        if (i >= kStages)
          barWait(&empty[s], ((i / kStages) - 1) & 1);
        barExpectTx(&full[s], 2 * kTileBytes);
        tmaLoad(tiles[s][0], &mapA, &full[s], i * kTileK, 0);
        tmaLoad(tiles[s][1], &mapB, &full[s], i * kTileK, 0);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float d[32];
    for (int i = 0; i < 32; ++i)
      d[i] = 0.0f;
    for (int i = 0; i < steps; ++i) {
      int s = i % kStages;
      barWait(&full[s], (i / kStages) & 1);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      for (int kk = 0; kk < kTileK / 16; ++kk)
        wgmma64(d, descriptor(tiles[s][0]) + 2 * kk,
                descriptor(tiles[s][1]) + 2 * kk, i > 0 || kk > 0);
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      barArrive(&empty[s]);
    }
    int t = threadIdx.x - 128, warp = t / 32, lane = t % 32;
    for (int i = 0; i < 32; ++i) {
      int row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
      int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      out[row * 64 + col] = d[i];
    }
  }
}
