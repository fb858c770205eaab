// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels -kiln-match-contractions -verify-diagnostics | FileCheck %s
// RUN: not kiln-opt %s -split-input-file -kiln-select-contraction-kernels="chip=sm_75" -kiln-match-contractions="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=CHIP
// The regions' configs come from kiln-select-contraction-kernels
// (kiln-select-contraction-kernels.mlir tests its choices); this file tests
// what the lowering makes of them. The selection's wgmma option (kilnc
// --wgmma sets it): sm_90a wgmma kernels for bf16/f16 on sm_90, mma.sync
// still on sm_80.
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true" -kiln-match-contractions | FileCheck %s --check-prefix=WGMMA
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true chip=sm_80" -kiln-match-contractions="chip=sm_80" | FileCheck %s --check-prefix=SM80
// WGMMA-LABEL: gpu.binary @kiln_gemm_0 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "{{.*}}.target sm_90a{{.*}}.entry kiln_gemm_0{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// WGMMA:       kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, warp_tile = 64x64
// With tma=true too (kilnc --tma), the first case's operands (rows of 64
// and 32 bytes) are TMA-able: the producer copies with cp.async.bulk.tensor
// and the call carries a tensor map per operand: A K-major (K by M, box 64
// by the tile's rows), B MN-major (N by K, box 64 x 64), 128B swizzle.
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true tma=true" -kiln-match-contractions | FileCheck %s --check-prefix=TMA
// TMA-LABEL: gpu.binary @kiln_gemm_0 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "{{.*}}.param .align 64 .b8 kiln_gemm_0_param_{{[0-9]+}}[128]{{.*}}cp.async.bulk.tensor.2d
// TMA:       kiln.kernel = #kiln.gemm_config<family = wgmma_f16, tile = 64x64x64, warp_tile = 64x64, stages = {{[0-9]}}, split_k = 1, producer = tma, swizzle = b128>
// TMA-SAME:  kiln.tensor_maps = [{box = array<i64: 64, 64>, dims = array<i64: 32, 64>, dtype = "bf16", l2_promotion = 2 : i32, name = "tensorMapA", oob_fill = 0 : i32, param = 0 : i32, strides = array<i64: 64>, swizzle = 3 : i32}, {box = array<i64: 64, 64>, dims = array<i64: 16, 32>, dtype = "bf16", l2_promotion = 2 : i32, name = "tensorMapB", oob_fill = 0 : i32, param = 1 : i32, strides = array<i64: 32>, swizzle = 3 : i32}]
// SM80-LABEL: gpu.binary @kiln_gemm_0
// SM80-NOT:   wgmma
// SM80:       kiln.kernel = #kiln.gemm_config<family = mma_f16
// REQUIRES: nvrtc

// CHIP: error: kiln-select-contraction-kernels: chip 'sm_75' is not sm_80 or sm_90

// A bf16 matmul with its bias and relu: one tensor-core kernel in a
// gpu.binary (NVRTC's PTX), called with the operands where they lie; the
// template's parameters are A, B, C, then the bias (pointer_order), then
// M and the batch strides.
// CHECK-LABEL: gpu.binary @kiln_gemm_0 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "{{.*}}.entry kiln_gemm_0{{.*}}mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-LABEL: func.func @bf16_bias_relu(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<64x32xbf16>, %[[W:[^:]*]]: tensor<32x16xbf16>, %[[B:[^:]*]]: tensor<16xf32>)
// CHECK-NOT:     kiln.fusion
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<64x16xf32>
// CHECK:         %[[Y:.*]] = kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%[[X]], %[[W]], %[[B]] : tensor<64x32xbf16>, tensor<32x16xbf16>, tensor<16xf32>) outs(%[[E]] : tensor<64x16xf32>)
// CHECK-SAME:      scalars [64 : i32, 0, 1024]
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = mma_f16
// CHECK-SAME:      pointer_order = array<i32: 0, 1, 3, 2>
// CHECK:         return %[[Y]]
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

// fp32 without tf32 runs on the FFMA kernel; a tf32-marked matmul on tf32
// tensor cores, which round the operands themselves: the rounding pair is
// peeled off and the kernel reads %x.
// CHECK-LABEL: func.func @fp32_and_tf32(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x64xf32>, %[[W:[^:]*]]: tensor<64x24xf32>)
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%[[X]], %[[W]] :
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = simt_f32
// CHECK:         kiln.call_kernel @kiln_gemm_1::@kiln_gemm_1 ins(%[[X]], %[[W]] :
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = mma_tf32
// With wgmma on sm_90 the tf32 matmul gets the wgmma_tf32 kernel (k8,
// both operands K-major: the row-major weight is transposed as it is
// staged); sm_80 keeps mma.sync.
// WGMMA:       gpu.binary @kiln_gemm_1 {{.*}}wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k8.f32.tf32.tf32
// WGMMA:       kiln.kernel = #kiln.gemm_config<family = simt_f32
// WGMMA:       kiln.kernel = #kiln.gemm_config<family = wgmma_tf32, tile = 64x{{[0-9]+}}x32
// SM80:        kiln.kernel = #kiln.gemm_config<family = mma_tf32
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

// tf32 with a row-major weight global (its compile-time tf32 rounding
// already done): with wgmma the weight is stored transposed, [N][K], in a
// new global whose origin adds the transpose (after a reshape: the
// initializer was [1, 64, 24]), so the kernel reads a K-major B with
// cp.async; the old global goes. Without wgmma nothing changes.
// WGMMA-NOT:   ml_program.global private @wt(
// WGMMA:       ml_program.global private @wt_kmajor(dense_resource<wt_kmajor> : tensor<24x64xf32>) : tensor<24x64xf32> {kiln.origin = "initializer f32 1x64x24 wt\0Areshape 64,24\0Atranspose 1,0", kiln.tf32_rounded}
// WGMMA-NOT:   ml_program.global private @wt(
// WGMMA-LABEL: func.func @tf32_weight(
// WGMMA:         %[[WT:.*]] = ml_program.global_load_const @wt_kmajor : tensor<24x64xf32>
// WGMMA:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%{{.*}}, %[[WT]] :
// WGMMA-SAME:      kiln.kernel = #kiln.gemm_config<family = wgmma_tf32
// CHECK-LABEL: func.func @tf32_weight(
// CHECK:         %[[W0:.*]] = ml_program.global_load_const @wt : tensor<1x64x24xf32>
// CHECK:         kiln.call_kernel {{.*}} ins(%{{.*}}, %[[W0]] :
// CHECK-SAME:      kiln.kernel = #kiln.gemm_config<family = mma_tf32
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

// Activations [2, 17, 48] times weights [48, 80]: the batch becomes rows of
// one GEMM (M = 34, no batch strides); the reshape and the transpose of the
// last two dimensions of a region input cost nothing (the kernel reads %x
// and %wt, the latter column-major); the residual is read at its broadcast
// index.
// CHECK-LABEL: func.func @folded_batch(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<34x48xf32>, %[[WT:[^:]*]]: tensor<80x48xf32>, %[[R:[^:]*]]: tensor<17x80xf32>)
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%[[X]], %[[WT]], %[[R]] :
// CHECK-SAME:      scalars [34 : i32, 0, 0]
func.func @folded_batch(%x: tensor<34x48xf32>, %wt: tensor<80x48xf32>, %res: tensor<17x80xf32>) -> tensor<2x17x80xf32> {
  %0 = kiln.fusion "matmul" -> tensor<2x17x80xf32> {
    %a = kiln.reshape %x : tensor<34x48xf32> -> tensor<2x17x48xf32>
    %w = kiln.transpose %wt {permutation = array<i64: 1, 0>} : tensor<80x48xf32> -> tensor<48x80xf32>
    %m = kiln.matmul %a, %w : tensor<2x17x48xf32>, tensor<48x80xf32> -> tensor<2x17x80xf32>
    %s = kiln.add %m, %res : tensor<2x17x80xf32>, tensor<17x80xf32> -> tensor<2x17x80xf32>
    kiln.yield %s : tensor<2x17x80xf32>
  }
  return %0 : tensor<2x17x80xf32>
}

// -----

// A cast to bf16 inside the region produces the kernel's A: it is split off
// into a region of its own (the kernel reads bf16 from memory), and the
// final cast to bf16 is the kernel's store.
// CHECK-LABEL: func.func @split_off_cast(
// CHECK:         %[[A:.*]] = kiln.fusion "elementwise" -> tensor<16x32xbf16> {
// CHECK-NEXT:      %[[C:.*]] = kiln.cast %arg0 : tensor<16x32xf32> -> tensor<16x32xbf16>
// CHECK-NEXT:      kiln.yield %[[C]]
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%[[A]], %arg1 : tensor<16x32xbf16>, tensor<32x8xbf16>) outs(%{{.*}} : tensor<16x8xbf16>)
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

// Small M x N with a long K: split-K, a main kernel writing fp32 partials to
// a workspace and a reduction kernel applying the epilogue.
// CHECK-LABEL: func.func @split_k(
// CHECK:         %[[WS:.*]] = tensor.empty() : tensor<{{[0-9]+}}xf32>
// CHECK:         %[[P:.*]] = kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%arg0, %arg1 : {{.*}}) outs(%[[WS]] :
// CHECK:         kiln.call_kernel @kiln_gemm_0_reduce::@kiln_gemm_0_reduce ins(%[[P]] :
func.func @split_k(%x: tensor<8x2048xf32>, %w: tensor<2048x16xf32>) -> tensor<8x16xf32> {
  %0 = kiln.fusion "matmul" -> tensor<8x16xf32> {
    %m = kiln.matmul %x, %w : tensor<8x2048xf32>, tensor<2048x16xf32> -> tensor<8x16xf32>
    kiln.yield %m : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// -----

// Regions the templates do not take keep their generic kernel and say why:
// results that are not computed from one another (a matmul and a value that
// does not depend on it), attention scores with their softmax, and an op
// with no epilogue form.
// CHECK-LABEL: func.func @kept_generic(
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32>, tensor<8x8xf32> attributes {kiln.generic_reason = "the region's result does not depend on its kiln.matmul"}
// CHECK:         kiln.fusion "matmul+softmax" -> tensor<8x8xf32> attributes {kiln.generic_reason = "the region has a kiln.softmax"}
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32> attributes {kiln.generic_reason = "kiln.sin has no epilogue form"}
// CHECK-NOT:     kiln.call_kernel
func.func @kept_generic(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
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
  %2 = kiln.fusion "matmul" -> tensor<8x8xf32> {
    %m = kiln.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    %s = kiln.sin %m : tensor<8x8xf32>
    kiln.yield %s : tensor<8x8xf32>
  }
  return %0#1, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Two results, one computed from the other (a matmul's value and its relu):
// one kernel stores both, the matmul's value as C and the relu as its
// second output, so no region after it re-reads C.
// CHECK-LABEL: func.func @two_results(
// CHECK:         %[[Y:.*]]:2 = kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%arg0, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK-NOT:     kiln.fusion
// CHECK:         return %[[Y]]#0, %[[Y]]#1
func.func @two_results(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0:2 = kiln.fusion "matmul" -> tensor<8x8xf32>, tensor<8x8xf32> {
    %m = kiln.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    %r = kiln.relu %m : tensor<8x8xf32>
    kiln.yield %m, %r : tensor<8x8xf32>, tensor<8x8xf32>
  }
  return %0#0, %0#1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A lossless widening cast of a region input (a bf16 skip connection that
// the residual add reads in f32) is read in the epilogue as the bf16 input
// itself: no kernel before this one writes an f32 copy.
// CHECK-LABEL: func.func @widened_input(
// CHECK-NOT:     kiln.fusion
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%arg0, %arg1, %arg2 : tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>)
// CHECK-NOT:     kiln.fusion
func.func @widened_input(%x: tensor<8x8xbf16>, %w: tensor<8x8xbf16>, %skip: tensor<8x8xbf16>) -> tensor<8x8xf32> {
  %0 = kiln.fusion "matmul" -> tensor<8x8xf32> {
    %s = kiln.cast %skip : tensor<8x8xbf16> -> tensor<8x8xf32>
    %m = kiln.matmul %x, %w : tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<8x8xf32>
    %a = kiln.add %m, %s : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    kiln.yield %a : tensor<8x8xf32>
  }
  return %0 : tensor<8x8xf32>
}
