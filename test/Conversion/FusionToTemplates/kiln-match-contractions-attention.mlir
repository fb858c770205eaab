// kiln-match-contractions on "attention" regions (kiln-fuse's rule 5): one
// fused flash-attention kernel per region, operands read where they lie.
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels -kiln-match-contractions | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true" -kiln-match-contractions | FileCheck %s --check-prefix=WG
// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels="wgmma=true chip=sm_80" -kiln-match-contractions="chip=sm_80" | FileCheck %s --check-prefix=SM80
// REQUIRES: nvrtc

// bf16 heads split from [1, 16, 2, 16] projections: the kernel reads Q, K
// and V in place (strides from the reshapes and transposes), runs both
// products on mma.sync and writes the packed [1, 2, 16, 16] output; the
// report names the kernel and the problem.
// CHECK: module attributes {kiln.contraction_report = ["kiln_attn_0: attn_mma_f16 64x64 w4 d16, batch=1 heads=2 Sq=16 Sk=16 Dv=16"]}
// CHECK-LABEL: gpu.binary @kiln_attn_0 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "{{.*}}.entry kiln_attn_0{{.*}}mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-LABEL: func.func @bf16_heads(
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<1x16x32xbf16>, %[[K:[^:]*]]: tensor<1x16x32xbf16>, %[[V:[^:]*]]: tensor<1x16x32xbf16>)
// CHECK-NOT:     kiln.fusion
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x2x16x16xbf16>
// CHECK:         %[[Y:.*]] = kiln.call_kernel @kiln_attn_0::@kiln_attn_0 ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) outs(%[[E]] : tensor<1x2x16x16xbf16>) grid [1, 2, 1] block [128, 1, 1]
// CHECK-SAME:      kiln.kernel = #kiln.attention_config<family = mma_f16, tile = 64x64, warps = 4>
// CHECK:         return %[[Y]]
// With wgmma=true on sm_90 the same region runs the sm_90a wgmma kernel: a
// producer warpgroup and one consumer (64 query rows, 16 of them valid), S through
// m64n64k16 and P V through m64n64k16 with P in registers (the 16-wide
// heads padded to a 64-column swizzle block); on sm_80 it stays on mma.sync.
// WG: module attributes {kiln.contraction_report = ["kiln_attn_0: attn_wgmma_f16 64x64 w8 s4 d16, batch=1 heads=2 Sq=16 Sk=16 Dv=16"]}
// WG-LABEL: gpu.binary @kiln_attn_0 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "{{.*}}.target sm_90a{{.*}}.entry kiln_attn_0{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// WG:         kiln.call_kernel @kiln_attn_0::@kiln_attn_0 ins({{.*}}) grid [1, 2, 1] block [256, 1, 1] {dynamic_shared_bytes = {{[0-9]+}}
// WG-SAME:      kiln.kernel = #kiln.attention_config<family = wgmma_f16, tile = 64x64, warps = 8, stages = 4>
// SM80: kiln.contraction_report = ["kiln_attn_0: attn_mma_f16 64x64 w4 d16,
func.func @bf16_heads(%q: tensor<1x16x32xbf16>, %k: tensor<1x16x32xbf16>, %v: tensor<1x16x32xbf16>) -> tensor<1x2x16x16xbf16> {
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

// fp32 with a causal select on a constant lower triangle: the FFMA kernel,
// which skips key tiles past the diagonal ("causal"); the padding mask is
// read through one more pointer. K given as Kt (its head dimension not
// contiguous) is first copied by a region of its own, transposed back.
// CHECK-LABEL: func.func @fp32_causal_padding(
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<3x20x32xf32>, %[[KT:[^:]*]]: tensor<3x32x20xf32>, %[[V:[^:]*]]: tensor<3x20x32xf32>, %[[M:[^:]*]]: tensor<3x1x20xf32>)
// CHECK:         %[[K:.*]] = kiln.fusion "elementwise" -> tensor<3x20x32xf32> {
// CHECK-NEXT:      kiln.transpose %[[KT]] {permutation = array<i64: 0, 2, 1>}
// CHECK:         kiln.call_kernel @kiln_attn_0::@kiln_attn_0 ins(%[[Q]], %[[K]], %[[V]], %[[M]] :
// CHECK-SAME:      grid [2, 3, 1] block [128, 1, 1]
// CHECK-SAME:      kiln.kernel = #kiln.attention_config<family = simt_f32, tile = 16x32, warps = 4>
func.func @fp32_causal_padding(%q: tensor<3x20x32xf32>, %kt: tensor<3x32x20xf32>, %v: tensor<3x20x32xf32>, %mask: tensor<3x1x20xf32>) -> tensor<3x20x32xf32> {
  %ninf = kiln.constant dense<0xFF800000> : tensor<f32>
  %causal = kiln.constant dense<[[true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false],[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true]]> : tensor<20x20xi1>
  %0 = kiln.fusion "attention" -> tensor<3x20x32xf32> {
    %s = kiln.matmul %q, %kt : tensor<3x20x32xf32>, tensor<3x32x20xf32> -> tensor<3x20x20xf32>
    %a = kiln.add %s, %mask : tensor<3x20x20xf32>, tensor<3x1x20xf32> -> tensor<3x20x20xf32>
    %w = kiln.select %causal, %a, %ninf : tensor<20x20xi1>, tensor<3x20x20xf32>, tensor<f32> -> tensor<3x20x20xf32>
    %p = kiln.softmax %w {axis = 2 : i64} : tensor<3x20x20xf32>
    %o = kiln.matmul %p, %v : tensor<3x20x20xf32>, tensor<3x20x32xf32> -> tensor<3x20x32xf32>
    kiln.yield %o : tensor<3x20x32xf32>
  }
  return %0 : tensor<3x20x32xf32>
}

// -----

// A 16-bit head dimension of 8 has no tensor-core kernel: the region is
// split back into its scores (a generic row kernel) and P V (a GEMM
// template), and the report says why.
// CHECK: module attributes {kiln.contraction_report = ["attention split (attention: a 16-bit head dimension that is not a multiple of 16) at {{.*}}", "generic fallback: the region has a kiln.softmax at {{.*}}", "kiln_gemm_0: mma_f16 {{.*}}"]}
// CHECK-LABEL: func.func @split_back(
// CHECK:         %[[P:.*]] = kiln.fusion "matmul+softmax" -> tensor<2x8x8xbf16> attributes {kiln.generic_reason = "the region has a kiln.softmax"} {
// CHECK:           kiln.softmax
// CHECK:           kiln.cast
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%[[P]], %arg2 :
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
