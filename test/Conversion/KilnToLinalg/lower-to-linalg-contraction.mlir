// RUN: kiln-opt %s -kiln-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// A 2-D matmul is linalg.matmul into a zero-filled accumulator.
// CHECK-LABEL: func.func @matmul_2d
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ACC:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: %[[MM:.*]] = linalg.matmul ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[ACC]] : tensor<4x16xf32>)
// CHECK: return %[[MM]]
func.func @matmul_2d(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// 3-D operands with equal batch sizes are linalg.batch_matmul.
// CHECK-LABEL: func.func @matmul_batch
// CHECK: linalg.fill ins(%{{.*}} : f16)
// CHECK: linalg.batch_matmul ins(%arg0, %arg1 : tensor<2x4x8xf16>, tensor<2x8x16xf16>)
func.func @matmul_batch(%a: tensor<2x4x8xf16>, %b: tensor<2x8x16xf16>) -> tensor<2x4x16xf16> {
  %0 = kiln.matmul %a, %b : tensor<2x4x8xf16>, tensor<2x8x16xf16> -> tensor<2x4x16xf16>
  return %0 : tensor<2x4x16xf16>
}

// -----

// Broadcast batch dims: size-1 batch dims read index 0, missing ones are dropped.
// CHECK-DAG: #[[LHS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, 0, d2, d4)>
// CHECK-DAG: #[[RHS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @matmul_broadcast
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @matmul_broadcast(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32> {
  %0 = kiln.matmul %a, %b : tensor<2x1x3x4xf32>, tensor<5x4x6xf32> -> tensor<2x5x3x6xf32>
  return %0 : tensor<2x5x3x6xf32>
}

// -----

// A 1-D lhs is a row vector whose dim is dropped from the result.
// CHECK-DAG: #[[VEC:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG: #[[MAT:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul_vector_lhs
// CHECK: linalg.generic {indexing_maps = [#[[VEC]], #[[MAT]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: outs(%{{.*}} : tensor<2x5xf32>)
func.func @matmul_vector_lhs(%a: tensor<4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x5xf32> {
  %0 = kiln.matmul %a, %b : tensor<4xf32>, tensor<2x4x5xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Two 1-D operands give a 0-D dot product.
// CHECK-DAG: #[[VEC:map[0-9]*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[SCALAR:map[0-9]*]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @matmul_dot
// CHECK: linalg.generic {indexing_maps = [#[[VEC]], #[[VEC]], #[[SCALAR]]], iterator_types = ["reduction"]}
// CHECK-SAME: outs(%{{.*}} : tensor<f32>)
func.func @matmul_dot(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<f32> {
  %0 = kiln.matmul %a, %b : tensor<6xf32>, tensor<6xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Integer matmul accumulates with muli/addi in the element type.
// CHECK-LABEL: func.func @matmul_i32
// CHECK: arith.constant 0 : i32
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK: arith.muli
// CHECK: arith.addi
func.func @matmul_i32(%a: tensor<3x4xi32>, %b: tensor<4xi32>) -> tensor<3xi32> {
  %0 = kiln.matmul %a, %b : tensor<3x4xi32>, tensor<4xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// Boolean matmul (or of ands) is refused: arith's i1 add and mul are xor and and.
func.func @matmul_bool(%a: tensor<2x2xi1>) -> tensor<2x2xi1> {
  // expected-error @+1 {{failed to legalize operation 'kiln.matmul'}}
  %0 = kiln.matmul %a, %a : tensor<2x2xi1>, tensor<2x2xi1> -> tensor<2x2xi1>
  return %0 : tensor<2x2xi1>
}

// -----

// Unsigned integer matmul is refused until a signless type conversion exists.
func.func @matmul_unsigned(%a: tensor<2x2xui8>) -> tensor<2x2xui8> {
  // expected-error @+1 {{failed to legalize operation 'kiln.matmul'}}
  %0 = kiln.matmul %a, %a : tensor<2x2xui8>, tensor<2x2xui8> -> tensor<2x2xui8>
  return %0 : tensor<2x2xui8>
}

// -----

// conv: zero padding (low pads then high pads), the bias broadcast as the
// accumulator, and a sliding-window input map.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 * 2 + d5, d3 * 2 + d6)>
// CHECK-DAG: #[[FILTER:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv_2d_bias
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 0] high[0, 0, 1, 1]
// CHECK: tensor<1x3x8x8xf32> to tensor<1x3x10x9xf32>
// CHECK: %[[BIAS:.*]] = linalg.broadcast ins(%arg2 : tensor<4xf32>) outs(%{{.*}} : tensor<1x4x4x4xf32>) dimensions = [0, 2, 3]
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[FILTER]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[PAD]], %arg1 : tensor<1x3x10x9xf32>, tensor<4x3x3x3xf32>) outs(%[[BIAS]] : tensor<1x4x4x4xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @conv_2d_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  %0 = kiln.conv %x, %w, %b {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 0, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

// Grouped conv splits the channel dims into [groups, channels / groups].
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>
// CHECK-DAG: #[[FILTER:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>
// CHECK-LABEL: func.func @conv_groups
// CHECK-NOT: tensor.pad
// CHECK: %[[X:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2], [3], [4]] {{.*}} into tensor<1x2x2x5x5xf32>
// CHECK: %[[W:.*]] = tensor.expand_shape %arg1 {{\[\[}}0, 1], [2], [3], [4]] {{.*}} into tensor<2x3x2x3x3xf32>
// CHECK: %[[ACC:.*]] = tensor.expand_shape %{{.*}} into tensor<1x2x3x3x3xf32>
// CHECK: %[[CONV:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[FILTER]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[X]], %[[W]] : {{.*}}) outs(%[[ACC]] : {{.*}})
// CHECK: tensor.collapse_shape %[[CONV]] {{\[\[}}0], [1, 2], [3], [4]] : tensor<1x2x3x3x3xf32> into tensor<1x6x3x3xf32>
func.func @conv_groups(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, groups = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

// nhwc conv: channels last in input, filter [O, kernel..., C] and result; dilation scales the tap.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2 + d4 * 2, d3)>
// CHECK-DAG: #[[FILTER:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1)>
// CHECK-LABEL: func.func @conv_1d_nhwc
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[FILTER]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
func.func @conv_1d_nhwc(%x: tensor<2x9x3xf32>, %w: tensor<5x3x3xf32>) -> tensor<2x5x5xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1>, dilations = array<i64: 2>, padding = array<i64: 0, 0>, data_format = #kiln.data_format<nhwc>} : (tensor<2x9x3xf32>, tensor<5x3x3xf32>) -> tensor<2x5x5xf32>
  return %0 : tensor<2x5x5xf32>
}

// -----

// A 3-D conv: five parallel loops and four reduction loops.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d2 + d6, d3 + d7, d4 + d8)>
// CHECK-LABEL: func.func @conv_3d
// CHECK: linalg.generic {indexing_maps = [#[[IN]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]}
func.func @conv_3d(%x: tensor<1x2x5x4x6xf32>, %w: tensor<3x2x2x3x2xf32>) -> tensor<1x3x4x2x5xf32> {
  %0 = kiln.conv %x, %w {strides = array<i64: 1, 1, 1>, dilations = array<i64: 1, 1, 1>, padding = array<i64: 0, 0, 0, 0, 0, 0>} : (tensor<1x2x5x4x6xf32>, tensor<3x2x2x3x2xf32>) -> tensor<1x3x4x2x5xf32>
  return %0 : tensor<1x3x4x2x5xf32>
}

// -----

// conv_transpose with stride 2: zeros inserted and borders added by one
// strided insert_slice; the filter is read as [C, O] with the kernel flipped.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 - d5 + 2, d3 - d6 + 2)>
// CHECK-DAG: #[[FILTER:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d1, d5, d6)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv_transpose_stride
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x4x8x8xf32>)
// CHECK: %[[X:.*]] = tensor.insert_slice %arg0 into %[[ZEROS]][0, 0, 1, 1] [1, 4, 3, 3] [1, 1, 2, 2]
// CHECK: %[[BIAS:.*]] = linalg.broadcast ins(%arg2 : tensor<3xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[FILTER]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME: ins(%[[X]], %arg1 : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) outs(%[[BIAS]] : tensor<1x3x6x6xf32>)
func.func @conv_transpose_stride(%x: tensor<1x4x3x3xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<1x3x6x6xf32> {
  %0 = kiln.conv_transpose %x, %w, %b {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x4x3x3xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x3x6x6xf32>
  return %0 : tensor<1x3x6x6xf32>
}

// -----

// conv_transpose with stride 2 along a dim of size 1: the stride places
// nothing there, so the insert_slice has stride 1 in it (a strided slice
// of a one-element innermost dim became an invalid vector.store).
// CHECK-LABEL: func.func @conv_transpose_stride_one_column
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[0, 0, 0, 0] [1, 4, 3, 1] [1, 1, 2, 1]
func.func @conv_transpose_stride_one_column(%x: tensor<1x4x3x1xf32>, %w: tensor<4x3x1x1xf32>) -> tensor<1x3x5x1xf32> {
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 2, 2>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, output_padding = array<i64: 0, 0>} : (tensor<1x4x3x1xf32>, tensor<4x3x1x1xf32>) -> tensor<1x3x5x1xf32>
  return %0 : tensor<1x3x5x1xf32>
}

// -----

// conv_transpose with unit stride is a tensor.pad; padding beyond the kernel
// border becomes an offset in the window map instead of a crop.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d2 - d4 + 2)>
// CHECK-LABEL: func.func @conv_transpose_pad_offset
// CHECK-NOT: tensor.pad
// CHECK-NOT: tensor.insert_slice
// CHECK: linalg.generic {indexing_maps = [#[[IN]], {{.*}}]
// CHECK-SAME: ins(%arg0, %arg1 : tensor<1x2x6xf32>, tensor<2x3x2xf32>)
func.func @conv_transpose_pad_offset(%x: tensor<1x2x6xf32>, %w: tensor<2x3x2xf32>) -> tensor<1x3x3xf32> {
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 1>, dilations = array<i64: 1>, padding = array<i64: 2, 2>, output_padding = array<i64: 0>} : (tensor<1x2x6xf32>, tensor<2x3x2xf32>) -> tensor<1x3x3xf32>
  return %0 : tensor<1x3x3xf32>
}

// -----

// Grouped nhwc conv_transpose: filter [C, kernel..., O / groups] split by group.
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d3 - d6 + 1, d4 - d7 + 1, d1, d5)>
// CHECK-DAG: #[[FILTER:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d5, d6, d7, d2)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d3, d4, d1, d2)>
// CHECK-LABEL: func.func @conv_transpose_groups_nhwc
// CHECK: tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0], [1], [2], [3, 4]] {{.*}} into tensor<1x5x5x2x2xf32>
// CHECK: tensor.expand_shape %arg1 {{\[\[}}0, 1], [2], [3], [4]] {{.*}} into tensor<2x2x2x2x3xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[FILTER]], #[[OUT]]]
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0], [1], [2], [3, 4]] : tensor<1x4x4x2x3xf32> into tensor<1x4x4x6xf32>
func.func @conv_transpose_groups_nhwc(%x: tensor<1x3x3x4xf32>, %w: tensor<4x2x2x3xf32>) -> tensor<1x4x4x6xf32> {
  %0 = kiln.conv_transpose %x, %w {strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, output_padding = array<i64: 0, 0>, groups = 2 : i64, data_format = #kiln.data_format<nhwc>} : (tensor<1x3x3x4xf32>, tensor<4x2x2x3xf32>) -> tensor<1x4x4x6xf32>
  return %0 : tensor<1x4x4x6xf32>
}
