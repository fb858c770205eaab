// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=auto precision=bf16" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nchw" | FileCheck %s --check-prefix=NCHW
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=auto precision=fp32" | FileCheck %s --check-prefix=NCHW
// No tensor-core convolution kernels (kilnc --contraction-kernels=false):
// auto is NCHW in every precision.
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=auto precision=bf16 tensor-core-convs=false" | FileCheck %s --check-prefix=NCHW
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc channel-multiple=1" | FileCheck %s --check-prefix=NOPAD

// Running the pass a second time changes nothing.
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc" > %t.once
// RUN: kiln-opt %t.once -split-input-file -kiln-assign-layout="layout=nhwc" > %t.twice
// RUN: diff %t.once %t.twice
// RUN: kiln-opt %s -split-input-file -kiln-assign-layout="layout=nchw" > %t.nchw.once
// RUN: kiln-opt %t.nchw.once -split-input-file -kiln-assign-layout="layout=nchw" > %t.nchw.twice
// RUN: diff %t.nchw.once %t.nchw.twice

// Errors: bad option values fail the pass with one line.
// RUN: not kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhcw" 2>&1 | FileCheck %s --check-prefix=BADLAYOUT
// RUN: not kiln-opt %s -split-input-file -kiln-assign-layout="precision=fp8" 2>&1 | FileCheck %s --check-prefix=BADPRECISION
// RUN: not kiln-opt %s -split-input-file -kiln-assign-layout="layout=nhwc channel-multiple=0" 2>&1 | FileCheck %s --check-prefix=BADMULTIPLE
// BADLAYOUT: error: kiln-assign-layout: layout 'nhcw' is not one of nchw, nhwc, auto
// BADPRECISION: error: kiln-assign-layout: precision 'fp8' is not one of fp32, tf32, bf16, fp16
// BADMULTIPLE: error: kiln-assign-layout: channel-multiple 0 is not positive

// A convolution takes NHWC: its input is transposed in at the function
// argument (a graph boundary), its result back before the return (the other
// boundary), and its filter transpose folds into the weight.
// CHECK-LABEL: func.func @conv(
// CHECK-SAME:      %[[X:.*]]: tensor<1x8x16x16xf32>
// CHECK-DAG:     %[[W:.*]] = kiln.constant dense<2.500000e-01> : tensor<4x3x3x8xf32>
// CHECK-DAG:     %[[XT:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x8x16x16xf32> -> tensor<1x16x16x8xf32>
// CHECK:         %[[Y:.*]] = kiln.conv %[[XT]], %[[W]] {data_format = #kiln.data_format<nhwc>, {{.*}}} : (tensor<1x16x16x8xf32>, tensor<4x3x3x8xf32>) -> tensor<1x16x16x4xf32>
// CHECK:         %[[YT:.*]] = kiln.transpose %[[Y]] {permutation = array<i64: 0, 3, 1, 2>} : tensor<1x16x16x4xf32> -> tensor<1x4x16x16xf32>
// CHECK:         return %[[YT]]
// NCHW-LABEL: func.func @conv(
// NCHW-NOT:     kiln.transpose
// NCHW:         kiln.conv %arg0, %{{.*}} {dilations
// NCHW-NOT:     kiln.transpose
func.func @conv(%x: tensor<1x8x16x16xf32>) -> tensor<1x4x16x16xf32> {
  %w = kiln.constant dense<0.25> : tensor<4x8x3x3xf32>
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 1, 1, 1, 1>}
      : (tensor<1x8x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x16x16xf32>
  return %y : tensor<1x4x16x16xf32>
}

// -----

// Pooling takes NHWC too, and a conv transpose (filter [C, O, k...] ->
// [C, k..., O]).
// CHECK-LABEL: func.func @pool_and_conv_transpose(
// CHECK:         %[[XT:.*]] = kiln.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:         %[[P:.*]] = kiln.pool <avg> %[[XT]] {ceil_mode, data_format = #kiln.data_format<nhwc>, {{.*}}} : tensor<1x9x9x16xf32> -> tensor<1x5x5x16xf32>
// CHECK:         %[[U:.*]] = kiln.conv_transpose %[[P]], %{{.*}} {data_format = #kiln.data_format<nhwc>, {{.*}}} : (tensor<1x5x5x16xf32>, tensor<16x2x2x8xf32>) -> tensor<1x10x10x8xf32>
// CHECK:         %[[UT:.*]] = kiln.transpose %[[U]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NOT:     kiln.transpose
// CHECK:         return %[[UT]]
func.func @pool_and_conv_transpose(%x: tensor<1x16x9x9xf32>) -> tensor<1x8x10x10xf32> {
  %p = kiln.pool <avg> %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
      dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, ceil_mode}
      : tensor<1x16x9x9xf32> -> tensor<1x16x5x5xf32>
  %w = kiln.constant dense<1.0> : tensor<16x8x2x2xf32>
  %u = kiln.conv_transpose %p, %w {strides = array<i64: 2, 2>,
      dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
      output_padding = array<i64: 0, 0>}
      : (tensor<1x16x5x5xf32>, tensor<16x8x2x2xf32>) -> tensor<1x8x10x10xf32>
  return %u : tensor<1x8x10x10xf32>
}

// -----

// Pair cancellation: between two convolutions (through relu) the back and
// forth transposes cancel; only the boundary ones remain.
// CHECK-LABEL: func.func @conv_relu_conv(
// CHECK:         kiln.transpose %arg0
// CHECK:         %[[A:.*]] = kiln.conv
// CHECK-NEXT:    %[[R:.*]] = kiln.relu %[[A]] : tensor<1x8x8x8xf32>
// CHECK-NOT:     kiln.transpose
// CHECK:         %[[B:.*]] = kiln.conv %[[R]]
// CHECK-NEXT:    %[[T:.*]] = kiln.transpose %[[B]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT:    return %[[T]]
func.func @conv_relu_conv(%x: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %a = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  %r = kiln.relu %a : tensor<1x8x8x8xf32>
  %b = kiln.conv %r, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x8x8xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x8x8xf32>
  return %b : tensor<1x8x8x8xf32>
}

// -----

// Elementwise with broadcasting: a per-channel [C, 1, 1] operand (constant
// or not) only needs a reshape to [1, 1, 1, C]; a residual add of two NHWC
// values needs nothing; a scalar stays as it is.
// CHECK-LABEL: func.func @broadcast_operands(
// CHECK-SAME:      %{{.*}}: tensor<1x8x4x4xf32>, %[[S:.*]]: tensor<8x1x1xf32>
// CHECK:         %[[TWO:.*]] = kiln.constant dense<2.000000e+00> : tensor<f32>
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK:         %[[B:.*]] = kiln.constant dense<{{.*}}> : tensor<1x1x1x8xf32>
// CHECK:         %[[A:.*]] = kiln.add %[[C]], %[[B]] : tensor<1x4x4x8xf32>, tensor<1x1x1x8xf32> -> tensor<1x4x4x8xf32>
// CHECK:         %[[SR:.*]] = kiln.reshape %[[S]] : tensor<8x1x1xf32> -> tensor<1x1x1x8xf32>
// CHECK:         %[[M:.*]] = kiln.mul %[[A]], %[[SR]] : tensor<1x4x4x8xf32>, tensor<1x1x1x8xf32> -> tensor<1x4x4x8xf32>
// CHECK:         %[[D:.*]] = kiln.div %[[M]], %[[TWO]] : tensor<1x4x4x8xf32>, tensor<f32> -> tensor<1x4x4x8xf32>
// CHECK:         %[[R:.*]] = kiln.add %[[D]], %[[C]] : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>
// CHECK:         %[[K:.*]] = kiln.cast %[[R]] : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf16>
// CHECK:         %[[T:.*]] = kiln.transpose %[[K]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT:    return %[[T]] : tensor<1x8x4x4xf16>
func.func @broadcast_operands(%x: tensor<1x8x4x4xf32>, %s: tensor<8x1x1xf32>) -> tensor<1x8x4x4xf16> {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %b = kiln.constant dense<[[[1.0]], [[2.0]], [[3.0]], [[4.0]], [[5.0]], [[6.0]], [[7.0]], [[8.0]]]> : tensor<8x1x1xf32>
  %two = kiln.constant dense<2.0> : tensor<f32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %a = kiln.add %c, %b : tensor<1x8x4x4xf32>, tensor<8x1x1xf32> -> tensor<1x8x4x4xf32>
  %m = kiln.mul %a, %s : tensor<1x8x4x4xf32>, tensor<8x1x1xf32> -> tensor<1x8x4x4xf32>
  %d = kiln.div %m, %two : tensor<1x8x4x4xf32>, tensor<f32> -> tensor<1x8x4x4xf32>
  %r = kiln.add %d, %c : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf32>
  %k = kiln.cast %r : tensor<1x8x4x4xf32> -> tensor<1x8x4x4xf16>
  return %k : tensor<1x8x4x4xf16>
}

// -----

// A full-rank operand known at compile time is transposed into NHWC at
// compile time: the add reads a new global with the moved data (C, H, W =
// 2, 2, 2 holding 0..7 becomes H, W, C order 0 4 1 5 2 6 3 7).
// CHECK-LABEL: ml_program.global private @bias_nhwc(dense_resource<bias_nhwc> : tensor<1x2x2x2xf32>)
// CHECK-NOT:   ml_program.global private @bias(
// CHECK-LABEL: func.func @compile_time_operand(
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK:         %[[B:.*]] = ml_program.global_load_const @bias_nhwc : tensor<1x2x2x2xf32>
// CHECK:         kiln.add %[[C]], %[[B]] : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
// CHECK:         bias_nhwc: "0x0800000000000000000080400000803F0000A040000000400000C040000040400000E040"
ml_program.global private @bias(dense_resource<bias> : tensor<1x2x2x2xf32>) : tensor<1x2x2x2xf32>
func.func @compile_time_operand(%x: tensor<1x8x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = kiln.constant dense<0.5> : tensor<2x8x1x1xf32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x2x2xf32>, tensor<2x8x1x1xf32>) -> tensor<1x2x2x2xf32>
  %b = ml_program.global_load_const @bias : tensor<1x2x2x2xf32>
  %a = kiln.add %c, %b : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
  return %a : tensor<1x2x2x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      bias: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E040"
    }
  }
#-}

// -----

// An operand that is neither NHWC, nor known at compile time, nor a pure
// relabeling would need a transpose at run time: the op stays in NCHW and
// the layouts meet in front of it.
// CHECK-LABEL: func.func @blocked_by_activation(
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK:         %[[T:.*]] = kiln.transpose %[[C]] {permutation = array<i64: 0, 3, 1, 2>} : tensor<1x4x4x8xf32> -> tensor<1x8x4x4xf32>
// CHECK:         kiln.add %[[T]], %arg1 : tensor<1x8x4x4xf32>, tensor<8x4x4xf32>
func.func @blocked_by_activation(%x: tensor<1x8x4x4xf32>, %y: tensor<8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %a = kiln.add %c, %y : tensor<1x8x4x4xf32>, tensor<8x4x4xf32> -> tensor<1x8x4x4xf32>
  return %a : tensor<1x8x4x4xf32>
}

// -----

// Reductions, softmax, concat, batch_norm and global_pool follow their
// input into NHWC with remapped axes; a reduction without keepdims whose
// surviving dims keep their order needs no transpose after it, and global
// pooling's [N, C, 1, 1] result is a reshape away from NHWC.
// CHECK-LABEL: func.func @reductions(
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK:         %[[BN:.*]] = kiln.batch_norm %[[C]], {{.*}} {data_format = #kiln.data_format<nhwc>} : (tensor<2x4x4x8xf32>
// CHECK:         %[[CAT:.*]] = kiln.concat %[[C]], %[[BN]] {axis = 3 : i64} : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32> -> tensor<2x4x4x16xf32>
// CHECK:         %[[CATT:.*]] = kiln.transpose %[[CAT]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK:         %[[SUM:.*]] = kiln.reduce <sum> %[[C]] {axes = array<i64: 3>, keepdims = false} : tensor<2x4x4x8xf32> -> tensor<2x4x4xf32>
// CHECK:         %[[GP:.*]] = kiln.global_pool <avg> %[[BN]] {data_format = #kiln.data_format<nhwc>} : tensor<2x4x4x8xf32> -> tensor<2x1x1x8xf32>
// CHECK:         %[[GPR:.*]] = kiln.reshape %[[GP]] : tensor<2x1x1x8xf32> -> tensor<2x8x1x1xf32>
// CHECK:         %[[SM:.*]] = kiln.softmax %[[BN]] {axis = 3 : i64} : tensor<2x4x4x8xf32>
// CHECK:         %[[SMT:.*]] = kiln.transpose %[[SM]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK:         %[[MAX:.*]] = kiln.reduce <max> %[[BN]] {axes = array<i64: 1, 2>, keepdims = false} : tensor<2x4x4x8xf32> -> tensor<2x8xf32>
// CHECK:         %[[MEAN:.*]] = kiln.reduce <mean> %[[BN]] {axes = array<i64: 1>} : tensor<2x4x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK:         %[[MEANT:.*]] = kiln.transpose %[[MEAN]] {permutation = array<i64: 0, 3, 1, 2>} : tensor<2x1x4x8xf32> -> tensor<2x8x1x4xf32>
// CHECK:         %[[ARG:.*]] = kiln.argmax %[[BN]] {axis = 2 : i64, keepdims = false} : tensor<2x4x4x8xf32> -> tensor<2x4x8xi64>
// CHECK:         %[[ARGT:.*]] = kiln.transpose %[[ARG]] {permutation = array<i64: 0, 2, 1>} : tensor<2x4x8xi64> -> tensor<2x8x4xi64>
// CHECK:         return %[[CATT]], %[[SUM]], %[[GPR]], %[[SMT]], %[[MAX]], %[[MEANT]], %[[ARGT]]
func.func @reductions(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>)
    -> (tensor<2x16x4x4xf32>, tensor<2x4x4xf32>, tensor<2x8x1x1xf32>,
        tensor<2x8x4x4xf32>, tensor<2x8xf32>, tensor<2x8x1x4xf32>, tensor<2x8x4xi64>) {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %bn = kiln.batch_norm %c, %s, %s, %s, %s {epsilon = 1.0e-05 : f32}
      : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> tensor<2x8x4x4xf32>
  %cat = kiln.concat %c, %bn {axis = 1 : i64}
      : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32> -> tensor<2x16x4x4xf32>
  %sum = kiln.reduce <sum> %c {axes = array<i64: 1>, keepdims = false}
      : tensor<2x8x4x4xf32> -> tensor<2x4x4xf32>
  %gp = kiln.global_pool <avg> %bn : tensor<2x8x4x4xf32> -> tensor<2x8x1x1xf32>
  %sm = kiln.softmax %bn {axis = 1 : i64} : tensor<2x8x4x4xf32>
  %max = kiln.reduce <max> %bn {axes = array<i64: 2, 3>, keepdims = false}
      : tensor<2x8x4x4xf32> -> tensor<2x8xf32>
  %mean = kiln.reduce <mean> %bn {axes = array<i64: 2>, keepdims = true}
      : tensor<2x8x4x4xf32> -> tensor<2x8x1x4xf32>
  %arg = kiln.argmax %bn {axis = 3 : i64, keepdims = false}
      : tensor<2x8x4x4xf32> -> tensor<2x8x4xi64>
  return %cat, %sum, %gp, %sm, %max, %mean, %arg
      : tensor<2x16x4x4xf32>, tensor<2x4x4xf32>, tensor<2x8x1x1xf32>,
        tensor<2x8x4x4xf32>, tensor<2x8xf32>, tensor<2x8x1x4xf32>, tensor<2x8x4xi64>
}

// -----

// slice, pad and split: per-dimension lists and the axis are permuted (the
// first piece has one channel, so its way back is a reshape).
// CHECK-LABEL: func.func @data_movement(
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK:         %[[S:.*]] = kiln.slice %[[C]] {limits = array<i64: 1, 4, 4, 6>, starts = array<i64: 0, 1, 0, 2>, steps = array<i64: 1, 1, 2, 1>} : tensor<1x4x4x8xf32> -> tensor<1x3x2x4xf32>
// CHECK:         %[[P:.*]] = kiln.pad <constant> %[[S]] {high = array<i64: 0, 0, 1, 0>, low = array<i64: 0, 1, 0, 0>} : tensor<1x3x2x4xf32> -> tensor<1x4x3x4xf32>
// CHECK:         %[[SP:.*]]:2 = kiln.split %[[P]] {axis = 3 : i64, sizes = array<i64: 1, 3>}
// CHECK-DAG:     kiln.reshape %[[SP]]#0 : tensor<1x4x3x1xf32> -> tensor<1x1x4x3xf32>
// CHECK-DAG:     kiln.transpose %[[SP]]#1 {permutation = array<i64: 0, 3, 1, 2>}
func.func @data_movement(%x: tensor<1x8x4x4xf32>) -> (tensor<1x1x4x3xf32>, tensor<1x3x4x3xf32>) {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %s = kiln.slice %c {starts = array<i64: 0, 2, 1, 0>, limits = array<i64: 1, 6, 4, 4>,
      steps = array<i64: 1, 1, 1, 2>} : tensor<1x8x4x4xf32> -> tensor<1x4x3x2xf32>
  %p = kiln.pad <constant> %s {low = array<i64: 0, 0, 1, 0>, high = array<i64: 0, 0, 0, 1>}
      : tensor<1x4x3x2xf32> -> tensor<1x4x4x3xf32>
  %a, %b = kiln.split %p {axis = 1 : i64, sizes = array<i64: 1, 3>}
      : tensor<1x4x4x3xf32> -> tensor<1x1x4x3xf32>, tensor<1x3x4x3xf32>
  return %a, %b : tensor<1x1x4x3xf32>, tensor<1x3x4x3xf32>
}

// -----

// An op with no NHWC variant (lrn) is where the layouts meet: transposes
// stay on both sides of it.
// CHECK-LABEL: func.func @lrn_between_convs(
// CHECK:         %[[A:.*]] = kiln.conv
// CHECK:         %[[AT:.*]] = kiln.transpose %[[A]] {permutation = array<i64: 0, 3, 1, 2>}
// CHECK:         %[[L:.*]] = kiln.lrn %[[AT]]
// CHECK:         %[[LT:.*]] = kiln.transpose %[[L]] {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:         kiln.conv %[[LT]]
func.func @lrn_between_convs(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %a = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %l = kiln.lrn %a {size = 3 : i64} : tensor<1x8x4x4xf32>
  %b = kiln.conv %l, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  return %b : tensor<1x8x4x4xf32>
}

// -----

// Channel padding: a 3-channel input layer reads its input padded with 5
// zero channels and a filter padded alike at compile time (filter [1, 2, 1,
// 2] holding 0..3: NHWC order 0 2 1 3, then zeros); the function keeps its
// signature. With channel-multiple=1 nothing is padded.
// CHECK-LABEL: ml_program.global private @w_nhwc_pad(dense_resource<w_nhwc_pad> : tensor<1x1x2x8xf32>)
// CHECK-LABEL: func.func @pad_channels(
// CHECK-SAME:      %[[X:.*]]: tensor<1x2x4x4xf32>) -> tensor<1x1x4x3xf32>
// CHECK:         %[[XT:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x2x4x4xf32> -> tensor<1x4x4x2xf32>
// CHECK:         %[[XP:.*]] = kiln.pad <constant> %[[XT]] {high = array<i64: 0, 0, 0, 6>, low = array<i64: 0, 0, 0, 0>} : tensor<1x4x4x2xf32> -> tensor<1x4x4x8xf32>
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w_nhwc_pad : tensor<1x1x2x8xf32>
// CHECK:         kiln.conv %[[XP]], %[[W]] {{.*}} : (tensor<1x4x4x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x4x3x1xf32>
// CHECK:         w_nhwc_pad: "0x0800000000000000000000400000000000000000000000000000000000000000000000000000803F00004040000000000000000000000000000000000000000000000000"
// NOPAD-LABEL: ml_program.global private @w_nhwc(dense_resource<w_nhwc> : tensor<1x1x2x2xf32>)
// NOPAD-LABEL: func.func @pad_channels(
// NOPAD-NOT:     kiln.pad
// NOPAD:         w_nhwc: "0x0800000000000000000000400000803F00004040"
ml_program.global private @w(dense_resource<w> : tensor<1x2x1x2xf32>) : tensor<1x2x1x2xf32>
func.func @pad_channels(%x: tensor<1x2x4x4xf32>) -> tensor<1x1x4x3xf32> {
  %w = ml_program.global_load_const @w : tensor<1x2x1x2xf32>
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x2x4x4xf32>, tensor<1x2x1x2xf32>) -> tensor<1x1x4x3xf32>
  return %y : tensor<1x1x4x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x04000000000000000000803F0000004000004040"
    }
  }
#-}

// -----

// Two filters computed from constants alone (no source global), of one
// shape, padded to 8 channels: each gets a global of its own (they shared
// one, so the second conv read the first's weights; the fusion fuzzer's
// nhwc-two-convs-padded-weights).
// CHECK-LABEL: func.func @constant_filters(
// CHECK:         %[[W0:.*]] = ml_program.global_load_const @[[G0:kiln_layout_weight_pad[_0-9]*]] : tensor<4x2x2x8xf32>
// CHECK:         kiln.conv %{{.*}}, %[[W0]]
// CHECK-NOT:     ml_program.global_load_const @[[G0]] :
// CHECK:         %[[W1:.*]] = ml_program.global_load_const @{{kiln_layout_weight_pad[_0-9]*}} : tensor<4x2x2x8xf32>
// CHECK:         kiln.conv %{{.*}}, %[[W1]]
func.func @constant_filters(%x: tensor<1x4x3x3xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) {
  %w0 = kiln.constant dense<1.0> : tensor<4x4x2x2xf32>
  %w1 = kiln.constant dense<2.0> : tensor<4x4x2x2xf32>
  %y0 = kiln.conv %x, %w0 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x4x3x3xf32>, tensor<4x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %y1 = kiln.conv %x, %w1 {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x4x3x3xf32>, tensor<4x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  return %y0, %y1 : tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>
}

// -----

// Grouped convolutions are not padded (a depthwise conv has one channel
// per group), and 1-D convolutions keep their layout.
// CHECK-LABEL: func.func @not_converted_or_padded(
// CHECK:         kiln.conv {{.*}}groups = 3 : i64{{.*}} : (tensor<1x4x4x3xf32>, tensor<3x3x3x1xf32>) -> tensor<1x4x4x3xf32>
// CHECK:         kiln.conv %arg1, {{.*}} : (tensor<1x3x10xf32>, tensor<2x3x3xf32>) -> tensor<1x2x8xf32>
func.func @not_converted_or_padded(%x: tensor<1x3x4x4xf32>, %y: tensor<1x3x10xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x2x8xf32>) {
  %w = kiln.constant dense<0.5> : tensor<3x1x3x3xf32>
  %a = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 1, 1, 1, 1>, groups = 3 : i64}
      : (tensor<1x3x4x4xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x4x4xf32>
  %v = kiln.constant dense<0.5> : tensor<2x3x3xf32>
  %b = kiln.conv %y, %v {strides = array<i64: 1>, dilations = array<i64: 1>,
      padding = array<i64: 0, 0>}
      : (tensor<1x3x10xf32>, tensor<2x3x3xf32>) -> tensor<1x2x8xf32>
  return %a, %b : tensor<1x3x4x4xf32>, tensor<1x2x8xf32>
}

// -----

// Weight transposes fold into the weights with any layout: a Gemm's
// transposed [2, 3] weight becomes a global holding its transpose.
// CHECK-LABEL: ml_program.global private @m_t(dense_resource<m_t> : tensor<3x2xf32>)
// NCHW-LABEL: ml_program.global private @m_t(dense_resource<m_t> : tensor<3x2xf32>)
// NCHW-NOT:   ml_program.global private @m(
// NCHW-LABEL: func.func @gemm_weight(
// NCHW:         %[[M:.*]] = ml_program.global_load_const @m_t : tensor<3x2xf32>
// NCHW:         kiln.matmul %arg0, %[[M]]
// NCHW:         m_t: "0x0800000000000000000040400000803F00008040000000400000A040"
ml_program.global private @m(dense_resource<m> : tensor<2x3xf32>) : tensor<2x3xf32>
func.func @gemm_weight(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %m = ml_program.global_load_const @m : tensor<2x3xf32>
  %t = kiln.transpose %m {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %y = kiln.matmul %x, %t : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      m: "0x04000000000000000000803F0000004000004040000080400000A040"
    }
  }
#-}

// -----

// A model that is NHWC already (a transpose into NCHW at its input, as
// converters write): the converted conv's input transpose cancels it.
// CHECK-LABEL: func.func @nhwc_model(
// CHECK-NOT:     kiln.transpose %arg0
// CHECK:         %[[C:.*]] = kiln.conv %arg0
// CHECK-NOT:     kiln.transpose
// CHECK:         return %[[C]] : tensor<1x4x4x8xf32>
func.func @nhwc_model(%x: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %t = kiln.transpose %x {permutation = array<i64: 0, 3, 1, 2>} : tensor<1x4x4x8xf32> -> tensor<1x8x4x4xf32>
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %c = kiln.conv %t, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %r = kiln.transpose %c {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x8x4x4xf32> -> tensor<1x4x4x8xf32>
  return %r : tensor<1x4x4x8xf32>
}

// -----

// A channel shuffle between convolutions (reshape splitting the channels,
// transpose of the factors, reshape merging them): the reshapes move to
// NHWC and the three transposes compose into one that swaps the factors.
// CHECK-LABEL: func.func @channel_shuffle(
// CHECK:         %[[A:.*]] = kiln.conv
// CHECK-NEXT:    %[[S:.*]] = kiln.reshape %[[A]] : tensor<1x4x4x8xf32> -> tensor<1x4x4x2x4xf32>
// CHECK-NEXT:    %[[T:.*]] = kiln.transpose %[[S]] {permutation = array<i64: 0, 1, 2, 4, 3>} : tensor<1x4x4x2x4xf32> -> tensor<1x4x4x4x2xf32>
// CHECK-NEXT:    %[[M:.*]] = kiln.reshape %[[T]] : tensor<1x4x4x4x2xf32> -> tensor<1x4x4x8xf32>
// CHECK-NOT:     kiln.transpose
// CHECK:         kiln.conv %[[M]]
// NCHW-LABEL: func.func @channel_shuffle(
// NCHW:         kiln.reshape {{.*}} : tensor<1x8x4x4xf32> -> tensor<1x2x4x4x4xf32>
// NCHW-NEXT:    kiln.transpose {{.*}} {permutation = array<i64: 0, 2, 1, 3, 4>}
func.func @channel_shuffle(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %a = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  %s = kiln.reshape %a : tensor<1x8x4x4xf32> -> tensor<1x2x4x4x4xf32>
  %t = kiln.transpose %s {permutation = array<i64: 0, 2, 1, 3, 4>}
      : tensor<1x2x4x4x4xf32> -> tensor<1x4x2x4x4xf32>
  %m = kiln.reshape %t : tensor<1x4x2x4x4xf32> -> tensor<1x8x4x4xf32>
  %b = kiln.conv %m, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  return %b : tensor<1x8x4x4xf32>
}

// -----

// A classifier reading a flattened NHWC activation reads it flattened in
// NHWC order, with its weight rows permuted to match at compile time (rows
// c * 2 + w holding 0..3 become w * 2 + c: 0 2 1 3): no transpose before
// the flatten.
// CHECK-LABEL: ml_program.global private @fc_t(dense_resource<fc_t> : tensor<1x2x2x1xf32>)
// CHECK-LABEL: func.func @flatten_into_weights(
// CHECK:         %[[C:.*]] = kiln.conv
// CHECK-NOT:     kiln.transpose
// CHECK-DAG:     %[[F:.*]] = kiln.reshape %[[C]] : tensor<1x1x2x2xf32> -> tensor<1x4xf32>
// CHECK-DAG:     %[[W:.*]] = ml_program.global_load_const @fc_t : tensor<1x2x2x1xf32>
// CHECK-DAG:     %[[WR:.*]] = kiln.reshape %[[W]] : tensor<1x2x2x1xf32> -> tensor<4x1xf32>
// CHECK:         kiln.matmul %[[F]], %[[WR]]
// CHECK:         fc_t: "0x0800000000000000000000400000803F00004040"
// NCHW-LABEL: func.func @flatten_into_weights(
// NCHW:         kiln.matmul %{{.*}}, %{{.*}} : tensor<1x4xf32>, tensor<4x1xf32>
ml_program.global private @fc(dense_resource<fc> : tensor<4x1xf32>) : tensor<4x1xf32>
func.func @flatten_into_weights(%x: tensor<1x8x1x2xf32>) -> tensor<1x1xf32> {
  %w = kiln.constant dense<0.5> : tensor<2x8x1x1xf32>
  %c = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x1x2xf32>, tensor<2x8x1x1xf32>) -> tensor<1x2x1x2xf32>
  %f = kiln.reshape %c : tensor<1x2x1x2xf32> -> tensor<1x4xf32>
  %fc = ml_program.global_load_const @fc : tensor<4x1xf32>
  %y = kiln.matmul %f, %fc : tensor<1x4xf32>, tensor<4x1xf32> -> tensor<1x1xf32>
  return %y : tensor<1x1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      fc: "0x04000000000000000000803F0000004000004040"
    }
  }
#-}

// -----

// Input preprocessing before the first convolution: the transpose into
// NHWC moves above it to the function argument (the graph boundary); the
// per-channel scale becomes [1, 1, 1, C].
// CHECK-LABEL: func.func @hoist_to_input(
// CHECK-DAG:     %[[S:.*]] = kiln.constant dense<{{.*}}> : tensor<1x1x1x8xf32>
// CHECK-DAG:     %[[XT:.*]] = kiln.transpose %arg0 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:         %[[M:.*]] = kiln.mul %[[XT]], %[[S]] : tensor<1x4x4x8xf32>, tensor<1x1x1x8xf32> -> tensor<1x4x4x8xf32>
// CHECK-NEXT:    %[[N:.*]] = kiln.neg %[[M]] : tensor<1x4x4x8xf32>
// CHECK-NOT:     kiln.transpose
// CHECK:         kiln.conv %[[N]]
func.func @hoist_to_input(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %s = kiln.constant dense<[[[1.0]], [[2.0]], [[3.0]], [[4.0]], [[5.0]], [[6.0]], [[7.0]], [[8.0]]]> : tensor<8x1x1xf32>
  %m = kiln.mul %x, %s : tensor<1x8x4x4xf32>, tensor<8x1x1xf32> -> tensor<1x8x4x4xf32>
  %n = kiln.neg %m : tensor<1x8x4x4xf32>
  %w = kiln.constant dense<0.5> : tensor<8x8x1x1xf32>
  %c = kiln.conv %n, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x4x4xf32>
  return %c : tensor<1x8x4x4xf32>
}

// -----

// Weight origins: the folded global's origin is its source's plus the
// transpose and the zero padding (kiln-run --weights replays them).
// CHECK-LABEL: ml_program.global private @w_nhwc_pad({{.*}}) : tensor<1x1x2x8xf32> {kiln.origin = "initializer f32 1x2x1x2 w\0Atranspose 0,2,3,1\0Apad 0,0,0,0 0,0,0,6"}
// CHECK-LABEL: func.func @origins(
// NCHW-LABEL: ml_program.global private @w({{.*}}) : tensor<1x2x1x2xf32> {kiln.origin = "initializer f32 1x2x1x2 w"}
ml_program.global private @w(dense_resource<w> : tensor<1x2x1x2xf32>) : tensor<1x2x1x2xf32> {kiln.origin = "initializer f32 1x2x1x2 w"}
func.func @origins(%x: tensor<1x2x4x4xf32>) -> tensor<1x1x4x3xf32> {
  %w = ml_program.global_load_const @w : tensor<1x2x1x2xf32>
  %y = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
      padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x2x4x4xf32>, tensor<1x2x1x2xf32>) -> tensor<1x1x4x3xf32>
  return %y : tensor<1x1x4x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x04000000000000000000803F0000004000004040"
    }
  }
#-}
