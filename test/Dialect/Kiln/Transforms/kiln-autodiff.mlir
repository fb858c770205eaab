// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=mse labels=t:4x2:f32 rematerialize=true" -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-autodiff="loss=mse labels=t:4x2:f32 rematerialize=true" -canonicalize -cse -verify-diagnostics | FileCheck %s --check-prefix=CANON

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
// CHECK:         %[[L:.*]] = kiln.reduce <mean> %[[SQ]] {axes = array<i64: 0, 1>, keepdims = false}
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

// -----

// batch_norm trains with batch statistics: the running mean and variance
// are state (no gradient), and their updates (momentum 0.8 from the
// importer's kiln.momentum) follow the gradients, named by
// kiln.state_updates.
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    -> (tensor<f32> {kiln.name = "loss"}, tensor<2xf32> {kiln.name = "grad.s"}, tensor<2xf32> {kiln.name = "update.m"}, tensor<2xf32> {kiln.name = "update.v"})
// CHECK-SAME:    attributes {kiln.gradients = [@s], kiln.state_updates = [@m, @v]}
// CHECK-NOT:     kiln.batch_norm
// CHECK:         kiln.reduce <mean> %{{.*}} {axes = array<i64: 0, 2>} : tensor<4x2x1xf32> -> tensor<1x2x1xf32>
// CHECK:         kiln.rsqrt
// CHECK:         kiln.constant dense<8.000000e-01> : tensor<f32>
module {
  ml_program.global private @s(dense<1.0> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 s"}
  ml_program.global private @m(dense<0.0> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 m"}
  ml_program.global private @v(dense<1.0> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 v"}
  func.func @main(%x: tensor<4x2x1xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %s = ml_program.global_load_const @s : tensor<2xf32>
    %m = ml_program.global_load_const @m : tensor<2xf32>
    %v = ml_program.global_load_const @v : tensor<2xf32>
    %b = kiln.batch_norm %x, %s, %s, %m, %v {epsilon = 1.0e-05 : f32, kiln.momentum = 0.8 : f32} : (tensor<4x2x1xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2x1xf32>
    %y = kiln.reshape %b : tensor<4x2x1xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Global max pooling routes each plane's gradient to its first maximum (an
// argmax over the flattened positions, one-hot against an iota), not to
// every element equal to the maximum: with ties that gave k times the
// gradient (train_fuzz.py --focus windows seed 1233).
// CHECK-LABEL: func.func @train_grad(
// (The pooled input is recomputed: rematerialize=true.)
// CHECK:         kiln.global_pool <max> %{{.*}} : tensor<4x2x3x1xf32> -> tensor<4x2x1x1xf32>
// CHECK:         %[[IN:.*]] = kiln.mul %arg0, %{{.*}} {kiln.recomputed}
// CHECK:         %[[FLAT:.*]] = kiln.reshape %[[IN]] : tensor<4x2x3x1xf32> -> tensor<4x2x3xf32>
// CHECK:         %[[FIRST:.*]] = kiln.argmax %[[FLAT]] {axis = 2 : i64} : tensor<4x2x3xf32> -> tensor<4x2x1xi64>
// CHECK:         %[[IOTA:.*]] = kiln.iota {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<3xi64>
// CHECK:         %[[ROW:.*]] = kiln.reshape %[[IOTA]] : tensor<3xi64> -> tensor<1x1x3xi64>
// CHECK:         %[[HIT:.*]] = kiln.equal %[[FIRST]], %[[ROW]] : tensor<4x2x1xi64>, tensor<1x1x3xi64> -> tensor<4x2x3xi1>
// CHECK:         kiln.select %[[HIT]]
// CHECK-NOT:     kiln.equal %{{.*}}, %{{.*}} : tensor<4x2x3x1xf32>, tensor<4x2x1x1xf32>
module {
  ml_program.global private @w(dense<1.0> : tensor<2x3x1xf32>) : tensor<2x3x1xf32> {kiln.origin = "initializer f32 2x3x1 w"}
  func.func @main(%x: tensor<4x2x3x1xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<2x3x1xf32>
    %h = kiln.mul %x, %w : tensor<4x2x3x1xf32>, tensor<2x3x1xf32> -> tensor<4x2x3x1xf32>
    %p = kiln.global_pool <max> %h : tensor<4x2x3x1xf32> -> tensor<4x2x1x1xf32>
    %y = kiln.reshape %p : tensor<4x2x1x1xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Rematerialisation: the relu's output (read by dW2 = r^T dY) is recomputed
// in the backward from its input h, which the relu's own gradient keeps;
// the report counts h and the loss's y - t kept (arguments, weights and
// constants are free). The module attribute prints before the functions.
// CHECK:       module attributes {kiln.remat_report = {kept = 2 : i64, kept_bytes = 64 : i64, recomputed = 1 : i64, recomputed_bytes = 32 : i64}}
// CHECK-LABEL: func.func @train_grad(
// CHECK:         %[[H:.*]] = kiln.matmul %arg0, %{{.*}} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
// CHECK:         %[[R:.*]] = kiln.relu %[[H]] : tensor<4x2xf32>
// CHECK:         kiln.matmul %[[R]]
// CHECK:         %[[RC:.*]] = kiln.relu %[[H]] {kiln.recomputed} : tensor<4x2xf32>
// CHECK:         %[[RT:.*]] = kiln.transpose %[[RC]]
// CHECK:         kiln.matmul %[[RT]]
// CHECK:         kiln.greater %[[H]]
// CSE leaves the recomputed clone alone.
// CANON:         kiln.relu %{{.*}} {kiln.recomputed}
module {
  ml_program.global private @w1(dense<0.5> : tensor<3x2xf32>) : tensor<3x2xf32> {kiln.origin = "initializer f32 3x2 w1"}
  ml_program.global private @w2(dense<0.5> : tensor<2x2xf32>) : tensor<2x2xf32> {kiln.origin = "initializer f32 2x2 w2"}
  func.func @main(%x: tensor<4x3xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w1 = ml_program.global_load_const @w1 : tensor<3x2xf32>
    %w2 = ml_program.global_load_const @w2 : tensor<2x2xf32>
    %h = kiln.matmul %x, %w1 : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
    %r = kiln.relu %h : tensor<4x2xf32>
    %y = kiln.matmul %r, %w2 : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// Training-mode dropout: @train_grad takes rng.key and rng.counter after
// main's inputs; each dropout becomes x * dropout_mask with its own
// stream; the backward multiplies by the same mask, recomputed from the
// same key and counter (kiln.recomputed), not kept. @main keeps no dropout.
// CHECK-LABEL: func.func @main(
// CHECK-NOT:     kiln.dropout
// CHECK:         return
// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x2xf32> {kiln.name = "x"}, %[[K:[^:]*]]: tensor<2xi32> {kiln.name = "rng.key"}, %[[C:[^:]*]]: tensor<4xi32> {kiln.name = "rng.counter"}, %{{[^:]*}}: tensor<4x2xf32> {kiln.name = "t"})
// CHECK:         %[[M0:.*]] = kiln.dropout_mask %[[K]], %[[C]] {ratio = 5.000000e-01 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<4x2xf32>
// CHECK:         kiln.mul %{{.*}}, %[[M0]]
// CHECK:         %[[M1:.*]] = kiln.dropout_mask %[[K]], %[[C]] {ratio = 2.500000e-01 : f32, stream = 1 : i64}
// CHECK:         kiln.dropout_mask %[[K]], %[[C]] {kiln.recomputed, ratio = 2.500000e-01 : f32, stream = 1 : i64}
// CHECK:         kiln.dropout_mask %[[K]], %[[C]] {kiln.recomputed, ratio = 5.000000e-01 : f32}
// CHECK-NOT:     kiln.dropout {
// CHECK:         return
module {
  ml_program.global private @w(dense<0.5> : tensor<2xf32>) : tensor<2xf32> {kiln.origin = "initializer f32 2 w"}
  func.func @main(%x: tensor<4x2xf32> {kiln.name = "x"}) -> (tensor<4x2xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<2xf32>
    %a = kiln.mul %x, %w : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
    %d = kiln.dropout %a {ratio = 0.5 : f32} : tensor<4x2xf32>
    %t = kiln.tanh %d : tensor<4x2xf32>
    %y = kiln.dropout %t {ratio = 0.25 : f32} : tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}
