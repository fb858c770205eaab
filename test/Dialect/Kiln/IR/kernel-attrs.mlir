// RUN: kiln-opt %s -split-input-file | kiln-opt -split-input-file | FileCheck %s

// The kernel configurations (KilnKernelAttrs.td) round-trip through their
// printed form; kernel-attrs-invalid.mlir has their verifier errors.

// A wgmma tile with the TMA producer; the swizzle follows the family when
// it is not written.
// CHECK-LABEL: func.func @gemm_wgmma
// CHECK: kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 128x256x64, warp_tile = 64x256, stages = 4, split_k = 1, producer = tma, swizzle = b128>
func.func @gemm_wgmma(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.fusion "matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 128x256x64, warp_tile = 64x256, stages = 4, split_k = 1, producer = tma>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// The FFMA family has a thread tile; fields may come in any order and
// split_k and producer have defaults.
// CHECK-LABEL: func.func @gemm_simt
// CHECK: kiln.kernel = #kiln.gemm_config<family = simt_f32, tile = 128x128x8, thread_tile = 8x8, stages = 3, split_k = 1, producer = cp_async, swizzle = padded>
// CHECK: kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3, split_k = 4, producer = cp_async, swizzle = xor16>
func.func @gemm_simt(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.fusion "matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<stages = 3, thread_tile = 8x8, tile = 128x128x8, family = simt_f32>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  %1 = kiln.fusion "matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3, split_k = 4, swizzle = xor16>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// The fp8 families (a quantized_matmul region of float8 operands): mma_f8
// with mma.sync's swizzle, wgmma_f8 with K tiles of 128 (one 128-byte row)
// and the descriptors' swizzle.
// CHECK-LABEL: func.func @gemm_fp8
// CHECK: kiln.kernel = #kiln.gemm_config<family = mma_f8, tile = 64x64x64, warp_tile = 32x32, stages = 3, split_k = 2, producer = cp_async, swizzle = xor16>
// CHECK: kiln.kernel = #kiln.gemm_config<family = wgmma_f8, tile = 128x128x128, warp_tile = 64x128, stages = 4, split_k = 1, producer = cp_async, swizzle = b128>
func.func @gemm_fp8(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.fusion "quantized_matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_f8, tile = 64x64x64, warp_tile = 32x32, stages = 3, split_k = 2>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  %1 = kiln.fusion "quantized_matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_f8, tile = 128x128x128, warp_tile = 64x128, stages = 4>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// The int8 families (quantized_matmul regions): mma_s8 with mma.sync's
// swizzle, wgmma_s8 with K tiles of 128 and the descriptors' swizzle.
// CHECK-LABEL: func.func @gemm_int8
// CHECK: kiln.kernel = #kiln.gemm_config<family = mma_s8, tile = 64x64x64, warp_tile = 32x32, stages = 4, split_k = 1, producer = cp_async, swizzle = xor16>
// CHECK: kiln.kernel = #kiln.gemm_config<family = wgmma_s8, tile = 64x256x128, warp_tile = 64x256, stages = 3, split_k = 1, producer = cp_async, swizzle = b128>
func.func @gemm_int8(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.fusion "quantized_matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = mma_s8, tile = 64x64x64, warp_tile = 32x32, stages = 4>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  %1 = kiln.fusion "quantized_matmul" -> tensor<4xf32> attributes {kiln.kernel = #kiln.gemm_config<family = wgmma_s8, tile = 64x256x128, warp_tile = 64x256, stages = 3>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Depthwise and attention kernels; stages print for wgmma attention only.
// CHECK-LABEL: func.func @depthwise_attention
// CHECK: kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>
// CHECK: kiln.kernel = #kiln.attention_config<family = wgmma_f16, tile = 128x64, warps = 12, stages = 4>
// CHECK: kiln.kernel = #kiln.attention_config<family = simt_f32, tile = 16x32, warps = 4>
func.func @depthwise_attention(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = kiln.fusion "conv" -> tensor<4xf32> attributes {kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  %1 = kiln.fusion "attention" -> tensor<4xf32> attributes {kiln.kernel = #kiln.attention_config<family = wgmma_f16, tile = 128x64, warps = 12, stages = 4>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  %2 = kiln.fusion "attention" -> tensor<4xf32> attributes {kiln.kernel = #kiln.attention_config<family = simt_f32, tile = 16x32, warps = 4>} {
    %r = kiln.relu %x : tensor<4xf32>
    kiln.yield %r : tensor<4xf32>
  }
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Every generic strategy with its parameters.
// CHECK-LABEL: func.func @generic
// CHECK-SAME: a0 = #kiln.generic_kernel<thread_per_output, block = 256>
// CHECK-SAME: a1 = #kiln.generic_kernel<vectorized, vector_width = 4, block = 256>
// CHECK-SAME: a2 = #kiln.generic_kernel<block_reduction, threads = 128>
// CHECK-SAME: a3 = #kiln.generic_kernel<block_rows, threads = 256>
// CHECK-SAME: a4 = #kiln.generic_kernel<strip_rows, threads = 32, rows_per_block = 8>
// CHECK-SAME: a5 = #kiln.generic_kernel<column_reduction, splits = 1>
// CHECK-SAME: a6 = #kiln.generic_kernel<whole_reduction, splits = 16>
// CHECK-SAME: a7 = #kiln.generic_kernel<tiled_transpose, tile = 32>
func.func @generic() attributes {
    a0 = #kiln.generic_kernel<thread_per_output, block = 256>,
    a1 = #kiln.generic_kernel<vectorized, block = 256, vector_width = 4>,
    a2 = #kiln.generic_kernel<block_reduction, threads = 128>,
    a3 = #kiln.generic_kernel<block_rows, threads = 256>,
    a4 = #kiln.generic_kernel<strip_rows, threads = 32, rows_per_block = 8>,
    a5 = #kiln.generic_kernel<column_reduction, splits = 1>,
    a6 = #kiln.generic_kernel<whole_reduction, splits = 16>,
    a7 = #kiln.generic_kernel<tiled_transpose, tile = 32>} {
  return
}

// -----

// Launch scaling (issue 24): a GEMM template call's rows, a launch's grid
// scale, and a function's list of them in launch order ({} keeps a
// launch's compiled grid).
// CHECK-LABEL: func.func @launch_scaling
// CHECK-SAME: kiln.grid_rows = #kiln.grid_rows<rows = 12544, tile = 128, a = 0>
// CHECK-SAME: kiln.grid_scale = #kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>
// CHECK-SAME: kiln.launch_grid_scales = [{}, #kiln.grid_scale<symbol = "batch", dim = 1, numerator = 3, denominator = 7>]
func.func @launch_scaling() attributes {
    kiln.grid_rows = #kiln.grid_rows<rows = 12544, tile = 128, a = 0>,
    kiln.grid_scale = #kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>,
    kiln.launch_grid_scales = [{}, #kiln.grid_scale<symbol = "batch", dim = 1, numerator = 3, denominator = 7>]} {
  return
}

// -----

// Size buckets: a region's configs for the smaller buckets and a launch's
// guard round-trip.
// CHECK-LABEL: func.func @size_buckets
// CHECK-SAME: kiln.kernel_variants = [{kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, warp_tile = 64x64, stages = 8, split_k = 2, producer = tma, swizzle = b128>, max = 64 : i64, min = 1 : i64}]
// CHECK-SAME: kiln.size_guard = #kiln.size_guard<symbol = "N", min = 65, max = 2048>
func.func @size_buckets() attributes {
    kiln.kernel_variants = [{kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, warp_tile = 64x64, stages = 8, split_k = 2, producer = tma, swizzle = b128>, max = 64 : i64, min = 1 : i64}],
    kiln.size_guard = #kiln.size_guard<symbol = "N", min = 65, max = 2048>} {
  return
}
