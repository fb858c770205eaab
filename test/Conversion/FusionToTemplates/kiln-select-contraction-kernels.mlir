// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true" | FileCheck %s --check-prefix=WGMMA
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true" | FileCheck %s --check-prefix=TMA
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=CHIP
// No NVRTC needed: selection compiles nothing. With the library hidden,
// the same decisions come out; with check-nvrtc (kilnc's setting) every
// region keeps its generic kernel and says why.
// RUN: env KILN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so kiln-opt %s -split-input-file -kiln-select-contraction-kernels | FileCheck %s
// RUN: env KILN_NVRTC_LIBRARY=/nonexistent/libnvrtc.so kiln-opt %s -split-input-file -kiln-select-contraction-kernels="check-nvrtc=true" | FileCheck %s --check-prefix=NONVRTC

// Each region gets its decision as typed attributes (`kiln.kernel`, a
// #kiln.gemm_config, #kiln.depthwise_config or #kiln.attention_config,
// and `kiln.kernel_origin`) or the reason it keeps a generic kernel; the
// region itself is left as it was.

// CHIP: error: kiln-select-contraction-kernels: chip 'sm_75' is not sm_80 or sm_90

// bf16 operands: mma.sync tensor cores (16-bit chunks XOR-swizzled), or
// with wgmma on sm_90 the warpgroup kernel (64-row blocks, K tiles of 64,
// the 128-byte swizzle); with tma too, these operands (rows of 64 and 32
// bytes, 16-byte aligned) are TMA-able. sm_80 keeps mma.sync.
// CHECK-LABEL: func.func @bf16_bias_relu(
// CHECK:         kiln.fusion "matmul" -> tensor<64x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16, tile = {{[0-9]+}}x{{[0-9]+}}x{{[0-9]+}}, warp_tile = {{[0-9]+}}x{{[0-9]+}}, stages = {{[0-9]}}, split_k = 1, producer = cp_async, swizzle = xor16>, kiln.kernel_origin = "heuristic"} {
// CHECK-NEXT:      kiln.matmul
// CHECK-NEXT:      kiln.add
// CHECK-NEXT:      kiln.relu
// WGMMA-LABEL: func.func @bf16_bias_relu(
// WGMMA:         kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x{{[0-9]+}}x64, warp_tile = 64x{{[0-9]+}}, stages = {{[0-9]}}, split_k = 1, producer = cp_async, swizzle = b128>
// TMA-LABEL:   func.func @bf16_bias_relu(
// TMA:           kiln.kernel = #kiln.gemm_config<family = wgmma_f16, {{.*}}, producer = tma, swizzle = b128>
// SM80-LABEL:  func.func @bf16_bias_relu(
// SM80:          kiln.kernel = #kiln.gemm_config<family = mma_f16,
// NONVRTC-LABEL: func.func @bf16_bias_relu(
// NONVRTC:       kiln.fusion "matmul" -> tensor<64x16xf32> attributes {kiln.generic_reason = "NVRTC not found (tried /nonexistent/libnvrtc.so){{.*}}"}
func.func @bf16_bias_relu(%x: tensor<64x32xbf16>, %w: tensor<32x16xbf16>, %b: tensor<16xf32>) -> tensor<64x16xf32> {
  %0 = kiln.fusion "matmul" -> tensor<64x16xf32> {
    %m = kiln.matmul %x, %w : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
    %a = kiln.add %m, %b : tensor<64x16xf32>, tensor<16xf32> -> tensor<64x16xf32>
    %r = kiln.relu %a : tensor<64x16xf32>
    kiln.yield %r : tensor<64x16xf32>
  }
  return %0 : tensor<64x16xf32>
}

// -----

// fp32 runs on the FFMA kernel (a thread tile, padded K-major tiles); a
// tf32-marked matmul on tf32 tensor cores; with wgmma on sm_90 the latter
// gets wgmma_tf32 (K tiles of 32), the former stays FFMA.
// CHECK-LABEL: func.func @fp32_and_tf32(
// CHECK:         kiln.kernel = #kiln.gemm_config<family = simt_f32, tile = {{.*}}, thread_tile = {{.*}}, swizzle = padded>
// CHECK:         kiln.kernel = #kiln.gemm_config<family = mma_tf32, {{.*}}, swizzle = xor16>
// WGMMA-LABEL: func.func @fp32_and_tf32(
// WGMMA:         kiln.kernel = #kiln.gemm_config<family = simt_f32,
// WGMMA:         kiln.kernel = #kiln.gemm_config<family = wgmma_tf32, tile = 64x{{[0-9]+}}x32,
func.func @fp32_and_tf32(%x: tensor<8x64xf32>, %w: tensor<64x24xf32>) -> (tensor<8x24xf32>, tensor<8x24xf32>) {
  %0 = kiln.fusion "matmul" -> tensor<8x24xf32> {
    %m = kiln.matmul %x, %w : tensor<8x64xf32>, tensor<64x24xf32> -> tensor<8x24xf32>
    kiln.yield %m : tensor<8x24xf32>
  }
  %1 = kiln.fusion "matmul" -> tensor<8x24xf32> {
    %r = kiln.cast %x : tensor<8x64xf32> -> tensor<8x64xtf32>
    %xr = kiln.cast %r : tensor<8x64xtf32> -> tensor<8x64xf32>
    %m = kiln.matmul %xr, %w {kiln.tf32} : tensor<8x64xf32>, tensor<64x24xf32> -> tensor<8x24xf32>
    kiln.yield %m : tensor<8x24xf32>
  }
  return %0, %1 : tensor<8x24xf32>, tensor<8x24xf32>
}

// -----

// tf32 with a row-major weight global: with wgmma the selection decides to
// store it K-major (kiln.weight_kmajor) but creates nothing: the global and
// its load are as they were (kiln-match-contractions makes @wt_kmajor).
// WGMMA:       ml_program.global private @wt(
// WGMMA-NOT:   @wt_kmajor
// WGMMA-LABEL: func.func @tf32_weight(
// WGMMA:         kiln.fusion "matmul" -> tensor<8x24xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_tf32, {{.*}}>, kiln.kernel_origin = "heuristic", kiln.weight_kmajor}
// CHECK-LABEL: func.func @tf32_weight(
// CHECK:         kiln.fusion "matmul" -> tensor<8x24xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_tf32, {{.*}}>, kiln.kernel_origin = "heuristic"} {
ml_program.global private @wt(dense<0.5> : tensor<1x64x24xf32>) : tensor<1x64x24xf32> {kiln.origin = "initializer f32 1x64x24 wt", kiln.tf32_rounded}
func.func @tf32_weight(%x: tensor<8x64xf32>) -> tensor<8x24xf32> {
  %w0 = ml_program.global_load_const @wt : tensor<1x64x24xf32>
  %0 = kiln.fusion "matmul" -> tensor<8x24xf32> {
    %w = kiln.reshape %w0 : tensor<1x64x24xf32> -> tensor<64x24xf32>
    %r = kiln.cast %x : tensor<8x64xf32> -> tensor<8x64xtf32>
    %xr = kiln.cast %r : tensor<8x64xtf32> -> tensor<8x64xf32>
    %m = kiln.matmul %xr, %w {kiln.tf32} : tensor<8x64xf32>, tensor<64x24xf32> -> tensor<8x24xf32>
    kiln.yield %m : tensor<8x24xf32>
  }
  return %0 : tensor<8x24xf32>
}

// -----

// A cast to bf16 inside the region produces A: the lowering will split it
// off, the selection only decides (no new region here).
// CHECK-LABEL: func.func @split_off_cast(
// CHECK-NOT:     kiln.fusion "elementwise"
// CHECK:         kiln.fusion "matmul" -> tensor<16x8xbf16> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16,
// CHECK-NEXT:      kiln.cast
func.func @split_off_cast(%x: tensor<16x32xf32>, %w: tensor<32x8xbf16>) -> tensor<16x8xbf16> {
  %0 = kiln.fusion "matmul" -> tensor<16x8xbf16> {
    %c = kiln.cast %x : tensor<16x32xf32> -> tensor<16x32xbf16>
    %m = kiln.matmul %c, %w : tensor<16x32xbf16>, tensor<32x8xbf16> -> tensor<16x8xf32>
    %y = kiln.cast %m : tensor<16x8xf32> -> tensor<16x8xbf16>
    kiln.yield %y : tensor<16x8xbf16>
  }
  return %0 : tensor<16x8xbf16>
}

// -----

// 8 x 16 outputs (one tile) over K = 2048: the output tiles do not fill
// two waves, so the heuristic splits K.
// CHECK-LABEL: func.func @split_k(
// CHECK:         kiln.kernel = #kiln.gemm_config<family = simt_f32, {{.*}}, split_k = {{[2-9]|1[0-6]}},
func.func @split_k(%x: tensor<8x2048xf32>, %w: tensor<2048x16xf32>) -> tensor<8x16xf32> {
  %0 = kiln.fusion "matmul" -> tensor<8x16xf32> {
    %m = kiln.matmul %x, %w : tensor<8x2048xf32>, tensor<2048x16xf32> -> tensor<8x16xf32>
    kiln.yield %m : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

// Matmuls side by side on one input (Q, K, V): one region per matmul, each
// with its own config.
// CHECK-LABEL: func.func @side_by_side(
// CHECK:         %[[A:.*]] = kiln.fusion "matmul" -> tensor<8x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = simt_f32,
// CHECK:         %[[B:.*]] = kiln.fusion "matmul" -> tensor<8x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = simt_f32,
// CHECK:         return %[[A]], %[[B]]
func.func @side_by_side(%x: tensor<8x32xf32>, %w1: tensor<32x16xf32>, %w2: tensor<32x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0:2 = kiln.fusion "matmul" -> tensor<8x16xf32>, tensor<8x16xf32> {
    %a = kiln.matmul %x, %w1 : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
    %b = kiln.matmul %x, %w2 : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
    kiln.yield %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
  }
  return %0#0, %0#1 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Regions the templates do not take keep their generic kernel and say why.
// CHECK-LABEL: func.func @kept_generic(
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32>, tensor<8x8xf32> attributes {kiln.generic_reason = "the region's result does not depend on its kiln.matmul"}
// CHECK:         kiln.fusion "matmul+softmax" -> tensor<8x8xf32> attributes {kiln.generic_reason = "the region has a kiln.softmax"}
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xi32> attributes {kiln.generic_reason = "kiln.cast has no epilogue form"}
func.func @kept_generic(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xi32>) {
  %0:2 = kiln.fusion "matmul" -> tensor<8x8xf32>, tensor<8x8xf32> {
    %m = kiln.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    %e = kiln.exp %x : tensor<8x8xf32>
    %a = kiln.add %m, %e : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    kiln.yield %a, %e : tensor<8x8xf32>, tensor<8x8xf32>
  }
  %1 = kiln.fusion "matmul+softmax" -> tensor<8x8xf32> {
    %m = kiln.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    %s = kiln.softmax %m {axis = 1 : i64} : tensor<8x8xf32>
    kiln.yield %s : tensor<8x8xf32>
  }
  %2 = kiln.fusion "matmul" -> tensor<8x8xi32> {
    %m = kiln.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    %s = kiln.cast %m : tensor<8x8xf32> -> tensor<8x8xi32>
    kiln.yield %s : tensor<8x8xi32>
  }
  return %0#1, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xi32>
}

// -----

// A config already in the IR stands (written by hand, as here, or by a
// tool): the selection does not replace it.
// CHECK-LABEL: func.func @given(
// CHECK:         kiln.fusion "matmul" -> tensor<64x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16, tile = 64x64x32, warp_tile = 32x32, stages = 2, split_k = 1, producer = cp_async, swizzle = xor16>} {
func.func @given(%x: tensor<64x32xbf16>, %w: tensor<32x16xbf16>) -> tensor<64x16xf32> {
  %0 = kiln.fusion "matmul" -> tensor<64x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16, tile = 64x64x32, warp_tile = 32x32, stages = 2>} {
    %m = kiln.matmul %x, %w : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
    kiln.yield %m : tensor<64x16xf32>
  }
  return %0 : tensor<64x16xf32>
}

// -----

// Convolutions: an NHWC bf16 conv is an implicit GEMM (mma_f16); a
// depthwise conv (one channel per group) the CUDA-core kernel, 8 channels
// a thread (16 bytes of bf16) and 2 pixels; NCHW and run-time filters keep
// generic kernels.
// CHECK-LABEL: func.func @convolutions(
// CHECK:         kiln.fusion "conv" -> tensor<1x8x8x32xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16,
// CHECK:         kiln.fusion "conv" -> tensor<1x8x8x16xf32> attributes {kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>}
// CHECK:         kiln.generic_reason = "an nchw convolution (the kernels read nhwc)"
// CHECK:         kiln.generic_reason = "depthwise: the filter is computed at run time"
// WGMMA-LABEL: func.func @convolutions(
// WGMMA:         kiln.kernel = #kiln.gemm_config<family = wgmma_f16, {{.*}}, producer = cp_async, swizzle = b128>
// The implicit GEMM gathers im2col rows: never TMA.
// TMA-LABEL:   func.func @convolutions(
// TMA:           kiln.kernel = #kiln.gemm_config<family = wgmma_f16, {{.*}}, producer = cp_async, swizzle = b128>
ml_program.global private @w3(dense<0.5> : tensor<32x3x3x16xbf16>) : tensor<32x3x3x16xbf16>
ml_program.global private @wd(dense<0.25> : tensor<16x3x3x1xbf16>) : tensor<16x3x3x1xbf16>
func.func @convolutions(%x: tensor<1x8x8x16xbf16>, %xn: tensor<1x8x6x6xf32>, %wn: tensor<8x8x3x3xf32>, %xf: tensor<1x8x8x16xf32>, %wf: tensor<16x3x3x1xf32>) -> (tensor<1x8x8x32xf32>, tensor<1x8x8x16xf32>, tensor<1x8x4x4xf32>, tensor<1x8x8x16xf32>) {
  %w = ml_program.global_load_const @w3 : tensor<32x3x3x16xbf16>
  %wd = ml_program.global_load_const @wd : tensor<16x3x3x1xbf16>
  %0 = kiln.fusion "conv" -> tensor<1x8x8x32xf32> {
    %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xbf16>, tensor<32x3x3x16xbf16>) -> tensor<1x8x8x32xf32>
    %r = kiln.relu %c : tensor<1x8x8x32xf32>
    kiln.yield %r : tensor<1x8x8x32xf32>
  }
  %1 = kiln.fusion "conv" -> tensor<1x8x8x16xf32> {
    %c = kiln.conv %x, %wd {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 16 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xbf16>, tensor<16x3x3x1xbf16>) -> tensor<1x8x8x16xf32>
    kiln.yield %c : tensor<1x8x8x16xf32>
  }
  %2 = kiln.fusion "conv" -> tensor<1x8x4x4xf32> {
    %c = kiln.conv %xn, %wn {dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x4x4xf32>
    kiln.yield %c : tensor<1x8x4x4xf32>
  }
  %3 = kiln.fusion "conv" -> tensor<1x8x8x16xf32> {
    %c = kiln.conv %xf, %wf {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 16 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xf32>, tensor<16x3x3x1xf32>) -> tensor<1x8x8x16xf32>
    kiln.yield %c : tensor<1x8x8x16xf32>
  }
  return %0, %1, %2, %3 : tensor<1x8x8x32xf32>, tensor<1x8x8x16xf32>, tensor<1x8x4x4xf32>, tensor<1x8x8x16xf32>
}

// -----

// Attention: bf16 heads of 16 get the flash-attention kernel, mma.sync
// (4 warps, 64x64 tiles), or with wgmma the sm_90a kernel (a producer and
// one consumer warpgroup for 16 queries: 8 warps).
// CHECK-LABEL: func.func @attention(
// CHECK:         kiln.fusion "attention" -> tensor<1x2x16x16xbf16> attributes {kiln.kernel = #kiln.attention_config<family = mma_f16, tile = 64x64, warps = 4>}
// WGMMA-LABEL: func.func @attention(
// WGMMA:         kiln.kernel = #kiln.attention_config<family = wgmma_f16, tile = 64x64, warps = 8, stages = {{[2-4]}}>
func.func @attention(%q: tensor<1x16x32xbf16>, %k: tensor<1x16x32xbf16>, %v: tensor<1x16x32xbf16>) -> tensor<1x2x16x16xbf16> {
  %c = kiln.constant dense<2.500000e-01> : tensor<f32>
  %0 = kiln.fusion "attention" -> tensor<1x2x16x16xbf16> {
    %qr = kiln.reshape %q : tensor<1x16x32xbf16> -> tensor<1x16x2x16xbf16>
    %qt = kiln.transpose %qr {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x16x2x16xbf16> -> tensor<1x2x16x16xbf16>
    %kr = kiln.reshape %k : tensor<1x16x32xbf16> -> tensor<1x16x2x16xbf16>
    %kt = kiln.transpose %kr {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x16x2x16xbf16> -> tensor<1x2x16x16xbf16>
    %vr = kiln.reshape %v : tensor<1x16x32xbf16> -> tensor<1x16x2x16xbf16>
    %vt = kiln.transpose %vr {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x16x2x16xbf16> -> tensor<1x2x16x16xbf16>
    %s = kiln.matmul %qt, %kt : tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16> -> tensor<1x2x16x16xf32>
    %m = kiln.mul %s, %c : tensor<1x2x16x16xf32>, tensor<f32> -> tensor<1x2x16x16xf32>
    %p = kiln.softmax %m {axis = 3 : i64} : tensor<1x2x16x16xf32>
    %pb = kiln.cast %p : tensor<1x2x16x16xf32> -> tensor<1x2x16x16xbf16>
    %o = kiln.matmul %pb, %vt : tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16> -> tensor<1x2x16x16xf32>
    %ob = kiln.cast %o : tensor<1x2x16x16xf32> -> tensor<1x2x16x16xbf16>
    kiln.yield %ob : tensor<1x2x16x16xbf16>
  }
  return %0 : tensor<1x2x16x16xbf16>
}

// -----

// A 16-bit head dimension of 8 fits no attention kernel: the selection
// splits the region into its scores (generic) and its P V matmul (a GEMM),
// the first part noting why.
// CHECK-LABEL: func.func @split_back(
// CHECK:         %[[P:.*]] = kiln.fusion "matmul+softmax" -> tensor<2x8x8xbf16> attributes {kiln.generic_reason = "the region has a kiln.softmax", kiln.selection_note = ["attention split (attention: a 16-bit head dimension that is not a multiple of 16) at {{.*}}"]}
// CHECK:         kiln.fusion "matmul" -> tensor<2x8x8xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16,
func.func @split_back(%q: tensor<2x8x8xbf16>, %kt: tensor<2x8x8xbf16>, %v: tensor<2x8x8xbf16>) -> tensor<2x8x8xf32> {
  %0 = kiln.fusion "attention" -> tensor<2x8x8xf32> {
    %s = kiln.matmul %q, %kt : tensor<2x8x8xbf16>, tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
    %p = kiln.softmax %s {axis = 2 : i64} : tensor<2x8x8xf32>
    %pb = kiln.cast %p : tensor<2x8x8xf32> -> tensor<2x8x8xbf16>
    %o = kiln.matmul %pb, %v : tensor<2x8x8xbf16>, tensor<2x8x8xbf16> -> tensor<2x8x8xf32>
    kiln.yield %o : tensor<2x8x8xf32>
  }
  return %0 : tensor<2x8x8xf32>
}

// -----

// A quantized_matmul region (kiln-fuse-quantized's QLinearMatMul chain):
// the int8 kernel, with mma.sync's tiles and a 64-element K tile. One whose
// chain the analysis does not take (here its requantize scale is no
// constant) keeps its generic kernel (the exact fallback) and says why.
ml_program.global private @qw(dense<1> : tensor<64x32xi8>) : tensor<64x32xi8>
// CHECK-LABEL: func.func @quantized(
// CHECK:         kiln.fusion "quantized_matmul" -> tensor<16x32xui8> attributes {kiln.kernel = #kiln.gemm_config<family = mma_s8, tile = {{[0-9]+}}x{{[0-9]+}}x64, warp_tile = {{[0-9]+}}x{{[0-9]+}}, stages = {{[0-9]}}, split_k = 1, producer = cp_async, swizzle = xor16>, kiln.kernel_origin = "heuristic"} {
// CHECK:         kiln.fusion "quantized_matmul" -> tensor<16x32xui8> attributes {kiln.generic_reason = "the requantize scale is not one constant (or one per channel)"} {
// On sm_90 with wgmma: the warpgroup int8 kernel, K tiles of 128.
// WGMMA-LABEL: func.func @quantized(
// WGMMA:         kiln.fusion "quantized_matmul" -> tensor<16x32xui8> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_s8, tile = {{64|128}}x{{64|128|256}}x128, warp_tile = 64x{{[0-9]+}}, stages = {{[0-9]}}, split_k = 1, producer = cp_async, swizzle = b128>, kiln.kernel_origin = "heuristic"} {
// SM80-LABEL: func.func @quantized(
// SM80:          kiln.fusion "quantized_matmul" -> tensor<16x32xui8> attributes {kiln.kernel = #kiln.gemm_config<family = mma_s8,
func.func @quantized(%x: tensor<16x64xui8>, %s: tensor<f64>) -> (tensor<16x32xui8>, tensor<16x32xui8>) {
  %w = ml_program.global_load_const @qw : tensor<64x32xi8>
  %0 = kiln.fusion "quantized_matmul" -> tensor<16x32xui8> {
    %a = kiln.cast %x : tensor<16x64xui8> -> tensor<16x64xi32>
    %za = kiln.constant dense<3> : tensor<i32>
    %a0 = kiln.sub %a, %za : tensor<16x64xi32>, tensor<i32> -> tensor<16x64xi32>
    %b = kiln.cast %w : tensor<64x32xi8> -> tensor<64x32xi32>
    %p = kiln.matmul %a0, %b : tensor<16x64xi32>, tensor<64x32xi32> -> tensor<16x32xi32>
    %f = kiln.cast %p : tensor<16x32xi32> -> tensor<16x32xf64>
    %m = kiln.constant dense<0.0039999997243285179> : tensor<f64>
    %y = kiln.mul %f, %m : tensor<16x32xf64>, tensor<f64> -> tensor<16x32xf64>
    %r = kiln.round %y : tensor<16x32xf64>
    %c = kiln.clip %r {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<16x32xf64>
    %q = kiln.cast %c : tensor<16x32xf64> -> tensor<16x32xui8>
    kiln.yield %q : tensor<16x32xui8>
  }
  %1 = kiln.fusion "quantized_matmul" -> tensor<16x32xui8> {
    %a = kiln.cast %x : tensor<16x64xui8> -> tensor<16x64xi32>
    %b = kiln.cast %w : tensor<64x32xi8> -> tensor<64x32xi32>
    %p = kiln.matmul %a, %b : tensor<16x64xi32>, tensor<64x32xi32> -> tensor<16x32xi32>
    %f = kiln.cast %p : tensor<16x32xi32> -> tensor<16x32xf64>
    %y = kiln.mul %f, %s : tensor<16x32xf64>, tensor<f64> -> tensor<16x32xf64>
    %r = kiln.round %y : tensor<16x32xf64>
    %c = kiln.clip %r {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<16x32xf64>
    %q = kiln.cast %c : tensor<16x32xf64> -> tensor<16x32xui8>
    kiln.yield %q : tensor<16x32xui8>
  }
  return %0, %1 : tensor<16x32xui8>, tensor<16x32xui8>
}
