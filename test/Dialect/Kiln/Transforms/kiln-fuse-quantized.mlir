// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-fuse-quantized{report=true}))" -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-fuse-quantized{regions=false}))" | FileCheck %s --check-prefix=NOREGIONS
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-fuse-quantized{convolutions=false}))" | FileCheck %s --check-prefix=NOCONV
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(kiln-fuse-quantized{matmuls=false}))" | FileCheck %s --check-prefix=NOMATMUL

// NOCONV-NOT: quantized_conv
// NOCONV: kiln.fusion "quantized_matmul"
// NOCONV-NOT: quantized_conv
// NOCONV-NOT: channels-first
// NOMATMUL-NOT: quantized_matmul
// NOMATMUL: kiln.fusion "quantized_conv"
// NOMATMUL-NOT: quantized_matmul

// NOREGIONS-NOT: kiln.fusion

// QLinearMatMul as the importer writes it (u8 activations with zero point
// 3, s8 constant weights, u8 output with zero point 128): the chain, from
// the 8-bit operands to the narrowing cast, with its constants, becomes one
// quantized_matmul region.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
// CHECK-LABEL: func.func @qlinear_matmul
// CHECK-NOT:     kiln.quantized_report
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w
// CHECK-NEXT:    %[[R:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x16xui8> {
// CHECK-NEXT:      kiln.cast %{{.*}} : tensor<4x32xui8> -> tensor<4x32xi32>
// CHECK-NEXT:      kiln.constant dense<3> : tensor<i32>
// CHECK-NEXT:      kiln.sub
// CHECK-NEXT:      kiln.cast %[[W]] : tensor<32x16xi8> -> tensor<32x16xi32>
// CHECK-NEXT:      kiln.matmul {{.*}} -> tensor<4x16xi32>
// CHECK-NEXT:      kiln.cast
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.mul
// CHECK-NEXT:      kiln.round
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.add
// CHECK-NEXT:      kiln.clip
// CHECK-NEXT:      %[[Y:.*]] = kiln.cast {{.*}} -> tensor<4x16xui8>
// CHECK-NEXT:      kiln.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]]
func.func @qlinear_matmul(%x: tensor<4x32xui8>) -> tensor<4x16xui8> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xi32>
  %1 = kiln.constant dense<3> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<4x32xi32>, tensor<i32> -> tensor<4x32xi32>
  %3 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 kernel (QLinearMatMul): A ui8 zero point 3, B i8 constant, zero point 0, scale 4.000000e-03 (f32), output ui8 zero point 128}}
  %4 = kiln.matmul %2, %3 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  %5 = kiln.cast %4 : tensor<4x16xi32> -> tensor<4x16xf64>
  %6 = kiln.constant dense<0.0039999997243285179> : tensor<f64>
  %7 = kiln.mul %5, %6 : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %8 = kiln.round %7 : tensor<4x16xf64>
  %9 = kiln.constant dense<1.280000e+02> : tensor<f64>
  %10 = kiln.add %8, %9 : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %11 = kiln.clip %10 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf64>
  %12 = kiln.cast %11 : tensor<4x16xf64> -> tensor<4x16xui8>
  return %12 : tensor<4x16xui8>
}

// -----

// MatMulInteger: the i32 product is the output.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @matmul_integer(%x: tensor<4x32xui8>) -> tensor<4x16xi32> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xi32>
  %1 = kiln.constant dense<3> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<4x32xi32>, tensor<i32> -> tensor<4x32xi32>
  %3 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  %4 = kiln.constant dense<-2> : tensor<i32>
  %5 = kiln.sub %3, %4 : tensor<32x16xi32>, tensor<i32> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 kernel (MatMulInteger): A ui8 zero point 3, B i8 constant, zero point -2, output i32}}
  %6 = kiln.matmul %2, %5 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  return %6 : tensor<4x16xi32>
}

// -----

// QDQ (DequantizeLinear -> MatMul -> QuantizeLinear): the multiplier is
// onnxruntime's (0.02f * 0.01f) / 0.05f in f32.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @qdq(%x: tensor<4x32xui8>) -> tensor<4x16xui8> {
  %0 = kiln.constant dense<5.000000e-02> : tensor<f32>
  %1 = kiln.constant dense<0.00999999977> : tensor<f32>
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %2 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %3 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %4 = kiln.constant dense<3.000000e+00> : tensor<f32>
  %5 = kiln.sub %3, %4 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %6 = kiln.mul %5, %2 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %7 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xf32>
  %8 = kiln.mul %7, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 3, B i8 constant, zero point 0, scale 4.000000e-03 (f32), output ui8 zero point 128}}
  %9 = kiln.matmul %6, %8 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  %10 = kiln.div %9, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %11 = kiln.round %10 : tensor<4x16xf32>
  %12 = kiln.constant dense<1.280000e+02> : tensor<f32>
  %13 = kiln.add %11, %12 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %14 = kiln.clip %13 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %15 = kiln.cast %14 : tensor<4x16xf32> -> tensor<4x16xui8>
  return %15 : tensor<4x16xui8>
}

// -----

// A QDQ residual block after the chain (a ResNet add as onnxruntime's
// quantizer writes it): the requantized value dequantized, added to a
// dequantized %r, Relu, quantized again. The region takes it all and reads
// %r from above; the chain's result is the block's.
// CHECK-LABEL: func.func @qdq_residual
// CHECK:         %[[R:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x16xi8> {
// CHECK:           kiln.matmul
// CHECK:           kiln.cast %{{.*}} : tensor<4x16xui8> -> tensor<4x16xf32>
// CHECK:           kiln.cast %arg1 : tensor<4x16xi8> -> tensor<4x16xf32>
// CHECK:           kiln.add
// CHECK:           kiln.relu
// CHECK:           %[[OUT:.*]] = kiln.cast %{{.*}} : tensor<4x16xf32> -> tensor<4x16xi8>
// CHECK:           kiln.yield %[[OUT]]
// CHECK:         return %[[R]]
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @qdq_residual(%x: tensor<4x32xui8>, %r: tensor<4x16xi8>) -> tensor<4x16xi8> {
  %0 = kiln.constant dense<5.000000e-02> : tensor<f32>
  %1 = kiln.constant dense<0.00999999977> : tensor<f32>
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %2 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %3 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %4 = kiln.constant dense<3.000000e+00> : tensor<f32>
  %5 = kiln.sub %3, %4 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %6 = kiln.mul %5, %2 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %7 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xf32>
  %8 = kiln.mul %7, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 3, B i8 constant, zero point 0, scale 4.000000e-03 (f32), output ui8 zero point 128; + residual i8 zero point -2, Relu, sum i8 zero point 5}}
  %9 = kiln.matmul %6, %8 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  %10 = kiln.div %9, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %11 = kiln.round %10 : tensor<4x16xf32>
  %12 = kiln.constant dense<1.280000e+02> : tensor<f32>
  %13 = kiln.add %11, %12 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %14 = kiln.clip %13 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %15 = kiln.cast %14 : tensor<4x16xf32> -> tensor<4x16xui8>
  // DQ(q): zero point 128, scale 0.05.
  %16 = kiln.cast %15 : tensor<4x16xui8> -> tensor<4x16xf32>
  %17 = kiln.sub %16, %12 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %18 = kiln.mul %17, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  // DQ(r): zero point -2, scale 0.03.
  %19 = kiln.cast %r : tensor<4x16xi8> -> tensor<4x16xf32>
  %20 = kiln.constant dense<-2.000000e+00> : tensor<f32>
  %21 = kiln.sub %19, %20 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %22 = kiln.constant dense<3.000000e-02> : tensor<f32>
  %23 = kiln.mul %21, %22 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %24 = kiln.add %23, %18 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %25 = kiln.relu %24 : tensor<4x16xf32>
  // Q(sum): scale 0.07, zero point 5, i8.
  %26 = kiln.constant dense<7.000000e-02> : tensor<f32>
  %27 = kiln.div %25, %26 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %28 = kiln.round %27 : tensor<4x16xf32>
  %29 = kiln.constant dense<5.000000e+00> : tensor<f32>
  %30 = kiln.add %28, %29 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %31 = kiln.clip %30 {max = 1.270000e+02 : f64, min = -1.280000e+02 : f64} : tensor<4x16xf32>
  %32 = kiln.cast %31 : tensor<4x16xf32> -> tensor<4x16xi8>
  return %32 : tensor<4x16xi8>
}

// -----

// The requantized value read by something else too: no residual block (the
// kernel would have to store both); the chain ends at its quantization.
// CHECK-LABEL: func.func @qdq_residual_shared
// CHECK:         kiln.fusion "quantized_matmul" -> tensor<4x16xui8>
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @qdq_residual_shared(%x: tensor<4x32xui8>, %r: tensor<4x16xui8>) -> (tensor<4x16xui8>, tensor<4x16xf32>) {
  %0 = kiln.constant dense<5.000000e-02> : tensor<f32>
  %1 = kiln.constant dense<0.00999999977> : tensor<f32>
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %3 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %6 = kiln.mul %3, %0 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %7 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xf32>
  %8 = kiln.mul %7, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 0, B i8 constant, zero point 0, scale 1.000000e-02 (f32), output ui8 zero point 0}}
  %9 = kiln.matmul %6, %8 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  %10 = kiln.div %9, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %11 = kiln.round %10 : tensor<4x16xf32>
  %14 = kiln.clip %11 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %15 = kiln.cast %14 : tensor<4x16xf32> -> tensor<4x16xui8>
  %16 = kiln.cast %15 : tensor<4x16xui8> -> tensor<4x16xf32>
  %18 = kiln.mul %16, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %19 = kiln.cast %r : tensor<4x16xui8> -> tensor<4x16xf32>
  %23 = kiln.mul %19, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %24 = kiln.add %23, %18 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %27 = kiln.div %24, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %28 = kiln.round %27 : tensor<4x16xf32>
  %31 = kiln.clip %28 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %32 = kiln.cast %31 : tensor<4x16xf32> -> tensor<4x16xui8>
  return %15, %24 : tensor<4x16xui8>, tensor<4x16xf32>
}

// -----

// A ResNet downsample add: both branches are chains ending in the same
// block. The first in block order takes it and reads the second's result
// from above; the second then stops at its quantization (the block is in
// another region now: before, it followed the captured use into that
// region and crashed).
// CHECK-LABEL: func.func @qdq_residual_two_chains
// CHECK:         %[[Q2:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x16xui8> {
// CHECK:           kiln.matmul
// CHECK-NOT:       kiln.add %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<4x16xf32>
// CHECK:           kiln.yield
// CHECK:         %[[Y:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x16xui8> {
// CHECK:           kiln.matmul
// CHECK:           kiln.cast %[[Q2]] : tensor<4x16xui8> -> tensor<4x16xf32>
// CHECK:           kiln.add %{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<4x16xf32>
// CHECK:           kiln.yield
// CHECK:         return %[[Y]]
ml_program.global private @w1(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
ml_program.global private @w2(dense<2> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @qdq_residual_two_chains(%x: tensor<4x32xui8>) -> tensor<4x16xui8> {
  %0 = kiln.constant dense<5.000000e-02> : tensor<f32>
  %1 = kiln.constant dense<0.00999999977> : tensor<f32>
  %3 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %6 = kiln.mul %3, %0 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %w1 = ml_program.global_load_const @w1 : tensor<32x16xi8>
  %7 = kiln.cast %w1 : tensor<32x16xi8> -> tensor<32x16xf32>
  %8 = kiln.mul %7, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 0, B i8 constant, zero point 0, scale 1.000000e-02 (f32), output ui8 zero point 0; + residual ui8 zero point 0, sum ui8 zero point 0}}
  %9 = kiln.matmul %6, %8 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  %10 = kiln.div %9, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %11 = kiln.round %10 : tensor<4x16xf32>
  %12 = kiln.clip %11 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %13 = kiln.cast %12 : tensor<4x16xf32> -> tensor<4x16xui8>
  %w2 = ml_program.global_load_const @w2 : tensor<32x16xi8>
  %17 = kiln.cast %w2 : tensor<32x16xi8> -> tensor<32x16xf32>
  %18 = kiln.mul %17, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 0, B i8 constant, zero point 0, scale 1.000000e-02 (f32), output ui8 zero point 0}}
  %19 = kiln.matmul %6, %18 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  %20 = kiln.div %19, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %21 = kiln.round %20 : tensor<4x16xf32>
  %22 = kiln.clip %21 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %23 = kiln.cast %22 : tensor<4x16xf32> -> tensor<4x16xui8>
  %30 = kiln.cast %13 : tensor<4x16xui8> -> tensor<4x16xf32>
  %31 = kiln.mul %30, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %32 = kiln.cast %23 : tensor<4x16xui8> -> tensor<4x16xf32>
  %33 = kiln.mul %32, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %34 = kiln.add %31, %33 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %35 = kiln.div %34, %0 : tensor<4x16xf32>, tensor<f32> -> tensor<4x16xf32>
  %36 = kiln.round %35 : tensor<4x16xf32>
  %37 = kiln.clip %36 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf32>
  %38 = kiln.cast %37 : tensor<4x16xf32> -> tensor<4x16xui8>
  return %38 : tensor<4x16xui8>
}

// -----

// QDQ with per-channel weights as quantize_static(per_channel=True)
// writes them: the scale and the (zero) zero point are globals along N,
// reshaped to [1][N]; one f32 multiplier per column, (0.02f * b[n]) / 0.05f.
ml_program.global private @w(dense<1> : tensor<32x4xi8>) : tensor<32x4xi8>
ml_program.global private @w_scale(dense_resource<w_scale> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private @w_zero_point(dense_resource<w_zero_point> : tensor<4xi8>) : tensor<4xi8>
func.func @qdq_per_channel(%x: tensor<4x32xui8>) -> tensor<4x4xui8> {
  %w = ml_program.global_load_const @w : tensor<32x4xi8>
  %ws = ml_program.global_load_const @w_scale : tensor<4xf32>
  %wz = ml_program.global_load_const @w_zero_point : tensor<4xi8>
  %0 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %1 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x4xi8> -> tensor<32x4xf32>
  %4 = kiln.reshape %wz : tensor<4xi8> -> tensor<1x4xi8>
  %5 = kiln.cast %4 : tensor<1x4xi8> -> tensor<1x4xf32>
  %6 = kiln.sub %3, %5 : tensor<32x4xf32>, tensor<1x4xf32> -> tensor<32x4xf32>
  %7 = kiln.reshape %ws : tensor<4xf32> -> tensor<1x4xf32>
  %8 = kiln.mul %6, %7 : tensor<32x4xf32>, tensor<1x4xf32> -> tensor<32x4xf32>
  // expected-remark @+1 {{int8 kernel (QDQ): A ui8 zero point 0, B i8 constant, zero point 0, scale per column (4, 4.000000e-03 to 1.600000e-02) (f32), output ui8 zero point 128}}
  %9 = kiln.matmul %2, %8 : tensor<4x32xf32>, tensor<32x4xf32> -> tensor<4x4xf32>
  %10 = kiln.constant dense<5.000000e-02> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  %12 = kiln.round %11 : tensor<4x4xf32>
  %13 = kiln.constant dense<1.280000e+02> : tensor<f32>
  %14 = kiln.add %12, %13 : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  %15 = kiln.clip %14 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x4xf32>
  %16 = kiln.cast %15 : tensor<4x4xf32> -> tensor<4x4xui8>
  return %16 : tensor<4x4xui8>
}
{-#
  dialect_resources: {
    builtin: {
      w_scale: "0x040000000AD7233C0AD7A33C8FC2F53C0AD7233D",
      w_zero_point: "0x0100000000000000"
    }
  }
#-}

// -----

// A per-row zero point of A is not matched: the chain stays as it is, and
// the function records why (kilnc --stats).
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
// CHECK-LABEL: func.func @per_row_zero_point
// CHECK-SAME:    kiln.quantized_report = ["kiln.matmul: exact fallback (no int8 kernel): A's zero point is not one constant (per row zero points are not matched yet)"]
// CHECK:         kiln.matmul
// CHECK-NEXT:    return
func.func @per_row_zero_point(%x: tensor<2x32xi8>) -> tensor<2x16xi32> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<2x32xi8> -> tensor<2x32xi32>
  %1 = kiln.constant dense<[[1], [2]]> : tensor<2x1xi32>
  %2 = kiln.sub %0, %1 : tensor<2x32xi32>, tensor<2x1xi32> -> tensor<2x32xi32>
  %3 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 fallback: A's zero point is not one constant (per row zero points are not matched yet)}}
  %4 = kiln.matmul %2, %3 : tensor<2x32xi32>, tensor<32x16xi32> -> tensor<2x16xi32>
  return %4 : tensor<2x16xi32>
}

// -----

// B's scale is one per row of B (along K), which no kernel scale can be.
ml_program.global private @w(dense<1> : tensor<4x3xi8>) : tensor<4x3xi8>
func.func @scale_along_k(%x: tensor<2x4xi8>) -> tensor<2x3xf32> {
  %w = ml_program.global_load_const @w : tensor<4x3xi8>
  %0 = kiln.cast %x : tensor<2x4xi8> -> tensor<2x4xf32>
  %1 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %3 = kiln.cast %w : tensor<4x3xi8> -> tensor<4x3xf32>
  %4 = kiln.constant dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>
  %5 = kiln.mul %3, %4 : tensor<4x3xf32>, tensor<4x1xf32> -> tensor<4x3xf32>
  // expected-remark @+1 {{int8 fallback: B is not dequantized by one constant or one per column scale}}
  %6 = kiln.matmul %2, %5 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %6 : tensor<2x3xf32>
}

// -----

// The same with K == N: as many values as columns, but along K.
ml_program.global private @w(dense<1> : tensor<4x4xi8>) : tensor<4x4xi8>
func.func @scale_along_k_square(%x: tensor<2x4xi8>) -> tensor<2x4xf32> {
  %w = ml_program.global_load_const @w : tensor<4x4xi8>
  %0 = kiln.cast %x : tensor<2x4xi8> -> tensor<2x4xf32>
  %1 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<2x4xf32>, tensor<f32> -> tensor<2x4xf32>
  %3 = kiln.cast %w : tensor<4x4xi8> -> tensor<4x4xf32>
  %4 = kiln.constant dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>
  %5 = kiln.mul %3, %4 : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x4xf32>
  // expected-remark @+1 {{int8 fallback: B is not dequantized by one constant or one per column scale}}
  %6 = kiln.matmul %2, %5 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %6 : tensor<2x4xf32>
}

// -----

// B is an input, not a constant weight: the fallback says so.
func.func @weight_not_constant(%x: tensor<4x32xi8>, %w: tensor<32x16xi8>) -> tensor<4x16xi32> {
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xi32>
  %1 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 fallback: B is not a constant weight (the kernel stores weights K-major at compile time)}}
  %2 = kiln.matmul %0, %1 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  return %2 : tensor<4x16xi32>
}

// -----

// A per-column zero point of B (MatMulInteger): the kernel's row sums.
ml_program.global private @w(dense<1> : tensor<32x4xi8>) : tensor<32x4xi8>
func.func @per_column_zero_point(%x: tensor<4x32xi8>) -> tensor<4x4xi32> {
  %w = ml_program.global_load_const @w : tensor<32x4xi8>
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xi32>
  %1 = kiln.cast %w : tensor<32x4xi8> -> tensor<32x4xi32>
  %2 = kiln.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %3 = kiln.sub %1, %2 : tensor<32x4xi32>, tensor<4xi32> -> tensor<32x4xi32>
  // expected-remark @+1 {{int8 kernel (MatMulInteger): A i8 zero point 0, B i8 constant, zero point per column, output i32}}
  %4 = kiln.matmul %0, %3 : tensor<4x32xi32>, tensor<32x4xi32> -> tensor<4x4xi32>
  return %4 : tensor<4x4xi32>
}

// -----

// The requantize scale is an input, not a constant.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @scale_not_constant(%x: tensor<4x32xi8>, %s: tensor<f64>) -> tensor<4x16xi8> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xi32>
  %1 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 fallback: the requantize scale is not one constant (or one per channel)}}
  %2 = kiln.matmul %0, %1 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  %3 = kiln.cast %2 : tensor<4x16xi32> -> tensor<4x16xf64>
  %4 = kiln.mul %3, %s : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %5 = kiln.round %4 : tensor<4x16xf64>
  %6 = kiln.clip %5 {max = 1.270000e+02 : f64, min = -1.280000e+02 : f64} : tensor<4x16xf64>
  %7 = kiln.cast %6 : tensor<4x16xf64> -> tensor<4x16xi8>
  return %7 : tensor<4x16xi8>
}

// -----

// A requantize multiplier that is not an f32 value (0.1 in f64): the
// kernel multiplies in f32, so it would not give these values.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @scale_not_f32(%x: tensor<4x32xi8>) -> tensor<4x16xi8> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xi32>
  %1 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 fallback: the requantize scale is not an f32 value}}
  %2 = kiln.matmul %0, %1 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  %3 = kiln.cast %2 : tensor<4x16xi32> -> tensor<4x16xf64>
  %4 = kiln.constant dense<1.000000e-01> : tensor<f64>
  %5 = kiln.mul %3, %4 : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %6 = kiln.round %5 : tensor<4x16xf64>
  %7 = kiln.constant dense<0.000000e+00> : tensor<f64>
  %8 = kiln.add %6, %7 : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %9 = kiln.clip %8 {max = 1.270000e+02 : f64, min = -1.280000e+02 : f64} : tensor<4x16xf64>
  %10 = kiln.cast %9 : tensor<4x16xf64> -> tensor<4x16xi8>
  return %10 : tensor<4x16xi8>
}

// -----

// A dequantized product that is not quantized again (a float output):
// nothing for the int8 kernel to write.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @not_requantized(%x: tensor<4x32xi8>) -> tensor<4x16xf32> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xf32>
  %1 = kiln.constant dense<2.000000e-02> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xf32>
  %4 = kiln.mul %3, %1 : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  // expected-remark @+1 {{int8 fallback: the product is not quantized by one constant scale}}
  %5 = kiln.matmul %2, %4 : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  return %5 : tensor<4x16xf32>
}

// -----

// A float matmul of float inputs is no quantized chain: no remark, no
// report, no region.
// CHECK-LABEL: func.func @float_matmul
// CHECK-NOT:     kiln.quantized_report
// CHECK:         kiln.matmul
// CHECK-NEXT:    return
func.func @float_matmul(%x: tensor<4x32xf32>, %w: tensor<32x16xf32>) -> tensor<4x16xf32> {
  %0 = kiln.matmul %x, %w : tensor<4x32xf32>, tensor<32x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// QLinearConv as the importer writes it, once kiln-assign-layout has made
// it channels-last: i32 values cast up to an f64 convolution, the int32
// bias folded to an f64 constant, one multiplier per output channel along
// the result's last dimension; the zero point add is left out when it is 0.
// The chain becomes one quantized_conv region.
ml_program.global private @w(dense<1> : tensor<2x3x3x3xi8>) : tensor<2x3x3x3xi8>
// CHECK-LABEL: func.func @qlinear_conv
// CHECK-NOT:     kiln.quantized_report
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w
// CHECK-NEXT:    %[[R:.*]] = kiln.fusion "quantized_conv" -> tensor<1x6x6x2xui8> {
// CHECK-NEXT:      kiln.cast %{{.*}} : tensor<1x6x6x3xui8> -> tensor<1x6x6x3xi32>
// CHECK:           kiln.cast %[[W]] : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xi32>
// CHECK:           kiln.conv {{.*}}data_format = #kiln.data_format<nhwc>
// CHECK:           %[[Y:.*]] = kiln.cast {{.*}} -> tensor<1x6x6x2xui8>
// CHECK-NEXT:      kiln.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]]
func.func @qlinear_conv(%x: tensor<1x6x6x3xui8>) -> tensor<1x6x6x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x3x3x3xi8>
  %0 = kiln.cast %x : tensor<1x6x6x3xui8> -> tensor<1x6x6x3xi32>
  %1 = kiln.constant dense<3> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<1x6x6x3xi32>, tensor<i32> -> tensor<1x6x6x3xi32>
  %3 = kiln.cast %w : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xi32>
  %4 = kiln.cast %2 : tensor<1x6x6x3xi32> -> tensor<1x6x6x3xf64>
  %5 = kiln.cast %3 : tensor<2x3x3x3xi32> -> tensor<2x3x3x3xf64>
  %6 = kiln.constant dense<[7.000000e+00, -1.200000e+01]> : tensor<2xf64>
  // expected-remark @+1 {{int8 kernel (QLinearConv, int32 bias): A ui8 zero point 3, B i8 constant, zero point 0, scale per column (2, 2.500000e-01 to 5.000000e-01) (f32), output ui8 zero point 0}}
  %7 = kiln.conv %4, %5, %6 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x6x6x3xf64>, tensor<2x3x3x3xf64>, tensor<2xf64>) -> tensor<1x6x6x2xf64>
  %8 = kiln.constant dense<[[[[5.000000e-01, 2.500000e-01]]]]> : tensor<1x1x1x2xf64>
  %9 = kiln.mul %7, %8 : tensor<1x6x6x2xf64>, tensor<1x1x1x2xf64> -> tensor<1x6x6x2xf64>
  %10 = kiln.round %9 : tensor<1x6x6x2xf64>
  %11 = kiln.clip %10 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x6x6x2xf64>
  %12 = kiln.cast %11 : tensor<1x6x6x2xf64> -> tensor<1x6x6x2xui8>
  return %12 : tensor<1x6x6x2xui8>
}

// -----

// QLinearConv with no zero points after canonicalization: each 8-bit
// operand's two casts (to i32, then f64) are folded into one, which is
// then the operand's cast up.
ml_program.global private @w(dense<1> : tensor<2x3x3x3xi8>) : tensor<2x3x3x3xi8>
// CHECK-LABEL: func.func @qlinear_conv_folded_casts
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x6x6x2xui8>
func.func @qlinear_conv_folded_casts(%x: tensor<1x6x6x3xui8>) -> tensor<1x6x6x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x3x3x3xi8>
  %0 = kiln.cast %x : tensor<1x6x6x3xui8> -> tensor<1x6x6x3xf64>
  %1 = kiln.cast %w : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xf64>
  // expected-remark @+1 {{int8 kernel (QLinearConv): A ui8 zero point 0, B i8 constant, zero point 0, scale 2.500000e-01 (f32), output ui8 zero point 0}}
  %2 = kiln.conv %0, %1 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x6x6x3xf64>, tensor<2x3x3x3xf64>) -> tensor<1x6x6x2xf64>
  %3 = kiln.constant dense<2.500000e-01> : tensor<f64>
  %4 = kiln.mul %2, %3 : tensor<1x6x6x2xf64>, tensor<f64> -> tensor<1x6x6x2xf64>
  %5 = kiln.round %4 : tensor<1x6x6x2xf64>
  %6 = kiln.clip %5 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x6x6x2xf64>
  %7 = kiln.cast %6 : tensor<1x6x6x2xf64> -> tensor<1x6x6x2xui8>
  return %7 : tensor<1x6x6x2xui8>
}

// -----

// A 1x1 QDQ convolution as kiln-assign-layout leaves it (ResNet-50 from
// quantize_static): the filter's transpose to [O][1][1][C] only moves unit
// dimensions, so it is a reshape (here after the dequantize), and the
// per-channel zero point (a splat global) and scale (a [O] global) are
// reshaped to [O][1][1][1]. The weight's bytes are the filter's.
// CHECK-LABEL: func.func @qdq_conv_1x1_reshaped
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x6x6x4xui8>
ml_program.global private @w(dense<1> : tensor<4x8x1x1xi8>) : tensor<4x8x1x1xi8>
ml_program.global private @zp(dense<0> : tensor<4xi8>) : tensor<4xi8>
ml_program.global private @s(dense<[0.5, 0.25, 0.5, 0.25]> : tensor<4xf32>) : tensor<4xf32>
func.func @qdq_conv_1x1_reshaped(%x: tensor<1x6x6x8xui8>) -> tensor<1x6x6x4xui8> {
  %w = ml_program.global_load_const @w : tensor<4x8x1x1xi8>
  %zp = ml_program.global_load_const @zp : tensor<4xi8>
  %s = ml_program.global_load_const @s : tensor<4xf32>
  %0 = kiln.cast %x : tensor<1x6x6x8xui8> -> tensor<1x6x6x8xf32>
  %1 = kiln.constant dense<1.000000e+01> : tensor<f32>
  %2 = kiln.sub %0, %1 : tensor<1x6x6x8xf32>, tensor<f32> -> tensor<1x6x6x8xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %2, %3 : tensor<1x6x6x8xf32>, tensor<f32> -> tensor<1x6x6x8xf32>
  %5 = kiln.cast %w : tensor<4x8x1x1xi8> -> tensor<4x8x1x1xf32>
  %z1 = kiln.reshape %zp : tensor<4xi8> -> tensor<4x1x1x1xi8>
  %z2 = kiln.cast %z1 : tensor<4x1x1x1xi8> -> tensor<4x1x1x1xf32>
  %6 = kiln.sub %5, %z2 : tensor<4x8x1x1xf32>, tensor<4x1x1x1xf32> -> tensor<4x8x1x1xf32>
  %s1 = kiln.reshape %s : tensor<4xf32> -> tensor<4x1x1x1xf32>
  %7 = kiln.mul %6, %s1 : tensor<4x8x1x1xf32>, tensor<4x1x1x1xf32> -> tensor<4x8x1x1xf32>
  %8 = kiln.reshape %7 : tensor<4x8x1x1xf32> -> tensor<4x1x1x8xf32>
  // expected-remark @+1 {{int8 kernel (QDQ conv): A ui8 zero point 10, B i8 constant, zero point 0, scale per column (4, 1.250000e-01 to 2.500000e-01) (f32), output ui8 zero point 0}}
  %9 = kiln.conv %4, %8 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x6x8xf32>, tensor<4x1x1x8xf32>) -> tensor<1x6x6x4xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x6x6x4xf32>, tensor<f32> -> tensor<1x6x6x4xf32>
  %12 = kiln.round %11 : tensor<1x6x6x4xf32>
  %15 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x6x6x4xf32>
  %16 = kiln.cast %15 : tensor<1x6x6x4xf32> -> tensor<1x6x6x4xui8>
  return %16 : tensor<1x6x6x4xui8>
}

// -----

// A QDQ bias the importer left unfolded (DequantizeLinear of an int32
// vector global with per-channel scale and zero-point globals, in f64, as
// it imports large ones): evaluated at compile time, its int32 values
// [3, -5] (scale 0.5 * w_scale) are recovered exactly.
ml_program.global private @w(dense<1> : tensor<2x1x1x1xi8>) : tensor<2x1x1x1xi8>
ml_program.global private @bq(dense<[3, -5]> : tensor<2xi32>) : tensor<2xi32>
ml_program.global private @bz(dense<0> : tensor<2xi32>) : tensor<2xi32>
ml_program.global private @bs(dense<[2.500000e-01, 1.250000e-01]> : tensor<2xf32>) : tensor<2xf32>
// CHECK-LABEL: func.func @qdq_conv_unfolded_bias
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x4x4x2xui8>
func.func @qdq_conv_unfolded_bias(%x: tensor<1x4x4x1xui8>) -> tensor<1x4x4x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xi8>
  %bq = ml_program.global_load_const @bq : tensor<2xi32>
  %bz = ml_program.global_load_const @bz : tensor<2xi32>
  %bs = ml_program.global_load_const @bs : tensor<2xf32>
  %0 = kiln.cast %x : tensor<1x4x4x1xui8> -> tensor<1x4x4x1xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %0, %3 : tensor<1x4x4x1xf32>, tensor<f32> -> tensor<1x4x4x1xf32>
  %5 = kiln.cast %w : tensor<2x1x1x1xi8> -> tensor<2x1x1x1xf32>
  %6 = kiln.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
  %7 = kiln.mul %5, %6 : tensor<2x1x1x1xf32>, tensor<2x1x1x1xf32> -> tensor<2x1x1x1xf32>
  %b0 = kiln.cast %bq : tensor<2xi32> -> tensor<2xf64>
  %b1 = kiln.cast %bz : tensor<2xi32> -> tensor<2xf64>
  %b2 = kiln.sub %b0, %b1 : tensor<2xf64>, tensor<2xf64> -> tensor<2xf64>
  %b3 = kiln.cast %bs : tensor<2xf32> -> tensor<2xf64>
  %b4 = kiln.mul %b2, %b3 : tensor<2xf64>, tensor<2xf64> -> tensor<2xf64>
  %8 = kiln.cast %b4 : tensor<2xf64> -> tensor<2xf32>
  // expected-remark @+1 {{int8 kernel (QDQ conv, int32 bias): A ui8 zero point 0, B i8 constant, zero point 0, scale per column (2, 1.250000e-01 to 2.500000e-01) (f32), output ui8 zero point 0}}
  %9 = kiln.conv %4, %7, %8 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %12 = kiln.round %11 : tensor<1x4x4x2xf32>
  %15 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x4x4x2xf32>
  %16 = kiln.cast %15 : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xui8>
  return %16 : tensor<1x4x4x2xui8>
}

// -----

// A QDQ Gemm with transB and a bias: the [N][K] weight is read through
// its transpose (per-column scales along its dimension 0), and the
// dequantized bias added to the product, int32 [3, -5] times
// a_scale * w_scale, joins the chain as its int32 bias.
ml_program.global private @w(dense<1> : tensor<2x8xi8>) : tensor<2x8xi8>
// CHECK-LABEL: func.func @qdq_gemm_trans_b_bias
// CHECK:         kiln.fusion "quantized_matmul" -> tensor<4x2xui8>
// CHECK:           kiln.transpose
// CHECK:           kiln.matmul
// CHECK:           kiln.add
// CHECK:           kiln.div
func.func @qdq_gemm_trans_b_bias(%x: tensor<4x8xui8>) -> tensor<4x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x8xi8>
  %0 = kiln.cast %x : tensor<4x8xui8> -> tensor<4x8xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %3 = kiln.cast %w : tensor<2x8xi8> -> tensor<2x8xf32>
  %4 = kiln.constant dense<[[5.000000e-01], [2.500000e-01]]> : tensor<2x1xf32>
  %5 = kiln.mul %3, %4 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %6 = kiln.transpose %5 {permutation = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  // expected-remark @+1 {{int8 kernel (QDQ, int32 bias): A ui8 zero point 0, B i8 constant, zero point 0, scale per column (2, 1.250000e-01 to 2.500000e-01) (f32), output ui8 zero point 0}}
  %7 = kiln.matmul %2, %6 : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %8 = kiln.constant dense<[7.500000e-01, -6.250000e-01]> : tensor<2xf32>
  %9 = kiln.add %7, %8 : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<4x2xf32>, tensor<f32> -> tensor<4x2xf32>
  %12 = kiln.round %11 : tensor<4x2xf32>
  %13 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<4x2xf32>
  %14 = kiln.cast %13 : tensor<4x2xf32> -> tensor<4x2xui8>
  return %14 : tensor<4x2xui8>
}

// -----

// The same chain channels-first (kiln-assign-layout left it NCHW, as
// --layout=nchw does): recognised, but the int8 kernel reads NHWC images,
// so it stays on the fallback, reported. A multiplier per channel lies
// along the result's dimension 1 there.
ml_program.global private @w(dense<1> : tensor<2x3x3x3xi8>) : tensor<2x3x3x3xi8>
// CHECK-LABEL: func.func @qlinear_conv_nchw
// CHECK-SAME:    kiln.quantized_report = ["kiln.conv: exact fallback (no int8 kernel): a channels-first convolution (the int8 kernel reads NHWC images: compile with --layout=nhwc or auto)"]
// CHECK-NOT:     kiln.fusion
// CHECK:         kiln.conv
// CHECK:         kiln.cast {{.*}} -> tensor<1x2x6x6xui8>
// CHECK-NEXT:    return
func.func @qlinear_conv_nchw(%x: tensor<1x3x6x6xui8>) -> tensor<1x2x6x6xui8> {
  %w = ml_program.global_load_const @w : tensor<2x3x3x3xi8>
  %0 = kiln.cast %x : tensor<1x3x6x6xui8> -> tensor<1x3x6x6xi32>
  %1 = kiln.constant dense<3> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<1x3x6x6xi32>, tensor<i32> -> tensor<1x3x6x6xi32>
  %3 = kiln.cast %w : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xi32>
  %4 = kiln.cast %2 : tensor<1x3x6x6xi32> -> tensor<1x3x6x6xf64>
  %5 = kiln.cast %3 : tensor<2x3x3x3xi32> -> tensor<2x3x3x3xf64>
  %6 = kiln.constant dense<[7.000000e+00, -1.200000e+01]> : tensor<2xf64>
  // expected-remark @+1 {{int8 fallback: a channels-first convolution (the int8 kernel reads NHWC images: compile with --layout=nhwc or auto)}}
  %7 = kiln.conv %4, %5, %6 {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x6x6xf64>, tensor<2x3x3x3xf64>, tensor<2xf64>) -> tensor<1x2x6x6xf64>
  %8 = kiln.constant dense<[[[[5.000000e-01]], [[2.500000e-01]]]]> : tensor<1x2x1x1xf64>
  %9 = kiln.mul %7, %8 : tensor<1x2x6x6xf64>, tensor<1x2x1x1xf64> -> tensor<1x2x6x6xf64>
  %10 = kiln.round %9 : tensor<1x2x6x6xf64>
  %11 = kiln.clip %10 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x2x6x6xf64>
  %12 = kiln.cast %11 : tensor<1x2x6x6xf64> -> tensor<1x2x6x6xui8>
  return %12 : tensor<1x2x6x6xui8>
}

// -----

// A depthwise chain (groups = channels, one input channel per group):
// recognised, and left on the fallback.
ml_program.global private @w(dense<1> : tensor<3x3x3x1xi8>) : tensor<3x3x3x1xi8>
// CHECK-LABEL: func.func @depthwise_conv
// CHECK-SAME:    kiln.quantized_report = ["kiln.conv: exact fallback (no int8 kernel): a depthwise convolution (one channel per group: the int8 kernel's 16-channel chunks would be 15/16 zeros)"]
func.func @depthwise_conv(%x: tensor<1x6x6x3xui8>) -> tensor<1x6x6x3xi32> {
  %w = ml_program.global_load_const @w : tensor<3x3x3x1xi8>
  %0 = kiln.cast %x : tensor<1x6x6x3xui8> -> tensor<1x6x6x3xi32>
  %3 = kiln.cast %w : tensor<3x3x3x1xi8> -> tensor<3x3x3x1xi32>
  %4 = kiln.cast %0 : tensor<1x6x6x3xi32> -> tensor<1x6x6x3xf64>
  %5 = kiln.cast %3 : tensor<3x3x3x1xi32> -> tensor<3x3x3x1xf64>
  // expected-remark @+1 {{int8 fallback: a depthwise convolution}}
  %6 = kiln.conv %4, %5 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, groups = 3 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x6x6x3xf64>, tensor<3x3x3x1xf64>) -> tensor<1x6x6x3xf64>
  %7 = kiln.cast %6 : tensor<1x6x6x3xf64> -> tensor<1x6x6x3xi32>
  return %7 : tensor<1x6x6x3xi32>
}

// -----

// ConvInteger: the f64 convolution cast to i32 is the output; a report an
// earlier run left on the function stays first.
ml_program.global private @w(dense<1> : tensor<2x3x3x3xi8>) : tensor<2x3x3x3xi8>
// CHECK-LABEL: func.func @conv_integer
// CHECK-SAME:    kiln.quantized_report = ["an earlier line"]
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x6x6x2xi32>
func.func @conv_integer(%x: tensor<1x6x6x3xui8>) -> tensor<1x6x6x2xi32> attributes {kiln.quantized_report = ["an earlier line"]} {
  %w = ml_program.global_load_const @w : tensor<2x3x3x3xi8>
  %0 = kiln.cast %x : tensor<1x6x6x3xui8> -> tensor<1x6x6x3xi32>
  %1 = kiln.constant dense<7> : tensor<i32>
  %2 = kiln.sub %0, %1 : tensor<1x6x6x3xi32>, tensor<i32> -> tensor<1x6x6x3xi32>
  %3 = kiln.cast %w : tensor<2x3x3x3xi8> -> tensor<2x3x3x3xi32>
  %4 = kiln.cast %2 : tensor<1x6x6x3xi32> -> tensor<1x6x6x3xf64>
  %5 = kiln.cast %3 : tensor<2x3x3x3xi32> -> tensor<2x3x3x3xf64>
  // expected-remark @+1 {{int8 kernel (ConvInteger): A ui8 zero point 7, B i8 constant, zero point 0, output i32}}
  %6 = kiln.conv %4, %5 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x6x6x3xf64>, tensor<2x3x3x3xf64>) -> tensor<1x6x6x2xf64>
  %7 = kiln.cast %6 : tensor<1x6x6x2xf64> -> tensor<1x6x6x2xi32>
  return %7 : tensor<1x6x6x2xi32>
}

// -----

// A QDQ convolution with per-channel weight scales [0.5, 0.25] along the
// filter's dimension 0 and a bias the importer folded to f32: the int32
// bias [3, -5] (times 0.5 * w_scale) is recovered exactly.
ml_program.global private @w(dense<1> : tensor<2x1x1x1xi8>) : tensor<2x1x1x1xi8>
// CHECK-LABEL: func.func @qdq_conv
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x4x4x2xui8>
func.func @qdq_conv(%x: tensor<1x4x4x1xui8>) -> tensor<1x4x4x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xi8>
  %0 = kiln.cast %x : tensor<1x4x4x1xui8> -> tensor<1x4x4x1xf32>
  %1 = kiln.constant dense<1.000000e+01> : tensor<f32>
  %2 = kiln.sub %0, %1 : tensor<1x4x4x1xf32>, tensor<f32> -> tensor<1x4x4x1xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %2, %3 : tensor<1x4x4x1xf32>, tensor<f32> -> tensor<1x4x4x1xf32>
  %5 = kiln.cast %w : tensor<2x1x1x1xi8> -> tensor<2x1x1x1xf32>
  %6 = kiln.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
  %7 = kiln.mul %5, %6 : tensor<2x1x1x1xf32>, tensor<2x1x1x1xf32> -> tensor<2x1x1x1xf32>
  %8 = kiln.constant dense<[7.500000e-01, -6.250000e-01]> : tensor<2xf32>
  // expected-remark @+1 {{int8 kernel (QDQ conv, int32 bias): A ui8 zero point 10, B i8 constant, zero point 0, scale per column (2, 1.250000e-01 to 2.500000e-01) (f32), output ui8 zero point 128}}
  %9 = kiln.conv %4, %7, %8 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %12 = kiln.round %11 : tensor<1x4x4x2xf32>
  %13 = kiln.constant dense<1.280000e+02> : tensor<f32>
  %14 = kiln.add %12, %13 : tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %15 = kiln.clip %14 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x4x4x2xf32>
  %16 = kiln.cast %15 : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xui8>
  return %16 : tensor<1x4x4x2xui8>
}

// -----

// The same with a float bias that is no int32 times 0.5 * w_scale (0.7 is
// 2.8 steps of 0.25): the kernel could not add it exactly.
ml_program.global private @w(dense<1> : tensor<2x1x1x1xi8>) : tensor<2x1x1x1xi8>
func.func @qdq_conv_float_bias(%x: tensor<1x1x4x4xui8>) -> tensor<1x2x4x4xui8> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xi8>
  %0 = kiln.cast %x : tensor<1x1x4x4xui8> -> tensor<1x1x4x4xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %0, %3 : tensor<1x1x4x4xf32>, tensor<f32> -> tensor<1x1x4x4xf32>
  %5 = kiln.cast %w : tensor<2x1x1x1xi8> -> tensor<2x1x1x1xf32>
  %6 = kiln.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
  %7 = kiln.mul %5, %6 : tensor<2x1x1x1xf32>, tensor<2x1x1x1xf32> -> tensor<2x1x1x1xf32>
  %8 = kiln.constant dense<[7.000000e-01, -6.250000e-01]> : tensor<2xf32>
  // expected-remark @+1 {{int8 fallback: the bias is not an int32 dequantized with a_scale * w_scale}}
  %9 = kiln.conv %4, %7, %8 {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %12 = kiln.round %11 : tensor<1x2x4x4xf32>
  %15 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x2x4x4xf32>
  %16 = kiln.cast %15 : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xui8>
  return %16 : tensor<1x2x4x4xui8>
}

// -----

// A requantization clipped to other bounds than its type's (as a fused
// Relu6 could be): the kernel saturates to the type's range only.
ml_program.global private @w(dense<1> : tensor<32x16xi8>) : tensor<32x16xi8>
func.func @clip_not_type_range(%x: tensor<4x32xi8>) -> tensor<4x16xi8> {
  %w = ml_program.global_load_const @w : tensor<32x16xi8>
  %0 = kiln.cast %x : tensor<4x32xi8> -> tensor<4x32xi32>
  %1 = kiln.cast %w : tensor<32x16xi8> -> tensor<32x16xi32>
  // expected-remark @+1 {{int8 fallback: the requantized value is clipped to other bounds than its type's}}
  %2 = kiln.matmul %0, %1 : tensor<4x32xi32>, tensor<32x16xi32> -> tensor<4x16xi32>
  %3 = kiln.cast %2 : tensor<4x16xi32> -> tensor<4x16xf64>
  %4 = kiln.constant dense<2.500000e-01> : tensor<f64>
  %5 = kiln.mul %3, %4 : tensor<4x16xf64>, tensor<f64> -> tensor<4x16xf64>
  %6 = kiln.round %5 : tensor<4x16xf64>
  %7 = kiln.clip %6 {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4x16xf64>
  %8 = kiln.cast %7 : tensor<4x16xf64> -> tensor<4x16xi8>
  return %8 : tensor<4x16xi8>
}

// -----

// A graph input's QDQ in NCHW, made NHWC by kiln-assign-layout's transpose
// after the dequantize (kilnc --precision=int8 on an image model): the
// transpose moves below the cast, onto the 8-bit tensor, so A is a
// dequantized 8-bit tensor again and the chain takes the int8 kernel.
// CHECK-LABEL: func.func @qdq_conv_input_transposed
// CHECK:         %[[T:.*]] = kiln.transpose %{{.*}} {{.*}}: tensor<1x3x4x4xui8> -> tensor<1x4x4x3xui8>
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x4x4x2xui8>
// CHECK:           kiln.cast %[[T]] : tensor<1x4x4x3xui8> -> tensor<1x4x4x3xf32>
// CHECK-NOT:     kiln.transpose
ml_program.global private @w(dense<1> : tensor<2x1x1x3xi8>) : tensor<2x1x1x3xi8>
func.func @qdq_conv_input_transposed(%x: tensor<1x3x4x4xui8>) -> tensor<1x4x4x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x3xi8>
  %0 = kiln.cast %x : tensor<1x3x4x4xui8> -> tensor<1x3x4x4xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %0, %3 : tensor<1x3x4x4xf32>, tensor<f32> -> tensor<1x3x4x4xf32>
  %t = kiln.transpose %4 {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x3x4x4xf32> -> tensor<1x4x4x3xf32>
  %5 = kiln.cast %w : tensor<2x1x1x3xi8> -> tensor<2x1x1x3xf32>
  %6 = kiln.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
  %7 = kiln.mul %5, %6 : tensor<2x1x1x3xf32>, tensor<2x1x1x1xf32> -> tensor<2x1x1x3xf32>
  // expected-remark @+1 {{int8 kernel (QDQ conv): A ui8 zero point 0}}
  %9 = kiln.conv %t, %7 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x3xf32>, tensor<2x1x1x3xf32>) -> tensor<1x4x4x2xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %12 = kiln.round %11 : tensor<1x4x4x2xf32>
  %15 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x4x4x2xf32>
  %16 = kiln.cast %15 : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xui8>
  return %16 : tensor<1x4x4x2xui8>
}

// -----

// The same with one input channel, where canonicalization made the
// transpose a reshape: the reshape moves below the cast instead.
// CHECK-LABEL: func.func @qdq_conv_input_reshaped
// CHECK:         %[[R:.*]] = kiln.reshape %{{.*}} : tensor<1x1x4x4xui8> -> tensor<1x4x4x1xui8>
// CHECK:         kiln.fusion "quantized_conv" -> tensor<1x4x4x2xui8>
ml_program.global private @w(dense<1> : tensor<2x1x1x1xi8>) : tensor<2x1x1x1xi8>
func.func @qdq_conv_input_reshaped(%x: tensor<1x1x4x4xui8>) -> tensor<1x4x4x2xui8> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xi8>
  %0 = kiln.cast %x : tensor<1x1x4x4xui8> -> tensor<1x1x4x4xf32>
  %3 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %4 = kiln.mul %0, %3 : tensor<1x1x4x4xf32>, tensor<f32> -> tensor<1x1x4x4xf32>
  %t = kiln.reshape %4 : tensor<1x1x4x4xf32> -> tensor<1x4x4x1xf32>
  %5 = kiln.cast %w : tensor<2x1x1x1xi8> -> tensor<2x1x1x1xf32>
  %6 = kiln.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
  %7 = kiln.mul %5, %6 : tensor<2x1x1x1xf32>, tensor<2x1x1x1xf32> -> tensor<2x1x1x1xf32>
  // expected-remark @+1 {{int8 kernel (QDQ conv): A ui8 zero point 0}}
  %9 = kiln.conv %t, %7 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>) -> tensor<1x4x4x2xf32>
  %10 = kiln.constant dense<1.000000e+00> : tensor<f32>
  %11 = kiln.div %9, %10 : tensor<1x4x4x2xf32>, tensor<f32> -> tensor<1x4x4x2xf32>
  %12 = kiln.round %11 : tensor<1x4x4x2xf32>
  %15 = kiln.clip %12 {max = 2.550000e+02 : f64, min = 0.000000e+00 : f64} : tensor<1x4x4x2xf32>
  %16 = kiln.cast %15 : tensor<1x4x4x2xf32> -> tensor<1x4x4x2xui8>
  return %16 : tensor<1x4x4x2xui8>
}

// -----

// A per-channel dequantize (its scale is not one value) does not commute
// with the transpose: nothing moves and the float convolution stays (no
// quantized chain, no report).
// CHECK-LABEL: func.func @per_channel_input_not_moved
// CHECK:         kiln.transpose %{{.*}} : tensor<1x3x4x4xf32> -> tensor<1x4x4x3xf32>
// CHECK-NOT:     quantized_conv
ml_program.global private @w(dense<1> : tensor<2x1x1x3xi8>) : tensor<2x1x1x3xi8>
func.func @per_channel_input_not_moved(%x: tensor<1x3x4x4xui8>) -> tensor<1x4x4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x3xi8>
  %0 = kiln.cast %x : tensor<1x3x4x4xui8> -> tensor<1x3x4x4xf32>
  %3 = kiln.constant dense<[[[5.000000e-01]], [[2.500000e-01]], [[1.0]]]> : tensor<3x1x1xf32>
  %4 = kiln.mul %0, %3 : tensor<1x3x4x4xf32>, tensor<3x1x1xf32> -> tensor<1x3x4x4xf32>
  %t = kiln.transpose %4 {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x3x4x4xf32> -> tensor<1x4x4x3xf32>
  %5 = kiln.cast %w : tensor<2x1x1x3xi8> -> tensor<2x1x1x3xf32>
  %9 = kiln.conv %t, %5 {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x3xf32>, tensor<2x1x1x3xf32>) -> tensor<1x4x4x2xf32>
  return %9 : tensor<1x4x4x2xf32>
}

// -----

// QDQ fp8 (opset 19's float8 DequantizeLinear, as kilnc --precision=fp8
// writes it): e4m3 activation and weight, a per-column weight scale and an
// f32 bias; the fp8 kernel's multipliers are a_scale * w_scale[n] (0.5 *
// 0.25, 0.5 * 0.125). The QuantizeLinear to e4m3 after the sum (its
// division, the saturating clip and the cast) is the chain's too: the
// kernel stores e4m3.
// CHECK-LABEL: func.func @qdq_fp8
// CHECK-NOT:     kiln.quantized_report
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w
// CHECK-NEXT:    %[[R:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x2xf8E4M3FN> {
// CHECK-NEXT:      kiln.cast %{{.*}} : tensor<4x32xf8E4M3FN> -> tensor<4x32xf32>
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.mul
// CHECK-NEXT:      kiln.cast %[[W]] : tensor<32x2xf8E4M3FN> -> tensor<32x2xf32>
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.mul
// CHECK-NEXT:      kiln.matmul
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.add
// CHECK-NEXT:      kiln.constant
// CHECK-NEXT:      kiln.div
// CHECK-NEXT:      kiln.clip
// CHECK-NEXT:      %[[Y:.*]] = kiln.cast %{{.*}} : tensor<4x2xf32> -> tensor<4x2xf8E4M3FN>
// CHECK-NEXT:      kiln.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[R]]
ml_program.global private @w(dense<1.0> : tensor<32x2xf8E4M3FN>) : tensor<32x2xf8E4M3FN>
func.func @qdq_fp8(%x: tensor<4x32xf8E4M3FN>) -> tensor<4x2xf8E4M3FN> {
  %w = ml_program.global_load_const @w : tensor<32x2xf8E4M3FN>
  %0 = kiln.cast %x : tensor<4x32xf8E4M3FN> -> tensor<4x32xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x2xf8E4M3FN> -> tensor<32x2xf32>
  %4 = kiln.constant dense<[2.500000e-01, 1.250000e-01]> : tensor<2xf32>
  %5 = kiln.mul %3, %4 : tensor<32x2xf32>, tensor<2xf32> -> tensor<32x2xf32>
  // expected-remark @+1 {{fp8 kernel (QDQ fp8, f32 bias): A f8E4M3FN, B f8E4M3FN constant, scale per column (2, 6.250000e-02 to 1.250000e-01) (f32), output f8E4M3FN (QuantizeLinear fused, y_scale 2.000000e+00)}}
  %6 = kiln.matmul %2, %5 : tensor<4x32xf32>, tensor<32x2xf32> -> tensor<4x2xf32>
  %7 = kiln.constant dense<[1.000000e+00, -2.000000e+00]> : tensor<2xf32>
  %8 = kiln.add %6, %7 : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %9 = kiln.constant dense<2.000000e+00> : tensor<f32>
  %10 = kiln.div %8, %9 : tensor<4x2xf32>, tensor<f32> -> tensor<4x2xf32>
  %11 = kiln.clip %10 {max = 4.480000e+02 : f64, min = -4.480000e+02 : f64} : tensor<4x2xf32>
  %12 = kiln.cast %11 : tensor<4x2xf32> -> tensor<4x2xf8E4M3FN>
  return %12 : tensor<4x2xf8E4M3FN>
}

// -----

// A Relu between the sum and the QuantizeLinear (Kiln's own --precision=fp8
// keeps it: e4m3 is symmetric): the chain takes both.
// CHECK-LABEL: func.func @qdq_fp8_relu
// CHECK:         kiln.fusion "quantized_matmul" -> tensor<4x2xf8E5M2> {
// CHECK:           kiln.relu
// CHECK:           kiln.div
ml_program.global private @w(dense<1.0> : tensor<32x2xf8E4M3FN>) : tensor<32x2xf8E4M3FN>
func.func @qdq_fp8_relu(%x: tensor<4x32xf8E4M3FN>) -> tensor<4x2xf8E5M2> {
  %w = ml_program.global_load_const @w : tensor<32x2xf8E4M3FN>
  %0 = kiln.cast %x : tensor<4x32xf8E4M3FN> -> tensor<4x32xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x2xf8E4M3FN> -> tensor<32x2xf32>
  %5 = kiln.mul %3, %1 : tensor<32x2xf32>, tensor<f32> -> tensor<32x2xf32>
  // expected-remark @+1 {{fp8 kernel (QDQ fp8): A f8E4M3FN, B f8E4M3FN constant, scale 2.500000e-01 (f32), output f8E5M2 (Relu and QuantizeLinear fused, y_scale 2.000000e+00)}}
  %6 = kiln.matmul %2, %5 : tensor<4x32xf32>, tensor<32x2xf32> -> tensor<4x2xf32>
  %7 = kiln.relu %6 : tensor<4x2xf32>
  %9 = kiln.constant dense<2.000000e+00> : tensor<f32>
  %10 = kiln.div %7, %9 : tensor<4x2xf32>, tensor<f32> -> tensor<4x2xf32>
  %11 = kiln.clip %10 {max = 5.734400e+04 : f64, min = -5.734400e+04 : f64} : tensor<4x2xf32>
  %12 = kiln.cast %11 : tensor<4x2xf32> -> tensor<4x2xf8E5M2>
  return %12 : tensor<4x2xf8E5M2>
}

// -----

// A QuantizeLinear with saturate = 0 (no clip: out of range is NaN, which
// the kernel's saturating conversion would not give) stays outside: the
// chain ends at the f32 sum.
// CHECK-LABEL: func.func @qdq_fp8_no_saturate
// CHECK:         %[[R:.*]] = kiln.fusion "quantized_matmul" -> tensor<4x2xf32> {
// CHECK:         kiln.div %[[R]]
ml_program.global private @w(dense<1.0> : tensor<32x2xf8E4M3FN>) : tensor<32x2xf8E4M3FN>
func.func @qdq_fp8_no_saturate(%x: tensor<4x32xf8E4M3FN>) -> tensor<4x2xf8E4M3FN> {
  %w = ml_program.global_load_const @w : tensor<32x2xf8E4M3FN>
  %0 = kiln.cast %x : tensor<4x32xf8E4M3FN> -> tensor<4x32xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x2xf8E4M3FN> -> tensor<32x2xf32>
  %5 = kiln.mul %3, %1 : tensor<32x2xf32>, tensor<f32> -> tensor<32x2xf32>
  // expected-remark @+1 {{fp8 kernel (QDQ fp8): A f8E4M3FN, B f8E4M3FN constant, scale 2.500000e-01 (f32), output f32}}
  %6 = kiln.matmul %2, %5 : tensor<4x32xf32>, tensor<32x2xf32> -> tensor<4x2xf32>
  %9 = kiln.constant dense<2.000000e+00> : tensor<f32>
  %10 = kiln.div %6, %9 : tensor<4x2xf32>, tensor<f32> -> tensor<4x2xf32>
  %12 = kiln.cast %10 : tensor<4x2xf32> -> tensor<4x2xf8E4M3FN>
  return %12 : tensor<4x2xf8E4M3FN>
}

// -----

// The FNUZ float8 variants have no tensor-core instruction: the chain is
// recognised and left on the exact fallback, reported as an fp8 one.
// CHECK-LABEL: func.func @qdq_fp8_fnuz
// CHECK-SAME:    kiln.quantized_report = ["kiln.matmul: exact fallback (no fp8 kernel): the fp8 kernel reads f8E4M3FN and f8E5M2 operands, not f8E4M3FNUZ"]
// CHECK-NOT:     kiln.fusion
ml_program.global private @w(dense<1.0> : tensor<32x2xf8E4M3FNUZ>) : tensor<32x2xf8E4M3FNUZ>
func.func @qdq_fp8_fnuz(%x: tensor<4x32xf8E4M3FNUZ>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<32x2xf8E4M3FNUZ>
  %0 = kiln.cast %x : tensor<4x32xf8E4M3FNUZ> -> tensor<4x32xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x2xf8E4M3FNUZ> -> tensor<32x2xf32>
  %4 = kiln.mul %3, %1 : tensor<32x2xf32>, tensor<f32> -> tensor<32x2xf32>
  // expected-remark @+1 {{fp8 fallback: the fp8 kernel reads f8E4M3FN and f8E5M2 operands, not f8E4M3FNUZ}}
  %6 = kiln.matmul %2, %4 : tensor<4x32xf32>, tensor<32x2xf32> -> tensor<4x2xf32>
  return %6 : tensor<4x2xf32>
}

// -----

// An int8 activation with a float8 weight: no one kernel reads both.
// CHECK-LABEL: func.func @qdq_int8_times_fp8
// CHECK-SAME:    kiln.quantized_report = ["kiln.matmul: exact fallback (no int8 kernel): A is ui8 and B f8E5M2: one kernel reads both in 8-bit integers or both in float8"]
ml_program.global private @w(dense<1.0> : tensor<32x2xf8E5M2>) : tensor<32x2xf8E5M2>
func.func @qdq_int8_times_fp8(%x: tensor<4x32xui8>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<32x2xf8E5M2>
  %0 = kiln.cast %x : tensor<4x32xui8> -> tensor<4x32xf32>
  %1 = kiln.constant dense<5.000000e-01> : tensor<f32>
  %2 = kiln.mul %0, %1 : tensor<4x32xf32>, tensor<f32> -> tensor<4x32xf32>
  %3 = kiln.cast %w : tensor<32x2xf8E5M2> -> tensor<32x2xf32>
  %4 = kiln.mul %3, %1 : tensor<32x2xf32>, tensor<f32> -> tensor<32x2xf32>
  // expected-remark @+1 {{int8 fallback: A is ui8 and B f8E5M2}}
  %6 = kiln.matmul %2, %4 : tensor<4x32xf32>, tensor<32x2xf32> -> tensor<4x2xf32>
  return %6 : tensor<4x2xf32>
}
