// RUN: kiln-opt %s -kiln-map-to-gpu -split-input-file | FileCheck %s
// Launch scaling (#kiln.grid_scale, KilnKernelAttrs.td; SymbolicLoops.h): with
// `kiln.dim_ranges` on the module and `kiln.symbolic_dims` on the
// arguments, kiln-map-to-gpu lists each generic launch's grid scale on the
// function (`kiln.launch_grid_scales`, in launch order; `{}` for a launch
// that keeps its compiled grid), which kiln-name-kernels moves onto the
// outlined launches. blocks(N) = ceil(N * numerator / denominator).

#id = affine_map<(d0, d1) -> (d0, d1)>

// A chain of two thread-per-output kernels over [N, 100], N <= 8, 256
// threads a block: 800 points, 4 blocks; per unit of N 100 points. The
// second reads the first's buffer, whose dim 0 follows N.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: kiln.launch_grid_scales = [#kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>, #kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>]
module attributes {kiln.dim_ranges = {N = array<i64: 1, 8, 8>}} {
func.func @chain(%x: memref<8x100xf32> {kiln.symbolic_dims = ["N", ""]}, %y: memref<8x100xf32> {bufferize.result}) {
  %t = memref.alloc() : memref<8x100xf32>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%t : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%i, %j] : memref<8x100xf32>
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %t[%i, %j] : memref<8x100xf32>
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  }
  return
}
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// N on loop 1 (a transposed write [100, N]): the grid's blocks do not hold
// N's slices in a suffix, so nothing scales.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: kiln.launch_grid_scales
// CHECK: return
module attributes {kiln.dim_ranges = {N = array<i64: 1, 8, 8>}} {
func.func @transposed(%x: memref<8x100xf32> {kiln.symbolic_dims = ["N", ""]}, %y: memref<100x8xf32> {bufferize.result}) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<100x8xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%j, %i] : memref<8x100xf32>
    linalg.yield %v : f32
  }
  return
}
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A reduction over N (loop 0 a reduction) does not scale, its output is
// unknown from then on (the consumer keeps its grid), and an op that reads
// only the input still scales.
// CHECK-LABEL: func.func @reduction
// CHECK-SAME: kiln.launch_grid_scales = [{}, {}, {}, #kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>]
module attributes {kiln.dim_ranges = {N = array<i64: 1, 8, 8>}} {
func.func @reduction(%x: memref<8x100xf32> {kiln.symbolic_dims = ["N", ""]}, %y: memref<8x100xf32> {bufferize.result}, %z: memref<8x100xf32> {bufferize.result}) {
  %cst = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<100xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%sum : memref<100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    linalg.yield %cst : f32
  }
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%x : memref<8x100xf32>) outs(%sum : memref<100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%i, %j] : memref<8x100xf32>
    %s = memref.load %sum[%j] : memref<100xf32>
    %r = arith.subf %v, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%z : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%i, %j] : memref<8x100xf32>
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  }
  return
}
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// A reshape view keeps the symbol outermost: [N, 4, 16] read as
// [N*4, 16] (factor 4), 128 threads a block: 512 points, 4 blocks, 64
// points per unit of N.
// CHECK-LABEL: func.func @collapsed
// CHECK-SAME: kiln.launch_grid_scales = [#kiln.grid_scale<symbol = "N", dim = 0, numerator = 64, denominator = 128>]
module attributes {kiln.dim_ranges = {N = array<i64: 1, 8, 8>}} {
func.func @collapsed(%x: memref<8x4x16xf32> {kiln.symbolic_dims = ["N", "", ""]}, %y: memref<32x16xf32> {bufferize.result}) {
  %v = memref.collapse_shape %x [[0, 1], [2]] : memref<8x4x16xf32> into memref<32x16xf32>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<32x16xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 128>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %a = memref.load %v[%i, %j] : memref<32x16xf32>
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  }
  return
}
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
// A gather (an index loaded from memory) anywhere in the function: nothing
// scales, since an unscaled gather could take padding a scaled producer
// left unwritten as an index.
// CHECK-LABEL: func.func @gather
// CHECK-NOT: kiln.launch_grid_scales
// CHECK: return
module attributes {kiln.dim_ranges = {N = array<i64: 1, 8, 8>}} {
func.func @gather(%x: memref<8x100xf32> {kiln.symbolic_dims = ["N", ""]}, %ids: memref<8xi32> {kiln.symbolic_dims = ["N"]}, %table: memref<50x100xf32>, %y: memref<8x100xf32> {bufferize.result}, %z: memref<8x100xf32> {bufferize.result}) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%i, %j] : memref<8x100xf32>
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%z : memref<8x100xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %id = memref.load %ids[%i] : memref<8xi32>
    %row = arith.index_cast %id : i32 to index
    %v = memref.load %table[%row, %j] : memref<50x100xf32>
    linalg.yield %v : f32
  }
  return
}
}
