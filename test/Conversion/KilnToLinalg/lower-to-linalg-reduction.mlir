// RUN: kiln-opt %s -kiln-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// reduce <sum> with keepdims: a reduction loop over the axis into a
// zero-filled accumulator, then expand_shape puts the unit dim back.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[ACC:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @reduce_sum_keepdims
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ACC]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%arg0 : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<2x4xf32>)
// CHECK: arith.addf
// CHECK: %[[KEPT:.*]] = tensor.expand_shape %[[SUM]] {{\[\[}}0, 1], [2]] output_shape [2, 1, 4]
// CHECK: return %[[KEPT]]
func.func @reduce_sum_keepdims(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
  %0 = kiln.reduce <sum> %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  return %0 : tensor<2x1x4xf32>
}

// -----

// reduce <mean> divides the sum by the number of reduced elements.
// CHECK-LABEL: func.func @reduce_mean
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<2xf32>)
// CHECK: arith.constant 1.200000e+01 : f32
// CHECK: arith.divf
func.func @reduce_mean(%x: tensor<2x3x4xf32>) -> tensor<2xf32> {
  %0 = kiln.reduce <mean> %x {axes = array<i64: 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// max, min and prod start from -inf, +inf and 1; max and min propagate NaN.
// CHECK-LABEL: func.func @reduce_max_min_prod
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: arith.maximumf
// CHECK: arith.constant 0x7F800000 : f32
// CHECK: arith.minimumf
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK: arith.mulf
func.func @reduce_max_min_prod(%x: tensor<5x6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
  %0 = kiln.reduce <max> %x {axes = array<i64: 0>, keepdims = false} : tensor<5x6xf32> -> tensor<6xf32>
  %1 = kiln.reduce <min> %x {axes = array<i64: 0>, keepdims = false} : tensor<5x6xf32> -> tensor<6xf32>
  %2 = kiln.reduce <prod> %x {axes = array<i64: 0>, keepdims = false} : tensor<5x6xf32> -> tensor<6xf32>
  return %0, %1, %2 : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
}

// -----

// Reducing every axis without keepdims gives a 0-D tensor; with keepdims all unit dims.
// CHECK-DAG: #[[SCALAR:map[0-9]*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @reduce_all
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}}#[[SCALAR]]], iterator_types = ["reduction", "reduction"]}
// CHECK-SAME: outs(%{{.*}} : tensor<f32>)
// CHECK: %[[MAX:.*]] = linalg.generic
// CHECK: tensor.expand_shape %[[MAX]] [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
func.func @reduce_all(%x: tensor<2x3xf32>) -> (tensor<f32>, tensor<1x1xf32>) {
  %0 = kiln.reduce <sum> %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  %1 = kiln.reduce <max> %x {axes = array<i64: 0, 1>, keepdims = true} : tensor<2x3xf32> -> tensor<1x1xf32>
  return %0, %1 : tensor<f32>, tensor<1x1xf32>
}

// -----

// An empty axes list is the identity.
// CHECK-LABEL: func.func @reduce_no_axes
// CHECK-NEXT: return %arg0
func.func @reduce_no_axes(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = kiln.reduce <sum> %x {axes = array<i64>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Integer reductions: signed max from the smallest i32; mean truncates (divsi).
// CHECK-LABEL: func.func @reduce_i32
// CHECK: arith.constant -2147483648 : i32
// CHECK: arith.maxsi
// CHECK: arith.addi
// CHECK: arith.constant 5 : i32
// CHECK: arith.divsi
func.func @reduce_i32(%x: tensor<3x5xi32>) -> (tensor<3xi32>, tensor<3xi32>) {
  %0 = kiln.reduce <max> %x {axes = array<i64: 1>, keepdims = false} : tensor<3x5xi32> -> tensor<3xi32>
  %1 = kiln.reduce <mean> %x {axes = array<i64: 1>, keepdims = false} : tensor<3x5xi32> -> tensor<3xi32>
  return %0, %1 : tensor<3xi32>, tensor<3xi32>
}

// -----

// Boolean max and min are or and and.
// CHECK-LABEL: func.func @reduce_bool
// CHECK: arith.constant false
// CHECK: arith.ori
// CHECK: arith.constant true
// CHECK: arith.andi
func.func @reduce_bool(%x: tensor<4x2xi1>) -> (tensor<2xi1>, tensor<2xi1>) {
  %0 = kiln.reduce <max> %x {axes = array<i64: 0>, keepdims = false} : tensor<4x2xi1> -> tensor<2xi1>
  %1 = kiln.reduce <min> %x {axes = array<i64: 0>, keepdims = false} : tensor<4x2xi1> -> tensor<2xi1>
  return %0, %1 : tensor<2xi1>, tensor<2xi1>
}

// -----

// Integer max and min start from the type's lowest and highest values,
// exactly: 2^63 - 1 as a double is 2^63, which once became INT64_MIN and
// made every i64 ReduceMin return -2^63.
// CHECK-LABEL: func.func @reduce_int_identities
// CHECK-DAG: arith.constant -9223372036854775808 : i64
// CHECK-DAG: arith.constant 9223372036854775807 : i64
// CHECK-DAG: arith.constant -2147483648 : i32
// CHECK-DAG: arith.constant 2147483647 : i32
func.func @reduce_int_identities(%a: tensor<4xi64>, %b: tensor<4xi32>) -> (tensor<i64>, tensor<i64>, tensor<i32>, tensor<i32>) {
  %0 = kiln.reduce <max> %a {axes = array<i64: 0>, keepdims = false} : tensor<4xi64> -> tensor<i64>
  %1 = kiln.reduce <min> %a {axes = array<i64: 0>, keepdims = false} : tensor<4xi64> -> tensor<i64>
  %2 = kiln.reduce <max> %b {axes = array<i64: 0>, keepdims = false} : tensor<4xi32> -> tensor<i32>
  %3 = kiln.reduce <min> %b {axes = array<i64: 0>, keepdims = false} : tensor<4xi32> -> tensor<i32>
  return %0, %1, %2, %3 : tensor<i64>, tensor<i64>, tensor<i32>, tensor<i32>
}

// -----

// Boolean sums are refused (the result would need a wider type).
func.func @reduce_bool_sum(%x: tensor<4xi1>) -> tensor<1xi1> {
  // expected-error @+1 {{failed to legalize operation 'kiln.reduce'}}
  %0 = kiln.reduce <sum> %x {axes = array<i64: 0>} : tensor<4xi1> -> tensor<1xi1>
  return %0 : tensor<1xi1>
}

// -----

// Unsigned integer reductions are refused.
func.func @reduce_unsigned(%x: tensor<4xui8>) -> tensor<1xui8> {
  // expected-error @+1 {{failed to legalize operation 'kiln.reduce'}}
  %0 = kiln.reduce <max> %x {axes = array<i64: 0>} : tensor<4xui8> -> tensor<1xui8>
  return %0 : tensor<1xui8>
}

// -----

// argmax: one generic with value and index accumulators; the index comes from
// linalg.index; ties keep the first index (strict ogt); NaN wins over numbers.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @argmax_first
// CHECK: %[[VALUES:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[INDICES:.*]] = linalg.fill ins(%{{.*}} : i64) outs(%{{.*}} : tensor<4xi64>)
// CHECK: %[[ARG:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: outs(%[[VALUES]], %[[INDICES]] : tensor<4xf32>, tensor<4xi64>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[BEST:.*]]: f32, %[[BEST_INDEX:.*]]: i64):
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[X]], %[[BEST]]
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]]
// CHECK: %[[NUMBER:.*]] = arith.cmpf ord, %[[BEST]], %[[BEST]]
// CHECK: %[[TAKE_NAN:.*]] = arith.andi %[[NAN]], %[[NUMBER]]
// CHECK: %[[BETTER:.*]] = arith.ori %[[GT]], %[[TAKE_NAN]]
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[V:.*]] = arith.select %[[BETTER]], %[[X]], %[[BEST]]
// CHECK: %[[IDX:.*]] = arith.select %[[BETTER]], %[[I64]], %[[BEST_INDEX]]
// CHECK: linalg.yield %[[V]], %[[IDX]]
// CHECK: return %[[ARG]]#1
func.func @argmax_first(%x: tensor<4x10xf32>) -> tensor<4xi64> {
  %0 = kiln.argmax %x {axis = 1 : i64, keepdims = false} : tensor<4x10xf32> -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// argmin with select_last_index takes equal elements too (ole); keepdims expands.
// CHECK-LABEL: func.func @argmin_last
// CHECK: arith.constant 0x7F800000 : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK: arith.cmpf ole
// CHECK-NOT: arith.cmpf ord
// CHECK: linalg.index 0 : index
// CHECK: tensor.expand_shape %{{.*}}#1 {{\[\[}}0, 1]] output_shape [1, 10] : tensor<10xi64> into tensor<1x10xi64>
func.func @argmin_last(%x: tensor<4x10xf32>) -> tensor<1x10xi64> {
  %0 = kiln.argmin %x {axis = 0 : i64, keepdims = true, select_last_index} : tensor<4x10xf32> -> tensor<1x10xi64>
  return %0 : tensor<1x10xi64>
}

// -----

// Integer argmax compares signed.
// CHECK-LABEL: func.func @argmax_i32
// CHECK: arith.constant -2147483648 : i32
// CHECK: iterator_types = ["reduction"]
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<i32>, tensor<i64>)
// CHECK: arith.cmpi sgt
func.func @argmax_i32(%x: tensor<6xi32>) -> tensor<i64> {
  %0 = kiln.argmax %x {axis = -1 : i64, keepdims = false} : tensor<6xi32> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// softmax: the row max, the sum of exp(x - max), then exp(x - max) / sum.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%arg0, %[[MAX]] : tensor<2x8xf32>, tensor<2xf32>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %[[MAX]], %[[SUM]] : tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.divf
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = kiln.softmax %x {axis = -1 : i64} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// log_softmax along a middle axis ends with x - max - log(sum).
// CHECK-DAG: #[[ROW:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @log_softmax
// CHECK: linalg.generic {{.*}}#[[ROW]]], iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "parallel"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: %[[SHIFTED:.*]] = arith.subf
// CHECK: %[[LOG:.*]] = math.log
// CHECK: arith.subf %[[SHIFTED]], %[[LOG]]
func.func @log_softmax(%x: tensor<2x5x3xf32>) -> tensor<2x5x3xf32> {
  %0 = kiln.log_softmax %x {axis = 1 : i64} : tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}

// -----

// layer_norm: the sum, the squared deviations from the mean, then the
// normalised result with scale and bias broadcast over the trailing dims.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[STAT:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-DAG: #[[SCALE:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[BIAS:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[STAT]]], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK: %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[STAT]], #[[STAT]]], iterator_types = ["parallel", "reduction", "reduction"]}
// CHECK-SAME: ins(%arg0, %[[SUM]] :
// CHECK: arith.constant 3.200000e+01 : f32
// CHECK: arith.mulf
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[STAT]], #[[STAT]], #[[SCALE]], #[[BIAS]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%arg0, %[[SUM]], %[[SQ]], %arg1, %arg2 :
// CHECK: arith.constant 9.99999974E-6 : f32
// CHECK: math.rsqrt
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NEXT: linalg.yield
func.func @layer_norm(%x: tensor<2x4x8xf32>, %s: tensor<8xf32>, %b: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  %0 = kiln.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

// layer_norm without bias multiplies by scale last.
// CHECK-LABEL: func.func @layer_norm_no_bias
// CHECK: linalg.generic {{.*}} ins(%arg0, %{{.*}}, %{{.*}}, %arg1 : tensor<3x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<8xf32>)
// CHECK: math.rsqrt
// CHECK: arith.mulf
// CHECK: %[[Y:.*]] = arith.mulf
// CHECK-NEXT: linalg.yield %[[Y]]
func.func @layer_norm_no_bias(%x: tensor<3x8xf32>, %s: tensor<8xf32>) -> tensor<3x8xf32> {
  %0 = kiln.layer_norm %x, %s : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

// batch_norm is one elementwise generic reading the per-channel vectors (nhwc: the last dim).
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[CH:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d3)>
// CHECK-LABEL: func.func @batch_norm_nhwc
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[CH]], #[[CH]], #[[CH]], #[[CH]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK: ^bb0(%[[X:.*]]: f32, %[[S:.*]]: f32, %[[B:.*]]: f32, %[[M:.*]]: f32, %[[V:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[EPS:.*]] = arith.constant 1.000000e-03 : f32
// CHECK: %[[VE:.*]] = arith.addf %[[V]], %[[EPS]]
// CHECK: %[[INV:.*]] = math.rsqrt %[[VE]]
// CHECK: %[[XM:.*]] = arith.subf %[[X]], %[[M]]
// CHECK: %[[N:.*]] = arith.mulf %[[XM]], %[[INV]]
// CHECK: %[[SC:.*]] = arith.mulf %[[N]], %[[S]]
// CHECK: arith.addf %[[SC]], %[[B]]
func.func @batch_norm_nhwc(%x: tensor<1x4x4x3xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<1x4x4x3xf32> {
  %0 = kiln.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-03 : f32, data_format = #kiln.data_format<nhwc>} : (tensor<1x4x4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x4x4x3xf32>
  return %0 : tensor<1x4x4x3xf32>
}

// -----

// instance_norm reduces each (n, c) plane over its spatial dims.
// CHECK-DAG: #[[PLANE:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-DAG: #[[CH:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @instance_norm
// CHECK: linalg.generic {{.*}}#[[PLANE]]], iterator_types = ["parallel", "parallel", "reduction", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[PLANE]], #[[PLANE]], #[[CH]], #[[CH]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
func.func @instance_norm(%x: tensor<2x3x4x5xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<2x3x4x5xf32> {
  %0 = kiln.instance_norm %x, %s, %b {epsilon = 1.0e-05 : f32} : (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

// lrn: channels padded by floor((size-1)/2) low and ceil((size-1)/2) high, a
// window reduction of squares, then x / (bias + alpha/size * sum)^beta.
// CHECK-DAG: #[[WINDOW:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 + d4, d2, d3)>
// CHECK-DAG: #[[SHAPE:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d4)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @lrn
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 1, 0, 0] high[0, 2, 0, 0]
// CHECK: %[[WIN:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[SQ:.*]] = linalg.generic {indexing_maps = [#[[WINDOW]], #[[SHAPE]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[PAD]], %[[WIN]] : tensor<1x11x3x3xf32>, tensor<4xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%arg0, %[[SQ]] :
// CHECK: arith.constant 5.000000e-05 : f32
// CHECK: math.powf
// CHECK: arith.divf
func.func @lrn(%x: tensor<1x8x3x3xf32>) -> tensor<1x8x3x3xf32> {
  %0 = kiln.lrn %x {size = 4 : i64, alpha = 2.0e-04 : f32, beta = 7.5e-01 : f32, bias = 1.0 : f32} : tensor<1x8x3x3xf32>
  return %0 : tensor<1x8x3x3xf32>
}

// -----

// Max pooling pads with -inf; a shape-only operand carries the window loops.
// CHECK-DAG: #[[WINDOW:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-DAG: #[[SHAPE:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @max_pool
// CHECK: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: tensor.yield %[[NEG_INF]]
// CHECK: %[[WIN:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[WINDOW]], #[[SHAPE]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[PAD]], %[[WIN]] : tensor<1x3x10x10xf32>, tensor<3x3xf32>)
// CHECK: arith.maximumf
func.func @max_pool(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %0 = kiln.pool <max> %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

// Average pooling with count_include_pad and full windows divides by the kernel size.
// CHECK-LABEL: func.func @avg_pool_include_pad
// CHECK: tensor.pad
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<1x3x4x4xf32>)
// CHECK: %[[NINE:.*]] = arith.constant 9.000000e+00 : f32
// CHECK: arith.divf %{{.*}}, %[[NINE]]
func.func @avg_pool_include_pad(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %0 = kiln.pool <avg> %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, count_include_pad} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

// Without count_include_pad the divisor is the count of in-bounds taps: one
// constant vector per spatial dim whose count varies (here only H).
// CHECK-DAG: #[[H:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// CHECK-LABEL: func.func @avg_pool_exclude_pad
// CHECK: tensor.pad %arg0 low[0, 0, 1, 0] high[0, 0, 0, 0]
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: %[[COUNTS:.*]] = arith.constant dense<[2.000000e+00, 3.000000e+00, 3.000000e+00, 3.000000e+00]> : tensor<4xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[H]], #{{.*}}]
// CHECK-SAME: ins(%[[SUM]], %[[COUNTS]] : tensor<1x3x4x3xf32>, tensor<4xf32>)
// CHECK: ^bb0(%[[S:.*]]: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[D:.*]] = arith.mulf %[[TWO]], %[[C]]
// CHECK: arith.divf %[[S]], %[[D]]
func.func @avg_pool_exclude_pad(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x3xf32> {
  %0 = kiln.pool <avg> %x {kernel = array<i64: 3, 2>, strides = array<i64: 2, 3>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x4x3xf32>
  return %0 : tensor<1x3x4x3xf32>
}

// -----

// ceil_mode: the last window runs past the padded input, so the input gets
// extra high padding. Without count_include_pad it never counts; with it,
// every tap of the window does (as in ONNX's reference): a uniform divisor.
// CHECK-LABEL: func.func @avg_pool_ceil
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 0, 1, 1]
// CHECK: tensor<1x1x7x7xf32> to tensor<1x1x8x8xf32>
// CHECK: arith.constant dense<[2.000000e+00, 2.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<4xf32>
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 0, 1, 1]
// CHECK-NOT: arith.constant dense<
// CHECK: arith.constant 4.000000e+00 : f32
// CHECK: return
func.func @avg_pool_ceil(%x: tensor<1x1x7x7xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) {
  %0 = kiln.pool <avg> %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, ceil_mode} : tensor<1x1x7x7xf32> -> tensor<1x1x4x4xf32>
  %1 = kiln.pool <avg> %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, ceil_mode, count_include_pad} : tensor<1x1x7x7xf32> -> tensor<1x1x4x4xf32>
  return %0, %1 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
}

// -----

// nhwc pooling slides over the middle dims; dilation scales the window loop.
// CHECK-DAG: #[[WINDOW:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 * 2 + d4, d2 + d5 * 2, d3)>
// CHECK-LABEL: func.func @max_pool_nhwc
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 1, 0, 0]
// CHECK: linalg.generic {indexing_maps = [#[[WINDOW]], {{.*}}]
func.func @max_pool_nhwc(%x: tensor<1x9x9x4xf32>) -> tensor<1x5x7x4xf32> {
  %0 = kiln.pool <max> %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 1>, dilations = array<i64: 1, 2>, padding = array<i64: 0, 0, 1, 0>, data_format = #kiln.data_format<nhwc>} : tensor<1x9x9x4xf32> -> tensor<1x5x7x4xf32>
  return %0 : tensor<1x5x7x4xf32>
}

// -----

// global_pool <avg> (nhwc) reduces the spatial dims, divides, and keeps them as size 1.
// CHECK-DAG: #[[ACC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @global_avg_pool_nhwc
// CHECK: linalg.generic {{.*}}#[[ACC]]], iterator_types = ["parallel", "reduction", "reduction", "parallel"]
// CHECK: arith.constant 4.900000e+01 : f32
// CHECK: arith.divf
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1, 2], [3]] output_shape [2, 1, 1, 16]
func.func @global_avg_pool_nhwc(%x: tensor<2x7x7x16xf32>) -> tensor<2x1x1x16xf32> {
  %0 = kiln.global_pool <avg> %x {data_format = #kiln.data_format<nhwc>} : tensor<2x7x7x16xf32> -> tensor<2x1x1x16xf32>
  return %0 : tensor<2x1x1x16xf32>
}

// -----

// global_pool <max> (nchw).
// CHECK-LABEL: func.func @global_max_pool
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["parallel", "parallel", "reduction", "reduction"]
// CHECK: arith.maximumf
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2, 3]] output_shape [2, 16, 1, 1]
func.func @global_max_pool(%x: tensor<2x16x7x7xf32>) -> tensor<2x16x1x1xf32> {
  %0 = kiln.global_pool <max> %x : tensor<2x16x7x7xf32> -> tensor<2x16x1x1xf32>
  return %0 : tensor<2x16x1x1xf32>
}
