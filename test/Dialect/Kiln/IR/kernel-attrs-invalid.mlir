// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// The kernel configurations' parser and verifier errors.

// wgmma's block M is one or two consumer warpgroups.
// expected-error @+1 {{wgmma's block M is 64 or 128, not 256}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_f16, tile = 256x128x64, warp_tile = 64x128, stages = 4>}

// -----

// wgmma_tf32's K tile is 32 elements (one 128-byte swizzle row).
// expected-error @+1 {{wgmma_tf32's block K is one 128-byte swizzle row (32), not 64}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_tf32, tile = 64x64x64, warp_tile = 64x64, stages = 4>}

// -----

// wgmma's warp tile is fixed.
// expected-error @+1 {{wgmma's warp tile is 64 x block N}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_f16, tile = 64x128x64, warp_tile = 64x64, stages = 4>}

// -----

// TMA is wgmma_f16's producer only.
// expected-error @+1 {{only wgmma_f16 has a TMA producer}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64, stages = 3, producer = tma>}

// -----

// The swizzle is the family's.
// expected-error @+1 {{mma_f16 tiles use swizzle xor16, not b128}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64, stages = 3, swizzle = b128>}

// -----

// Tiles are powers of two.
// expected-error @+1 {{tile sizes must be powers of two, not 96x128x32}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 96x128x32, warp_tile = 32x64, stages = 3>}

// -----

// The warp tile divides the block tile.
// expected-error @+1 {{the warp or thread tile 64x48 does not divide the block tile 128x128}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x48, stages = 3>}

// -----

// mma.sync warp tiles are multiples of 16.
// expected-error @+1 {{mma.sync warp tiles must be multiples of 16}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 8x64, stages = 3>}

// -----

// simt_f32's thread tile is a multiple of 4.
// expected-error @+1 {{simt_f32's thread tile must be multiples of 4}}
func.func @f() attributes {a = #kiln.gemm_config<family = simt_f32, tile = 128x128x8, thread_tile = 2x8, stages = 3>}

// -----

// stages 2 to 8.
// expected-error @+1 {{stages must be 2 to 8, not 9}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64, stages = 9>}

// -----

// split_k at least 1.
// expected-error @+1 {{split_k must be at least 1, not 0}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64, stages = 3, split_k = 0>}

// -----

// simt_f32 has a thread tile, not a warp tile.
// expected-error @+1 {{simt_f32 takes thread_tile, not warp_tile}}
func.func @f() attributes {a = #kiln.gemm_config<family = simt_f32, tile = 128x128x8, warp_tile = 8x8, stages = 3>}

// -----

// A missing field.
// expected-error @+1 {{missing parameter 'stages'}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64>}

// -----

// An unknown field.
// expected-error @+1 {{unknown parameter 'stage'}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, stage = 3>}

// -----

// An unknown family.
// expected-error @+1 {{unknown value 'mma_f4'}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f4>}

// -----

// A tile needs three dimensions.
// expected-error @+1 {{expected 3 dimensions separated by 'x'}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128, warp_tile = 64x64, stages = 3>}

// -----

// A field given twice.
// expected-error @+1 {{'stages' given twice}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f16, tile = 128x128x32, warp_tile = 64x64, stages = 3, stages = 4>}

// -----

// The depthwise kernel's vector widths.
// expected-error @+1 {{vector must be 1, 2, 4 or 8, not 3}}
func.func @f() attributes {a = #kiln.depthwise_config<vector = 3, pixels = 2>}

// -----

// The depthwise kernel computes one or two pixels a thread.
// expected-error @+1 {{pixels must be 1 or 2, not 4}}
func.func @f() attributes {a = #kiln.depthwise_config<vector = 8, pixels = 4>}

// -----

// The wgmma attention kernel's warps follow its block M.
// expected-error @+1 {{the wgmma attention kernel has a producer and 2 consumer warpgroups: 12 warps, not 8}}
func.func @f() attributes {a = #kiln.attention_config<family = wgmma_f16, tile = 128x64, warps = 8, stages = 4>}

// -----

// Only the wgmma attention kernel has a ring.
// expected-error @+1 {{only the wgmma attention kernel has stages}}
func.func @f() attributes {a = #kiln.attention_config<family = mma_f16, tile = 64x64, warps = 4, stages = 3>}

// -----

// A strategy takes its own parameters only.
// expected-error @+1 {{block_rows has no parameter 'vector_width'}}
func.func @f() attributes {a = #kiln.generic_kernel<block_rows, vector_width = 4>}

// -----

// Every parameter of the strategy is given.
// expected-error @+1 {{missing parameter 'rows_per_block'}}
func.func @f() attributes {a = #kiln.generic_kernel<strip_rows, threads = 32>}

// -----

// Vectors of 2, 4 or 8 elements.
// expected-error @+1 {{vector_width must be 2, 4 or 8, not 3}}
func.func @f() attributes {a = #kiln.generic_kernel<vectorized, vector_width = 3, block = 256>}

// -----

// Threads: a power of two from a warp to 1024.
// expected-error @+1 {{threads must be a power of two from 32 to 1024, not 48}}
func.func @f() attributes {a = #kiln.generic_kernel<block_reduction, threads = 48>}

// -----

// Several rows a block are warp rows.
// expected-error @+1 {{several rows per block need a warp per row (threads = 32)}}
func.func @f() attributes {a = #kiln.generic_kernel<strip_rows, threads = 64, rows_per_block = 2>}

// -----

// An unknown strategy.
// expected-error @+1 {{unknown value 'warp_per_output'}}
func.func @f() attributes {a = #kiln.generic_kernel<warp_per_output>}

// -----

// kiln.kernel holds a kernel configuration.
// expected-error @+1 {{'kiln.kernel' must be a kernel configuration}}
func.func @f() attributes {kiln.kernel = "wgmma_f16 64x64x64 w64x64 s3 k1"}

// -----

// A template config belongs on a fusion region or a kernel call.
// expected-error @+1 {{belongs on a kiln.fusion region, kiln.call_kernel or gpu.launch_func}}
func.func @f() attributes {kiln.kernel = #kiln.depthwise_config<vector = 8, pixels = 2>}

// -----

// The int8 MMA's K is 32.
// expected-error @+1 {{mma_s8's block K must be a multiple of 32 (the m16n8k32 MMA's K), not 16}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_s8, tile = 64x64x16, warp_tile = 32x32, stages = 3>}

// -----

// The int8 kernel requantizes the whole sum: no split-K.
// expected-error @+1 {{mma_s8 has no split-K (the requantization needs the whole sum), not split_k = 2}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_s8, tile = 64x64x64, warp_tile = 32x32, stages = 3, split_k = 2>}

// -----

// A grid has three dims.
// expected-error @+1 {{#kiln.grid_scale dim must be 0, 1 or 2, not 3}}
func.func @f() attributes {a = #kiln.grid_scale<symbol = "N", dim = 3, numerator = 1, denominator = 2>}

// -----

// blocks(n) = ceil(n * numerator / denominator): both above 0.
// expected-error @+1 {{#kiln.grid_scale needs numerator and denominator above 0}}
func.func @f() attributes {a = #kiln.grid_scale<symbol = "N", dim = 0, numerator = 1, denominator = 0>}

// -----

// expected-error @+1 {{#kiln.grid_scale needs a symbol}}
func.func @f() attributes {a = #kiln.grid_scale<symbol = "", dim = 0, numerator = 1, denominator = 2>}

// -----

// expected-error @+1 {{#kiln.grid_rows needs rows and tile above 0 and an input index a of at least 0}}
func.func @f() attributes {a = #kiln.grid_rows<rows = 64, tile = 0, a = 0>}

// -----

// The names are typed: a dictionary is no longer a grid scale.
// expected-error @+1 {{'kiln.grid_scale' must be a #kiln.grid_scale, not}}
func.func @f() attributes {kiln.grid_scale = {dim = 0 : i64}}

// -----

// expected-error @+1 {{'kiln.grid_rows' must be a #kiln.grid_rows, not 3 : i64}}
func.func @f() attributes {kiln.grid_rows = 3 : i64}

// -----

// expected-error @+1 {{'kiln.launch_grid_scales' holds a #kiln.grid_scale or {} per launch, not}}
func.func @f() attributes {kiln.launch_grid_scales = [{dim = 0 : i64}]}

// -----

// expected-error @+1 {{#kiln.size_guard needs 0 <= min <= max, not 9..8}}
func.func @f() attributes {a = #kiln.size_guard<symbol = "N", min = 9, max = 8>}

// -----

// expected-error @+1 {{#kiln.size_guard needs a symbol}}
func.func @f() attributes {a = #kiln.size_guard<symbol = "", min = 1, max = 8>}

// -----

// expected-error @+1 {{'kiln.size_guard' must be a #kiln.size_guard, not 3 : i64}}
func.func @f() attributes {kiln.size_guard = 3 : i64}

// -----

// expected-error @+1 {{'kiln.kernel_variants' holds {kernel = <config>, min = M, max = X} per size bucket (0 <= M <= X), not {max = 8 : i64, min = 1 : i64}}}
func.func @f() attributes {kiln.kernel_variants = [{max = 8 : i64, min = 1 : i64}]}

// -----

// expected-error @+1 {{'kiln.kernel_variants' must be a non-empty array}}
func.func @f() attributes {kiln.kernel_variants = []}

// -----

// wgmma_f8's K tile is one 128-byte swizzle row: 128 fp8 elements.
// expected-error @+1 {{wgmma_f8's block K is one 128-byte swizzle row (128), not 64}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_f8, tile = 64x64x64, warp_tile = 64x64, stages = 3>}

// -----

// wgmma_s8's K tile is one 128-byte swizzle row: 128 int8 elements.
// expected-error @+1 {{wgmma_s8's block K is one 128-byte swizzle row (128), not 64}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_s8, tile = 64x64x64, warp_tile = 64x64, stages = 3>}

// -----

// Nor does wgmma_s8 split K: its epilogue requantizes the whole sum.
// expected-error @+1 {{wgmma_s8 has no split-K (the requantization needs the whole sum), not split_k = 2}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_s8, tile = 128x128x128, warp_tile = 64x128, stages = 3, split_k = 2>}

// -----

// The fp8 mma.sync's K is 32.
// expected-error @+1 {{mma_f8's block K must be a multiple of 32 (the m16n8k32 MMA's K), not 16}}
func.func @f() attributes {a = #kiln.gemm_config<family = mma_f8, tile = 64x64x16, warp_tile = 32x32, stages = 3>}

// -----

// Only wgmma_f16 has a TMA producer.
// expected-error @+1 {{only wgmma_f16 has a TMA producer}}
func.func @f() attributes {a = #kiln.gemm_config<family = wgmma_f8, tile = 64x64x128, warp_tile = 64x64, stages = 3, producer = tma, swizzle = b128>}
