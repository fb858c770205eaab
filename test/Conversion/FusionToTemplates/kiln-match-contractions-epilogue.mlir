// RUN: kiln-opt %s -split-input-file -kiln-select-contraction-kernels -kiln-match-contractions | FileCheck %s
// A fused epilogue is printed from the scalar IR that the linalg lowering
// builds each op's generic body from (ScalarSemantics.cpp, issue 23): one
// C++ statement per arith/math op, in the IR's order. No NVRTC: the source
// is checked as the gpu.binary holds it.

// softplus(x) = max(x, 0) + log1p(exp(-|x|)): the generated kernel's
// formula, op by op (absf, negf, exp, log1p, maximumf, addf), then the
// hard swish's x * min(max(x / 6 + 0.5, 0), 1) with maxNaN/minNaN.
// CHECK-LABEL: gpu.binary @kiln_gemm_0
// CHECK-SAME:    float [[ABS:v[0-9]+]] = fabsf(acc);
// CHECK-SAME:    float [[NEG:v[0-9]+]] = -[[ABS]];
// CHECK-SAME:    float [[EXP:v[0-9]+]] = expf([[NEG]]);
// CHECK-SAME:    float [[LOG:v[0-9]+]] = log1pf([[EXP]]);
// CHECK-SAME:    float [[ZERO:v[0-9]+]] = 0.f;
// CHECK-SAME:    float [[MAX:v[0-9]+]] = maxNaN(acc, [[ZERO]]);
// CHECK-SAME:    float [[SP:v[0-9]+]] = [[MAX]] + [[LOG]];
// CHECK-SAME:    = 0.166666672f;
// CHECK-SAME:    minNaN(
// CHECK-SAME:    return v{{[0-9]+}};
// CHECK-LABEL: func.func @softplus_hard_swish(
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0
// CHECK-NOT:     kiln.fusion
func.func @softplus_hard_swish(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %0 = kiln.fusion "matmul" -> tensor<8x8xf32> {
    %m = kiln.matmul %x, %w : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<8x8xf32>
    %s = kiln.softplus %m : tensor<8x8xf32>
    %h = kiln.hard_swish %s : tensor<8x8xf32>
    kiln.yield %h : tensor<8x8xf32>
  }
  return %0 : tensor<8x8xf32>
}

// -----

// f16 arithmetic rounds each result to f16, as the generated kernel's f16
// ops do: the cast of the accumulator, then the add of the f16 skip input
// and its constant.
// CHECK-LABEL: gpu.binary @kiln_gemm_0
// CHECK-SAME:    float [[C:v[0-9]+]] = acc;
// CHECK-SAME:    [[C]] = f16ToFloat(floatToF16([[C]]));
// CHECK-SAME:    float [[A:v[0-9]+]] = [[C]] + x{{[0-9]+}};
// CHECK-SAME:    [[A]] = f16ToFloat(floatToF16([[A]]));
// CHECK-LABEL: func.func @f16_arithmetic(
// CHECK:         kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0
func.func @f16_arithmetic(%x: tensor<16x32xf16>, %w: tensor<32x16xf16>, %skip: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %0 = kiln.fusion "matmul" -> tensor<16x16xf16> {
    %m = kiln.matmul %x, %w : tensor<16x32xf16>, tensor<32x16xf16> -> tensor<16x16xf32>
    %c = kiln.cast %m : tensor<16x16xf32> -> tensor<16x16xf16>
    %a = kiln.add %c, %skip : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf16>
    kiln.yield %a : tensor<16x16xf16>
  }
  return %0 : tensor<16x16xf16>
}
