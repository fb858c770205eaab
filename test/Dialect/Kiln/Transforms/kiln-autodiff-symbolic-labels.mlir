// kiln-autodiff's labels may spell a dim as a symbol of kiln.dim_ranges
// (kilnc --train --dim N=1..4 --labels=lab:N:int64): the dim is the
// symbol's maximum and the argument follows the symbol, so that kilnc's
// size-mask analysis sees the labels' padded rows.
// RUN: kiln-opt %s -kiln-autodiff="loss=cross_entropy labels=lab:N:i64" | FileCheck %s
// RUN: not kiln-opt %s -kiln-autodiff="loss=cross_entropy labels=lab:M:i64" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not kiln-opt %s -kiln-autodiff="loss=cross_entropy labels=lab:Nx10:f32" 2>&1 | FileCheck %s --check-prefix=SHAPE

// CHECK-LABEL: func.func @train_grad(
// CHECK-SAME:    %{{.*}}: tensor<4x8xf32> {kiln.name = "x", kiln.symbolic_dims = ["N", ""]}
// CHECK-SAME:    %{{.*}}: tensor<4xi64> {kiln.name = "lab", kiln.symbolic_dims = ["N"]}
// CHECK:         kiln.reduce <mean>
// UNKNOWN: error: kiln-autodiff: labels 'lab:M:i64': 'M' is not a dimension or a symbol given to --dim
// SHAPE: error: kiln-autodiff: loss 'cross_entropy' on 'y': float labels (class probabilities) must have the output's shape [4,3] f32, got [4,10] f32
module attributes {kiln.dim_ranges = {N = array<i64: 1, 4, 4>}} {
  ml_program.global private @w(dense<0.5> : tensor<8x3xf32>) : tensor<8x3xf32> {kiln.origin = "initializer f32 8x3 w"}
  func.func @main(%x: tensor<4x8xf32> {kiln.name = "x", kiln.symbolic_dims = ["N", ""]}) -> (tensor<4x3xf32> {kiln.name = "y"}) {
    %w = ml_program.global_load_const @w : tensor<8x3xf32>
    %y = kiln.matmul %x, %w : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}
