// RUN: kiln-opt %s -split-input-file -kiln-map-to-gpu -verify-diagnostics

// kiln-map-to-gpu follows the `kiln.kernel` kiln-select-generic-kernels
// attached; a generic without one, or with a strategy whose analysis does
// not hold for it, is an error naming the strategy and the reason.

#id = affine_map<(d0, d1) -> (d0, d1)>

// No decision to follow.
func.func @undecided(%a: memref<8x64xf32>, %c: memref<8x64xf32>) {
  // expected-error @+1 {{has no kiln.kernel = #kiln.generic_kernel (kiln-select-generic-kernels decides it)}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x64xf32>) outs(%c : memref<8x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// An elementwise copy is no transpose.
func.func @not_a_transpose(%a: memref<64x64xf32>, %c: memref<64x64xf32>) {
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.generic_kernel<tiled_transpose, tile = 32>: no read is contiguous along another dimension than the write (not a transpose)}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<64x64xf32>) outs(%c : memref<64x64xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<tiled_transpose, tile = 32>} {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// The transposes are built with 32x32 tiles only.
func.func @tile_16(%a: memref<64x64xf32>, %c: memref<64x64xf32>) {
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.generic_kernel<tiled_transpose, tile = 16>: the tiles are 32x32, not 16}}
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<64x64xf32>) outs(%c : memref<64x64xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<tiled_transpose, tile = 16>} {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Row kernels need row loops in the body.
func.func @no_rows(%a: memref<8x64xf32>, %c: memref<8x64xf32>) {
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.generic_kernel<strip_rows, threads = 32, rows_per_block = 1>: the body has no row loops over outer coordinates}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x64xf32>) outs(%c : memref<8x64xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<strip_rows, threads = 32, rows_per_block = 1>} {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0) -> (d0)>

// A vectorised kernel needs an access that is contiguous and aligned over
// the group: views one f32 past a 16-byte boundary have none.
func.func @no_vector(%a: memref<8xf32, strided<[1], offset: 1>>, %c: memref<8xf32, strided<[1], offset: 1>>) {
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.generic_kernel<vectorized, vector_width = 4, block = 2>: no access proven contiguous and aligned for vectors of 4}}
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32, strided<[1], offset: 1>>) outs(%c : memref<8xf32, strided<[1], offset: 1>>) attrs = {kiln.kernel = #kiln.generic_kernel<vectorized, vector_width = 4, block = 2>} {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A block reduction needs a body that folds into its output.
func.func @not_a_fold(%x: memref<8x64xf32>, %out: memref<8xf32>) {
  // expected-error @+1 {{cannot follow kiln.kernel = #kiln.generic_kernel<block_reduction, threads = 64>: the body does not fold into one output with add, mul, max or min}}
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%out : memref<8xf32>) attrs = {kiln.kernel = #kiln.generic_kernel<block_reduction, threads = 64>} {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.subf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}
