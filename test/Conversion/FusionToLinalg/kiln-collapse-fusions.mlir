// RUN: kiln-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(kiln-lower-to-linalg, kiln-collapse-fusions, canonicalize, cse))' -verify-diagnostics | FileCheck %s

// A matmul with its bias: one generic over the output; the reduction is an
// scf.for with the accumulator in a register, the bias is read at the point.
// CHECK-LABEL: func.func @matmul_bias(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x16xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK:         %[[G:.*]] = linalg.generic
// CHECK-SAME:        iterator_types = ["parallel", "parallel"]
// CHECK-SAME:        kiln.fusion_kind = "matmul"
// CHECK:           %[[I:.*]] = linalg.index 0
// CHECK:           %[[J:.*]] = linalg.index 1
// CHECK:           %[[ACC:.*]] = scf.for %[[K:.*]] = {{.*}} iter_args
// CHECK:             tensor.extract %[[X]][%[[I]], %[[K]]]
// CHECK:             tensor.extract %[[W]][%[[K]], %[[J]]]
// CHECK:             arith.mulf
// CHECK:             arith.addf
// CHECK:           %[[BIAS:.*]] = tensor.extract %[[B]][%[[J]]]
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[BIAS]]
// CHECK:           linalg.yield %[[SUM]]
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[G]]
func.func @matmul_bias(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = kiln.fusion "matmul" -> tensor<4x8xf32> {
    %m = kiln.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %a = kiln.add %m, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    kiln.yield %a : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// Softmax: the row's max and sum depend on the row only, so they are
// computed at the top of the body, outside any loop over the row; the sum's
// loop reads the max, it does not recompute it.
// CHECK-LABEL: func.func @softmax(
// CHECK:         linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 0
// CHECK:           %[[J:.*]] = linalg.index 1
// CHECK:           %[[MAX:.*]] = scf.for {{.*}} {
// CHECK:             arith.maximumf
// CHECK:           }
// CHECK:           %[[SUM:.*]] = scf.for {{.*}} {
// CHECK-NOT:         scf.for
// CHECK:             arith.subf %{{.*}}, %[[MAX]]
// CHECK:             math.exp
// CHECK:             arith.addf
// CHECK:           }
// CHECK:           arith.subf %{{.*}}, %[[MAX]]
// CHECK:           %[[E:.*]] = math.exp
// CHECK:           %[[P:.*]] = arith.divf %[[E]], %[[SUM]]
// CHECK:           linalg.yield %[[P]]
func.func @softmax(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %0 = kiln.fusion "softmax" -> tensor<4x64xf32> {
    %s = kiln.softmax %x {axis = 1 : i64} : tensor<4x64xf32>
    kiln.yield %s : tensor<4x64xf32>
  }
  return %0 : tensor<4x64xf32>
}

// -----

// Padding becomes a guarded read: inside the source, its element; outside,
// the padding value. The window loops (kh, kw) are outermost, so the guard
// is computed outside the loop over input channels, which is innermost.
// CHECK-LABEL: func.func @pad_into_conv(
// CHECK:         linalg.generic
// CHECK:           scf.for %[[KH:[^ ]*]] = %c0 to %c3
// CHECK:             scf.for %[[KW:[^ ]*]] = %c0 to %c3
// CHECK:               arith.andi
// CHECK:               %[[IN:.*]] = arith.andi
// CHECK:               scf.for %[[C:[^ ]*]] = %c0 to %c2
// CHECK-NOT:             arith.andi
// CHECK:                 scf.if %[[IN]] -> (f32) {
// CHECK:                   tensor.extract %arg0[%c0, %[[C]],
// CHECK:                 } else {
// CHECK:                   scf.yield %{{.*}} : f32
// CHECK:                 }
// CHECK:                 tensor.extract %arg1[%{{.*}}, %[[C]], %[[KH]], %[[KW]]]
func.func @pad_into_conv(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<1x2x4x4xf32> {
  %0 = kiln.fusion "conv" -> tensor<1x2x4x4xf32> {
    %c = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x4x4xf32>
    kiln.yield %c : tensor<1x2x4x4xf32>
  }
  return %0 : tensor<1x2x4x4xf32>
}

// -----

// Concatenation: each part is read where it lies (the last part is tested
// first, as the lowering inserts it last).
// CHECK-LABEL: func.func @concat(
// CHECK:         linalg.generic
// CHECK:           %[[J:.*]] = linalg.index 1
// CHECK:           %[[SECOND:.*]] = arith.cmpi sge, %[[J]], %c3
// CHECK:           scf.if %[[SECOND]] -> (f32) {
// CHECK:             %[[K:.*]] = arith.addi %[[J]], %c-3
// CHECK:             tensor.extract %arg1[%{{.*}}, %[[K]]]
// CHECK:           } else {
// CHECK:             tensor.extract %arg0
// CHECK-NOT:     tensor.insert_slice
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<2x8xf32> {
    %c = kiln.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
    %r = kiln.relu %c : tensor<2x8xf32>
    kiln.yield %r : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32>
}

// -----

// Reshape and transpose become index arithmetic (attention heads): the
// collapsed dimension is rebuilt from the head and the channel.
// CHECK-LABEL: func.func @heads(
// CHECK:         linalg.generic
// CHECK:           %[[H:.*]] = linalg.index 0
// CHECK:           %[[S:.*]] = linalg.index 1
// CHECK:           %[[D:.*]] = linalg.index 2
// CHECK:           %[[HC:.*]] = arith.muli %[[H]], %c8
// CHECK:           %[[C:.*]] = arith.addi %[[HC]], %[[D]]
// CHECK:           tensor.extract %arg0[%[[S]], %[[C]]]
// CHECK-NOT:     tensor.expand_shape
// CHECK-NOT:     linalg.transpose
func.func @heads(%x: tensor<8x32xf32>) -> tensor<4x8x8xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<4x8x8xf32> {
    %r = kiln.reshape %x : tensor<8x32xf32> -> tensor<8x4x8xf32>
    %t = kiln.transpose %r {permutation = array<i64: 1, 0, 2>} : tensor<8x4x8xf32> -> tensor<4x8x8xf32>
    %e = kiln.exp %t : tensor<4x8x8xf32>
    kiln.yield %e : tensor<4x8x8xf32>
  }
  return %0 : tensor<4x8x8xf32>
}

// -----

// Two results of one shape: one generic with two outputs; the shared relu is
// computed once.
// CHECK-LABEL: func.func @two_results(
// CHECK:         %[[G:.*]]:2 = linalg.generic
// CHECK:           %[[R:.*]] = arith.maximumf
// CHECK:           %[[E:.*]] = math.exp %[[R]]
// CHECK:           linalg.yield %[[R]], %[[E]]
// CHECK:         return %[[G]]#0, %[[G]]#1
func.func @two_results(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0:2 = kiln.fusion "elementwise" -> tensor<16xf32>, tensor<16xf32> {
    %r = kiln.relu %x : tensor<16xf32>
    %e = kiln.exp %r : tensor<16xf32>
    kiln.yield %r, %e : tensor<16xf32>, tensor<16xf32>
  }
  return %0#0, %0#1 : tensor<16xf32>, tensor<16xf32>
}

// -----

// A region holding an op with no point form (here tensor.concat, which the
// kiln lowering never produces) stays as separate ops, with a warning.
// CHECK-LABEL: func.func @no_point_form(
// CHECK-NOT:     kiln.fusion
// CHECK:         tensor.concat
func.func @no_point_form(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<4xf32> {
  // expected-warning @+1 {{fusion region kept as separate kernels: tensor.concat has no point form}}
  %0 = kiln.fusion "data_movement" -> tensor<4xf32> {
    %c = tensor.concat dim(0) %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
    kiln.yield %c : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A gather from a tensor the region computes, yielded as it is (issue 10:
// this crashed): the table is read at the gathered row, the relu applied
// there, and the index wrapped (negative) and clamped first.
// CHECK-LABEL: func.func @relu_gather(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<16x8xf32>, %[[J:[^:]*]]: tensor<1xi64>)
// CHECK:         linalg.generic
// CHECK:           %[[COL:.*]] = linalg.index 1
// CHECK:           %[[RAW:.*]] = tensor.extract %[[J]][%c0]
// CHECK:           %[[IDX:.*]] = arith.index_cast %[[RAW]]
// CHECK:           arith.cmpi slt, %[[IDX]], %c0
// CHECK:           arith.addi %[[IDX]], %c16
// CHECK:           %[[ROW:.*]] = arith.minsi %{{.*}}, %c15
// CHECK:           %[[E:.*]] = tensor.extract %[[X]][%[[ROW]], %[[COL]]]
// CHECK:           %[[R:.*]] = arith.maximumf %[[E]], %{{.*}}
// CHECK:           linalg.yield %[[R]]
func.func @relu_gather(%x: tensor<16x8xf32>, %j: tensor<1xi64>) -> tensor<1x8xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<1x8xf32> {
    %r = kiln.relu %x : tensor<16x8xf32>
    %g = kiln.gather %r, %j {axis = 0 : i64} : tensor<16x8xf32>, tensor<1xi64> -> tensor<1x8xf32>
    kiln.yield %g : tensor<1x8xf32>
  }
  return %0 : tensor<1x8xf32>
}

// -----

// Two gathers on different axes, then an op on the gathered value: the
// inner gather's row index and the outer's column index both reach the one
// read of the table.
// CHECK-LABEL: func.func @gather_gather(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<16x8xf32>, %[[I:[^:]*]]: tensor<2xi64>, %[[J:[^:]*]]: tensor<3xi64>)
// CHECK:         linalg.generic
// CHECK:           %[[ROW:.*]] = linalg.index 0
// CHECK:           %[[COL:.*]] = linalg.index 1
// CHECK:           tensor.extract %[[J]][%[[COL]]]
// CHECK:           %[[C:.*]] = arith.minsi %{{.*}}, %c7
// CHECK:           tensor.extract %[[I]][%[[ROW]]]
// CHECK:           %[[R:.*]] = arith.minsi %{{.*}}, %c15
// CHECK:           %[[E:.*]] = tensor.extract %[[X]][%[[R]], %[[C]]]
// CHECK:           %[[M:.*]] = arith.maximumf %[[E]]
// CHECK:           %[[N:.*]] = arith.negf %[[M]]
// CHECK:           linalg.yield %[[N]]
func.func @gather_gather(%x: tensor<16x8xf32>, %i: tensor<2xi64>, %j: tensor<3xi64>) -> tensor<2x3xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<2x3xf32> {
    %r = kiln.relu %x : tensor<16x8xf32>
    %a = kiln.gather %r, %i {axis = 0 : i64} : tensor<16x8xf32>, tensor<2xi64> -> tensor<2x8xf32>
    %b = kiln.gather %a, %j {axis = 1 : i64} : tensor<2x8xf32>, tensor<3xi64> -> tensor<2x3xf32>
    %n = kiln.neg %b : tensor<2x3xf32>
    kiln.yield %n : tensor<2x3xf32>
  }
  return %0 : tensor<2x3xf32>
}

// -----

// A slice with a negative step of a computed tensor reads it through the
// same point form as a gather: row 3 - 2 * i.
// CHECK-LABEL: func.func @reverse_slice(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x10xf32>)
// CHECK:         linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 0
// CHECK:           %[[J:.*]] = linalg.index 1
// CHECK:           %[[M:.*]] = arith.muli %[[I]], %c-2
// CHECK:           %[[ROW:.*]] = arith.addi %[[M]], %c3
// CHECK:           %[[E:.*]] = tensor.extract %[[X]][%[[ROW]], %[[J]]]
// CHECK:           arith.maximumf %[[E]]
func.func @reverse_slice(%x: tensor<4x10xf32>) -> tensor<2x10xf32> {
  %0 = kiln.fusion "elementwise" -> tensor<2x10xf32> {
    %r = kiln.relu %x : tensor<4x10xf32>
    %s = kiln.slice %r {limits = array<i64: -1, 10>, starts = array<i64: 3, 0>, steps = array<i64: -2, 1>} : tensor<4x10xf32> -> tensor<2x10xf32>
    kiln.yield %s : tensor<2x10xf32>
  }
  return %0 : tensor<2x10xf32>
}

// -----

// A region with a rank-0 result: the collapse of the one-element slice to
// a scalar reads the slice's only element (issue 10's fuzzing found this
// reading past the end of an empty index list).
// CHECK-LABEL: func.func @scalar_result(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3xf32>)
// CHECK:         linalg.generic {{.*}} iterator_types = []
// CHECK:           %[[E:.*]] = tensor.extract %[[X]][%c1]
// CHECK:           %[[R:.*]] = arith.maximumf %[[E]]
// CHECK:           linalg.yield %[[R]]
func.func @scalar_result(%x: tensor<3xf32>) -> tensor<f32> {
  %0 = kiln.fusion "elementwise" -> tensor<f32> {
    %s = kiln.slice %x {limits = array<i64: 2>, starts = array<i64: 1>, steps = array<i64: 1>} : tensor<3xf32> -> tensor<1xf32>
    %r = kiln.reshape %s : tensor<1xf32> -> tensor<f32>
    %n = kiln.relu %r : tensor<f32>
    kiln.yield %n : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// A reduction over several axes (here all of them, to a scalar) is one loop
// over their product, the coordinates split off its induction variable
// (the last axis fastest), so that kiln-map-to-gpu sees one reduction loop
// it can spread over a block (a whole-tensor reduce, a mean over H and W).
// CHECK-LABEL: func.func @reduce_all(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x5x7xf32>)
// CHECK:         linalg.generic {{.*}} iterator_types = []
// CHECK:           %[[S:.*]] = scf.for %[[K:.*]] = %c0 to %c105 step %c1 iter_args
// CHECK-NOT:         scf.for
// CHECK-DAG:         %[[K2:.*]] = arith.remui %[[K]], %c7
// CHECK-DAG:         %[[R:.*]] = arith.divui %[[K]], %c7
// CHECK-DAG:         %[[K1:.*]] = arith.remui %[[R]], %c5
// CHECK-DAG:         %[[K0:.*]] = arith.divui %[[R]], %c5
// CHECK:             tensor.extract %[[X]][%[[K0]], %[[K1]], %[[K2]]]
// CHECK:             arith.addf
// CHECK:           linalg.yield %[[S]]
func.func @reduce_all(%x: tensor<3x5x7xf32>) -> tensor<f32> {
  %0 = kiln.fusion "reduce" -> tensor<f32> {
    %r = kiln.reduce <sum> %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<3x5x7xf32> -> tensor<f32>
    kiln.yield %r : tensor<f32>
  }
  return %0 : tensor<f32>
}
