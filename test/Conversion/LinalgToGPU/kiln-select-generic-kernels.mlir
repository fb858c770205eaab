// RUN: kiln-opt %s -split-input-file -kiln-select-generic-kernels -verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-select-generic-kernels="vectorize=false row-kernels=false tiled-transpose=false reduction-kernels=false" -verify-diagnostics | FileCheck %s --check-prefix=OFF
// RUN: kiln-opt %s -split-input-file -kiln-select-generic-kernels="sm-count=1" -verify-diagnostics | FileCheck %s --check-prefix=ONESM

// The decision kiln-map-to-gpu follows, as `kiln.kernel =
// #kiln.generic_kernel<strategy, parameters>` on each generic (the kernels
// themselves: map-to-gpu*.mlir). OFF turns every optional strategy off (the
// A/B switches): what is left is a block per output or a thread per
// output. The third run targets a GPU of one SM.

#id = affine_map<(d0, d1) -> (d0, d1)>

// f32 elementwise: groups of 16 bytes (4 f32), all accesses contiguous: a
// vectorised kernel; 8 x 1024 / 4 = 2048 groups, so blocks of the full 256.
// bf16: 8 elements a group. Without vectorisation, a thread per output.
// CHECK-LABEL: func.func @elementwise
// CHECK:         kiln.kernel = #kiln.generic_kernel<vectorized, vector_width = 4, block = 256>
// CHECK:         kiln.kernel = #kiln.generic_kernel<vectorized, vector_width = 8, block = 256>
// OFF-LABEL:   func.func @elementwise
// OFF:           kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>
func.func @elementwise(%a: memref<8x1024xf32>, %b: memref<8x1024xf32>, %c: memref<8x1024xf32>, %d: memref<8x1024xbf16>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<8x1024xf32>, memref<8x1024xf32>) outs(%c : memref<8x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d : memref<8x1024xbf16>) outs(%d : memref<8x1024xbf16>) {
  ^bb0(%x: bf16, %o: bf16):
    %s = arith.addf %x, %x : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Reductions folded by add: a block per output, the row rounded up to a
// power of two threads (at most 256): 1024 -> 256, 40 -> 64. Below a warp
// (a row of 16), or with more outputs than a block each pays for (20000),
// a thread per output walks its row.
// CHECK-LABEL: func.func @reductions
// CHECK:         kiln.kernel = #kiln.generic_kernel<block_reduction, threads = 256>
// CHECK:         kiln.kernel = #kiln.generic_kernel<block_reduction, threads = 64>
// CHECK:         kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 8>
// CHECK:         kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>
// OFF-LABEL:   func.func @reductions
// OFF:           kiln.kernel = #kiln.generic_kernel<block_reduction, threads = 256>
func.func @reductions(%x: memref<8x1024xf32>, %out: memref<8xf32>, %y: memref<8x40xf32>, %z: memref<8x16xf32>, %w: memref<20000x64xf32>, %wo: memref<20000xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1024xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<8x40xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<8x16xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%w : memref<20000x64xf32>) outs(%wo : memref<20000xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A fused softmax (row loops over the row's 64 positions): 4 rows are fewer
// than the 132 SMs, so a block of 64 threads per row (positions / 8,
// at least 64); on one SM, a warp per row, all 4 rows in one block. Without
// row kernels, the block per row strides each loop over 64 threads.
// CHECK-LABEL: func.func @softmax
// CHECK:         kiln.kernel = #kiln.generic_kernel<strip_rows, threads = 64, rows_per_block = 1>
// ONESM-LABEL: func.func @softmax
// ONESM:         kiln.kernel = #kiln.generic_kernel<strip_rows, threads = 32, rows_per_block = 4>
// OFF-LABEL:   func.func @softmax
// OFF:           kiln.kernel = #kiln.generic_kernel<block_rows, threads = 64>
func.func @softmax(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
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

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar = affine_map<() -> ()>

// Every output its own row: the batch-norm mean over N, H, W of NHWC reads
// the row along the kept C: a column reduction, one kernel (its one tile of
// 7 outputs over 120 terms is too short to split). A dot product of
// 100003 terms into one output: a whole-tensor reduction over 49 blocks
// (100003 / 2048 rounded up). Without reduction kernels, the row kernels.
// CHECK-LABEL: func.func @split_reductions
// CHECK:         kiln.kernel = #kiln.generic_kernel<column_reduction, splits = 1>
// CHECK:         kiln.kernel = #kiln.generic_kernel<whole_reduction, splits = 49>
// OFF-LABEL:   func.func @split_reductions
// OFF:           kiln.kernel = #kiln.generic_kernel<block_rows, threads = 128>
// OFF:           kiln.kernel = #kiln.generic_kernel<block_rows, threads = 256>
func.func @split_reductions(%x: memref<4x6x5x7xf32>, %y: memref<1x1x1x7xf32>, %a: memref<100003xf32>, %b: memref<100003xf32>, %dot: memref<f32>) {
  %cst = arith.constant 1.200000e+02 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c120 = arith.constant 120 : index
  %n = arith.constant 100003 : index
  linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%y : memref<1x1x1x7xf32>) {
  ^bb0(%out: f32):
    %c = linalg.index 3 : index
    %s = scf.for %k = %c0 to %c120 step %c1 iter_args(%acc = %zero) -> (f32) {
      %w = arith.remui %k, %c5 : index
      %q = arith.divui %k, %c5 : index
      %h = arith.remui %q, %c6 : index
      %nn = arith.divui %q, %c6 : index
      %v = memref.load %x[%nn, %h, %w, %c] : memref<4x6x5x7xf32>
      %t = arith.addf %acc, %v : f32
      scf.yield %t : f32
    }
    %m = arith.divf %s, %cst : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#scalar], iterator_types = []}
      outs(%dot : memref<f32>) {
  ^bb0(%out: f32):
    %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) {
      %u = memref.load %a[%k] : memref<100003xf32>
      %v = memref.load %b[%k] : memref<100003xf32>
      %p = arith.mulf %u, %v : f32
      %t = arith.addf %acc, %p : f32
      scf.yield %t : f32
    }
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// A transpose (the read is contiguous along d0, the write along d1): 32x32
// shared-memory tiles. Without them, no access of the vector group is
// both contiguous and aligned on the read side, but the write is: the
// vectorised kernel; with nothing optional, a thread per output.
// A memref.copy is decided as the identity generic kiln-map-to-gpu makes
// of it, and the copy carries the decision.
// CHECK-LABEL: func.func @transpose_and_copy
// CHECK:         kiln.kernel = #kiln.generic_kernel<tiled_transpose, tile = 32>
// CHECK:         memref.copy {{.*}} {kiln.kernel = #kiln.generic_kernel<vectorized, vector_width = 4, block = 256>}
// OFF-LABEL:   func.func @transpose_and_copy
// OFF:           kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>
// OFF:           memref.copy {{.*}} {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 256>}
func.func @transpose_and_copy(%x: memref<64x48xf32>, %y: memref<48x64xf32>, %z: memref<48x64xf32>) {
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x48xf32>) outs(%y : memref<48x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  memref.copy %y, %z : memref<48x64xf32> to memref<48x64xf32>
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A decision already in the IR stands.
// CHECK-LABEL: func.func @given
// CHECK:         kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 32>
func.func @given(%a: memref<8x1024xf32>, %c: memref<8x1024xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x1024xf32>) outs(%c : memref<8x1024xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<thread_per_output, block = 32>} {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// No decision without static sizes.
func.func @dynamic(%a: memref<?xf32>, %c: memref<?xf32>) {
  // expected-error @+1 {{has a dynamic iteration space, which kiln-map-to-gpu does not support yet}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<?xf32>) outs(%c : memref<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
