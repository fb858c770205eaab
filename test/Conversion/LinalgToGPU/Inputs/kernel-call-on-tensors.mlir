// Input of kiln-lower-kernel-calls.mlir's second RUN line (bufferized first).

// On tensors, bufferization writes the kernel's output straight into the
// function's out-parameter (the init is never read, so nothing is copied).
// CHECK-LABEL: func.func @tensors(
// CHECK-SAME:      %[[X:.*]]: memref<64x32xbf16>, %[[W:.*]]: memref<32x16xbf16>, %[[OUT:.*]]: memref<64x16xf32> {bufferize.result})
// CHECK-NOT:     memref.copy
// CHECK:         gpu.launch_func @gemm::@gemm {{.*}} args(%[[X]] : memref<64x32xbf16>, %[[W]] : memref<32x16xbf16>, %[[OUT]] : memref<64x16xf32>, %{{.*}} : i32)
// CHECK-NOT:     memref.copy
gpu.binary @gemm [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "PTX">]
func.func @tensors(%x: tensor<64x32xbf16>, %w: tensor<32x16xbf16>) -> tensor<64x16xf32> {
  %e = tensor.empty() : tensor<64x16xf32>
  %y = kiln.call_kernel @gemm::@gemm ins(%x, %w : tensor<64x32xbf16>, tensor<32x16xbf16>) outs(%e : tensor<64x16xf32>) grid [1, 1, 1] block [128, 1, 1] scalars [64 : i32] -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}

