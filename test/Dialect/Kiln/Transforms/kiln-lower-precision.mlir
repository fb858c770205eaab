// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16})" | FileCheck %s --check-prefixes=CHECK,BF16
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=fp16})" | FileCheck %s --check-prefixes=CHECK,FP16
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=tf32})" | FileCheck %s --check-prefix=TF32
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=fp32})" | FileCheck %s --check-prefix=FP32
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 io-precision=bf16})" | FileCheck %s --check-prefix=IO
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 residual-precision=low})" | FileCheck %s --check-prefix=LOWRES

// Running the pass twice changes nothing the second time, in every mode.
// RUN: for p in bf16 fp16 tf32; do \
// RUN:   kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=$p io-precision=fp16})" -o %t.once.$p.mlir && \
// RUN:   kiln-opt %t.once.$p.mlir -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=$p io-precision=fp16})" -o %t.twice.$p.mlir && \
// RUN:   diff %t.once.$p.mlir %t.twice.$p.mlir || exit 1; done

// Bad option values: one line naming the option, non-zero exit.
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=int8})" 2>&1 | FileCheck %s --check-prefix=BADP
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 io-precision=tf32})" 2>&1 | FileCheck %s --check-prefix=BADIO
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 residual-precision=bf16})" 2>&1 | FileCheck %s --check-prefix=BADRES
// BADRES: residual-precision 'bf16' is not one of fp32, low
// BADP: error: kiln-lower-precision: precision 'int8' is not one of fp32, tf32, bf16, fp16
// BADIO: error: kiln-lower-precision: io-precision 'tf32' is not one of fp32, bf16, fp16
// RUN: not kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 f32-head-layers=-1})" 2>&1 | FileCheck %s --check-prefix=BADHEAD
// BADHEAD: error: kiln-lower-precision: f32-head-layers -1 is negative

// f32-head-layers=N: the contractions at most N-1 others away from an
// output stay f32 (a classifier's head); those before them are lowered.
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 f32-head-layers=1})" | FileCheck %s --check-prefix=HEAD1
// RUN: kiln-opt %s -split-input-file --pass-pipeline="builtin.module(kiln-lower-precision{precision=bf16 f32-head-layers=2})" | FileCheck %s --check-prefix=HEAD2

// A matmul reads the low type and returns f32; the weight becomes a new
// global converted at compile time (1.0, 2.0, 1/3 rounded to nearest even);
// softmax after it stays f32; the model's input and output keep f32.
ml_program.global private @w(dense_resource<w> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @matmul_weight(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %z = kiln.softmax %y {axis = 1 : i64} : tensor<4x2xf32>
  return %z : tensor<4x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F00000040ABAAAA3E0000803F00000040ABAAAA3E"
    }
  }
#-}
// CHECK-NOT:     ml_program.global private @w(
// BF16:          ml_program.global private @w_bf16(dense_resource<w_bf16> : tensor<3x2xbf16>)
// FP16:          ml_program.global private @w_f16(dense_resource<w_f16> : tensor<3x2xf16>)
// CHECK-LABEL:   func.func @matmul_weight(
// CHECK-SAME:        %[[X:.*]]: tensor<4x3xf32>) -> tensor<4x2xf32>
// BF16:            %[[XL:.*]] = kiln.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// BF16:            %[[W:.*]] = ml_program.global_load_const @w_bf16 : tensor<3x2xbf16>
// BF16:            %[[Y:.*]] = kiln.matmul %[[XL]], %[[W]] : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xf32>
// FP16:            %[[XL:.*]] = kiln.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xf16>
// FP16:            %[[W:.*]] = ml_program.global_load_const @w_f16 : tensor<3x2xf16>
// FP16:            %[[Y:.*]] = kiln.matmul %[[XL]], %[[W]] : tensor<4x3xf16>, tensor<3x2xf16> -> tensor<4x2xf32>
// CHECK:           %[[Z:.*]] = kiln.softmax %[[Y]] {axis = 1 : i64} : tensor<4x2xf32>
// CHECK:           return %[[Z]] : tensor<4x2xf32>
// BF16:          w_bf16: "0x08000000803F0040AB3E803F0040AB3E"
// FP16:          w_f16: "0x08000000003C00405535003C00405535"

// tf32: operands stay f32, rounded by a cast pair; the weight's values are
// rounded at compile time (1/3 = 0x3EAAAAAB -> 0x3EAAA000); the matmul is
// marked kiln.tf32 (codegen may run it on tf32 tensor cores).
// TF32-LABEL:    ml_program.global private @w_tf32(dense_resource<w_tf32> : tensor<3x2xf32>) : tensor<3x2xf32> {kiln.tf32_rounded}
// TF32-LABEL:    func.func @matmul_weight(
// TF32-SAME:         %[[X:.*]]: tensor<4x3xf32>)
// TF32:            %[[R:.*]] = kiln.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xtf32>
// TF32:            %[[XR:.*]] = kiln.cast %[[R]] : tensor<4x3xtf32> -> tensor<4x3xf32>
// TF32:            %[[W:.*]] = ml_program.global_load_const @w_tf32 : tensor<3x2xf32>
// TF32:            kiln.matmul %[[XR]], %[[W]] {kiln.tf32} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
// TF32:          w_tf32: "0x080000000000803F0000004000A0AA3E0000803F0000004000A0AA3E"

// precision=fp32 is the identity.
// FP32-LABEL:    ml_program.global private @w(
// FP32-LABEL:    func.func @matmul_weight(
// FP32-NOT:        kiln.cast
// FP32:            kiln.matmul %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>

// io-precision=bf16: the argument and result become bf16, with casts at
// the entry (whose bf16 -> f32 -> bf16 chain into the matmul cancels) and
// before the return.
// IO-LABEL:      func.func @matmul_weight(
// IO-SAME:           %[[X:.*]]: tensor<4x3xbf16>) -> tensor<4x2xbf16>
// IO-NOT:          kiln.cast %[[X]]
// IO:              %[[Y:.*]] = kiln.matmul %[[X]], %{{.*}} : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xf32>
// IO:              %[[Z:.*]] = kiln.softmax %[[Y]]
// IO:              %[[OUT:.*]] = kiln.cast %[[Z]] : tensor<4x2xf32> -> tensor<4x2xbf16>
// IO:              return %[[OUT]] : tensor<4x2xbf16>

// -----

// A convolution's input and filter go low; its bias and result stay f32.
// One weight read both by a conv and as f32 elsewhere keeps both globals.
ml_program.global private @f(dense_resource<f> : tensor<2x1x1x1xf32>) : tensor<2x1x1x1xf32>
func.func @conv_bias(%x: tensor<1x1x4x4xf32>, %b: tensor<2xf32>) -> (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>) {
  %f = ml_program.global_load_const @f : tensor<2x1x1x1xf32>
  %y = kiln.conv %x, %f, %b {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  return %y, %f : tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      f: "0x040000000000803F00000040"
    }
  }
#-}
// CHECK:         ml_program.global private @f(
// BF16:          ml_program.global private @f_bf16(
// CHECK-LABEL:   func.func @conv_bias(
// CHECK-SAME:        %[[X:.*]]: tensor<1x1x4x4xf32>, %[[B:.*]]: tensor<2xf32>)
// BF16:            %[[XL:.*]] = kiln.cast %[[X]] : tensor<1x1x4x4xf32> -> tensor<1x1x4x4xbf16>
// BF16:            %[[FL:.*]] = ml_program.global_load_const @f_bf16
// BF16:            kiln.conv %[[XL]], %[[FL]], %[[B]] {{.*}} : (tensor<1x1x4x4xbf16>, tensor<2x1x1x1xbf16>, tensor<2xf32>) -> tensor<1x2x4x4xf32>

// -----

// conv_transpose follows the same rule.
func.func @conv_transpose(%x: tensor<1x2x3x3xf32>, %w: tensor<2x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  %y = kiln.conv_transpose %x, %w {dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x3x3xf32>, tensor<2x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}
// CHECK-LABEL:   func.func @conv_transpose(
// FP16:            kiln.conv_transpose %{{.*}}, %{{.*}} {{.*}} : (tensor<1x2x3x3xf16>, tensor<2x1x2x2xf16>) -> tensor<1x1x4x4xf32>
// BF16:            kiln.conv_transpose %{{.*}}, %{{.*}} {{.*}} : (tensor<1x2x3x3xbf16>, tensor<2x1x2x2xbf16>) -> tensor<1x1x4x4xf32>

// -----

// A contraction the model declares in f16 accumulates and returns f32; a
// cast restores the declared type for its users. f64 and integer
// contractions are left alone.
func.func @declared_f16(%a: tensor<2x3xf16>, %b: tensor<3x4xf16>, %c: tensor<2x2xf64>, %i: tensor<2x2xi32>) -> (tensor<2x4xf16>, tensor<2x2xf64>, tensor<2x2xi32>) {
  %0 = kiln.matmul %a, %b : tensor<2x3xf16>, tensor<3x4xf16> -> tensor<2x4xf16>
  %1 = kiln.matmul %c, %c : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
  %2 = kiln.matmul %i, %i : tensor<2x2xi32>, tensor<2x2xi32> -> tensor<2x2xi32>
  return %0, %1, %2 : tensor<2x4xf16>, tensor<2x2xf64>, tensor<2x2xi32>
}
// CHECK-LABEL:   func.func @declared_f16(
// CHECK:           %[[M:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<2x3xf16>, tensor<3x4xf16> -> tensor<2x4xf32>
// CHECK:           %[[N:.*]] = kiln.cast %[[M]] : tensor<2x4xf32> -> tensor<2x4xf16>
// CHECK:           kiln.matmul %{{.*}}, %{{.*}} : tensor<2x2xf64>, tensor<2x2xf64> -> tensor<2x2xf64>
// CHECK:           kiln.matmul %{{.*}}, %{{.*}} : tensor<2x2xi32>, tensor<2x2xi32> -> tensor<2x2xi32>
// CHECK:           return %[[N]],

// -----

// Softmax, layer norm, reductions and exp on f16 values compute in f32.
func.func @f32_only(%x: tensor<2x8xf16>, %g: tensor<8xf16>) -> (tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x1xf16>, tensor<2x8xf16>, tensor<2x8xf16>) {
  %0 = kiln.softmax %x {axis = 1 : i64} : tensor<2x8xf16>
  %1 = kiln.layer_norm %x, %g {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
  %2 = kiln.reduce <sum> %x {axes = array<i64: 1>} : tensor<2x8xf16> -> tensor<2x1xf16>
  %3 = kiln.exp %x : tensor<2x8xf16>
  %4 = kiln.relu %x : tensor<2x8xf16>
  return %0, %1, %2, %3, %4 : tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x1xf16>, tensor<2x8xf16>, tensor<2x8xf16>
}
// CHECK-LABEL:   func.func @f32_only(
// CHECK-SAME:        %[[X:.*]]: tensor<2x8xf16>, %[[G:.*]]: tensor<8xf16>)
// CHECK-DAG:       %[[XW:.*]] = kiln.cast %[[X]] : tensor<2x8xf16> -> tensor<2x8xf32>
// CHECK-DAG:       %[[GW:.*]] = kiln.cast %[[G]] : tensor<8xf16> -> tensor<8xf32>
// CHECK:           %[[S:.*]] = kiln.softmax %[[XW]] {axis = 1 : i64} : tensor<2x8xf32>
// CHECK:           %[[S16:.*]] = kiln.cast %[[S]] : tensor<2x8xf32> -> tensor<2x8xf16>
// CHECK:           %[[L:.*]] = kiln.layer_norm %[[XW]], %[[GW]] {{.*}} -> tensor<2x8xf32>
// CHECK:           %[[L16:.*]] = kiln.cast %[[L]] : tensor<2x8xf32> -> tensor<2x8xf16>
// CHECK:           %[[R:.*]] = kiln.reduce <sum> %[[XW]] {{.*}} : tensor<2x8xf32> -> tensor<2x1xf32>
// CHECK:           %[[R16:.*]] = kiln.cast %[[R]] : tensor<2x1xf32> -> tensor<2x1xf16>
// CHECK:           %[[E:.*]] = kiln.exp %[[XW]] : tensor<2x8xf32>
// CHECK:           %[[E16:.*]] = kiln.cast %[[E]] : tensor<2x8xf32> -> tensor<2x8xf16>
// An elementwise op between low values stays low.
// CHECK:           %[[U:.*]] = kiln.relu %[[X]] : tensor<2x8xf16>
// CHECK:           return %[[S16]], %[[L16]], %[[R16]], %[[E16]], %[[U]]

// -----

// The narrowing cast a matmul or conv needs moves above transpose, reshape
// and pad (bit for bit the same), so they move bf16.
func.func @hoist(%x: tensor<3x4xf32>, %w: tensor<12x2xf32>, %i: tensor<1x3x4x4xf32>, %f: tensor<2x3x3x3xf32>) -> (tensor<1x2xf32>, tensor<1x2x4x4xf32>) {
  %t = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %r = kiln.reshape %t : tensor<4x3xf32> -> tensor<1x12xf32>
  %y = kiln.matmul %r, %w : tensor<1x12xf32>, tensor<12x2xf32> -> tensor<1x2xf32>
  %p = kiln.pad <constant> %i {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>} : tensor<1x3x4x4xf32> -> tensor<1x3x6x6xf32>
  %c = kiln.conv %p, %f {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x6x6xf32>, tensor<2x3x3x3xf32>) -> tensor<1x2x4x4xf32>
  return %y, %c : tensor<1x2xf32>, tensor<1x2x4x4xf32>
}
// CHECK-LABEL:   func.func @hoist(
// CHECK-SAME:        %[[X:.*]]: tensor<3x4xf32>, %[[W:.*]]: tensor<12x2xf32>, %[[I:.*]]: tensor<1x3x4x4xf32>,
// BF16-DAG:        %[[XL:.*]] = kiln.cast %[[X]] : tensor<3x4xf32> -> tensor<3x4xbf16>
// BF16-DAG:        %[[IL:.*]] = kiln.cast %[[I]] : tensor<1x3x4x4xf32> -> tensor<1x3x4x4xbf16>
// BF16:            %[[T:.*]] = kiln.transpose %[[XL]] {{.*}} : tensor<3x4xbf16> -> tensor<4x3xbf16>
// BF16:            %[[R:.*]] = kiln.reshape %[[T]] : tensor<4x3xbf16> -> tensor<1x12xbf16>
// BF16:            kiln.matmul %[[R]], %{{.*}} : tensor<1x12xbf16>, tensor<12x2xbf16> -> tensor<1x2xf32>
// BF16:            %[[P:.*]] = kiln.pad <constant> %[[IL]] {{.*}} : tensor<1x3x4x4xbf16> -> tensor<1x3x6x6xbf16>
// BF16:            kiln.conv %[[P]], %{{.*}} {{.*}} : (tensor<1x3x6x6xbf16>, tensor<2x3x3x3xbf16>) -> tensor<1x2x4x4xf32>

// -----

// A max pool selects elements, so the cast the next conv needs moves above
// it (rounding is monotone: the max of rounded values is the rounded max)
// and the pool reads bf16. An average pool sums: it stays f32. A max pool
// the model declares in bf16 is not widened; an average pool is.
func.func @max_pool(%x: tensor<1x2x4x4xf32>, %f: tensor<2x2x1x1xf32>, %h: tensor<1x2x4x4xbf16>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xbf16>, tensor<1x2x2x2xbf16>) {
  %r = kiln.relu %x : tensor<1x2x4x4xf32>
  %m = kiln.pool <max> %r {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  %c = kiln.conv %m, %f {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %a = kiln.pool <avg> %r {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  %d = kiln.conv %a, %f {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %hm = kiln.pool <max> %h {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xbf16> -> tensor<1x2x2x2xbf16>
  %ha = kiln.pool <avg> %h {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xbf16> -> tensor<1x2x2x2xbf16>
  return %c, %d, %hm, %ha : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xbf16>, tensor<1x2x2x2xbf16>
}
// CHECK-LABEL:   func.func @max_pool(
// CHECK-SAME:        %[[X:.*]]: tensor<1x2x4x4xf32>, %{{.*}}: tensor<2x2x1x1xf32>, %[[H:.*]]: tensor<1x2x4x4xbf16>)
// BF16:            %[[HW:.*]] = kiln.cast %[[H]] : tensor<1x2x4x4xbf16> -> tensor<1x2x4x4xf32>
// BF16:            %[[R:.*]] = kiln.relu %[[X]] : tensor<1x2x4x4xf32>
// BF16:            %[[RL:.*]] = kiln.cast %[[R]] : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xbf16>
// BF16:            %[[M:.*]] = kiln.pool <max> %[[RL]] {{.*}} : tensor<1x2x4x4xbf16> -> tensor<1x2x2x2xbf16>
// BF16:            kiln.conv %[[M]], %{{.*}} {{.*}} : (tensor<1x2x2x2xbf16>, tensor<2x2x1x1xbf16>) -> tensor<1x2x2x2xf32>
// BF16:            %[[A:.*]] = kiln.pool <avg> %[[R]] {{.*}} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
// BF16:            %[[AL:.*]] = kiln.cast %[[A]] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xbf16>
// BF16:            kiln.conv %[[AL]], %{{.*}} {{.*}} : (tensor<1x2x2x2xbf16>, tensor<2x2x1x1xbf16>) -> tensor<1x2x2x2xf32>
// BF16:            kiln.pool <max> %[[H]] {{.*}} : tensor<1x2x4x4xbf16> -> tensor<1x2x2x2xbf16>
// BF16:            kiln.pool <avg> %[[HW]] {{.*}} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>

// -----

// A value a contraction reads narrowed and an add reads as it is (a skip
// connection): by default the add reads the exact f32 value; with
// residual-precision=low it reads the narrowed copy widened back, so only
// the bf16 copy needs storing. A returned value keeps f32.
func.func @residual(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = kiln.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %r = kiln.relu %a : tensor<2x4xf32>
  %b = kiln.matmul %r, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %s = kiln.add %b, %r : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %s, %r : tensor<2x4xf32>, tensor<2x4xf32>
}
// CHECK-LABEL:   func.func @residual(
// BF16:            %[[R:.*]] = kiln.relu
// BF16:            %[[RL:.*]] = kiln.cast %[[R]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// BF16:            %[[B:.*]] = kiln.matmul %[[RL]]
// BF16:            kiln.add %[[B]], %[[R]]
// LOWRES-LABEL:    func.func @residual(
// LOWRES:            %[[R:.*]] = kiln.relu
// LOWRES-NEXT:       %[[RL:.*]] = kiln.cast %[[R]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// LOWRES-NEXT:       %[[RW:.*]] = kiln.cast %[[RL]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// LOWRES:            %[[B:.*]] = kiln.matmul %[[RL]]
// LOWRES:            %[[S:.*]] = kiln.add %[[B]], %[[RW]]
// LOWRES:            return %[[S]], %[[R]]

// -----

// No hoisting when the data-movement result also has an f32 user: the
// transpose would run twice.
func.func @no_hoist(%x: tensor<3x4xf32>, %w: tensor<3x2xf32>) -> (tensor<4x2xf32>, tensor<4x3xf32>) {
  %t = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %y = kiln.matmul %t, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  return %y, %t : tensor<4x2xf32>, tensor<4x3xf32>
}
// CHECK-LABEL:   func.func @no_hoist(
// CHECK:           %[[T:.*]] = kiln.transpose %{{.*}} : tensor<3x4xf32> -> tensor<4x3xf32>
// BF16:            %[[TL:.*]] = kiln.cast %[[T]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// BF16:            kiln.matmul %[[TL]], %{{.*}} : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xf32>

// -----

// Casts: a lossless chain (bf16 -> f32 -> bf16) cancels; a rounding one
// (f32 -> bf16 -> f32) is kept; two casts of one value to one type merge
// into one; an unused cast goes.
func.func @casts(%a: tensor<4xbf16>, %b: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xf16>) {
  %0 = kiln.cast %a : tensor<4xbf16> -> tensor<4xf32>
  %1 = kiln.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = kiln.cast %b : tensor<4xf32> -> tensor<4xbf16>
  %3 = kiln.cast %2 : tensor<4xbf16> -> tensor<4xf32>
  %4 = kiln.cast %b : tensor<4xf32> -> tensor<4xf16>
  %5 = kiln.relu %b : tensor<4xf32>
  %6 = kiln.cast %b : tensor<4xf32> -> tensor<4xf16>
  %7 = kiln.cast %b : tensor<4xf32> -> tensor<4xi32>
  return %1, %3, %4, %6 : tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xf16>
}
// CHECK-LABEL:   func.func @casts(
// CHECK-SAME:        %[[A:.*]]: tensor<4xbf16>, %[[B:.*]]: tensor<4xf32>)
// CHECK-DAG:       %[[H:.*]] = kiln.cast %[[B]] : tensor<4xf32> -> tensor<4xf16>
// CHECK-DAG:       %[[L:.*]] = kiln.cast %[[B]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-DAG:       %[[BACK:.*]] = kiln.cast %[[L]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NOT:       kiln.cast
// CHECK:           return %[[A]], %[[BACK]], %[[H]], %[[H]]

// -----

// io-precision leaves f64 and integer arguments alone.
func.func @io_other_types(%d: tensor<2xf64>, %i: tensor<2xi32>) -> (tensor<2xf64>, tensor<2xi32>) {
  return %d, %i : tensor<2xf64>, tensor<2xi32>
}
// IO-LABEL:      func.func @io_other_types(
// IO-SAME:           tensor<2xf64>, %{{.*}}: tensor<2xi32>) -> (tensor<2xf64>, tensor<2xi32>)
// IO-NOT:          kiln.cast

// -----

// A weight that is a constant in the IR (a splat, as ConstantOfShape
// imports) is converted in place: no cast is left to run.
func.func @constant_weight(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %w = kiln.constant dense<0.333333343> : tensor<3x4xf32>
  %y = kiln.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
// CHECK-LABEL:   func.func @constant_weight(
// BF16-DAG:        %[[W:.*]] = kiln.constant dense<3.339840e-01> : tensor<3x4xbf16>
// FP16-DAG:        %[[W:.*]] = kiln.constant dense<3.332520e-01> : tensor<3x4xf16>
// CHECK-DAG:       %[[XL:.*]] = kiln.cast %{{.*}} : tensor<2x3xf32>
// CHECK:           kiln.matmul %[[XL]], %[[W]]
// IO-LABEL:      func.func @constant_weight(
// TF32-LABEL:    func.func @constant_weight(
// TF32-DAG:        %[[W:.*]] = kiln.constant dense<0.333251953> : tensor<3x4xf32>
// TF32:            kiln.matmul %{{.*}}, %[[W]] {kiln.tf32} : tensor<2x3xf32>, tensor<3x4xf32>

// -----

// Weight origins: the converted global's origin gains a convert step.
// BF16-LABEL: ml_program.global private @v_bf16({{.*}}) : tensor<3x2xbf16> {kiln.origin = "initializer f32 3x2 v\0Aconvert bf16"}
// FP16-LABEL: ml_program.global private @v_f16({{.*}}) : tensor<3x2xf16> {kiln.origin = "initializer f32 3x2 v\0Aconvert f16"}
// TF32-LABEL: ml_program.global private @v_tf32({{.*}}) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 v\0Aconvert tf32", kiln.tf32_rounded}
// FP32-LABEL: ml_program.global private @v({{.*}}) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 v"}
ml_program.global private @v(dense_resource<v> : tensor<3x2xf32>) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 v"}
func.func @origins(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @v : tensor<3x2xf32>
  %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      v: "0x040000000000803F00000040ABAAAA3E0000803F00000040ABAAAA3E"
    }
  }
#-}

// -----

// The head: conv -> matmul -> relu -> matmul -> softmax -> return. With
// one head layer only the last matmul stays f32; with two, both matmuls.
// HEAD1-LABEL: func.func @classifier_head(
// HEAD1:         kiln.conv {{.*}} : (tensor<1x3x8x8xbf16>, tensor<4x3x3x3xbf16>) -> tensor<1x4x6x6xf32>
// HEAD1:         kiln.matmul {{.*}} : tensor<1x144xbf16>, tensor<144x16xbf16> -> tensor<1x16xf32>
// HEAD1:         kiln.matmul {{.*}} : tensor<1x16xf32>, tensor<16x10xf32> -> tensor<1x10xf32>
// HEAD2-LABEL: func.func @classifier_head(
// HEAD2:         kiln.conv {{.*}} : (tensor<1x3x8x8xbf16>, tensor<4x3x3x3xbf16>) -> tensor<1x4x6x6xf32>
// HEAD2:         kiln.matmul {{.*}} : tensor<1x144xf32>, tensor<144x16xf32> -> tensor<1x16xf32>
// HEAD2:         kiln.matmul {{.*}} : tensor<1x16xf32>, tensor<16x10xf32> -> tensor<1x10xf32>
func.func @classifier_head(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %f1: tensor<144x16xf32>, %f2: tensor<16x10xf32>) -> tensor<1x10xf32> {
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %r = kiln.reshape %c : tensor<1x4x6x6xf32> -> tensor<1x144xf32>
  %h = kiln.matmul %r, %f1 : tensor<1x144xf32>, tensor<144x16xf32> -> tensor<1x16xf32>
  %a = kiln.relu %h : tensor<1x16xf32>
  %l = kiln.matmul %a, %f2 : tensor<1x16xf32>, tensor<16x10xf32> -> tensor<1x10xf32>
  %s = kiln.softmax %l {axis = 1 : i64} : tensor<1x10xf32>
  return %s : tensor<1x10xf32>
}

// -----

// A window sum (LpPool's sums of |x|^p: a convolution whose filter is
// ones, with the zeros the layout pass pads channels with) stays f32 in
// every precision: |x|^p spans more range than fp16 holds (fuzz finding
// 29: a window of values near 1e-5 cubed underflowed to 0). A filter with
// any other value is lowered as usual.
// CHECK-LABEL: func.func @window_sum_stays_f32
// CHECK:         kiln.conv %{{.*}}, %{{.*}} {{.*}} : (tensor<4x2x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<4x1x1x1xf32>
// BF16:          kiln.conv %{{.*}}, %{{.*}} {{.*}} : (tensor<4x2x2x8xbf16>, tensor<1x1x2x8xbf16>) -> tensor<4x1x1x1xf32>
// FP16:          kiln.conv %{{.*}}, %{{.*}} {{.*}} : (tensor<4x2x2x8xf16>, tensor<1x1x2x8xf16>) -> tensor<4x1x1x1xf32>
func.func @window_sum_stays_f32(%x: tensor<4x2x2x8xf32>) -> (tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>) {
  %ones = kiln.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x2x8xf32>
  %s = kiln.conv %x, %ones {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<4x2x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<4x1x1x1xf32>
  %w = kiln.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x2x8xf32>
  %c = kiln.conv %x, %w {data_format = #kiln.data_format<nhwc>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<4x2x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<4x1x1x1xf32>
  return %s, %c : tensor<4x1x1x1xf32>, tensor<4x1x1x1xf32>
}
