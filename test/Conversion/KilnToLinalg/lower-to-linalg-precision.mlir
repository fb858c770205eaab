// RUN: kiln-opt %s -kiln-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// What kiln-lower-precision emits, lowered: bf16/f16 contraction operands
// with an f32 accumulator, the tf32 rounding pair, and f16 <-> bf16 casts.

// A 2-D bf16 matmul with an f32 result is linalg.matmul with bf16 inputs
// into an f32 accumulator (the named op widens its inputs).
// CHECK-LABEL: func.func @matmul_bf16_f32
// CHECK: %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%[[ACC]] : tensor<4x16xf32>)
func.func @matmul_bf16_f32(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  %0 = kiln.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// The broadcasting matmul generic widens each f16 operand before the f32
// multiply-add.
// CHECK-LABEL: func.func @matmul_broadcast_f16_f32
// CHECK: linalg.generic
// CHECK: ^bb0(%[[L:.*]]: f16, %[[R:.*]]: f16, %[[ACC:.*]]: f32):
// CHECK:   %[[LW:.*]] = arith.extf %[[L]] : f16 to f32
// CHECK:   %[[RW:.*]] = arith.extf %[[R]] : f16 to f32
// CHECK:   %[[P:.*]] = arith.mulf %[[LW]], %[[RW]] : f32
// CHECK:   %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK:   linalg.yield %[[S]] : f32
func.func @matmul_broadcast_f16_f32(%a: tensor<2x4x8xf16>, %b: tensor<8x16xf16>) -> tensor<2x4x16xf32> {
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf16>, tensor<8x16xf16> -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// A bf16 convolution with an f32 result and an f32 bias: the bias is the
// f32 accumulator's initial value; operands are widened in the body.
// CHECK-LABEL: func.func @conv_bf16_f32
// CHECK: %[[INIT:.*]] = linalg.broadcast ins(%arg2 : tensor<2xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %arg1 : tensor<1x1x4x4xbf16>, tensor<2x1x1x1xbf16>) outs(%[[INIT]] : tensor<1x2x4x4xf32>)
// CHECK:   arith.extf %{{.*}} : bf16 to f32
// CHECK:   arith.extf %{{.*}} : bf16 to f32
func.func @conv_bf16_f32(%x: tensor<1x1x4x4xbf16>, %w: tensor<2x1x1x1xbf16>, %b: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  %0 = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xbf16>, tensor<2x1x1x1xbf16>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return %0 : tensor<1x2x4x4xf32>
}

// -----

// The tf32 pair is one f32 -> f32 generic that rounds the bits to 10
// mantissa bits, to nearest even, and keeps NaN; no tf32 value remains.
// CHECK-LABEL: func.func @round_to_tf32
// CHECK-NOT: tf32
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK:   %[[BITS:.*]] = arith.bitcast %[[X]] : f32 to i32
// CHECK:   %[[SH:.*]] = arith.shrui %[[BITS]], %c13_i32
// CHECK:   %[[LSB:.*]] = arith.andi %[[SH]], %c1_i32
// CHECK:   %[[BIAS:.*]] = arith.addi %[[LSB]], %c4095_i32
// CHECK:   %[[SUM:.*]] = arith.addi %[[BITS]], %[[BIAS]]
// CHECK:   %[[CLR:.*]] = arith.andi %[[SUM]], %c-8192_i32
// CHECK:   %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]]
// CHECK:   %[[Y:.*]] = arith.bitcast %[[CLR]] : i32 to f32
// CHECK:   %[[OUT:.*]] = arith.select %[[NAN]], %[[X]], %[[Y]]
// CHECK:   linalg.yield %[[OUT]]
// CHECK-NOT: tf32
// CHECK: return %[[R]]
func.func @round_to_tf32(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.cast %x : tensor<8xf32> -> tensor<8xtf32>
  %1 = kiln.cast %0 : tensor<8xtf32> -> tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// f16 -> bf16 goes through f32 (same width: truncf/extf cannot express it).
// CHECK-LABEL: func.func @f16_to_bf16
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: arith.truncf %[[W]] : f32 to bf16
func.func @f16_to_bf16(%x: tensor<8xf16>) -> tensor<8xbf16> {
  %0 = kiln.cast %x : tensor<8xf16> -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

// A tf32 tensor read by anything but a cast back to f32 has no lowering.
func.func @tf32_other_user(%x: tensor<8xf32>) -> tensor<8xtf32> {
  // expected-error @+1 {{failed to legalize operation 'kiln.cast'}}
  %0 = kiln.cast %x : tensor<8xf32> -> tensor<8xtf32>
  %1 = kiln.neg %0 : tensor<8xtf32>
  return %1 : tensor<8xtf32>
}

// -----

// float8 is a storage type: a cast from it reads its byte and builds the f32
// bits in i32 (no float8 arithmetic; Float8Conversion.cpp). The numbers are
// checked bit for bit in test/Target/CUDA/float8-casts.test.
// CHECK-LABEL: func.func @f8_to_f32
// CHECK: linalg.generic
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: arith.extui %[[B]] : i8 to i32
// CHECK-NOT: arith.extf
// CHECK: %[[F:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: linalg.yield %[[F]]
func.func @f8_to_f32(%x: tensor<4xf8E4M3FN>) -> tensor<4xf32> {
  %0 = kiln.cast %x : tensor<4xf8E4M3FN> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// To float8: widen to f32, round the bits in i32, keep the low byte.
// CHECK-LABEL: func.func @f16_to_f8
// CHECK: %[[W:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: arith.bitcast %[[W]] : f32 to i32
// CHECK: %[[T:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: %[[Y:.*]] = arith.bitcast %[[T]] : i8 to f8E5M2FNUZ
// CHECK: linalg.yield %[[Y]]
func.func @f16_to_f8(%x: tensor<4xf16>) -> tensor<4xf8E5M2FNUZ> {
  %0 = kiln.cast %x : tensor<4xf16> -> tensor<4xf8E5M2FNUZ>
  return %0 : tensor<4xf8E5M2FNUZ>
}
