// RUN: kiln-opt %s -split-input-file -kiln-match-contractions -verify-diagnostics
// RUN: not kiln-opt %s -split-input-file -kiln-match-contractions="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80

// kiln-match-contractions follows the `kiln.kernel` a region carries; a
// config the region's problem rules out is an error naming the config and
// the reason (no NVRTC is needed: the checks come before compilation).

// An FFMA config for a bf16 region would compute another precision.
func.func @simt_for_bf16(%x: tensor<64x32xbf16>, %w: tensor<32x16xbf16>) -> tensor<64x16xf32> {
  // expected-error @+1 {{kiln-match-contractions cannot follow kiln.kernel = #kiln.gemm_config<family = simt_f32, tile = 128x128x8, thread_tile = 8x8, stages = 3, split_k = 1, producer = cp_async, swizzle = padded>: simt_f32 does not compute this region's precision (mma_f16)}}
  %0 = kiln.fusion "matmul" -> tensor<64x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = simt_f32, tile = 128x128x8, thread_tile = 8x8, stages = 3>} {
    %m = kiln.matmul %x, %w : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
    kiln.yield %m : tensor<64x16xf32>
  }
  return %0 : tensor<64x16xf32>
}

// -----

// tf32 tensor cores for a matmul the precision policy keeps in fp32.
func.func @tf32_for_fp32(%x: tensor<8x64xf32>, %w: tensor<64x24xf32>) -> tensor<8x24xf32> {
  // expected-error @+1 {{mma_tf32 does not compute this region's precision (simt_f32)}}
  %0 = kiln.fusion "matmul" -> tensor<8x24xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3>} {
    %m = kiln.matmul %x, %w : tensor<8x64xf32>, tensor<64x24xf32> -> tensor<8x24xf32>
    kiln.yield %m : tensor<8x24xf32>
  }
  return %0 : tensor<8x24xf32>
}

// -----

// TMA needs 16-byte aligned rows: K = 20 bf16 is 40 bytes. On sm_80 the
// wgmma family itself is out.
// SM80: error: kiln-match-contractions cannot follow kiln.kernel = #kiln.gemm_config<family = wgmma_f16, {{.*}}>: wgmma_f16 needs sm_90, not sm_80
func.func @tma_unaligned(%x: tensor<64x20xbf16>, %w: tensor<20x64xbf16>) -> tensor<64x64xf32> {
  // expected-error @+1 {{TMA}}
  %0 = kiln.fusion "matmul" -> tensor<64x64xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, warp_tile = 64x64, stages = 4, producer = tma>} {
    %m = kiln.matmul %x, %w : tensor<64x20xbf16>, tensor<20x64xbf16> -> tensor<64x64xf32>
    kiln.yield %m : tensor<64x64xf32>
  }
  return %0 : tensor<64x64xf32>
}

// -----

// A depthwise kernel's vector must divide the channels: 8 does not divide 4.
ml_program.global private @wd(dense<0.25> : tensor<4x3x3x1xbf16>) : tensor<4x3x3x1xbf16>
func.func @depthwise_vector(%x: tensor<1x8x8x4xbf16>) -> tensor<1x8x8x4xf32> {
  %wd = ml_program.global_load_const @wd : tensor<4x3x3x1xbf16>
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>: a vector of 8 channels does not divide the 4 output channels}}
  %0 = kiln.fusion "conv" -> tensor<1x8x8x4xf32> attributes {kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>} {
    %c = kiln.conv %x, %wd {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 4 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x4xbf16>, tensor<4x3x3x1xbf16>) -> tensor<1x8x8x4xf32>
    kiln.yield %c : tensor<1x8x8x4xf32>
  }
  return %0 : tensor<1x8x8x4xf32>
}

// -----

// A GEMM config on a depthwise region (and the other way round) names
// another kernel.
ml_program.global private @wd(dense<0.25> : tensor<16x3x3x1xbf16>) : tensor<16x3x3x1xbf16>
func.func @wrong_kind(%x: tensor<1x8x8x16xbf16>) -> tensor<1x8x8x16xf32> {
  %wd = ml_program.global_load_const @wd : tensor<16x3x3x1xbf16>
  // expected-error @+1 {{the region's kiln.kernel is not a depthwise_config}}
  %0 = kiln.fusion "conv" -> tensor<1x8x8x16xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f16, tile = 64x64x32, warp_tile = 32x32, stages = 3>} {
    %c = kiln.conv %x, %wd {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 16 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x8x16xbf16>, tensor<16x3x3x1xbf16>) -> tensor<1x8x8x16xf32>
    kiln.yield %c : tensor<1x8x8x16xf32>
  }
  return %0 : tensor<1x8x8x16xf32>
}

// -----

// The FFMA attention kernel does not take bf16 inputs.
func.func @attention_family(%q: tensor<2x16x16xbf16>, %k: tensor<2x16x16xbf16>, %v: tensor<2x16x16xbf16>) -> tensor<2x16x16xf32> {
  // expected-error @+1 {{the attention kernel's simt_f32 family does not take 16-bit inputs}}
  %0 = kiln.fusion "attention" -> tensor<2x16x16xf32> attributes {kiln.kernel = #kiln.attention_config<family = simt_f32, tile = 16x32, warps = 4>} {
    %s = kiln.matmul %q, %k : tensor<2x16x16xbf16>, tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
    %p = kiln.softmax %s {axis = 2 : i64} : tensor<2x16x16xf32>
    %pb = kiln.cast %p : tensor<2x16x16xf32> -> tensor<2x16x16xbf16>
    %o = kiln.matmul %pb, %v : tensor<2x16x16xbf16>, tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
    kiln.yield %o : tensor<2x16x16xf32>
  }
  return %0 : tensor<2x16x16xf32>
}
