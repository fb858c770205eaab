// RUN: kiln-opt %s -kiln-map-to-gpu -canonicalize -split-input-file -verify-diagnostics | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Elementwise: one thread per element, a 1-D grid of 256-thread blocks
// (8 x 1024 = 8192 elements -> 32 blocks), bounds-checked.
// CHECK-LABEL: func.func @elementwise
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRID:.*]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads({{.*}}) in (%{{.*}} = %[[BLOCK:.*]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}})
// CHECK: arith.cmpi ult
// CHECK: scf.if
// CHECK: memref.load %arg0
// CHECK: memref.load %arg1
// CHECK: arith.addf
// CHECK: memref.store
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
// CHECK: memref.store {{.*}} %arg1
func.func @copy_of_view(%a: memref<4x8xf32>, %b: memref<2x8xf32>) {
  %v = memref.subview %a[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %v, %b : memref<2x8xf32, strided<[8, 1], offset: 16>> to memref<2x8xf32>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// linalg.index inside the body reads the thread's loop coordinate.
// CHECK-LABEL: func.func @iota
// CHECK: arith.index_cast
// CHECK: memref.store
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

// A fused kernel whose reductions depend on the row only (softmax's max and
// sum, as kiln-collapse-fusions emits them): a block per row; each reduction
// strides over the row with the block's threads and ends in one
// gpu.all_reduce; then the threads stride over the row's elements.
// CHECK-LABEL: func.func @fused_row
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c64,
// CHECK:           %[[MP:.*]] = scf.for %{{.*}} = %[[T]] to %c64 step %c64
// CHECK:           %[[M:.*]] = gpu.all_reduce maximumf %[[MP]] uniform
// CHECK:           %[[SP:.*]] = scf.for %{{.*}} = %[[T]] to %c64 step %c64
// CHECK:             arith.subf %{{.*}}, %[[M]]
// CHECK:           %[[S:.*]] = gpu.all_reduce add %[[SP]] uniform
// CHECK:           scf.for %{{.*}} = %[[T]] to %c64 step %c64
// CHECK:             arith.divf %{{.*}}, %{{.*}}
// CHECK:             memref.store
// CHECK-NOT:     linalg.generic
func.func @fused_row(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
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
