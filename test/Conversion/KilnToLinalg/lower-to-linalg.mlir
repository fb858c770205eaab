// RUN: kiln-opt %s -kiln-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// A binary op broadcasts its operands through the generic's indexing maps.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %arg1 : tensor<2x3xf32>, tensor<3xf32>) outs(%[[E]] : tensor<2x3xf32>)
// CHECK: arith.addf
func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A size-1 dimension that stretches reads index 0.
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @mul_stretch
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[COL]], #{{.*}}]
// CHECK: arith.muli
func.func @mul_stretch(%a: tensor<2x3xi32>, %b: tensor<2x1xi32>) -> tensor<2x3xi32> {
  %0 = kiln.mul %a, %b : tensor<2x3xi32>, tensor<2x1xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// Comparisons yield i1 elements.
// CHECK-LABEL: func.func @compare
// CHECK: outs(%{{.*}} : tensor<4xi1>)
// CHECK: arith.cmpf olt
// CHECK: arith.cmpi sge
func.func @compare(%a: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xi1>, tensor<4xi1>) {
  %0 = kiln.less %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  %1 = kiln.greater_equal %i, %i : tensor<4xi64>, tensor<4xi64> -> tensor<4xi1>
  return %0, %1 : tensor<4xi1>, tensor<4xi1>
}

// -----

// Exact GELU is 0.5 x (1 + erf(x / sqrt 2)); the tanh form uses math.tanh.
// CHECK-LABEL: func.func @gelu
// CHECK: math.erf
// CHECK: math.tanh
func.func @gelu(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = kiln.gelu %x : tensor<8xf32>
  %1 = kiln.gelu %x {tanh} : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Softplus avoids overflow: max(x, 0) + log1p(exp(-|x|)).
// CHECK-LABEL: func.func @softplus
// CHECK: math.absf
// CHECK: math.exp
// CHECK: math.log1p
// CHECK: arith.maximumf
func.func @softplus(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kiln.softplus %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Integer mod without fmod follows the divisor's sign (Python's %).
// CHECK-LABEL: func.func @python_mod
// CHECK: arith.remsi
// CHECK: arith.select
func.func @python_mod(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = kiln.mod %a, %b : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Casts pick the arith conversion by source and destination kinds.
// CHECK-LABEL: func.func @casts
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: arith.fptosi {{.*}} : f32 to i32
// CHECK: arith.uitofp {{.*}} : i1 to f32
// CHECK: arith.cmpf une
func.func @casts(%x: tensor<4xf32>, %c: tensor<4xi1>) -> (tensor<4xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<4xi1>) {
  %0 = kiln.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = kiln.cast %x : tensor<4xf32> -> tensor<4xi32>
  %2 = kiln.cast %c : tensor<4xi1> -> tensor<4xf32>
  %3 = kiln.cast %x : tensor<4xf32> -> tensor<4xi1>
  return %0, %1, %2, %3 : tensor<4xbf16>, tensor<4xi32>, tensor<4xf32>, tensor<4xi1>
}

// -----

// select broadcasts all three operands.
// CHECK-LABEL: func.func @select
// CHECK: ins(%arg0, %arg1, %arg2 : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32>)
// CHECK: arith.select
func.func @select(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
  %0 = kiln.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Unsigned integers: the body computes on signless integers of the same
// width (unrealized casts in and out, which vanish at LLVM's iN) with the
// unsigned forms of division, remainder, min/max, comparison and conversion.
// CHECK-LABEL: func.func @unsigned
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.*]]: ui8, %[[B:.*]]: ui8, %{{.*}}: ui8):
// CHECK-DAG: %[[SA:.*]] = builtin.unrealized_conversion_cast %[[A]] : ui8 to i8
// CHECK-DAG: %[[SB:.*]] = builtin.unrealized_conversion_cast %[[B]] : ui8 to i8
// CHECK: %[[Q:.*]] = arith.divui %[[SA]], %[[SB]] : i8
// CHECK: %[[R:.*]] = builtin.unrealized_conversion_cast %[[Q]] : i8 to ui8
// CHECK: linalg.yield %[[R]] : ui8
// CHECK: arith.remui
// CHECK: arith.maxui
// CHECK: arith.minui
// CHECK: arith.cmpi ult
// CHECK: arith.addi
// CHECK: arith.uitofp %{{.*}} : i8 to f32
// CHECK: arith.extui %{{.*}} : i8 to i32
// CHECK: arith.fptoui %{{.*}} : f32 to i8
func.func @unsigned(%a: tensor<4xui8>, %b: tensor<4xui8>, %f: tensor<4xf32>)
    -> (tensor<4xui8>, tensor<4xui8>, tensor<4xui8>, tensor<4xui8>,
        tensor<4xi1>, tensor<4xui8>, tensor<4xf32>, tensor<4xi32>,
        tensor<4xui8>) {
  %0 = kiln.div %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %1 = kiln.mod %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %2 = kiln.max %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %3 = kiln.min %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %4 = kiln.less %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xi1>
  %5 = kiln.add %a, %b : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %6 = kiln.cast %a : tensor<4xui8> -> tensor<4xf32>
  %7 = kiln.cast %a : tensor<4xui8> -> tensor<4xi32>
  %8 = kiln.cast %f : tensor<4xf32> -> tensor<4xui8>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<4xui8>, tensor<4xui8>,
      tensor<4xui8>, tensor<4xui8>, tensor<4xi1>, tensor<4xui8>,
      tensor<4xf32>, tensor<4xi32>, tensor<4xui8>
}

// -----

// philox: one generic reading the two key and four counter words with
// constant maps; the body takes the element's linear index, runs ten
// rounds (two 32x32->64 multiplies each) and picks word index mod 4.
// CHECK-DAG:   #[[K0:.*]] = affine_map<(d0, d1) -> (0)>
// CHECK-DAG:   #[[K3:.*]] = affine_map<(d0, d1) -> (3)>
// CHECK-LABEL: func.func @philox(
// CHECK:         linalg.generic {indexing_maps = [#[[K0]], #{{.*}}, #[[K0]], #{{.*}}, #{{.*}}, #[[K3]], #{{.*}}]
// CHECK:           linalg.index 0
// CHECK:           linalg.index 1
// CHECK-COUNT-20:  arith.mului_extended
// CHECK:           arith.select
// CHECK-NOT:     kiln.philox
func.func @philox(%key: tensor<2xi32>, %counter: tensor<4xi32>) -> tensor<8x5xi32> {
  %0 = kiln.philox %key, %counter {stream = 3} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xi32>
  return %0 : tensor<8x5xi32>
}

// -----

// dropout_mask: the same generic, then `bits <u round(0.7 * 2^32)` (the f32
// ratio: 3006477056, printed as a signed i32) selects
// 1 / 0.7 or 0; ratio 0 keeps everything (a fill of 1).
// CHECK-LABEL: func.func @dropout_mask(
// CHECK:         linalg.generic
// CHECK:           %[[T:.*]] = arith.constant -1288490240 : i32
// CHECK:           arith.cmpi ult, %{{.*}}, %[[T]] : i32
// CHECK:           arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:         linalg.fill ins(%{{.*}} : f32)
func.func @dropout_mask(%key: tensor<2xi32>, %counter: tensor<4xi32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0 = kiln.dropout_mask %key, %counter {ratio = 0.3 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<16xf32>
  %1 = kiln.dropout_mask %key, %counter {ratio = 0.0 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<16xf32>
  return %0, %1 : tensor<16xf32>, tensor<16xf32>
}
