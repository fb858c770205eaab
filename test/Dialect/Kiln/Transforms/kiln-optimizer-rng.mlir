// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd seed=4294967301})" | FileCheck %s

// kiln-optimizer feeds kiln-autodiff's dropout arguments from the state:
// rng.key becomes the state rng.key (first value [seed mod 2^32, seed div
// 2^32] = [5, 1] for seed 2^32 + 5, no update) and rng.counter is [0, 0,
// opt.step, 0], the step before this one as i32.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    %{{[^:]*}}: tensor<4x2xf32> {kiln.name = "x"}, %[[K:[^:]*]]: tensor<2xi32> {kiln.initial = dense<[5, 1]> : tensor<2xi32>, kiln.name = "kiln.state.rng.key", kiln.state = "rng.key"}, %{{[^:]*}}: tensor<4x2xf32> {kiln.name = "t"}
// CHECK-SAME:    %[[S:[^:]*]]: tensor<f32> {kiln.name = "kiln.state.opt.step", kiln.state = "opt.step"})
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<2xf32> {kiln.name = "kiln.state.params.next", kiln.state = "params"}, tensor<f32> {kiln.name = "kiln.state.opt.step.next", kiln.state = "opt.step"})
// CHECK:         %[[SI:.*]] = kiln.cast %[[S]] : tensor<f32> -> tensor<i32>
// CHECK:         %[[SW:.*]] = kiln.reshape %[[SI]] : tensor<i32> -> tensor<1xi32>
// CHECK:         %[[Z2:.*]] = kiln.constant dense<0> : tensor<2xi32>
// CHECK:         %[[Z1:.*]] = kiln.constant dense<0> : tensor<1xi32>
// CHECK:         %[[C:.*]] = kiln.concat %[[Z2]], %[[SW]], %[[Z1]] {axis = 0 : i64} : tensor<2xi32>, tensor<1xi32>, tensor<1xi32> -> tensor<4xi32>
// CHECK:         kiln.dropout_mask %[[K]], %[[C]] {ratio = 5.000000e-01 : f32}
ml_program.global private @w(dense<0.5> : tensor<2xf32>) : tensor<2xf32>
func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
  %w = ml_program.global_load_const @w : tensor<2xf32>
  %a = kiln.mul %x, %w : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  return %a : tensor<4x2xf32>
}
func.func @train_grad(%x: tensor<4x2xf32> {kiln.name = "x"}, %key: tensor<2xi32> {kiln.name = "rng.key"}, %counter: tensor<4xi32> {kiln.name = "rng.counter"}, %t: tensor<4x2xf32> {kiln.name = "t"}) -> (tensor<f32>, tensor<2xf32>) attributes {kiln.gradients = [@w]} {
  %w = ml_program.global_load_const @w : tensor<2xf32>
  %m = kiln.dropout_mask %key, %counter {ratio = 0.5 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<4x2xf32>
  %a = kiln.mul %x, %w : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %y = kiln.mul %a, %m : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  %d = kiln.sub %y, %t : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  %l = kiln.reduce <mean> %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  %g = kiln.reduce <sum> %d {axes = array<i64: 0>, keepdims = false} : tensor<4x2xf32> -> tensor<2xf32>
  return %l, %g : tensor<f32>, tensor<2xf32>
}
