// RUN: kiln-opt %s -kiln-select-generic-kernels=sm-count=1 -kiln-map-to-gpu=sm-count=1 -canonicalize -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-select-generic-kernels -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s --check-prefix=FEW
// RUN: kiln-opt %s -kiln-select-generic-kernels=row-kernels=false -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s --check-prefix=OFF

// kiln-map-to-gpu's row kernels (row-kernels=true, the default) for the
// fused kernels kiln-collapse-fusions emits: an all-parallel generic whose
// body holds reduction loops over the row (softmax: max, then sum). The
// first RUN has one SM (sm-count=1), so that a few rows are rows enough for
// a warp each; FEW has the default chip's SMs (sm_90: 132, from the target
// table), where rows fewer than the SMs get a block each (spread over more threads). OFF is the A/B switch: the
// block-per-row kernel that strides over the row once per loop and reads
// it three times.

#id = affine_map<(d0, d1) -> (d0, d1)>

// Rows of 64: a warp per row, 8 rows per 256-thread block (4 rows here:
// one block of 128 threads). Each lane owns positions lane and lane + 32;
// the row is loaded once (two loads), both reductions are 5-step
// gpu.shuffle xor butterflies over the registers, and the exps computed for
// the sum are the ones divided for the output (two math.exp, not four).
// CHECK-LABEL: func.func @softmax_warp
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c128,
// CHECK-DAG:       %[[W:.*]] = arith.divui %[[T]], %c32
// CHECK-DAG:       %[[L:.*]] = arith.remui %[[T]], %c32
// CHECK:           %[[X0:.*]] = memref.load %{{.*}}[%[[W]], %[[L]]]
// CHECK:           %[[L1:.*]] = arith.addi %[[L]], %c32
// CHECK:           %[[X1:.*]] = memref.load %{{.*}}[%[[W]], %[[L1]]]
// CHECK:           arith.maximumf %[[X0]], %[[X1]]
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK-NOT:       memref.load
// CHECK:           math.exp
// CHECK:           math.exp
// CHECK-NOT:       memref.load
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK-NOT:       math.exp
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[W]], %[[L]]]
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[W]], %[[L1]]]
// CHECK-NOT:       gpu.all_reduce
// CHECK-NOT:     linalg.generic
// FEW-LABEL: func.func @softmax_warp
// FEW:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads({{.*}}) in ({{.*}} = %c64,
// FEW-NOT:       gpu.shuffle
// FEW:           memref.load
// FEW:           gpu.all_reduce maximumf
// FEW:           gpu.all_reduce add
// FEW-NOT:       memref.load
// FEW:           memref.store
// OFF-LABEL: func.func @softmax_warp
// OFF:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c64,
// OFF:           scf.for %{{.*}} = %[[T]] to %c64 step %c64
// OFF:           gpu.all_reduce maximumf
// OFF:           scf.for %{{.*}} = %[[T]] to %c64 step %c64
// OFF:           gpu.all_reduce add
// OFF:           scf.for %{{.*}} = %[[T]] to %c64 step %c64
// OFF:             memref.store
// OFF-NOT:       gpu.shuffle
func.func @softmax_warp(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<4x64xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %m = scf.for %k = %c0 to %c64 step %c1 iter_args(%a = %ninf) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<4x64xf32>
      %n = arith.maximumf %a, %v : f32
      scf.yield %n : f32
    }
    %s = scf.for %k = %c0 to %c64 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<4x64xf32>
      %d = arith.subf %v, %m : f32
      %e = math.exp %d : f32
      %n = arith.addf %a, %e : f32
      scf.yield %n : f32
    }
    %v = memref.load %x[%i, %j] : memref<4x64xf32>
    %d = arith.subf %v, %m : f32
    %e = math.exp %d : f32
    %p = arith.divf %e, %s : f32
    linalg.yield %p : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Rows of 33 over 20 rows (not a multiple of 8 rows per block): 3 blocks
// of 256 threads, a warp-uniform guard on the row. Position lane + 32 is
// inside only for lane 0: it reads the last element (clamped with minui),
// its term is dropped with a select, and only lane 0 stores it.
// CHECK-LABEL: func.func @sum_tail
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c3, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK:           %[[ROW:.*]] = arith.addi
// CHECK:           %[[LIVE:.*]] = arith.cmpi ult, %[[ROW]], %c20
// CHECK:           scf.if %[[LIVE]] {
// CHECK:             %[[P1:.*]] = arith.addi %[[L:.*]], %c32
// CHECK:             %[[C1:.*]] = arith.minui %[[P1]], %c32
// CHECK:             memref.load %{{.*}}[%[[ROW]], %[[C1]]]
// CHECK:             %[[IN:.*]] = arith.cmpi ult, %[[P1]], %c33
// CHECK:             arith.select %[[IN]]
// CHECK-COUNT-5:     gpu.shuffle xor
// CHECK:             memref.store
// CHECK:             scf.if %[[IN]] {
// CHECK-NEXT:          memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[C1]]]
func.func @sum_tail(%x: memref<20x33xf32>, %y: memref<20x33xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c33 = arith.constant 33 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<20x33xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %s = scf.for %k = %c0 to %c33 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<20x33xf32>
      %n = arith.addf %a, %v : f32
      scf.yield %n : f32
    }
    %v = memref.load %x[%i, %j] : memref<20x33xf32>
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Rows of 4097 (longer than 1024): a block per row, 1024 threads (about 8
// positions each: 5 here), the partials combined with one gpu.all_reduce
// (warp shuffles, then shared memory across the block's warps).
// CHECK-LABEL: func.func @long_rows
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c3, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024,
// CHECK-COUNT-5:   memref.load
// CHECK-NOT:       memref.load
// CHECK:           gpu.all_reduce add
// CHECK-NOT:       gpu.shuffle
// CHECK-COUNT-5:   memref.store
func.func @long_rows(%x: memref<3x4097xf32>, %y: memref<3x4097xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4097 = arith.constant 4097 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<3x4097xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %s = scf.for %k = %c0 to %c4097 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<3x4097xf32>
      %n = arith.addf %a, %v : f32
      scf.yield %n : f32
    }
    %v = memref.load %x[%i, %j] : memref<3x4097xf32>
    %p = arith.subf %v, %s : f32
    linalg.yield %p : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A fused producer (a matmul row, a dot product over 16 per element) under
// a softmax: each lane computes its two dot products once, in the max
// phase, and the sum and output phases reuse them (two loops, not six).
// CHECK-LABEL: func.func @matmul_softmax
// CHECK:         gpu.launch
// CHECK-COUNT-2:   scf.for %{{.*}} = %c0 to %c16 step %c1
// CHECK-NOT:       scf.for
// CHECK:           gpu.terminator
// OFF-LABEL: func.func @matmul_softmax
// OFF-COUNT-3:   scf.for %{{.*}} = %c0 to %c16 step %c1
func.func @matmul_softmax(%a: memref<8x16xf32>, %b: memref<16x64xf32>, %y: memref<8x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<8x64xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %m = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %ninf) -> (f32) {
      %dot = scf.for %r = %c0 to %c16 step %c1 iter_args(%d = %zero) -> (f32) {
        %u = memref.load %a[%i, %r] : memref<8x16xf32>
        %w = memref.load %b[%r, %k] : memref<16x64xf32>
        %p = arith.mulf %u, %w : f32
        %q = arith.addf %d, %p : f32
        scf.yield %q : f32
      }
      %n = arith.maximumf %acc, %dot : f32
      scf.yield %n : f32
    }
    %s = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f32) {
      %dot = scf.for %r = %c0 to %c16 step %c1 iter_args(%d = %zero) -> (f32) {
        %u = memref.load %a[%i, %r] : memref<8x16xf32>
        %w = memref.load %b[%r, %k] : memref<16x64xf32>
        %p = arith.mulf %u, %w : f32
        %q = arith.addf %d, %p : f32
        scf.yield %q : f32
      }
      %e = math.exp %dot : f32
      %n = arith.addf %acc, %e : f32
      scf.yield %n : f32
    }
    %dot = scf.for %r = %c0 to %c16 step %c1 iter_args(%d = %zero) -> (f32) {
      %u = memref.load %a[%i, %r] : memref<8x16xf32>
      %w = memref.load %b[%r, %j] : memref<16x64xf32>
      %p = arith.mulf %u, %w : f32
      %q = arith.addf %d, %p : f32
      scf.yield %q : f32
    }
    %e = math.exp %dot : f32
    %v = arith.divf %e, %s : f32
    linalg.yield %v : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// What the row kernels do not cover falls back to the block per row:
// f64 accumulators (gpu.shuffle moves 32-bit values), and rows longer than
// 32 positions x 1024 threads.
// CHECK-LABEL: func.func @f64_rows
// CHECK-NOT:     gpu.shuffle
// CHECK:         gpu.all_reduce add
// CHECK-NOT:     gpu.shuffle
func.func @f64_rows(%x: memref<4x64xf64>, %y: memref<4x64xf64>) {
  %zero = arith.constant 0.0 : f64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<4x64xf64>) {
  ^bb0(%o: f64):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %s = scf.for %k = %c0 to %c64 step %c1 iter_args(%a = %zero) -> (f64) {
      %v = memref.load %x[%i, %k] : memref<4x64xf64>
      %n = arith.addf %a, %v : f64
      scf.yield %n : f64
    }
    %v = memref.load %x[%i, %j] : memref<4x64xf64>
    %p = arith.divf %v, %s : f64
    linalg.yield %p : f64
  }
  return
}

// CHECK-LABEL: func.func @very_long_rows
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c256,
// CHECK:           scf.for %{{.*}} = %[[T]] to %c40000 step %c256
// CHECK:           gpu.all_reduce add
func.func @very_long_rows(%x: memref<2x40000xf32>, %y: memref<2x40000xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c40000 = arith.constant 40000 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<2x40000xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %s = scf.for %k = %c0 to %c40000 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%i, %k] : memref<2x40000xf32>
      %n = arith.addf %a, %v : f32
      scf.yield %n : f32
    }
    %v = memref.load %x[%i, %j] : memref<2x40000xf32>
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  }
  return
}
