// RUN: kiln-opt %s -split-input-file -kiln-fuse | FileCheck %s
// Running the pass again changes nothing: regions are not re-fused.
// RUN: kiln-opt %s -split-input-file -kiln-fuse | kiln-opt -split-input-file -kiln-fuse | FileCheck %s

// Rule 1 (epilogue): a convolution absorbs its batch norm, the residual add
// and the activation; one region, one result.
// CHECK-LABEL: func.func @conv_epilogue(
// CHECK:         %[[F:.*]] = kiln.fusion "conv" -> tensor<1x8x6x6xf32> {
// CHECK-NEXT:      %[[C:.*]] = kiln.conv
// CHECK-NEXT:      %[[B:.*]] = kiln.batch_norm %[[C]]
// CHECK-NEXT:      %[[A:.*]] = kiln.add %[[B]], %arg3
// CHECK-NEXT:      %[[R:.*]] = kiln.relu %[[A]]
// CHECK-NEXT:      kiln.yield %[[R]]
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
func.func @conv_epilogue(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x3x3xf32>, %s: tensor<8xf32>, %res: tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32> {
  %c = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
  %b = kiln.batch_norm %c, %s, %s, %s, %s : (tensor<1x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x6x6xf32>
  %a = kiln.add %b, %res : tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32> -> tensor<1x8x6x6xf32>
  %r = kiln.relu %a : tensor<1x8x6x6xf32>
  return %r : tensor<1x8x6x6xf32>
}

// -----

// Rule 1, multi-output: the convolution's value is also used outside the
// region (by a later convolution), so the region yields it too.
// CHECK-LABEL: func.func @epilogue_with_escaping_producer(
// CHECK:         %[[F:.*]]:2 = kiln.fusion "conv" -> tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32> {
// CHECK-NEXT:      %[[C:.*]] = kiln.conv
// CHECK-NEXT:      %[[R:.*]] = kiln.relu %[[C]]
// CHECK-NEXT:      kiln.yield %[[C]], %[[R]]
// CHECK:         kiln.fusion "conv"
// CHECK-NEXT:      kiln.conv %[[F]]#0
func.func @epilogue_with_escaping_producer(%x: tensor<1x4x4x4xf32>, %w: tensor<4x4x1x1xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %c = kiln.conv %x, %w {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %r = kiln.relu %c : tensor<1x4x4x4xf32>
  %d = kiln.conv %c, %w {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32>
  return %r, %d : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}

// -----

// Rule 1 refused: the subtraction has another shape than the reduction (the
// kernel's iteration space), so it starts its own region, where it reads
// the stored reduction.
// CHECK-LABEL: func.func @epilogue_shape_differs(
// CHECK:         %[[M:.*]] = kiln.fusion "reduce" -> tensor<4x1xf32> {
// CHECK-NEXT:      kiln.reduce <max>
// CHECK:         kiln.fusion "elementwise" -> tensor<4x16xf32> {
// CHECK-NEXT:      kiln.sub %arg0, %[[M]]
func.func @epilogue_shape_differs(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = kiln.reduce <max> %x {axes = array<i64: 1>} : tensor<4x16xf32> -> tensor<4x1xf32>
  %d = kiln.sub %x, %m : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  return %d : tensor<4x16xf32>
}

// -----

// Rule 1 refused for a cycle: the add's other operand is computed from the
// matmul's region (through a transpose), so the add cannot join it. The add
// gets its own region, with the transpose cloned in as indexing.
// CHECK-LABEL: func.func @epilogue_would_cycle(
// CHECK:         %[[M:.*]] = kiln.fusion "matmul" -> tensor<8x8xf32> {
// CHECK-NEXT:      kiln.matmul
// CHECK-NEXT:      kiln.yield
// CHECK:         kiln.fusion "elementwise" -> tensor<8x8xf32> {
// CHECK-NEXT:      %[[T:.*]] = kiln.transpose %[[M]]
// CHECK-NEXT:      kiln.add %[[M]], %[[T]]
// CHECK-NOT:     kiln.transpose
func.func @epilogue_would_cycle(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = kiln.matmul %x, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %t = kiln.transpose %m {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %a = kiln.add %m, %t : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %a : tensor<8x8xf32>
}

// -----

// Rule 2: a softmax absorbs attention scores whose reduction is short (16),
// scale included.
// CHECK-LABEL: func.func @short_scores_into_softmax(
// CHECK:         kiln.fusion "matmul+softmax" -> tensor<2x32x32xf32> {
// CHECK-NEXT:      kiln.matmul
// CHECK-NEXT:      kiln.mul
// CHECK-NEXT:      kiln.softmax
// CHECK-NEXT:      kiln.yield
// CHECK-NOT:     kiln.fusion
func.func @short_scores_into_softmax(%q: tensor<2x32x16xf32>, %k: tensor<2x16x32xf32>, %s: tensor<f32>) -> tensor<2x32x32xf32> {
  %m = kiln.matmul %q, %k : tensor<2x32x16xf32>, tensor<2x16x32xf32> -> tensor<2x32x32xf32>
  %x = kiln.mul %m, %s : tensor<2x32x32xf32>, tensor<f32> -> tensor<2x32x32xf32>
  %p = kiln.softmax %x {axis = -1 : i64} : tensor<2x32x32xf32>
  return %p : tensor<2x32x32xf32>
}

// -----

// Rule 2 refused: a reduction of 128 is too long to recompute in every pass
// over the row; the scores are stored.
// CHECK-LABEL: func.func @long_scores_not_into_softmax(
// CHECK:         %[[M:.*]] = kiln.fusion "matmul" -> tensor<32x32xf32>
// CHECK:         kiln.fusion "softmax" -> tensor<32x32xf32> {
// CHECK-NEXT:      kiln.softmax %[[M]]
func.func @long_scores_not_into_softmax(%q: tensor<32x128xf32>, %k: tensor<128x32xf32>) -> tensor<32x32xf32> {
  %m = kiln.matmul %q, %k : tensor<32x128xf32>, tensor<128x32xf32> -> tensor<32x32xf32>
  %p = kiln.softmax %m {axis = -1 : i64} : tensor<32x32xf32>
  return %p : tensor<32x32xf32>
}

// -----

// Rule 3 (prologue): a reshape and a transpose become the matmul's indexing;
// neither is materialized.
// CHECK-LABEL: func.func @data_movement_prologue(
// CHECK:         kiln.fusion "matmul" -> tensor<4x8x8xf32> {
// CHECK-NEXT:      %[[R:.*]] = kiln.reshape %arg0
// CHECK-NEXT:      %[[T:.*]] = kiln.transpose %[[R]]
// CHECK-NEXT:      kiln.matmul %[[T]], %arg1
// CHECK-NOT:     kiln.fusion
func.func @data_movement_prologue(%x: tensor<8x32xf32>, %w: tensor<8x8xf32>) -> tensor<4x8x8xf32> {
  %r = kiln.reshape %x : tensor<8x32xf32> -> tensor<8x4x8xf32>
  %t = kiln.transpose %r {permutation = array<i64: 1, 0, 2>} : tensor<8x4x8xf32> -> tensor<4x8x8xf32>
  %m = kiln.matmul %t, %w : tensor<4x8x8xf32>, tensor<8x8xf32> -> tensor<4x8x8xf32>
  return %m : tensor<4x8x8xf32>
}

// -----

// Rule 3: an elementwise producer with two users is cloned into the
// reduction that reads it, but never into a contraction's inner loop: for
// the matmul it is materialized once.
// CHECK-LABEL: func.func @elementwise_prologue(
// CHECK:         %[[E:.*]] = kiln.fusion "elementwise" -> tensor<8x8xf32> {
// CHECK-NEXT:      kiln.exp %arg0
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32> {
// CHECK-NEXT:      kiln.matmul %[[E]], %arg0
// CHECK:         kiln.fusion "reduce" -> tensor<8x1xf32> {
// CHECK-NEXT:      %[[C:.*]] = kiln.exp %arg0
// CHECK-NEXT:      kiln.reduce <sum> %[[C]]
func.func @elementwise_prologue(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x1xf32>) {
  %e = kiln.exp %x : tensor<8x8xf32>
  %m = kiln.matmul %e, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %s = kiln.reduce <sum> %e {axes = array<i64: 1>} : tensor<8x8xf32> -> tensor<8x1xf32>
  return %m, %s : tensor<8x8xf32>, tensor<8x1xf32>
}

// -----

// Rule 3: an elementwise producer whose only user is a matmul is cloned in.
// CHECK-LABEL: func.func @single_use_prologue(
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32> {
// CHECK-NEXT:      %[[E:.*]] = kiln.exp %arg0
// CHECK-NEXT:      kiln.matmul %[[E]], %arg0
// CHECK-NOT:     kiln.fusion
func.func @single_use_prologue(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = kiln.exp %x : tensor<8x8xf32>
  %m = kiln.matmul %e, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}

// -----

// Rule 4 (side by side): three projections of one input, one region with
// three results; a projection of another shape stays apart.
// CHECK-LABEL: func.func @side_by_side(
// CHECK:         %[[F:.*]]:3 = kiln.fusion "matmul" -> tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> {
// CHECK-COUNT-3:   kiln.matmul %arg0
// CHECK:           kiln.yield
// CHECK:         kiln.fusion "matmul" -> tensor<4x16xf32>
func.func @side_by_side(%x: tensor<4x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %wv: tensor<8x8xf32>, %wo: tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>) {
  %q = kiln.matmul %x, %wq : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k = kiln.matmul %x, %wk : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %v = kiln.matmul %x, %wv : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %o = kiln.matmul %x, %wo : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %q, %k, %v, %o : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>
}

// -----

// Rule 4 refused: the second matmul reads the first, so they cannot run
// side by side.
// CHECK-LABEL: func.func @dependent_not_side_by_side(
// CHECK:         %[[A:.*]] = kiln.fusion "matmul" -> tensor<8x8xf32>
// CHECK:         kiln.fusion "matmul" -> tensor<8x8xf32> {
// CHECK-NEXT:      kiln.matmul %arg0, %[[A]]
func.func @dependent_not_side_by_side(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %a = kiln.matmul %x, %w : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %b = kiln.matmul %x, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// The register bound: a chain of 50 elementwise ops becomes two regions
// (at most 48 ops each).
// CHECK-LABEL: func.func @size_bound(
// CHECK-COUNT-2: kiln.fusion "elementwise"
// CHECK-NOT:     kiln.fusion
func.func @size_bound(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = kiln.exp %x : tensor<4xf32>
  %1 = kiln.exp %0 : tensor<4xf32>
  %2 = kiln.exp %1 : tensor<4xf32>
  %3 = kiln.exp %2 : tensor<4xf32>
  %4 = kiln.exp %3 : tensor<4xf32>
  %5 = kiln.exp %4 : tensor<4xf32>
  %6 = kiln.exp %5 : tensor<4xf32>
  %7 = kiln.exp %6 : tensor<4xf32>
  %8 = kiln.exp %7 : tensor<4xf32>
  %9 = kiln.exp %8 : tensor<4xf32>
  %10 = kiln.exp %9 : tensor<4xf32>
  %11 = kiln.exp %10 : tensor<4xf32>
  %12 = kiln.exp %11 : tensor<4xf32>
  %13 = kiln.exp %12 : tensor<4xf32>
  %14 = kiln.exp %13 : tensor<4xf32>
  %15 = kiln.exp %14 : tensor<4xf32>
  %16 = kiln.exp %15 : tensor<4xf32>
  %17 = kiln.exp %16 : tensor<4xf32>
  %18 = kiln.exp %17 : tensor<4xf32>
  %19 = kiln.exp %18 : tensor<4xf32>
  %20 = kiln.exp %19 : tensor<4xf32>
  %21 = kiln.exp %20 : tensor<4xf32>
  %22 = kiln.exp %21 : tensor<4xf32>
  %23 = kiln.exp %22 : tensor<4xf32>
  %24 = kiln.exp %23 : tensor<4xf32>
  %25 = kiln.exp %24 : tensor<4xf32>
  %26 = kiln.exp %25 : tensor<4xf32>
  %27 = kiln.exp %26 : tensor<4xf32>
  %28 = kiln.exp %27 : tensor<4xf32>
  %29 = kiln.exp %28 : tensor<4xf32>
  %30 = kiln.exp %29 : tensor<4xf32>
  %31 = kiln.exp %30 : tensor<4xf32>
  %32 = kiln.exp %31 : tensor<4xf32>
  %33 = kiln.exp %32 : tensor<4xf32>
  %34 = kiln.exp %33 : tensor<4xf32>
  %35 = kiln.exp %34 : tensor<4xf32>
  %36 = kiln.exp %35 : tensor<4xf32>
  %37 = kiln.exp %36 : tensor<4xf32>
  %38 = kiln.exp %37 : tensor<4xf32>
  %39 = kiln.exp %38 : tensor<4xf32>
  %40 = kiln.exp %39 : tensor<4xf32>
  %41 = kiln.exp %40 : tensor<4xf32>
  %42 = kiln.exp %41 : tensor<4xf32>
  %43 = kiln.exp %42 : tensor<4xf32>
  %44 = kiln.exp %43 : tensor<4xf32>
  %45 = kiln.exp %44 : tensor<4xf32>
  %46 = kiln.exp %45 : tensor<4xf32>
  %47 = kiln.exp %46 : tensor<4xf32>
  %48 = kiln.exp %47 : tensor<4xf32>
  %49 = kiln.exp %48 : tensor<4xf32>
  return %49 : tensor<4xf32>
}

// -----

// Ops that fusion does not know (here a resize) stay outside any region;
// their neighbours are fused around them.
// CHECK-LABEL: func.func @unknown_op_stays(
// CHECK:         %[[R:.*]] = kiln.fusion "elementwise"
// CHECK:         %[[Z:.*]] = kiln.resize %[[R]]
// CHECK:         kiln.fusion "elementwise"
// CHECK-NEXT:      kiln.exp %[[Z]]
func.func @unknown_op_stays(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x8x8xf32> {
  %r = kiln.relu %x : tensor<1x1x4x4xf32>
  %z = kiln.resize %r {coordinate_mode = #kiln.coordinate_mode<asymmetric>, mode = #kiln.resize_mode<nearest>, nearest_mode = #kiln.nearest_mode<floor>, scales = array<f64>} : tensor<1x1x4x4xf32> -> tensor<1x1x8x8xf32>
  %e = kiln.exp %z : tensor<1x1x8x8xf32>
  return %e : tensor<1x1x8x8xf32>
}

// -----

// Rule 3: gather_elements and tile are data movement too: each is cloned
// into its consumer's group with the relu it reads, and the relu, whose
// every user cloned it, is not materialized.
// CHECK-LABEL: func.func @gather_elements_and_tile_prologue(
// CHECK:         kiln.fusion "elementwise" -> tensor<4x2xf32> {
// CHECK-NEXT:      %[[R:.*]] = kiln.relu %arg0
// CHECK-NEXT:      %[[G:.*]] = kiln.gather_elements %[[R]], %arg1
// CHECK-NEXT:      kiln.neg %[[G]]
// CHECK:         kiln.fusion "elementwise" -> tensor<8x12xf32> {
// CHECK-NEXT:      %[[R2:.*]] = kiln.relu %arg0
// CHECK-NEXT:      %[[T:.*]] = kiln.tile %[[R2]]
// CHECK-NEXT:      kiln.exp %[[T]]
// CHECK-NOT:     kiln.fusion
func.func @gather_elements_and_tile_prologue(%x: tensor<4x6xf32>, %j: tensor<4x2xi64>) -> (tensor<4x2xf32>, tensor<8x12xf32>) {
  %r = kiln.relu %x : tensor<4x6xf32>
  %g = kiln.gather_elements %r, %j {axis = 1 : i64} : tensor<4x6xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %n = kiln.neg %g : tensor<4x2xf32>
  %t = kiln.tile %r {repeats = array<i64: 2, 2>} : tensor<4x6xf32> -> tensor<8x12xf32>
  %e = kiln.exp %t : tensor<8x12xf32>
  return %n, %e : tensor<4x2xf32>, tensor<8x12xf32>
}

// -----

// Rule 3: a shared cast (a training step's bf16 copy of the flat params)
// read through slices by two matmuls is one kernel: the slices are cloned
// into each matmul, the cast is not cloned into the slices.
// CHECK-LABEL: func.func @shared_cast_through_slices(
// CHECK:         %[[C:.*]] = kiln.fusion "elementwise" -> tensor<32xbf16> {
// CHECK-NEXT:      kiln.cast %arg0
// CHECK-NEXT:      kiln.yield
// CHECK-NEXT:    }
// CHECK-NOT:     kiln.cast %arg0
// CHECK:         kiln.slice %[[C]] {{.*}}starts = array<i64: 0>
// CHECK:         kiln.slice %[[C]] {{.*}}starts = array<i64: 16>
func.func @shared_cast_through_slices(%p: tensor<32xf32>, %x: tensor<2x4xbf16>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %c = kiln.cast %p : tensor<32xf32> -> tensor<32xbf16>
  %s0 = kiln.slice %c {limits = array<i64: 16>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<32xbf16> -> tensor<16xbf16>
  %w0 = kiln.reshape %s0 : tensor<16xbf16> -> tensor<4x4xbf16>
  %s1 = kiln.slice %c {limits = array<i64: 32>, starts = array<i64: 16>, steps = array<i64: 1>} : tensor<32xbf16> -> tensor<16xbf16>
  %w1 = kiln.reshape %s1 : tensor<16xbf16> -> tensor<4x4xbf16>
  %m0 = kiln.matmul %x, %w0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xf32>
  %m1 = kiln.matmul %x, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xf32>
  return %m0, %m1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Rule 1's exception: a lossless widening cast (bf16 -> f32, a skip
// connection with kiln-lower-precision's residual-precision=low) does not
// join its producer's region, which would then store the f32 copy as well:
// it is cloned into its consumer (rule 3), which reads the bf16 value. A
// narrowing cast still joins its producer.
// CHECK-LABEL: func.func @widening_cast_is_a_prologue(
// CHECK:         %[[A:.*]] = kiln.fusion "matmul" -> tensor<2x4xbf16> {
// CHECK:           kiln.matmul
// CHECK-NEXT:      kiln.relu
// CHECK-NEXT:      kiln.cast {{.*}} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT:      kiln.yield {{.*}} : tensor<2x4xbf16>
// CHECK:         kiln.fusion "matmul" -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[W:.*]] = kiln.cast %[[A]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT:      %[[M:.*]] = kiln.matmul %[[A]]
// CHECK-NEXT:      kiln.add %[[M]], %[[W]]
// CHECK-NOT:     kiln.fusion
func.func @widening_cast_is_a_prologue(%x: tensor<2x4xbf16>, %w: tensor<4x4xbf16>) -> tensor<2x4xf32> {
  %a = kiln.matmul %x, %w : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xf32>
  %r = kiln.relu %a : tensor<2x4xf32>
  %n = kiln.cast %r : tensor<2x4xf32> -> tensor<2x4xbf16>
  %f = kiln.cast %n : tensor<2x4xbf16> -> tensor<2x4xf32>
  %b = kiln.matmul %n, %w : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xf32>
  %s = kiln.add %b, %f : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// A region formed before kiln-fuse (kiln-fuse-quantized's) has no operands:
// its body reads %n from above. The add reads both %n and the region's
// result, so it must not join %n's group: that group would then compute a
// value the region reads before it (a cycle; this fused before).
// CHECK-LABEL: func.func @captured_by_region(
// CHECK:         %[[N:.*]] = kiln.fusion "layer_norm"
// CHECK-NOT:       kiln.add
// CHECK:           kiln.yield
// CHECK:         %[[Q:.*]] = kiln.fusion "quantized_matmul"
// CHECK-NEXT:      kiln.relu %[[N]]
// CHECK:         kiln.fusion "elementwise"
// CHECK-NEXT:      kiln.add %[[N]], %[[Q]]
func.func @captured_by_region(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %n = kiln.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %q = kiln.fusion "quantized_matmul" -> tensor<4x8xf32> {
    %r = kiln.relu %n : tensor<4x8xf32>
    kiln.yield %r : tensor<4x8xf32>
  }
  %s = kiln.add %n, %q : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
