// kiln-optimizer data-parallel=true bucket-elements=E (kilnc --bucket-mb):
// the gradients grouped into buckets from the last weight to the first, each
// a state of its own (grad.0 holds the last weights) that @train_step
// assembles right after the last of its gradients is computed, so its
// all-reduce can start while the backward pass goes on; @train_update
// concatenates them back in offset order.
//
// Three weights, laid out W1 (2x3: 6 elements at 0), b1 (3 at 6), W2 (3x2: 6
// at 9); the backward computes gW2 first, then gb1 and gW1. With E = 9:
// grad.0 = W2 alone (b1 would make 9 + ... no: 6 + 3 = 9 fits), so grad.0 =
// [b1, W2] (9 elements) and grad.1 = W1 (6).
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd lr=0.5 data-parallel=true bucket-elements=9})" | FileCheck %s
// E = 6: no two neighbours fit together: W2, b1 and W1 each alone.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd data-parallel=true bucket-elements=6})" | FileCheck %s --check-prefix=THREE
// E large enough for everything, or 0: one state `grad`, as without buckets.
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd data-parallel=true bucket-elements=15})" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{optimizer=sgd data-parallel=true})" | FileCheck %s --check-prefix=ONE

// Bad options: one line, non-zero exit.
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{bucket-elements=9})" 2>&1 | FileCheck %s --check-prefix=NODP
// NODP: error: kiln-optimizer: bucket-elements needs data-parallel=true
// RUN: not kiln-opt %s --pass-pipeline="builtin.module(kiln-optimizer{data-parallel=true bucket-elements=-1})" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: kiln-optimizer: bucket-elements must not be negative (bucket-elements=-1)

// The buckets in the module's kiln.training, offsets into the flat gradients.
// CHECK: kiln.training = {buckets = [{count = 9 : i64, offset = 6 : i64, state = "grad.0"}, {count = 6 : i64, offset = 0 : i64, state = "grad.1"}]

// @train_step returns grad.0 then grad.1. grad.0's concat comes right after
// gb1 (its last gradient), before gW1's matmul: nothing of the rest of the
// backward pass has to run first.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<9xf32> {kiln.name = "kiln.state.grad.0.next", kiln.state = "grad.0"}, tensor<6xf32> {kiln.name = "kiln.state.grad.1.next", kiln.state = "grad.1"})
// The flattening reshape follows its gradient rather than sitting at the
// end.
// CHECK:         %[[GW2:.*]] = kiln.matmul %{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    %[[FW2:.*]] = kiln.reshape %[[GW2]] : tensor<3x2xf32> -> tensor<6xf32>
// CHECK:         %[[GB1:.*]] = kiln.reduce <sum>
// CHECK-NEXT:    %[[B0:.*]] = kiln.concat %[[GB1]], %[[FW2]] {axis = 0 : i64} : tensor<3xf32>, tensor<6xf32> -> tensor<9xf32>
// CHECK:         %[[GW1:.*]] = kiln.matmul
// CHECK-NEXT:    %[[B1:.*]] = kiln.reshape %[[GW1]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK:         return %{{.*}}, %[[B0]], %[[B1]] : tensor<f32>, tensor<9xf32>, tensor<6xf32>

// @train_update reads both and concatenates them in offset order (grad.1
// first) before the rule.
// CHECK-LABEL: func.func @train_update(
// CHECK-SAME:    %[[P:[a-z0-9]+]]: tensor<15xf32> {kiln.name = "kiln.state.params", kiln.state = "params"},
// CHECK-SAME:    %[[U0:[a-z0-9]+]]: tensor<9xf32> {kiln.name = "kiln.state.grad.0", kiln.state = "grad.0"},
// CHECK-SAME:    %[[U1:[a-z0-9]+]]: tensor<6xf32> {kiln.name = "kiln.state.grad.1", kiln.state = "grad.1"})
// CHECK:         %[[FLAT:.*]] = kiln.concat %[[U1]], %[[U0]] {axis = 0 : i64} : tensor<6xf32>, tensor<9xf32> -> tensor<15xf32>
// CHECK:         kiln.mul %{{.*}}, %[[FLAT]]

// THREE: buckets = [{count = 6 : i64, offset = 9 : i64, state = "grad.0"}, {count = 3 : i64, offset = 6 : i64, state = "grad.1"}, {count = 6 : i64, offset = 0 : i64, state = "grad.2"}]
// THREE-LABEL: func.func @train_update(
// THREE:         kiln.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<6xf32>, tensor<3xf32>, tensor<6xf32> -> tensor<15xf32>

// ONE: buckets = [{count = 15 : i64, offset = 0 : i64, state = "grad"}]
// ONE-LABEL: func.func @train_step(
// ONE-SAME:    tensor<15xf32> {kiln.name = "kiln.state.grad.next", kiln.state = "grad"})
// ONE-NOT:     grad.0
// ONE-LABEL: func.func @train_update(
// ONE-SAME:    tensor<15xf32> {kiln.name = "kiln.state.grad", kiln.state = "grad"})

ml_program.global private @W1(dense<1.0> : tensor<2x3xf32>) : tensor<2x3xf32>
ml_program.global private @b1(dense<0.5> : tensor<3xf32>) : tensor<3xf32>
ml_program.global private @W2(dense<0.25> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
  %W1 = ml_program.global_load_const @W1 : tensor<2x3xf32>
  %b1 = ml_program.global_load_const @b1 : tensor<3xf32>
  %W2 = ml_program.global_load_const @W2 : tensor<3x2xf32>
  %0 = kiln.matmul %x, %W1 : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %1 = kiln.add %0, %b1 : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %2 = kiln.matmul %1, %W2 : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  return %2 : tensor<4x2xf32>
}
func.func @train_grad(%x: tensor<4x2xf32> {kiln.name = "x"}, %t: tensor<4x2xf32> {kiln.name = "labels"}) -> (tensor<f32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>) attributes {kiln.gradients = [@W1, @b1, @W2]} {
  %W1 = ml_program.global_load_const @W1 : tensor<2x3xf32>
  %b1 = ml_program.global_load_const @b1 : tensor<3xf32>
  %W2 = ml_program.global_load_const @W2 : tensor<3x2xf32>
  %0 = kiln.matmul %x, %W1 : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %1 = kiln.add %0, %b1 : tensor<4x3xf32>, tensor<3xf32> -> tensor<4x3xf32>
  %2 = kiln.matmul %1, %W2 : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %d = kiln.sub %2, %t : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  %l = kiln.reduce <mean> %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  %h = kiln.transpose %1 {permutation = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  %gW2 = kiln.matmul %h, %d : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  %w2t = kiln.transpose %W2 {permutation = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
  %d1 = kiln.matmul %d, %w2t : tensor<4x2xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %gb1 = kiln.reduce <sum> %d1 {axes = array<i64: 0>, keepdims = false} : tensor<4x3xf32> -> tensor<3xf32>
  %xt = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<4x2xf32> -> tensor<2x4xf32>
  %gW1 = kiln.matmul %xt, %d1 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  return %l, %gW1, %gb1, %gW2 : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>
}
