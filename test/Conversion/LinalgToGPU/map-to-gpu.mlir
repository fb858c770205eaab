// RUN: kiln-opt %s -kiln-select-generic-kernels=tiled-transpose=false -kiln-map-to-gpu -canonicalize -split-input-file -verify-diagnostics | FileCheck %s
// (tiled-transpose=false: the transposed reads below are the vectorised and
// thread-per-output kernels' cases; the tiled transposes that replace them
// by default are in map-to-gpu-tiled-transpose.mlir.)
// The chip's SM count and resident threads come from the target table
// (runtime/targets/gpus.ini; SM80 below: the A100's 108 SMs); a chip the
// table does not have is an error naming the ones it has.
// RUN: kiln-opt %s -kiln-select-generic-kernels="chip=sm_80 tiled-transpose=false" -kiln-map-to-gpu=chip=sm_80 -canonicalize -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SM80
// RUN: not kiln-opt %s -kiln-map-to-gpu=chip=sm_75 -split-input-file 2>&1 | FileCheck %s --check-prefix=BADCHIP
// BADCHIP: error: kiln-map-to-gpu: chip 'sm_75' is not in the target table (sm_80, sm_90)
// RUN: not kiln-opt %s -kiln-select-generic-kernels=chip=sm_75 -split-input-file 2>&1 | FileCheck %s --check-prefix=BADCHIPSEL
// BADCHIPSEL: error: kiln-select-generic-kernels: chip 'sm_75' is not in the target table (sm_80, sm_90)

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Elementwise: vectorised. 8 x 1024 f32 = 2048 groups of 4 (16 bytes), all
// contiguous and 16-byte aligned: one vector.load per input, one
// vector.store, in a grid-stride loop; 2048 / 256 = 8 blocks (fewer than
// the 132 SMs x 8 resident blocks of the default target). No tail.
// CHECK-LABEL: func.func @elementwise
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[C2048:.*]] = arith.constant 2048 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %[[C8]], {{.*}}) threads({{.*}}) in (%{{.*}} = %[[BLOCK:.*]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}})
// CHECK: scf.for %[[G:.*]] = %{{.*}} to %[[C2048]] step %[[C2048]]
// CHECK: %[[BASE:.*]] = arith.muli %[[G]], %[[C4]]
// CHECK: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<8x1024xf32>, vector<4xf32>
// CHECK: vector.load %arg1[{{.*}}] {alignment = 16 : i64} : memref<8x1024xf32>, vector<4xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: vector.from_elements
// CHECK: vector.store %{{.*}}, %arg2[{{.*}}] {alignment = 16 : i64} : memref<8x1024xf32>, vector<4xf32>
// CHECK-NOT: scf.if
// CHECK-NOT: linalg.generic
func.func @elementwise(%a: memref<8x1024xf32>, %b: memref<8x1024xf32>, %c: memref<8x1024xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<8x1024xf32>, memref<8x1024xf32>) outs(%c : memref<8x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A long reduction with an additive body: a block per row, threads stride
// over the row, gpu.all_reduce combines, thread 0 folds into the output.
// CHECK-LABEL: func.func @row_sum_of_squares
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in
// CHECK: %[[PART:.*]] = scf.for %[[R:.*]] = %[[TX]] to %{{.*}} step %[[C256]] iter_args
// CHECK: memref.load %arg0[%[[BX]], %[[R]]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[TOTAL:.*]] = gpu.all_reduce add %[[PART]] uniform
// CHECK: arith.cmpi eq, %[[TX]]
// CHECK: scf.if
// CHECK: %[[INIT:.*]] = memref.load %arg1[%[[BX]]]
// CHECK: arith.addf %[[TOTAL]], %[[INIT]]
// CHECK: memref.store
func.func @row_sum_of_squares(%x: memref<8x1024xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1024xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %m, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A max reduction uses maximumf with -inf as the partials' identity.
// CHECK-LABEL: func.func @row_max
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: gpu.all_reduce maximumf
func.func @row_max(%x: memref<4x512xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x512xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.maximumf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

#mk = affine_map<(d0, d1, d2) -> (d0, d2)>
#kn = affine_map<(d0, d1, d2) -> (d2, d1)>
#mn = affine_map<(d0, d1, d2) -> (d0, d1)>

// A contraction with many outputs (256 x 128 = 32768 > 16384): a thread per
// output element accumulating K in registers from the output's initial value.
// CHECK-LABEL: func.func @matmul
// CHECK: gpu.launch
// CHECK: %[[INIT:.*]] = memref.load %arg2
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[INIT]]) -> (f32)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: memref.store
// CHECK-NOT: gpu.all_reduce
func.func @matmul(%a: memref<256x64xf32>, %b: memref<64x128xf32>, %c: memref<256x128xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<256x64xf32>, memref<64x128xf32>) outs(%c : memref<256x128xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Rows shorter than the block size get the row length rounded up to a power
// of two threads (softmax over 100 logits: 128 threads, one block per row).
// CHECK-LABEL: func.func @short_rows
// CHECK: %[[C128:.*]] = arith.constant 128 : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %[[C128]],
// CHECK: scf.for {{.*}} step %[[C128]]
// CHECK: gpu.all_reduce add
func.func @short_rows(%x: memref<64x100xf32>, %out: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x100xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Rows shorter than a warp stay a thread per output.
// CHECK-LABEL: func.func @tiny_rows
// CHECK: scf.for
// CHECK-NOT: gpu.all_reduce
func.func @tiny_rows(%x: memref<64x9xf32>, %out: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x9xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// memref.copy becomes a kernel too; a subview is rebuilt inside the kernel so
// the launch captures the whole buffer.
// CHECK-LABEL: func.func @copy_of_view
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// CHECK: memref.subview %arg0
// CHECK: vector.store {{.*}} %arg1
func.func @copy_of_view(%a: memref<4x8xf32>, %b: memref<2x8xf32>) {
  %v = memref.subview %a[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %v, %b : memref<2x8xf32, strided<[8, 1], offset: 16>> to memref<2x8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// linalg.index inside the body reads the thread's loop coordinate: one
// per point of a group (2 x i64 = 16 bytes).
// CHECK-LABEL: func.func @iota
// CHECK-COUNT-2: arith.index_cast
// CHECK: vector.store {{.*}} : memref<100xi64>, vector<2xi64>
func.func @iota(%out: memref<100xi64>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]} outs(%out : memref<100xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  }
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// Tensors must be bufferized first.
func.func @tensors(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'linalg.generic' op must be bufferized before kiln-map-to-gpu}}
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// Dynamic iteration spaces are not supported yet.
func.func @dynamic(%a: memref<?xf32>, %b: memref<?xf32>) {
  // expected-error @+1 {{'linalg.generic' op has a dynamic iteration space, which kiln-map-to-gpu does not support yet}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<?xf32>) outs(%b : memref<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// An empty output (a zero-sized dimension) needs no kernel at all.
// CHECK-LABEL: func.func @empty
// CHECK-NOT: gpu.launch
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @empty(%a: memref<0x4xf32>, %b: memref<0x4xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<0x4xf32>) outs(%b : memref<0x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Fused kernels whose reductions depend on the row only (softmax's max and
// sum): map-to-gpu-row-kernels.mlir (warp and block row kernels, and the
// block per row of row-kernels=false).
func.func @fused_row_elsewhere() {
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A reduction loop that depends on every coordinate (a dot product per
// output) over many outputs: a thread per output walks it alone.
// CHECK-LABEL: func.func @fused_dot_per_output
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c128, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// CHECK-NOT:       gpu.all_reduce
// CHECK:           scf.for %{{.*}} = %c0 to %c64 step %c1
func.func @fused_dot_per_output(%a: memref<128x64xf32>, %b: memref<64x256xf32>, %y: memref<128x256xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<128x256xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %s = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %a[%i, %k] : memref<128x64xf32>
      %w = memref.load %b[%k, %j] : memref<64x256xf32>
      %p = arith.mulf %x, %w : f32
      %n = arith.addf %acc, %p : f32
      scf.yield %n : f32
    }
    linalg.yield %s : f32
  }
  return
}

// -----

// kiln-map-to-gpu=vectorize: the elementwise cases of the vectorised
// builder (VectorizedElementwise.cpp).

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A size that is not a multiple of the vector width: 7 x 13 = 91 points,
// 22 groups of 4 and a scalar tail of 3 done by the threads with id < 3 at
// point 88 + id. The row bias (13 elements per row, not a multiple of 4)
// is read point by point; the contiguous input and output are vectors (a
// group may span two rows: they are consecutive in memory).
// CHECK-LABEL: func.func @tail
// CHECK-DAG: %[[C22:.*]] = arith.constant 22 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C88:.*]] = arith.constant 88 : index
// CHECK: gpu.launch
// CHECK: scf.for {{.*}} to %[[C22]]
// CHECK: vector.load %arg0{{.*}} vector<4xf32>
// CHECK-COUNT-4: memref.load %arg1
// CHECK: vector.store {{.*}}, %arg2
// CHECK: arith.cmpi ult, %[[GID:.*]], %[[C3]]
// CHECK: scf.if
// CHECK: arith.addi %[[GID]], %[[C88]]
// CHECK: memref.load %arg0
// CHECK: memref.load %arg1
// CHECK: memref.store {{.*}}, %arg2
func.func @tail(%x: memref<7x13xf32>, %b: memref<13xf32>, %y: memref<7x13xf32>) {
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<7x13xf32>, memref<13xf32>) outs(%y : memref<7x13xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A broadcast the group does not leave (one value per row of 64, a group
// of 4 never crosses a row) is one scalar load per group.
// CHECK-LABEL: func.func @uniform_broadcast
// CHECK: scf.for
// CHECK: vector.load %arg0
// CHECK-NEXT: vector.extract
// CHECK: memref.load %arg1
// CHECK-NOT: memref.load %arg1
// CHECK: vector.store
func.func @uniform_broadcast(%x: memref<32x64xf32>, %s: memref<32xf32>, %y: memref<32x64xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<32x64xf32>, memref<32xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A view at an offset that is not a multiple of 16 bytes (a slice starting
// at element 1 of each 64-element row) is read point by point; the output
// is still one vector store per group. A slice at element 4 (16 bytes) is
// a vector.
// CHECK-LABEL: func.func @unaligned_view
// CHECK: memref.subview %arg0[0, 1]
// CHECK: memref.subview %arg0[0, 4]
// CHECK: scf.for
// CHECK-COUNT-4: memref.load %subview[
// CHECK: vector.load %subview_{{[0-9]+}}[{{.*}}] {alignment = 16 : i64}
// CHECK: vector.store {{.*}}, %arg1
func.func @unaligned_view(%x: memref<16x64xf32>, %y: memref<16x32xf32>) {
  %a = memref.subview %x[0, 1] [16, 32] [1, 1] : memref<16x64xf32> to memref<16x32xf32, strided<[64, 1], offset: 1>>
  %b = memref.subview %x[0, 4] [16, 32] [1, 1] : memref<16x64xf32> to memref<16x32xf32, strided<[64, 1], offset: 4>>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<16x32xf32, strided<[64, 1], offset: 1>>, memref<16x32xf32, strided<[64, 1], offset: 4>>)
      outs(%y : memref<16x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.subf %p, %q : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// The narrowest element sets the width: f32 -> bf16 moves 8 points per
// group, 32 bytes of f32 in (one 16-byte aligned vector<8xf32>) and 16
// bytes of bf16 out.
// CHECK-LABEL: func.func @narrowing_cast
// CHECK: vector.load %arg0{{.*}} {alignment = 16 : i64} : memref<4x64xf32>, vector<8xf32>
// CHECK-COUNT-8: arith.truncf
// CHECK: vector.store {{.*}} {alignment = 16 : i64} : memref<4x64xbf16>, vector<8xbf16>
func.func @narrowing_cast(%x: memref<4x64xf32>, %y: memref<4x64xbf16>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x64xf32>) outs(%y : memref<4x64xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A fused kernel (no ins: the body loads its inputs at linalg.index
// coordinates): the transposed read (stride 16 along the innermost loop
// coordinate) is point by point, the contiguous one a vector.
// CHECK-LABEL: func.func @fused_transpose
// CHECK: scf.for
// CHECK-COUNT-4: memref.load %arg0
// CHECK: vector.load %arg1
// CHECK: vector.store
func.func @fused_transpose(%x: memref<16x16xf32>, %z: memref<16x16xf32>, %y: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<16x16xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %t = memref.load %x[%j, %i] : memref<16x16xf32>
    %u = memref.load %z[%i, %j] : memref<16x16xf32>
    %s = arith.addf %t, %u : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Nothing provably contiguous (a transpose through the indexing map, i1
// data): the thread-per-output kernel, bounds-checked.
// CHECK-LABEL: func.func @not_vectorised
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK-NOT: vector.
func.func @not_vectorised(%x: memref<16x16xi1>, %y: memref<16x16xi1>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<16x16xi1>) outs(%y : memref<16x16xi1>) {
  ^bb0(%a: i1, %o: i1):
    linalg.yield %a : i1
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A large elementwise op: the grid is capped at what the target holds
// resident (132 SMs x 2048 / 256 threads = 1056 blocks) and each thread
// strides over 2^22 / 4 groups.
// CHECK-LABEL: func.func @grid_stride
// SM80-LABEL: func.func @grid_stride
// SM80-DAG: arith.constant 864 : index
// SM80-DAG: arith.constant 221184 : index
// CHECK-DAG: %[[GRID:.*]] = arith.constant 1056 : index
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 1048576 : index
// CHECK-DAG: %[[STRIDE:.*]] = arith.constant 270336 : index
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRID]],
// CHECK: scf.for {{.*}} to %[[GROUPS]] step %[[STRIDE]]
func.func @grid_stride(%x: memref<2048x2048xf32>, %y: memref<2048x2048xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2048x2048xf32>) outs(%y : memref<2048x2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  return
}
