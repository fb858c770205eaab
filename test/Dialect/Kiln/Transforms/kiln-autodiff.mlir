// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=mse labels=t:4x2:f32" -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=mse labels=t:4x2:f32" -canonicalize -cse -verify-diagnostics | FileCheck %s --check-prefix=CANON

// A matmul under mse: @main stays, @train_grad takes the labels last and
// returns the loss and dW = x^T dY with dY = 2 (y - t) / 8.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %{{.*}}: tensor<4x3xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"})
// CHECK:         kiln.matmul
// CHECK-NEXT:    return
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    %[[X:.*]]: tensor<4x3xf32> {kiln.name = "x"}, %[[T:.*]]: tensor<4x2xf32> {kiln.name = "t"})
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<3x2xf32> {kiln.name = "grad.w"})
// CHECK-SAME:    attributes {kiln.gradients = [@w]}
// CHECK:         %[[W:.*]] = ml_program.global_load_const @w
// CHECK:         %[[Y:.*]] = kiln.matmul %[[X]], %[[W]]
// CHECK:         %[[D:.*]] = kiln.sub %[[Y]], %[[T]]
// CHECK:         %[[SQ:.*]] = kiln.mul %[[D]], %[[D]]
// CHECK:         %[[S:.*]] = kiln.reduce <sum> %[[SQ]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK:         %[[L:.*]] = kiln.mul %[[S]]
// CHECK:         %[[XT:.*]] = kiln.transpose %[[X]] {permutation = array<i64: 1, 0>}
// CHECK:         %[[DW:.*]] = kiln.matmul %[[XT]], %{{.*}} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
// CHECK:         return %[[L]], %[[DW]] : tensor<f32>, tensor<3x2xf32>
// CANON-LABEL: func.func @train_grad(
// CANON:         return %{{.*}}, %{{.*}} : tensor<f32>, tensor<3x2xf32>
module {
  ml_program.global private @w(dense<0.5> : tensor<3x2xf32>) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 w"}
  func.func @main(%x: tensor<4x3xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<3x2xf32>
    %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// A broadcast bias: its gradient is summed over the batch and reshaped to
// [2]; a weight used twice sums both contributions; a global that is not
// an initializer (a hoisted Constant node) gets no gradient.
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<2xf32> {kiln.name = "grad.b"})
// CHECK-SAME:    attributes {kiln.gradients = [@b]}
// CHECK:         %[[R:.*]] = kiln.reduce <sum> %{{.*}} {axes = array<i64: 0>} : tensor<4x2xf32> -> tensor<1x2xf32>
// CHECK:         kiln.reshape %[[R]] : tensor<1x2xf32> -> tensor<2xf32>
// CHECK:         kiln.add
// CHECK:         return
module {
  ml_program.global private @b(dense<0.5> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 b"}
  ml_program.global private @k(dense<2.0> : tensor<4x2xf32>) : tensor<4x2xf32>
  func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %b = ml_program.global_load_const @b : tensor<2xf32>
    %k = ml_program.global_load_const @k : tensor<4x2xf32>
    %a = kiln.add %x, %b : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
    %m = kiln.mul %a, %k : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
    %y = kiln.mul %m, %b : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// A weight the loss does not depend on gets a zero gradient.
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    tensor<3x2xf32> {kiln.name = "grad.w"}, tensor<5xf32> {kiln.name = "grad.unused"})
// CHECK:         %[[Z:.*]] = kiln.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK:         return %{{.*}}, %{{.*}}, %[[Z]]
module {
  ml_program.global private @w(dense<0.5> : tensor<3x2xf32>) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 w"}
  ml_program.global private @unused(dense<0.5> : tensor<5xf32>) : tensor<5xf32> {kiln.origin = "initializer f32 5 unused"}
  func.func @main(%x: tensor<4x3xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<3x2xf32>
    %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Error: an op on the path from the weights to the loss without a rule
// (kilnc's gradients.test checks that the ONNX node is named too).
module {
  ml_program.global private @w(dense<0.5> : tensor<4x2xf32>) : tensor<4x2xf32> {kiln.origin = "initializer f32 4x2 w"}
  func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<4x2xf32>
    %a = kiln.add %x, %w : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
    // expected-error @+1 {{kiln-autodiff: no gradient rule for 'kiln.floor', which is on the path from the weights to the loss}}
    %y = kiln.floor %a : tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Error: no trainable weights (the only float global is not an
// initializer).
// expected-error @+1 {{kiln-autodiff: no trainable weights (no float initializer)}}
module {
  ml_program.global private @k(dense<0.5> : tensor<4x2xf32>) : tensor<4x2xf32>
  func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %k = ml_program.global_load_const @k : tensor<4x2xf32>
    %y = kiln.add %x, %k : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Error: labels that do not fit the output.
module {
  ml_program.global private @w(dense<0.5> : tensor<3x3xf32>) : tensor<3x3xf32> {kiln.origin = "initializer f32 3x3 w"}
  // expected-error @+1 {{kiln-autodiff: loss 'mse' on 'y': regression labels must be float with the output's shape [4,3] f32, got [4,2] f32}}
  func.func @main(%x: tensor<4x3xf32> {kiln.name = "x"}) -> (tensor<4x3xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<3x3xf32>
    %y = kiln.matmul %x, %w : tensor<4x3xf32>, tensor<3x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}
