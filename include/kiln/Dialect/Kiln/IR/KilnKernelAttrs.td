//===- KilnKernelAttrs.td - Kernel choices as typed attributes -*- tablegen -*-===//
//
// What a selection pass decided for a kernel (ARCHITECTURE.md section 6,
// "decide, then emit"): the template family and its tiles for contraction
// regions, the strategy and its parameters for generic kernels. The
// selection passes (kiln-select-contraction-kernels, kiln-select-generic-
// kernels) attach them as `kiln.kernel`; the lowerings (kiln-match-
// contractions, kiln-map-to-gpu) only follow them, and say so when they
// cannot.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILNKERNELATTRS_TD
#define KILN_DIALECT_KILN_IR_KILNKERNELATTRS_TD

include "kiln/Dialect/Kiln/IR/KilnBase.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kiln_GemmFamily : I32EnumAttr<"GemmFamily",
    "the instruction family of a template GEMM or implicit-GEMM kernel", [
      I32EnumAttrCase<"MmaF16", 0, "mma_f16">,
      I32EnumAttrCase<"MmaTf32", 1, "mma_tf32">,
      I32EnumAttrCase<"SimtF32", 2, "simt_f32">,
      I32EnumAttrCase<"WgmmaF16", 3, "wgmma_f16">,
      I32EnumAttrCase<"WgmmaTf32", 4, "wgmma_tf32">,
      I32EnumAttrCase<"MmaS8", 5, "mma_s8">,
      I32EnumAttrCase<"MmaF8", 6, "mma_f8">,
      I32EnumAttrCase<"WgmmaF8", 7, "wgmma_f8">,
      I32EnumAttrCase<"WgmmaS8", 8, "wgmma_s8">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_GemmProducer : I32EnumAttr<"GemmProducer",
    "how a template kernel copies operand tiles to shared memory", [
      I32EnumAttrCase<"CpAsync", 0, "cp_async">,
      I32EnumAttrCase<"Tma", 1, "tma">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_SmemSwizzle : I32EnumAttr<"SmemSwizzle",
    "the shared-memory layout of a template kernel's operand tiles", [
      // SimtF32: K-major tiles with padded rows.
      I32EnumAttrCase<"Padded", 0, "padded">,
      // mma.sync: 16-byte chunks XOR-swizzled by row.
      I32EnumAttrCase<"Xor16", 1, "xor16">,
      // wgmma (and TMA): the 128-byte swizzle of the matrix descriptors.
      I32EnumAttrCase<"B128", 2, "b128">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_AttentionFamily : I32EnumAttr<"AttentionFamily",
    "the instruction family of the flash-attention kernel", [
      I32EnumAttrCase<"MmaF16", 0, "mma_f16">,
      I32EnumAttrCase<"WgmmaF16", 1, "wgmma_f16">,
      I32EnumAttrCase<"SimtF32", 2, "simt_f32">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_GenericStrategy : I32EnumAttr<"GenericStrategy",
    "the shape of a generated (linalg) kernel", [
      I32EnumAttrCase<"ThreadPerOutput", 0, "thread_per_output">,
      I32EnumAttrCase<"Vectorized", 1, "vectorized">,
      I32EnumAttrCase<"BlockReduction", 2, "block_reduction">,
      I32EnumAttrCase<"BlockRows", 3, "block_rows">,
      I32EnumAttrCase<"StripRows", 4, "strip_rows">,
      I32EnumAttrCase<"ColumnReduction", 5, "column_reduction">,
      I32EnumAttrCase<"WholeReduction", 6, "whole_reduction">,
      I32EnumAttrCase<"TiledTranspose", 7, "tiled_transpose">
    ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Kernel configurations
//===----------------------------------------------------------------------===//

class Kiln_KernelAttr<string name, string attrMnemonic>
    : AttrDef<Kiln_Dialect, name> {
  let mnemonic = attrMnemonic;
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Kiln_GemmConfigAttr : Kiln_KernelAttr<"GemmConfig", "gemm_config"> {
  let summary = "How a contraction region's template kernel is tiled";
  let description = [{
    The configuration of a template GEMM or implicit-GEMM convolution
    kernel (include/kiln/Target/CUDA/ContractionKernels.h, `GemmConfig`),
    as kiln-select-contraction-kernels chose it (tune cache, tuning or the
    heuristic) and kiln-match-contractions follows it:

    - `family`: `mma_f16` / `mma_tf32` (mma.sync), `simt_f32` (FFMA),
      `wgmma_f16` / `wgmma_tf32` (sm_90a warpgroup MMA), `mma_s8`
      (mma.sync m16n8k32 on int8/uint8 operands with s32 accumulators and
      the requantizing integer epilogue: the `quantized_matmul` and
      `quantized_conv` regions kiln-fuse-quantized forms) and `wgmma_s8`
      (the same on sm_90a's wgmma m64nNk32, K tile 128, no split-K),
      `mma_f8` / `wgmma_f8` (e4m3/e5m2 operands, f32 accumulators);
    - `tile`: the block tile M x N x K;
    - `warp_tile` (tensor-core families: M x N per warp, 64 x N for
      wgmma) or `thread_tile` (`simt_f32`: outputs per thread);
    - `stages`: the shared-memory pipeline depth (2-8);
    - `split_k`: K splits; above 1 the partial sums are reduced after the
      main loop;
    - `producer`: `cp_async` or `tma` (wgmma_f16 only);
    - `swizzle`: the operand tiles' shared-memory layout, fixed by the
      family (`padded` for simt_f32, `xor16` for mma.sync, `b128` for
      wgmma); written out so that IR says what the kernel does.

    The verifier checks what holds for any problem (tile sizes, the warp
    tile dividing the block tile, wgmma's fixed shapes, a TMA producer on
    wgmma_f16 only, the swizzle of the family); kiln-match-contractions
    checks the rest against the region's problem (alignment, TMA's
    strides, the convolution's channel chunk) and reports a config it
    cannot follow as an error.

    Example:

    ```mlir
    #kiln.gemm_config<family = wgmma_f16, tile = 128x256x64,
                      warp_tile = 64x256, stages = 4, split_k = 1,
                      producer = tma, swizzle = b128>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::kiln::GemmFamily", "instruction family">:$family,
    AttrParameter<"int64_t", "block tile M (`tile`)">:$blockM,
    AttrParameter<"int64_t", "block tile N">:$blockN,
    AttrParameter<"int64_t", "block tile K">:$blockK,
    AttrParameter<"int64_t",
                  "warp tile M (`warp_tile`), or outputs a thread computes "
                  "along M (`thread_tile`, simt_f32)">:$subM,
    AttrParameter<"int64_t", "warp or thread tile N">:$subN,
    AttrParameter<"int64_t", "shared-memory pipeline stages">:$stages,
    AttrParameter<"int64_t", "K splits (`split_k`)">:$splitK,
    AttrParameter<"::kiln::GemmProducer", "operand tile copies">:$producer,
    AttrParameter<"::kiln::SmemSwizzle", "shared-memory layout">:$swizzle
  );
  let extraClassDeclaration = [{
    /// The swizzle every kernel of `family` uses.
    static ::kiln::SmemSwizzle swizzleOf(::kiln::GemmFamily family);
    bool isWgmma() const {
      return getFamily() == ::kiln::GemmFamily::WgmmaF16 ||
             getFamily() == ::kiln::GemmFamily::WgmmaTf32 ||
             getFamily() == ::kiln::GemmFamily::WgmmaF8 ||
             getFamily() == ::kiln::GemmFamily::WgmmaS8;
    }
  }];
}

def Kiln_DepthwiseConfigAttr
    : Kiln_KernelAttr<"DepthwiseConfig", "depthwise_config"> {
  let summary = "How a depthwise convolution's CUDA-core kernel is shaped";
  let description = [{
    The depthwise kernel (include/kiln/Target/CUDA/DepthwiseKernels.h):
    each thread computes `vector` consecutive output channels (1, 2, 4 or
    8: 16-byte loads where the channels and alignment allow) of `pixels`
    consecutive output pixels of a row (1 or 2), in blocks of 256 threads.

    Example:

    ```mlir
    #kiln.depthwise_config<vector = 8, pixels = 2>
    ```
  }];
  let parameters = (ins
    AttrParameter<"int64_t", "output channels a thread computes">:$vector,
    AttrParameter<"int64_t", "output pixels a thread computes">:$pixels);
}

def Kiln_AttentionConfigAttr
    : Kiln_KernelAttr<"AttentionConfig", "attention_config"> {
  let summary = "How an attention region's flash-attention kernel is tiled";
  let description = [{
    The flash-attention kernel (include/kiln/Target/CUDA/AttentionKernels.h,
    `AttentionConfig`): `family` (`mma_f16`, `wgmma_f16` on sm_90a,
    `simt_f32`), `tile` (query rows per block x keys per K/V tile), `warps`
    per block and, for wgmma, the K/V ring's `stages`.

    Example:

    ```mlir
    #kiln.attention_config<family = wgmma_f16, tile = 128x64, warps = 12, stages = 4>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::kiln::AttentionFamily", "instruction family">:$family,
    AttrParameter<"int64_t", "query rows per block (`tile`)">:$blockM,
    AttrParameter<"int64_t", "keys per K/V tile">:$blockN,
    AttrParameter<"int64_t", "warps per block">:$warps,
    AttrParameter<"int64_t", "K/V ring depth (wgmma; 2 otherwise)">:$stages);
}

def Kiln_GenericKernelAttr
    : Kiln_KernelAttr<"GenericKernel", "generic_kernel"> {
  let summary = "How a generated (linalg) kernel maps to blocks and threads";
  let description = [{
    What kiln-select-generic-kernels chose for one `linalg.generic` (or
    `memref.copy`) on buffers, and kiln-map-to-gpu follows (docs/
    architecture.md, "Code generation decisions"):

    - `thread_per_output` (`block`): a 1-D grid, a thread per point of the
      parallel iterations, reductions serial in the thread;
    - `vectorized` (`vector_width`, `block`): groups of `vector_width`
      consecutive points per thread, 128-bit accesses where proven, in a
      grid-stride loop;
    - `block_reduction` (`threads`): a block per output, its threads
      striding over the reduction and meeting in `gpu.all_reduce`;
    - `block_rows` (`threads`): a block per row of a fused kernel whose
      body holds row loops, each loop strided over the block;
    - `strip_rows` (`threads`, `rows_per_block`): the row kernels, a warp
      (`threads` = 32, `rows_per_block` rows a block) or a block per row,
      the row's strip in registers;
    - `column_reduction` (`splits`): 32x8 blocks over 32 consecutive
      outputs; above 1 split, a second kernel combines the partials;
    - `whole_reduction` (`splits`): a two-pass tree over `splits` blocks
      per output;
    - `tiled_transpose` (`tile`): 32x32 shared-memory tiles.

    Only the parameters of the strategy appear. kiln-map-to-gpu reports a
    strategy whose analysis does not hold for the generic (a transpose
    without a transposed read, a row kernel without row loops) as an
    error naming the strategy.

    Example:

    ```mlir
    #kiln.generic_kernel<vectorized, vector_width = 4, block = 256>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::kiln::GenericStrategy", "the kernel's shape">:$strategy,
    AttrParameter<"int64_t", "points a thread moves per group "
                             "(`vector_width`; 0 when not a parameter of "
                             "the strategy)">:$vectorWidth,
    AttrParameter<"int64_t", "threads per block">:$block,
    AttrParameter<"int64_t", "threads per block (reductions, rows)">:$threads,
    AttrParameter<"int64_t", "rows a block (`rows_per_block`)">:$rowsPerBlock,
    AttrParameter<"int64_t", "blocks a reduction is split over">:$splits,
    AttrParameter<"int64_t", "transpose tile edge">:$tile);
  let extraClassDeclaration = [{
    /// The parameter names `strategy` has, in printing order.
    static ::llvm::ArrayRef<::llvm::StringLiteral>
    parameterNames(::kiln::GenericStrategy strategy);
  }];
}

//===----------------------------------------------------------------------===//
// Launch scaling: grids that follow a symbolic dim (issue 24)
//===----------------------------------------------------------------------===//

// An artifact compiled with `kilnc --dim N=1..64` keeps the maximum's
// memory plan and padding, but a launch whose work for slices N..63 lies
// only in a suffix of one grid dimension runs fewer blocks there. These
// carry that proof from the passes that know each kernel's shape to the
// artifact builder (docs/runtime.md "Sizes at run time").
class Kiln_LaunchAttr<string name, string attrMnemonic>
    : AttrDef<Kiln_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Kiln_GridRowsAttr : Kiln_LaunchAttr<"GridRows", "grid_rows"> {
  let summary = "Which grid dim of a GEMM template call tiles M's rows";
  let description = [{
    On a `kiln.call_kernel` of a GEMM template (kiln-match-contractions, as
    `kiln.grid_rows`): blockIdx.x tiles M's `rows` `tile` at a time, and
    M's rows are slices of input `a`'s dim 0 in order. kiln-map-to-gpu
    turns it into a `kiln.grid_scale` when a symbol follows that dim.

    Example:

    ```mlir
    #kiln.grid_rows<rows = 12544, tile = 128, a = 0>
    ```
  }];
  let parameters = (ins
    AttrParameter<"int64_t", "M, the GEMM's rows">:$rows,
    AttrParameter<"int64_t", "rows a block tiles">:$tile,
    AttrParameter<"int64_t", "the input whose dim 0 the rows slice">:$a);
}

def Kiln_GridScaleAttr : Kiln_LaunchAttr<"GridScale", "grid_scale"> {
  let summary = "How a launch's grid follows a symbolic dim";
  let description = [{
    On a `gpu.launch_func` (and, before outlining, a `gpu.launch` or a
    `kiln.call_kernel`, as `kiln.grid_scale`): with symbol `symbol` at size
    n the launch needs only the first ceil(n * `numerator` / `denominator`)
    blocks of grid dim `dim`. kiln-map-to-gpu lists one per generic launch
    on the function (`kiln.launch_grid_scales`, an empty dictionary for a
    launch that keeps its compiled grid) for kiln-name-kernels to move onto
    the outlined launches; the artifact builder writes them into the
    `launch-scales` section.

    Example:

    ```mlir
    #kiln.grid_scale<symbol = "N", dim = 0, numerator = 100, denominator = 256>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "the symbolic dim">:$symbol,
    AttrParameter<"int64_t", "the grid dim that scales (0, 1 or 2)">:$dim,
    AttrParameter<"int64_t", "work units per slice of the symbol">:$numerator,
    AttrParameter<"int64_t", "work units per block">:$denominator);
}

def Kiln_SizeGuardAttr : Kiln_LaunchAttr<"SizeGuard", "size_guard"> {
  let summary = "The sizes of a symbolic dim at which a launch runs";
  let description = [{
    On a `kiln.call_kernel` and the `gpu.launch_func` it becomes (as
    `kiln.size_guard`): the launch runs only when symbol `symbol` has a
    size in [`min`, `max`]. kiln-match-contractions builds a GEMM or
    convolution region with size buckets (`kiln.kernel_variants`, kilnc
    `--size-buckets`) as one chain of calls per bucket, each computing the
    whole result into the same buffer with the tiles chosen for its bucket,
    and guards each; the artifact builder writes the guards into the
    `launch-guards` section and the runtime skips a guarded launch at the
    other sizes.

    Example:

    ```mlir
    #kiln.size_guard<symbol = "N", min = 1, max = 8>
    ```
  }];
  let parameters = (ins
    AttrParameter<"::mlir::StringAttr", "the symbolic dim">:$symbol,
    AttrParameter<"int64_t", "the smallest size it runs at">:$min,
    AttrParameter<"int64_t", "the largest size it runs at">:$max);
}

#endif // KILN_DIALECT_KILN_IR_KILNKERNELATTRS_TD
