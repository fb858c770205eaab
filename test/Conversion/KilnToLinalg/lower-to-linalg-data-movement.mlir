// RUN: kiln-opt %s -kiln-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// Inputs are function arguments throughout: with constant operands the
// conversion driver folds these ops instead of lowering them. Numerics are
// checked by lower-to-linalg-data-movement-numerics.test.

// A dense constant becomes arith.constant.
// CHECK-LABEL: func.func @constant_dense
// CHECK: %[[C:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: return %[[C]]
func.func @constant_dense() -> tensor<2xf32> {
  %0 = kiln.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A resource blob stays a resource: arith.constant takes the same attribute.
// CHECK-LABEL: func.func @constant_resource
// CHECK: arith.constant dense_resource<weights> : tensor<2xf32>
func.func @constant_resource() -> tensor<2xf32> {
  %0 = kiln.constant dense_resource<weights> : tensor<2xf32>
  return %0 : tensor<2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// iota computes start + i * step in f64, as its folder does (2^16+ elements, or it folds).
// CHECK-LABEL: func.func @iota_f32
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[I64:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: %[[X:.*]] = arith.sitofp %[[I64]] : i64 to f64
// CHECK: %[[SCALED:.*]] = arith.mulf %[[X]], %{{.*}} : f64
// CHECK: %[[V:.*]] = arith.addf %[[SCALED]], %{{.*}} : f64
// CHECK: %[[F:.*]] = arith.truncf %[[V]] : f64 to f32
// CHECK: linalg.yield %[[F]] : f32
func.func @iota_f32() -> tensor<70000xf32> {
  %0 = kiln.iota {start = 0.5, step = 0.25} : tensor<70000xf32>
  return %0 : tensor<70000xf32>
}

// -----

// An integer iota truncates toward zero, like its folder.
// CHECK-LABEL: func.func @iota_i32
// CHECK: %[[N:.*]] = arith.fptosi %{{.*}} : f64 to i64
// CHECK: %[[T:.*]] = arith.trunci %[[N]] : i64 to i32
// CHECK: linalg.yield %[[T]] : i32
func.func @iota_i32() -> tensor<70000xi32> {
  %0 = kiln.iota {start = 3.0, step = -1.0} : tensor<70000xi32>
  return %0 : tensor<70000xi32>
}

// -----

// Merging neighbouring dimensions is one collapse_shape.
// CHECK-LABEL: func.func @reshape_collapse
// CHECK: %[[R:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK-NOT: tensor.expand_shape
// CHECK: return %[[R]]
func.func @reshape_collapse(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// Splitting a dimension is one expand_shape.
// CHECK-LABEL: func.func @reshape_expand
// CHECK-NOT: tensor.collapse_shape
// CHECK: tensor.expand_shape %arg0 {{\[\[}}0], [1], [2, 3]] output_shape [2, 3, 2, 2] : tensor<2x3x4xf32> into tensor<2x3x2x2xf32>
func.func @reshape_expand(%x: tensor<2x3x4xf32>) -> tensor<2x3x2x2xf32> {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  return %0 : tensor<2x3x2x2xf32>
}

// -----

// Merging some dimensions and splitting others: collapse to the common runs, then expand.
// CHECK-LABEL: func.func @reshape_regroup
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK: tensor.expand_shape %[[C]] {{\[\[}}0], [1, 2]] output_shape [6, 2, 2] : tensor<6x4xf32> into tensor<6x2x2xf32>
func.func @reshape_regroup(%x: tensor<2x3x4xf32>) -> tensor<6x2x2xf32> {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<6x2x2xf32>
  return %0 : tensor<6x2x2xf32>
}

// -----

// With no common boundary: collapse to 1-D and expand (never tensor.reshape).
// CHECK-LABEL: func.func @reshape_through_1d
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK: tensor.expand_shape %[[C]] {{\[\[}}0, 1, 2]] output_shape [4, 3, 2] : tensor<24xf32> into tensor<4x3x2xf32>
// CHECK-NOT: tensor.reshape
func.func @reshape_through_1d(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = kiln.reshape %x : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
  return %0 : tensor<4x3x2xf32>
}

// -----

// Unit dimensions join a neighbouring run; a scalar expands with no groups.
// CHECK-LABEL: func.func @reshape_unit_dims
// CHECK: tensor.collapse_shape %arg0 {{\[\[}}0], [1, 2]] : tensor<2x1x3xf32> into tensor<2x3xf32>
// CHECK: tensor.expand_shape %arg1 [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
func.func @reshape_unit_dims(%x: tensor<2x1x3xf32>, %s: tensor<f32>) -> (tensor<2x3xf32>, tensor<1x1xf32>) {
  %0 = kiln.reshape %x : tensor<2x1x3xf32> -> tensor<2x3xf32>
  %1 = kiln.reshape %s : tensor<f32> -> tensor<1x1xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<1x1xf32>
}

// -----

// transpose is linalg.transpose with the same permutation.
// CHECK-LABEL: func.func @transpose
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x2x3xi64>
// CHECK: linalg.transpose ins(%arg0 : tensor<2x3x4xi64>) outs(%[[E]] : tensor<4x2x3xi64>) permutation = [2, 0, 1]
func.func @transpose(%x: tensor<2x3x4xi64>) -> tensor<4x2x3xi64> {
  %0 = kiln.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xi64> -> tensor<4x2x3xi64>
  return %0 : tensor<4x2x3xi64>
}

// -----

// Only leading dimensions added: linalg.broadcast.
// CHECK-LABEL: func.func @broadcast_leading
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x5x3xf32>
// CHECK: linalg.broadcast ins(%arg0 : tensor<3xf32>) outs(%[[E]] : tensor<2x5x3xf32>) dimensions = [0, 1]
func.func @broadcast_leading(%x: tensor<3xf32>) -> tensor<2x5x3xf32> {
  %0 = kiln.broadcast %x : tensor<3xf32> -> tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}

// -----

// A stretching size-1 dimension reads index 0 through a generic's map.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @broadcast_stretch
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]]
// CHECK-SAME: ins(%arg0 : tensor<3x1xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[A]] : f32
func.func @broadcast_stretch(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %0 = kiln.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// concat inserts each non-empty input at its offset along the axis.
// CHECK-LABEL: func.func @concat
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %arg0 into %[[E]][0, 0] [2, 1] [1, 1]
// CHECK: %[[B:.*]] = tensor.insert_slice %arg2 into %[[A]][0, 1] [2, 3] [1, 1]
// CHECK-NOT: tensor.insert_slice
// CHECK: return %[[B]]
func.func @concat(%a: tensor<2x1xf32>, %b: tensor<2x0xf32>, %c: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %0 = kiln.concat %a, %b, %c {axis = 1 : i64} : tensor<2x1xf32>, tensor<2x0xf32>, tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Positive steps are one extract_slice.
// CHECK-LABEL: func.func @slice_forward
// CHECK: tensor.extract_slice %arg0[0, 1] [4, 3] [1, 3] : tensor<4x10xf32> to tensor<4x3xf32>
func.func @slice_forward(%x: tensor<4x10xf32>) -> tensor<4x3xf32> {
  %0 = kiln.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 4, 10>, steps = array<i64: 1, 3>} : tensor<4x10xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// A negative step reads input[start + i * step] in a generic (limit -1: to the front).
// CHECK-LABEL: func.func @slice_backward
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[STEP:.*]] = arith.constant -2 : index
// CHECK: %[[SCALED:.*]] = arith.muli %[[J]], %[[STEP]] : index
// CHECK: %[[START:.*]] = arith.constant 9 : index
// CHECK: %[[COL:.*]] = arith.addi %[[SCALED]], %[[START]] : index
// CHECK: tensor.extract %arg0[%[[I]], %[[COL]]] : tensor<4x10xf32>
func.func @slice_backward(%x: tensor<4x10xf32>) -> tensor<4x5xf32> {
  %0 = kiln.slice %x {starts = array<i64: 0, 9>, limits = array<i64: 4, -1>, steps = array<i64: 1, -2>} : tensor<4x10xf32> -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// split is one extract_slice per piece; an empty piece is a tensor.empty.
// CHECK-LABEL: func.func @split
// CHECK-DAG: %[[A:.*]] = tensor.extract_slice %arg0[0, 0, 0] [1, 4, 2] [1, 1, 1]
// CHECK-DAG: %[[B:.*]] = tensor.empty() : tensor<1x4x0xf32>
// CHECK-DAG: %[[C:.*]] = tensor.extract_slice %arg0[0, 0, 2] [1, 4, 4] [1, 1, 1]
// CHECK: return %[[A]], %[[B]], %[[C]]
func.func @split(%x: tensor<1x4x6xf32>) -> (tensor<1x4x2xf32>, tensor<1x4x0xf32>, tensor<1x4x4xf32>) {
  %0:3 = kiln.split %x {axis = 2 : i64, sizes = array<i64: 2, 0, 4>} : tensor<1x4x6xf32> -> tensor<1x4x2xf32>, tensor<1x4x0xf32>, tensor<1x4x4xf32>
  return %0#0, %0#1, %0#2 : tensor<1x4x2xf32>, tensor<1x4x0xf32>, tensor<1x4x4xf32>
}

// -----

// gather reads the index through a map, wraps and clamps it, and extracts the element.
// CHECK-DAG: #[[IDX:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic {indexing_maps = [#[[IDX]], #{{.*}}]
// CHECK-SAME: ins(%arg1 : tensor<2x4xi64>)
// CHECK: ^bb0(%[[IN:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[K:.*]] = linalg.index 2 : index
// CHECK: %[[I:.*]] = arith.index_cast %[[IN]] : i64 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[I]], %{{.*}} : index
// CHECK: %[[UP:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[W:.*]] = arith.select %[[NEG]], %[[UP]], %[[I]] : index
// CHECK: %[[LO:.*]] = arith.maxsi %[[W]], %{{.*}} : index
// CHECK: %[[C:.*]] = arith.minsi %[[LO]], %{{.*}} : index
// CHECK: tensor.extract %arg0[%[[C]], %[[K]]] : tensor<5x3xf32>
func.func @gather(%t: tensor<5x3xf32>, %i: tensor<2x4xi64>) -> tensor<2x4x3xf32> {
  %0 = kiln.gather %t, %i {axis = 0 : i64} : tensor<5x3xf32>, tensor<2x4xi64> -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

// gather_elements iterates over the indices and replaces the axis coordinate.
// CHECK-LABEL: func.func @gather_elements
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg1 : tensor<3x2xi32>) outs(%{{.*}} : tensor<3x2xf32>)
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[COL:.*]] = arith.minsi
// CHECK: tensor.extract %arg0[%[[ROW]], %[[COL]]] : tensor<3x4xf32>
func.func @gather_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi32>) -> tensor<3x2xf32> {
  %0 = kiln.gather_elements %x, %i {axis = 1 : i64} : tensor<3x4xf32>, tensor<3x2xi32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// scatter_elements walks each reached row's updates in order along a reduction dimension.
// CHECK-DAG: #[[UPD:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[RES:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @scatter_add
// CHECK: %[[ROWS:.*]] = tensor.extract_slice %arg0[0, 0] [3, 5] [1, 1] : tensor<4x5xf32> to tensor<3x5xf32>
// CHECK: %[[G:.*]] = linalg.generic {indexing_maps = [#[[UPD]], #[[UPD]], #[[RES]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%arg1, %arg2 : tensor<3x2xi64>, tensor<3x2xf32>) outs(%[[ROWS]] : tensor<3x5xf32>)
// CHECK: ^bb0(%[[IDX:.*]]: i64, %[[U:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[T:.*]] = arith.select {{.*}} : index
// CHECK: %[[POS:.*]] = linalg.index 1 : index
// CHECK: %[[HIT:.*]] = arith.cmpi eq, %[[T]], %[[POS]] : index
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[U]] : f32
// CHECK: %[[NEW:.*]] = arith.select %[[HIT]], %[[SUM]], %[[ACC]] : f32
// CHECK: linalg.yield %[[NEW]] : f32
// CHECK: tensor.insert_slice %[[G]] into %arg0[0, 0] [3, 5] [1, 1] : tensor<3x5xf32> into tensor<4x5xf32>
func.func @scatter_add(%x: tensor<4x5xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<4x5xf32> {
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<add>} : tensor<4x5xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Without a reduction the last matching update wins; indices covering every row need no slice.
// CHECK-LABEL: func.func @scatter_none
// CHECK-NOT: tensor.extract_slice
// CHECK: linalg.generic
// CHECK-SAME: outs(%arg0 : tensor<3x4xi64>)
// CHECK: ^bb0(%{{.*}}: i32, %[[U:.*]]: i64, %[[ACC:.*]]: i64):
// CHECK: %[[NEW:.*]] = arith.select %{{.*}}, %[[U]], %[[ACC]] : i64
// CHECK: linalg.yield %[[NEW]] : i64
// CHECK-NOT: tensor.insert_slice
func.func @scatter_none(%x: tensor<3x4xi64>, %i: tensor<3x2xi32>, %u: tensor<3x2xi64>) -> tensor<3x4xi64> {
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : tensor<3x4xi64>, tensor<3x2xi32>, tensor<3x2xi64> -> tensor<3x4xi64>
  return %0 : tensor<3x4xi64>
}

// -----

// max and min reductions propagate NaN (arith.maximumf / minimumf).
// CHECK-LABEL: func.func @scatter_max_min
// CHECK: arith.maximumf
// CHECK: arith.minsi
func.func @scatter_max_min(%x: tensor<3x4xf32>, %y: tensor<3x4xi32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>, %v: tensor<3x2xi32>) -> (tensor<3x4xf32>, tensor<3x4xi32>) {
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = #kiln.scatter_reduction<max>} : tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32> -> tensor<3x4xf32>
  %1 = kiln.scatter_elements %y, %i, %v {axis = 1 : i64, reduction = #kiln.scatter_reduction<min>} : tensor<3x4xi32>, tensor<3x2xi64>, tensor<3x2xi32> -> tensor<3x4xi32>
  return %0, %1 : tensor<3x4xf32>, tensor<3x4xi32>
}

// -----

// Constant padding is tensor.pad yielding the value.
// CHECK-LABEL: func.func @pad_constant
// CHECK: %[[V:.*]] = arith.constant 2.500000e+00 : f32
// CHECK: tensor.pad %arg0 low[1, 2] high[0, 1]
// CHECK: tensor.yield %[[V]] : f32
// CHECK: tensor<3x4xf32> to tensor<4x7xf32>
func.func @pad_constant(%x: tensor<3x4xf32>) -> tensor<4x7xf32> {
  %0 = kiln.pad <constant> %x {low = array<i64: 1, 2>, high = array<i64: 0, 1>, value = 2.5} : tensor<3x4xf32> -> tensor<4x7xf32>
  return %0 : tensor<4x7xf32>
}

// -----

// Reflect padding mirrors j = i - low into min(|j|, 2 (n - 1) - |j|).
// CHECK-LABEL: func.func @pad_reflect
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[J:.*]] = arith.subi %[[I]], %{{.*}} : index
// CHECK: %[[NEG:.*]] = arith.subi %{{.*}}, %[[J]] : index
// CHECK: %[[ABS:.*]] = arith.maxsi %[[J]], %[[NEG]] : index
// CHECK: %[[TWICE_LAST:.*]] = arith.constant 6 : index
// CHECK: %[[MIRROR:.*]] = arith.subi %[[TWICE_LAST]], %[[ABS]] : index
// CHECK: %[[COL:.*]] = arith.minsi %[[ABS]], %[[MIRROR]] : index
// CHECK: tensor.extract %arg0[%[[ROW]], %[[COL]]] : tensor<3x4xf32>
func.func @pad_reflect(%x: tensor<3x4xf32>) -> tensor<3x7xf32> {
  %0 = kiln.pad <reflect> %x {low = array<i64: 0, 2>, high = array<i64: 0, 1>} : tensor<3x4xf32> -> tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}

// -----

// Edge padding clamps i - low into [0, n).
// CHECK-LABEL: func.func @pad_edge
// CHECK: %[[J:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK: %[[LO:.*]] = arith.maxsi %[[J]], %{{.*}} : index
// CHECK: %[[C:.*]] = arith.minsi %[[LO]], %{{.*}} : index
// CHECK: tensor.extract %arg0[%[[C]]] : tensor<4xi64>
func.func @pad_edge(%x: tensor<4xi64>) -> tensor<7xi64> {
  %0 = kiln.pad <edge> %x {low = array<i64: 2>, high = array<i64: 1>} : tensor<4xi64> -> tensor<7xi64>
  return %0 : tensor<7xi64>
}

// -----

// tile reads input[i mod n]; size-1 dimensions read 0, unrepeated ones the index.
// CHECK-LABEL: func.func @tile
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[K:.*]] = linalg.index 2 : index
// CHECK: %[[N:.*]] = arith.constant 3 : index
// CHECK: %[[R:.*]] = arith.remui %[[I]], %[[N]] : index
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: tensor.extract %arg0[%[[R]], %[[ZERO]], %[[K]]] : tensor<3x1x4xf32>
func.func @tile(%x: tensor<3x1x4xf32>) -> tensor<6x5x4xf32> {
  %0 = kiln.tile %x {repeats = array<i64: 2, 5, 1>} : tensor<3x1x4xf32> -> tensor<6x5x4xf32>
  return %0 : tensor<6x5x4xf32>
}

// -----

// Nearest resizing maps coordinates in f64 and decides ties on the exact fraction.
// CHECK-LABEL: func.func @resize_nearest
// CHECK: %[[N:.*]] = linalg.index 0 : index
// CHECK: %[[C:.*]] = linalg.index 1 : index
// CHECK: %[[H:.*]] = linalg.index 2 : index
// CHECK: %[[W:.*]] = linalg.index 3 : index
// CHECK: %[[HI:.*]] = arith.index_cast %[[H]] : index to i64
// CHECK: %[[HF:.*]] = arith.sitofp %[[HI]] : i64 to f64
// CHECK: arith.addf %[[HF]]
// CHECK: arith.divf
// CHECK: %[[X:.*]] = arith.subf
// CHECK: %[[FLOOR:.*]] = math.floor %[[X]] : f64
// CHECK: %[[FRAC:.*]] = arith.subf %[[X]], %[[FLOOR]] : f64
// CHECK: %[[UP:.*]] = arith.cmpf oge, %[[FRAC]], %{{.*}} : f64
// CHECK: %[[NEXT:.*]] = arith.addf %[[FLOOR]], %{{.*}} : f64
// CHECK: %[[ROUNDED:.*]] = arith.select %[[UP]], %[[NEXT]], %[[FLOOR]] : f64
// CHECK: arith.fptosi %[[ROUNDED]] : f64 to i64
// CHECK: %[[ROW:.*]] = arith.minsi
// CHECK: %[[COL:.*]] = arith.minsi
// CHECK: tensor.extract %arg0[%[[N]], %[[C]], %[[ROW]], %[[COL]]] : tensor<1x2x4x4xf32>
func.func @resize_nearest(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x8x6xf32> {
  %0 = kiln.resize %x {mode = #kiln.resize_mode<nearest>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, nearest_mode = #kiln.nearest_mode<round_prefer_ceil>, scales = array<f64>} : tensor<1x2x4x4xf32> -> tensor<1x2x8x6xf32>
  return %0 : tensor<1x2x8x6xf32>
}

// -----

// Linear resizing in two dimensions blends four pixels, innermost first, f16 in f32.
// CHECK-LABEL: func.func @resize_linear
// CHECK: %[[TH:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[TW:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[P00:.*]] = tensor.extract %arg0
// CHECK: %[[A:.*]] = arith.extf %[[P00]] : f16 to f32
// CHECK: %[[P01:.*]] = tensor.extract %arg0
// CHECK: %[[B:.*]] = arith.extf %[[P01]] : f16 to f32
// CHECK: tensor.extract %arg0
// CHECK: tensor.extract %arg0
// CHECK-NOT: tensor.extract
// CHECK: %[[SW:.*]] = arith.subf %{{.*}}, %[[TW]] : f32
// CHECK: %[[AW:.*]] = arith.mulf %[[A]], %[[SW]] : f32
// CHECK: %[[BW:.*]] = arith.mulf %[[B]], %[[TW]] : f32
// CHECK: arith.addf %[[AW]], %[[BW]] : f32
// CHECK: %[[SH:.*]] = arith.subf %{{.*}}, %[[TH]] : f32
// CHECK: %[[V:.*]] = arith.addf
// CHECK: %[[R:.*]] = arith.truncf %[[V]] : f32 to f16
// CHECK: linalg.yield %[[R]] : f16
func.func @resize_linear(%x: tensor<1x1x4x4xf16>) -> tensor<1x1x8x8xf16> {
  %0 = kiln.resize %x {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<align_corners>, scales = array<f64>} : tensor<1x1x4x4xf16> -> tensor<1x1x8x8xf16>
  return %0 : tensor<1x1x8x8xf16>
}

// -----

// Scales given at run time are read in the body, widened to f64, and
// divide the shifted output coordinate (half_pixel); the size-1 dimensions
// they cover are not resampled (one pixel whatever the scale).
// CHECK-LABEL: func.func @resize_runtime_scales
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x1x4x6xf32>, %[[S:[^:]*]]: tensor<4xf32>
// CHECK: linalg.generic
// CHECK: %[[S2:.*]] = tensor.extract %[[S]][%c2{{.*}}] : tensor<4xf32>
// CHECK: %[[W2:.*]] = arith.extf %[[S2]] : f32 to f64
// CHECK: arith.divf %{{.*}}, %[[W2]] : f64
// CHECK: %[[S3:.*]] = tensor.extract %[[S]][%c3{{.*}}] : tensor<4xf32>
// CHECK: %[[W3:.*]] = arith.extf %[[S3]] : f32 to f64
// CHECK: arith.divf %{{.*}}, %[[W3]] : f64
// CHECK-NOT: tensor.extract %[[S]]
// CHECK-COUNT-4: tensor.extract %[[X]]
// CHECK: linalg.yield %{{.*}} : f32
func.func @resize_runtime_scales(%x: tensor<1x1x4x6xf32>, %s: tensor<4xf32>) -> tensor<1x1x2x3xf32> {
  %0 = kiln.resize %x scales(%s : tensor<4xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 0, 1, 2, 3>} : tensor<1x1x4x6xf32> -> tensor<1x1x2x3xf32>
  return %0 : tensor<1x1x2x3xf32>
}

// -----

// Antialias with a run-time scale: the taps cover the least scale the
// guard allows (floor(4 s) = 2: s >= 0.5, so 2 * ceil(1 / 0.5) = 4 pixels
// per dimension), the scale clamped to 1 in the kernel.
// CHECK-LABEL: func.func @resize_runtime_antialias
// CHECK: arith.minimumf
// CHECK-COUNT-4: tensor.extract %arg0
// CHECK-NOT: tensor.extract %arg0
// CHECK: linalg.yield
func.func @resize_runtime_antialias(%x: tensor<1x1x1x4xf32>, %s: tensor<1xf32>) -> tensor<1x1x1x2xf32> {
  %0 = kiln.resize %x scales(%s : tensor<1xf32>) {mode = #kiln.resize_mode<linear>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, scales = array<f64>, value_axes = array<i64: 3>, antialias} : tensor<1x1x1x4xf32> -> tensor<1x1x1x2xf32>
  return %0 : tensor<1x1x1x2xf32>
}

// -----

// Cubic resizing in one dimension reads four edge-clamped pixels around
// floor(x) and blends them with Keys' weights; exclude_outside zeroes the
// weights of pixels outside [0, 4) and divides by their sum.
// CHECK-LABEL: func.func @resize_cubic
// CHECK: %[[FL:.*]] = math.floor %{{.*}} : f64
// CHECK-DAG: arith.cmpf oge
// CHECK-DAG: arith.cmpf olt
// CHECK: arith.divf
// CHECK-COUNT-4: tensor.extract %arg0
// CHECK-NOT: tensor.extract
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: linalg.yield %{{.*}} : f32
func.func @resize_cubic(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x8xf32> {
  %0 = kiln.resize %x {mode = #kiln.resize_mode<cubic>, coordinate_mode = #kiln.coordinate_mode<half_pixel>, exclude_outside, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x4x8xf32>
  return %0 : tensor<1x1x4x8xf32>
}

// -----

// Dynamic shapes are not lowered yet.
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<4x?xf32> {
  // expected-error @+1 {{failed to legalize operation 'kiln.transpose'}}
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<?x4xf32> -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

// Unsigned elements that only move lower like any others.
// CHECK-LABEL: func.func @unsigned_transpose
// CHECK: linalg.transpose ins(%arg0 : tensor<2x3xui8>)
func.func @unsigned_transpose(%x: tensor<2x3xui8>) -> tensor<3x2xui8> {
  %0 = kiln.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3xui8> -> tensor<3x2xui8>
  return %0 : tensor<3x2xui8>
}

// -----

// Padding unsigned elements with a value needs arithmetic on them: refused for now.
func.func @unsigned_pad(%x: tensor<2x3xui8>) -> tensor<4x3xui8> {
  // expected-error @+1 {{failed to legalize operation 'kiln.pad'}}
  %0 = kiln.pad <constant> %x {low = array<i64: 1, 0>, high = array<i64: 1, 0>, value = 1.0} : tensor<2x3xui8> -> tensor<4x3xui8>
  return %0 : tensor<4x3xui8>
}

// -----

// Adding or multiplying booleans has no agreed meaning: refused.
func.func @scatter_add_bool(%x: tensor<4xi1>, %i: tensor<2xi64>, %u: tensor<2xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{failed to legalize operation 'kiln.scatter_elements'}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = 0 : i64, reduction = #kiln.scatter_reduction<add>} : tensor<4xi1>, tensor<2xi64>, tensor<2xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Indices longer than the input outside the axis address nothing: refused.
func.func @scatter_indices_too_wide(%x: tensor<2x4xf32>, %i: tensor<3x1xi64>, %u: tensor<3x1xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{failed to legalize operation 'kiln.scatter_elements'}}
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64} : tensor<2x4xf32>, tensor<3x1xi64>, tensor<3x1xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
