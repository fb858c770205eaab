// RUN: kiln-opt %s -split-input-file -kiln-lower-kernel-calls -verify-diagnostics | FileCheck %s
// The tensor form through bufferization first, as the GPU phase runs it.
// RUN: kiln-opt %S/Inputs/kernel-call-on-tensors.mlir -pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, buffer-results-to-out-params{modify-public-functions hoist-static-allocs add-result-attr}, kiln-lower-kernel-calls)' | FileCheck %S/Inputs/kernel-call-on-tensors.mlir

// A call on memrefs becomes a launch of the binary's entry: inputs, outputs,
// then the scalars in their own types; the module becomes a container.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK:         func.func @memrefs(%[[X:.*]]: memref<256xf32>, %[[Y:.*]]: memref<256xf32>)
// CHECK-DAG:       %[[N:.*]] = arith.constant 256 : i32
// CHECK-DAG:       %[[S:.*]] = arith.constant 7 : i64
// CHECK-DAG:       %[[SMEM:.*]] = arith.constant 1024 : i32
// CHECK-DAG:       %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:       %[[C128:.*]] = arith.constant 128 : index
// CHECK:           gpu.launch_func @scale::@scale blocks in (%[[C2]], %{{.*}}, %{{.*}}) threads in (%[[C128]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[SMEM]] args(%[[X]] : memref<256xf32>, %[[Y]] : memref<256xf32>, %[[N]] : i32, %[[S]] : i64)
// CHECK-NOT:       kiln.call_kernel
gpu.binary @scale [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @memrefs(%x: memref<256xf32>, %y: memref<256xf32>) {
  kiln.call_kernel @scale::@scale ins(%x : memref<256xf32>) outs(%y : memref<256xf32>) grid [2, 1, 1] block [128, 1, 1] scalars [256 : i32, 7 : i64] {dynamic_shared_bytes = 1024 : i32}
  return
}

// -----

// pointer_order puts the output between the inputs, as the templates'
// parameter lists have it.
// CHECK-LABEL: func.func @pointer_order(
// CHECK-SAME:      %[[A:[^:]*]]: memref<8xf32>, %[[B:[^:]*]]: memref<8xf32>, %[[C:[^:]*]]: memref<8xf32>, %[[BIAS:[^:]*]]: memref<8xf32>)
// CHECK:           gpu.launch_func @gemm::@gemm {{.*}} args(%[[A]] : memref<8xf32>, %[[B]] : memref<8xf32>, %[[C]] : memref<8xf32>, %[[BIAS]] : memref<8xf32>)
gpu.binary @gemm [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @pointer_order(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %bias: memref<8xf32>) {
  kiln.call_kernel @gemm::@gemm ins(%a, %b, %bias : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%c : memref<8xf32>) grid [1, 1, 1] block [1, 1, 1] {pointer_order = array<i32: 0, 1, 3, 2>}
  return
}

// -----

// The TMA producer's tensor maps (kiln.tensor_maps, parameters after the
// scalars that the artifact builder records) travel to the launch.
// CHECK-LABEL: func.func @tensor_maps(
// CHECK:           gpu.launch_func @tma::@tma
// CHECK-SAME:      kiln.tensor_maps = [{box = array<i64: 64, 64>, dims = array<i64: 8, 8>, dtype = "bf16", l2_promotion = 2 : i32, name = "tensorMapA", oob_fill = 0 : i32, param = 0 : i32, strides = array<i64: 16>, swizzle = 3 : i32}]
gpu.binary @tma [#gpu.object<#nvvm.target<chip = "sm_90a">, assembly = "PTX">]
func.func @tensor_maps(%a: memref<64xbf16>, %c: memref<64xf32>) {
  kiln.call_kernel @tma::@tma ins(%a : memref<64xbf16>) outs(%c : memref<64xf32>) grid [1, 1, 1] block [384, 1, 1] {kiln.tensor_maps = [{param = 0 : i32, dtype = "bf16", dims = array<i64: 8, 8>, strides = array<i64: 16>, box = array<i64: 64, 64>, swizzle = 3 : i32, l2_promotion = 2 : i32, oob_fill = 0 : i32, name = "tensorMapA"}]}
  return
}

// -----

// Split-K template GEMMs (split_k above 1) take the per-tile semaphores
// after their pointers: one mutable, zero-initialised global shared by
// every split-K launch, sized for the largest grid (grid x * y * z /
// split_k: 2 * 3 * 8 / 4 = 12 here, 4 for the second); a GEMM without
// split-K and any other kernel take none.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK:         memref.global "private" @kiln_split_k_semaphores : memref<12xi32> = dense<0>
// CHECK-NOT:     memref.global
// CHECK-LABEL: func.func @split_k(
// CHECK-SAME:      %[[A:[^:]*]]: memref<8xf32>, %[[B:[^:]*]]: memref<8xf32>, %[[C:[^:]*]]: memref<8xf32>, %[[W:[^:]*]]: memref<8xf32>)
// CHECK:           %[[S1:.*]] = memref.get_global @kiln_split_k_semaphores : memref<12xi32>
// CHECK:           gpu.launch_func @big::@big {{.*}} args(%[[A]] : memref<8xf32>, %[[B]] : memref<8xf32>, %[[C]] : memref<8xf32>, %[[W]] : memref<8xf32>, %[[S1]] : memref<12xi32>, %{{.*}} : i32)
// CHECK:           %[[S2:.*]] = memref.get_global @kiln_split_k_semaphores : memref<12xi32>
// CHECK:           gpu.launch_func @small::@small {{.*}} args(%[[A]] : memref<8xf32>, %[[B]] : memref<8xf32>, %[[C]] : memref<8xf32>, %[[W]] : memref<8xf32>, %[[S2]] : memref<12xi32>)
// CHECK:           gpu.launch_func @whole::@whole {{.*}} args(%[[A]] : memref<8xf32>, %[[B]] : memref<8xf32>, %[[C]] : memref<8xf32>)
gpu.binary @big [#gpu.object<#nvvm.target<chip = "sm_80">, assembly = "PTX">]
gpu.binary @small [#gpu.object<#nvvm.target<chip = "sm_80">, assembly = "PTX">]
gpu.binary @whole [#gpu.object<#nvvm.target<chip = "sm_80">, assembly = "PTX">]
func.func @split_k(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %w: memref<8xf32>) {
  kiln.call_kernel @big::@big ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%c, %w : memref<8xf32>, memref<8xf32>) grid [2, 3, 8] block [128, 1, 1] scalars [8 : i32] {kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3, split_k = 4, producer = cp_async, swizzle = xor16>}
  kiln.call_kernel @small::@small ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%c, %w : memref<8xf32>, memref<8xf32>) grid [1, 2, 4] block [128, 1, 1] {kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3, split_k = 2, producer = cp_async, swizzle = xor16>}
  kiln.call_kernel @whole::@whole ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%c : memref<8xf32>) grid [4, 4, 1] block [128, 1, 1] {kiln.kernel = #kiln.gemm_config<family = mma_tf32, tile = 64x64x32, warp_tile = 32x32, stages = 3, split_k = 1, producer = cp_async, swizzle = xor16>}
  return
}

// -----

// A call left on tensors cannot be launched (only reached without
// bufferization: the first RUN line).
gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @unbufferized(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{must be bufferized before it is launched}}
  %y = kiln.call_kernel @k::@k ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) grid [1, 1, 1] block [4, 1, 1] -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Launch scaling: kiln-map-to-gpu's kiln.grid_scale on a call travels to
// its launch, where the artifact builder records it (launch-scales).
// CHECK-LABEL: func.func @grid_scale(
// CHECK:           gpu.launch_func @scaled::@scaled
// CHECK-SAME:      kiln.grid_scale = #kiln.grid_scale<symbol = "N", dim = 0, numerator = 16, denominator = 64>
gpu.binary @scaled [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @grid_scale(%x: memref<256xf32>, %y: memref<256xf32>) {
  kiln.call_kernel @scaled::@scaled ins(%x : memref<256xf32>) outs(%y : memref<256xf32>) grid [4, 1, 1] block [128, 1, 1] {kiln.grid_scale = #kiln.grid_scale<symbol = "N", dim = 0, numerator = 16, denominator = 64>}
  return
}
