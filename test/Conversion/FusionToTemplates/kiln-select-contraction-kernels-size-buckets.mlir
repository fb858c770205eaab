// kiln-select-contraction-kernels size-buckets (kilnc --size-buckets): with
// one symbolic dim N = 1..2048 (kiln.dim_ranges) and a GEMM whose M is N
// rows, the range is cut into buckets and each bucket but the last gets
// the config chosen for its largest M where it differs from the region's
// own; kiln-match-contractions then builds one guarded chain of calls per
// bucket, all writing the same result.
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true size-buckets=64,256" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true size-buckets=auto" | FileCheck %s --check-prefix=AUTO
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true" | FileCheck %s --check-prefix=OFF
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true size-buckets=64,256" -kiln-match-contractions | FileCheck %s --check-prefix=MATCH

// Bad cuts: one line each, naming the value.
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="size-buckets=big" 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: error: kiln-select-contraction-kernels: size-buckets 'big': 'big' is not a size in 1..2047 above the previous cut (off, auto, or increasing sizes: 4,16)
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="size-buckets=2048" 2>&1 | FileCheck %s --check-prefix=MAX
// MAX: error: kiln-select-contraction-kernels: size-buckets '2048': '2048' is not a size in 1..2047 above the previous cut
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="size-buckets=256,64" 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: kiln-select-contraction-kernels: size-buckets '256,64': '64' is not a size in 1..2047 above the previous cut
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="size-buckets=0" 2>&1 | FileCheck %s --check-prefix=MIN
// MIN: error: kiln-select-contraction-kernels: size-buckets '0': '0' is not a size in 1..2047 above the previous cut

// Buckets 1..64 (tuned at M = 64: small tiles and split-K) and 65..256
// (M = 256); the region's own config (M = 2048) takes 257..2048.
// CHECK-LABEL: func.func @ffn_up(
// CHECK:         kiln.fusion "matmul" -> tensor<2048x4096xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 128x256x64, {{.*}}>, kiln.kernel_origin = "heuristic", kiln.kernel_variants = [{kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, {{.*}}split_k = 2{{.*}}>, max = 64 : i64, min = 1 : i64}, {kernel = #kiln.gemm_config<family = wgmma_f16, tile = 128x64x64, {{.*}}>, max = 256 : i64, min = 65 : i64}]}
// auto: one cut at ceil(2048 / 8) = 256.
// AUTO-LABEL: func.func @ffn_up(
// AUTO:         kiln.kernel_variants = [{kernel = #kiln.gemm_config<family = wgmma_f16, tile = 128x64x64, {{.*}}>, max = 256 : i64, min = 1 : i64}]
// OFF-LABEL: func.func @ffn_up(
// OFF-NOT:     kiln.kernel_variants
// Three chains into one tensor, each guarded; the first writes a new
// tensor, the others the previous chain's result.
// MATCH-LABEL: func.func @ffn_up(
// MATCH:         %[[E:.*]] = tensor.empty() : tensor<2048x4096xf32>
// MATCH:         %[[C1:.*]]:2 = kiln.call_kernel @[[K1:kiln_gemm_[0-9]+]]::@{{.*}} ins(%{{.*}}, %{{.*}} : {{.*}}) outs(%[[E]], %{{.*}} : {{.*}}) {{.*}}kiln.size_guard = #kiln.size_guard<symbol = "N", min = 1, max = 64>
// MATCH:         %[[C2:.*]] = kiln.call_kernel @{{.*}} outs(%[[C1]]#0 : {{.*}}) {{.*}}kiln.size_guard = #kiln.size_guard<symbol = "N", min = 65, max = 256>
// MATCH:         %[[C3:.*]] = kiln.call_kernel @{{.*}} outs(%[[C2]] : {{.*}}) {{.*}}kiln.size_guard = #kiln.size_guard<symbol = "N", min = 257, max = 2048>
// MATCH:         return %[[C3]]
module attributes {kiln.dim_ranges = {N = array<i64: 1, 2048, 2048>}} {
  func.func @ffn_up(%x: tensor<2048x1024xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<2048x4096xf32> {
    %0 = kiln.fusion "matmul" -> tensor<2048x4096xf32> {
      %m = kiln.matmul %x, %w : tensor<2048x1024xbf16>, tensor<1024x4096xbf16> -> tensor<2048x4096xf32>
      kiln.yield %m : tensor<2048x4096xf32>
    }
    return %0 : tensor<2048x4096xf32>
  }
}

// -----

// A batched matmul (attention's scores): its M is not N's rows, its launch
// does not scale, so no buckets.
// CHECK-LABEL: func.func @batched(
// CHECK-NOT:     kiln.kernel_variants
// CHECK:         return
module attributes {kiln.dim_ranges = {N = array<i64: 1, 2048, 2048>}} {
  func.func @batched(%q: tensor<8x2048x64xbf16>, %k: tensor<8x64x2048xbf16>) -> tensor<8x2048x2048xf32> {
    %0 = kiln.fusion "matmul" -> tensor<8x2048x2048xf32> {
      %m = kiln.matmul %q, %k : tensor<8x2048x64xbf16>, tensor<8x64x2048xbf16> -> tensor<8x2048x2048xf32>
      kiln.yield %m : tensor<8x2048x2048xf32>
    }
    return %0 : tensor<8x2048x2048xf32>
  }
}
