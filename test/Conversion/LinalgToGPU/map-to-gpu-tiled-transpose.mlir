// RUN: kiln-opt %s -kiln-select-generic-kernels -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-select-generic-kernels=tiled-transpose=false -kiln-map-to-gpu -canonicalize -split-input-file | FileCheck %s --check-prefix=OFF

// kiln-map-to-gpu's shared-memory tiled transposes (tiled-transpose=true,
// the default; TiledTranspose.cpp). OFF is the A/B switch: the elementwise
// kernel, with strided reads.

#id = affine_map<(d0, d1) -> (d0, d1)>

// A fused transpose + negation, 65x33 from 33x65: 3 x 2 tiles of 32x32, a
// block of 32x8 threads each, one tile padded to 33 columns. Phase 1 reads
// x[w, r] with r = R0 + tx (consecutive threads, consecutive addresses)
// into tile[ty + 8k][tx]; a barrier; phase 2 reads tile[tx][ty + 8k] (a
// column: 33-word rows put it in 32 banks), negates and writes y[r, w]
// with w = W0 + tx. Each of the 4 elements per phase is guarded against the
// ragged edges (33 = 32 + 1, 65 = 2 * 32 + 1).
// CHECK-LABEL: func.func @transpose_neg
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c6, {{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{.*}} = %c32, {{.*}} = %c8, {{.*}}) workgroup(%[[TILE:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[R:.*]] = arith.addi %{{.*}}, %[[TX]]
// CHECK:           %[[W:.*]] = arith.addi %{{.*}}, %[[TY]]
// CHECK:           arith.cmpi ult, %[[W]], %c33
// CHECK:           arith.cmpi ult, %[[R]], %c65
// CHECK:           scf.if
// CHECK-NEXT:        %[[V:.*]] = memref.load %arg0[%[[W]], %[[R]]] : memref<33x65xf32>
// CHECK-NEXT:        memref.store %[[V]], %[[TILE]][%[[TY]], %[[TX]]]
// CHECK-COUNT-3:   memref.store %{{.*}}, %[[TILE]]
// CHECK:           gpu.barrier
// CHECK:           %[[W2:.*]] = arith.addi %{{.*}}, %[[TX]]
// CHECK:           %[[R2:.*]] = arith.addi %{{.*}}, %[[TY]]
// CHECK:           scf.if
// CHECK-NEXT:        %[[T:.*]] = memref.load %[[TILE]][%[[TX]], %[[TY]]]
// CHECK-NEXT:        %[[N:.*]] = arith.negf %[[T]]
// CHECK-NEXT:        memref.store %[[N]], %arg1[%[[R2]], %[[W2]]] : memref<65x33xf32>
// CHECK-COUNT-3:   arith.negf
// CHECK-NOT:       gpu.barrier
// OFF-LABEL: func.func @transpose_neg
// OFF-NOT:     workgroup
// OFF-NOT:     gpu.barrier
func.func @transpose_neg(%x: memref<33x65xf32>, %y: memref<65x33xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<65x33xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%j, %i] : memref<33x65xf32>
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  }
  return
}

// -----

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// NCHW -> NHWC, 2x3x5x7 -> 2x5x7x3, int8: the tile spans W (read
// innermost, loop dim 2) and C (written innermost, loop dim 3); N and H
// are folded into the block index (2 * 5 = 10 blocks of one tile each).
// 1-byte elements: rows padded by 4 (36 bytes, 9 words: odd, so a column
// read still spreads over the banks).
// CHECK-LABEL: func.func @nchw_to_nhwc_i8
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c10, {{.*}}) threads({{.*}}) in ({{.*}} = %c32, {{.*}} = %c8, {{.*}}) workgroup(%{{.*}} : memref<32x36xi8, #gpu.address_space<workgroup>>)
// CHECK:           gpu.barrier
func.func @nchw_to_nhwc_i8(%x: memref<2x3x5x7xi8>, %y: memref<2x5x7x3xi8>) {
  linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%y : memref<2x5x7x3xi8>) {
  ^bb0(%o: i8):
    %n = linalg.index 0 : index
    %h = linalg.index 1 : index
    %w = linalg.index 2 : index
    %c = linalg.index 3 : index
    %v = memref.load %x[%n, %c, %h, %w] : memref<2x3x5x7xi8>
    linalg.yield %v : i8
  }
  return
}

// -----

#t = affine_map<(d0, d1) -> (d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// An unfused transpose (a permuted input map) of 8-byte elements with a
// second input read in the output's layout: the permuted input is staged
// (one element of padding: 8-byte accesses are served in half-warps), the
// other is read directly in phase 2 at the output's coordinates.
// CHECK-LABEL: func.func @operand_transpose_i64
// CHECK:         gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<32x33xi64, #gpu.address_space<workgroup>>)
// CHECK:           memref.load %arg0
// CHECK:           memref.store %{{.*}}, %[[TILE]]
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[TILE]]
// CHECK:           memref.load %arg1
// CHECK:           arith.addi
// CHECK:           memref.store %{{.*}}, %arg2
func.func @operand_transpose_i64(%x: memref<40x64xi64>, %z: memref<64x40xi64>, %y: memref<64x40xi64>) {
  linalg.generic {indexing_maps = [#t, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %z : memref<40x64xi64>, memref<64x40xi64>) outs(%y : memref<64x40xi64>) {
  ^bb0(%a: i64, %b: i64, %o: i64):
    %s = arith.addi %a, %b : i64
    linalg.yield %s : i64
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Fallbacks: a read whose innermost index is data (a gather) is not a
// transpose; a copy with the same innermost dimension on both sides is the
// vectorised elementwise kernel; a 1-wide side has nothing to tile; a
// broadcast along the written dimension (a per-channel scale s[c] of NCHW:
// contiguous along c, but the same for every w) is no transpose either.
// CHECK-LABEL: func.func @gather_rows
// CHECK-NOT:     workgroup
// CHECK-LABEL: func.func @copy
// CHECK-NOT:     workgroup
// CHECK:         vector.load
// CHECK-LABEL: func.func @column_vector
// CHECK-NOT:     workgroup
// CHECK-LABEL: func.func @channel_scale
// CHECK-NOT:     workgroup
// CHECK:         vector.load
func.func @gather_rows(%x: memref<64x64xf32>, %idx: memref<64xindex>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<64x64xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = memref.load %idx[%i] : memref<64xindex>
    %v = memref.load %x[%j, %k] : memref<64x64xf32>
    linalg.yield %v : f32
  }
  return
}
func.func @copy(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<64x64xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%i, %j] : memref<64x64xf32>
    linalg.yield %v : f32
  }
  return
}
func.func @column_vector(%x: memref<1x64xf32>, %y: memref<64x1xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<64x1xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %x[%j, %i] : memref<1x64xf32>
    linalg.yield %v : f32
  }
  return
}
#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1)>
func.func @channel_scale(%x: memref<2x8x16x16xf32>, %s: memref<8xf32>, %y: memref<2x8x16x16xf32>) {
  linalg.generic {indexing_maps = [#nchw, #chan, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : memref<2x8x16x16xf32>, memref<8xf32>) outs(%y : memref<2x8x16x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }
  return
}
