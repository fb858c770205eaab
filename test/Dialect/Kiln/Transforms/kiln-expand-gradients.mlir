// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-expand-gradients))' -verify-diagnostics | FileCheck %s

// y = sum(x * w): dy/dx = ones * w, dy/dw = ones * x (the seed is ones of
// y's type), inserted where the gradient was, reusing the forward values.
// CHECK-LABEL: func.func @product(
// CHECK-SAME:    %[[X:.*]]: tensor<3xf32>, %[[W:.*]]: tensor<3xf32>)
// CHECK:         %[[P:.*]] = kiln.mul %[[X]], %[[W]]
// CHECK:         %[[S:.*]] = kiln.reduce <sum> %[[P]]
// CHECK-NOT:     kiln.gradient
// CHECK:         %[[ONE:.*]] = kiln.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[R:.*]] = kiln.reshape %[[ONE]]
// CHECK:         %[[B:.*]] = kiln.broadcast %[[R]]
// CHECK-DAG:     %[[DX:.*]] = kiln.mul %[[B]], %[[W]]
// CHECK-DAG:     %[[DW:.*]] = kiln.mul %[[B]], %[[X]]
// CHECK:         return %[[S]], %[[DX]], %[[DW]]
func.func @product(%x: tensor<3xf32>, %w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) {
  %p = kiln.mul %x, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %s = kiln.reduce <sum> %p {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  %g:2 = kiln.gradient %s wrt %x, %w : tensor<f32> wrt tensor<3xf32>, tensor<3xf32>
  return %s, %g#0, %g#1 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A non-scalar y: the seed is ones of its shape (the gradient of its sum);
// an x y does not depend on gets zeros.
// CHECK-LABEL: func.func @vector_y(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK:         %[[E:.*]] = kiln.exp %[[A]]
// CHECK:         %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK:         %[[DA:.*]] = kiln.mul %[[ONES]], %[[E]]
// CHECK:         %[[ZERO:.*]] = kiln.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK:         return %[[DA]], %[[ZERO]]
func.func @vector_y(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<4xf32>) {
  %e = kiln.exp %a : tensor<2x3xf32>
  %g:2 = kiln.gradient %e wrt %a, %b : tensor<2x3xf32> wrt tensor<2x3xf32>, tensor<4xf32>
  return %g#0, %g#1 : tensor<2x3xf32>, tensor<4xf32>
}

// -----

// An intermediate x: the gradient stops there (nothing flows into %x).
// CHECK-LABEL: func.func @intermediate(
// CHECK-SAME:    %[[X:.*]]: tensor<3xf32>)
// CHECK:         %[[H:.*]] = kiln.tanh %[[X]]
// CHECK:         %[[Y:.*]] = kiln.mul %[[H]], %[[H]]
// CHECK:         %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK:         %[[D1:.*]] = kiln.mul %[[ONES]], %[[H]]
// CHECK:         %[[D2:.*]] = kiln.mul %[[ONES]], %[[H]]
// CHECK:         %[[DH:.*]] = kiln.add %[[D2]], %[[D1]]
// CHECK-NOT:     kiln.tanh
// CHECK:         return %[[DH]]
func.func @intermediate(%x: tensor<3xf32>) -> tensor<3xf32> {
  %h = kiln.tanh %x : tensor<3xf32>
  %y = kiln.mul %h, %h : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %g = kiln.gradient %y wrt %h : tensor<3xf32> wrt tensor<3xf32>
  return %g : tensor<3xf32>
}

// -----

// A second derivative: the second gradient differentiates the first one's
// backward ops. d/dx sum(x*x) = 2x (two products with the seed, added);
// d/dx sum(2x) = 2.
// CHECK-LABEL: func.func @second_order(
// CHECK-SAME:    %[[X:.*]]: tensor<3xf32>)
// CHECK:         %[[ONES:.*]] = kiln.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK:         %[[G:.*]] = kiln.add
// CHECK:         %[[ONES2:.*]] = kiln.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK:         kiln.mul %[[ONES2]], %[[ONES]]
// CHECK:         %[[H:.*]] = kiln.add
// CHECK-NOT:     kiln.gradient
// CHECK:         return %[[G]], %[[H]]
func.func @second_order(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %y = kiln.mul %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %g = kiln.gradient %y wrt %x : tensor<3xf32> wrt tensor<3xf32>
  %h = kiln.gradient %g wrt %x : tensor<3xf32> wrt tensor<3xf32>
  return %g, %h : tensor<3xf32>, tensor<3xf32>
}

// -----

// An op on the path without a gradient rule is an error naming it (its
// ONNX node; a bare name location prints as unknown).
func.func @no_rule(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @unknown {{kiln-expand-gradients: no gradient rule for 'kiln.sin' (node 's'), which is on the path from the Gradient's xs to its y}}
  %s = kiln.sin %x : tensor<3xf32> loc("s")
  %g = kiln.gradient %s wrt %x : tensor<3xf32> wrt tensor<3xf32>
  return %g : tensor<3xf32>
}
