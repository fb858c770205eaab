// RUN: kiln-opt %s -kiln-select-generic-kernels -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-select-generic-kernels=reduction-kernels=false -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s --check-prefix=OFF

// kiln-map-to-gpu's column and whole-tensor reductions
// (reduction-kernels=true, the default; SplitReductions.cpp) for the fused
// reductions kiln-collapse-fusions emits: an all-parallel generic over the
// outputs whose body's loop walks each output's row. OFF is the A/B
// switch: the row kernels (a block per output, its threads strided over the
// row, so over a column's stride).

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// Batch-norm statistics: the mean over N, H, W of NHWC 4x6x5x7, 7 outputs.
// One block of 32 x 8 threads: x over the 7 outputs (the C of the read
// x[n, h, w, c]: consecutive threads, consecutive addresses; the outputs
// past 7 are clamped to read in bounds and do not store), y over 8 slices
// of the 120-long row; each thread's partial to a [8][33] shared tile, a
// barrier, the 8 partials combined in order, then the body's rest (the
// division by 120) and the store by the threads of slice 0.
// CHECK-LABEL: func.func @nhw_mean
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{.*}} = %c32, {{.*}} = %c8, {{.*}}) workgroup(%[[TILE:.*]] : memref<8x33xf32, #gpu.address_space<workgroup>>)
// CHECK:           arith.minui %[[TX]], %c6
// CHECK:           %[[P:.*]] = scf.for %{{.*}} = %[[TY]] to %c120 step %c8
// CHECK:             memref.load %arg0[
// CHECK:           memref.store %[[P]], %[[TILE]][%[[TY]], %[[TX]]]
// CHECK:           gpu.barrier
// CHECK-COUNT-8:   memref.load %[[TILE]]
// CHECK:           arith.divf
// CHECK-DAG:       arith.cmpi ult, %[[TX]], %c7
// CHECK-DAG:       arith.cmpi eq, %[[TY]], %c0
// CHECK:           scf.if
// CHECK-NEXT:        memref.store
// CHECK-NOT:     gpu.launch
// OFF-LABEL: func.func @nhw_mean
// OFF-NOT:     workgroup
// OFF:         gpu.all_reduce add
func.func @nhw_mean(%x: memref<4x6x5x7xf32>, %y: memref<1x1x1x7xf32>) {
  %cst = arith.constant 1.200000e+02 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c120 = arith.constant 120 : index
  linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%y : memref<1x1x1x7xf32>) {
  ^bb0(%out: f32):
    %c = linalg.index 3 : index
    %s = scf.for %k = %c0 to %c120 step %c1 iter_args(%a = %zero) -> (f32) {
      %w = arith.remui %k, %c5 : index
      %q = arith.divui %k, %c5 : index
      %h = arith.remui %q, %c6 : index
      %n = arith.divui %q, %c6 : index
      %v = memref.load %x[%n, %h, %w, %c] : memref<4x6x5x7xf32>
      %t = arith.addf %a, %v : f32
      scf.yield %t : f32
    }
    %m = arith.divf %s, %cst : f32
    linalg.yield %m : f32
  }
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// ReduceSum over axis 0 of 1000x33: 2 output tiles leave the GPU idle, so
// the row is split over 4 slices of 250 (8 threads each, at least 32 terms
// per thread): pass 1 (2 x 4 blocks) writes each slice's partial to a
// 4x33 scratch buffer (memref.alloc: the memory plan places it), pass 2 (a
// thread per output) combines the 4 partials in order and stores.
// CHECK-LABEL: func.func @column_split
// CHECK:         %[[SCRATCH:.*]] = memref.alloc() : memref<4x33xf32>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c8, {{.*}}) threads({{.*}}) in ({{.*}} = %c32, {{.*}} = %c8, {{.*}}) workgroup({{.*}} : memref<8x33xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[S:.*]] = arith.divui %{{.*}}, %c2
// CHECK:           %[[LB0:.*]] = arith.muli %[[S]], %c250
// CHECK:           scf.for {{.*}} step %c8
// CHECK:           gpu.barrier
// CHECK:           memref.store %{{.*}}, %[[SCRATCH]][%[[S]], %{{.*}}]
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c256,
// CHECK:           memref.load %[[SCRATCH]][%c0, %[[T]]]
// CHECK:           scf.for %[[I:.*]] = %c1 to %c4 step %c1
// CHECK:             memref.load %[[SCRATCH]][%[[I]], %[[T]]]
// CHECK:           memref.store %{{.*}}, %arg1[%[[T]]]
// OFF-LABEL: func.func @column_split
// OFF-NOT:     memref.alloc
func.func @column_split(%x: memref<1000x33xf32>, %y: memref<33xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%y : memref<33xf32>) {
  ^bb0(%out: f32):
    %j = linalg.index 0 : index
    %s = scf.for %k = %c0 to %c1000 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%k, %j] : memref<1000x33xf32>
      %t = arith.addf %a, %v : f32
      scf.yield %t : f32
    }
    linalg.yield %s : f32
  }
  return
}

// -----

#scalar = affine_map<() -> ()>

// A whole-tensor ReduceSum(x * z) of 100003: pass 1, 49 blocks of 256
// threads, each over a grid-stride range (start 256 b + t, step 49 x 256),
// a block total (gpu.all_reduce) to a 1x49 scratch buffer by thread 0;
// pass 2, one block of 64 threads over the 49 partials, then thread 0
// stores the total. Deterministic: no atomics.
// CHECK-LABEL: func.func @whole_dot
// CHECK:         %[[SCRATCH:.*]] = memref.alloc() : memref<1x49xf32>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c49, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c256,
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c100003 step %c12544
// CHECK:             arith.mulf
// CHECK:           gpu.all_reduce add
// CHECK:           memref.store %{{.*}}, %[[SCRATCH]][%{{.*}}, %{{.*}}]
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[T2:[^,]*]], {{.*}}) in ({{.*}} = %c64,
// CHECK:           scf.for %{{.*}} = %[[T2]] to %c49 step %c64
// CHECK:           gpu.all_reduce add
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %arg2[]
// CHECK-NOT:     atomic
// OFF-LABEL: func.func @whole_dot
// OFF-NOT:     memref.alloc
// OFF:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1,
// OFF-NOT:     gpu.launch
func.func @whole_dot(%x: memref<100003xf32>, %z: memref<100003xf32>, %y: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 100003 : index
  linalg.generic {indexing_maps = [#scalar], iterator_types = []}
      outs(%y : memref<f32>) {
  ^bb0(%out: f32):
    %s = scf.for %k = %c0 to %n step %c1 iter_args(%a = %zero) -> (f32) {
      %u = memref.load %x[%k] : memref<100003xf32>
      %v = memref.load %z[%k] : memref<100003xf32>
      %p = arith.mulf %u, %v : f32
      %t = arith.addf %a, %p : f32
      scf.yield %t : f32
    }
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// Fallbacks: a row that is contiguous (a reduction over the innermost
// dimension) stays on the row kernels; so does a whole-tensor reduction of
// at most 8192 elements (one block reads it in one go).
// CHECK-LABEL: func.func @row_sum
// OFF-LABEL: func.func @row_sum
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     workgroup
// CHECK:         gpu.all_reduce add
// CHECK-LABEL: func.func @small_whole
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch
// CHECK-NOT:     gpu.launch
func.func @row_sum(%x: memref<7x1000xf32>, %y: memref<7xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1000 = arith.constant 1000 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%y : memref<7xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %s = scf.for %k = %c0 to %c1000 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<7x1000xf32>
      %t = arith.addf %a, %v : f32
      scf.yield %t : f32
    }
    linalg.yield %s : f32
  }
  return
}
func.func @small_whole(%x: memref<8192xf32>, %y: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 8192 : index
  linalg.generic {indexing_maps = [affine_map<() -> ()>], iterator_types = []}
      outs(%y : memref<f32>) {
  ^bb0(%out: f32):
    %s = scf.for %k = %c0 to %n step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%k] : memref<8192xf32>
      %t = arith.addf %a, %v : f32
      scf.yield %t : f32
    }
    linalg.yield %s : f32
  }
  return
}
