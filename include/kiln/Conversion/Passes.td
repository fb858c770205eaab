//===- Passes.td - Kiln conversion passes ------------------*- tablegen -*-===//

#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToLinalgPass : Pass<"kiln-lower-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Lower kiln ops to linalg on tensors";
  let description = [{
    Rewrites every kiln op into `linalg` structured ops (mostly
    `linalg.generic`, whose indexing maps carry broadcasting, strides and
    windows), `tensor` ops for pure data movement, and `arith`/`math` for
    scalar bodies. Value semantics are kept: the result is still on tensors,
    ready for tiling and bufferization. A kiln op without a lowering is an
    error naming it.

    Example:

    ```mlir
    %y = kiln.relu %x : tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [#id, #id],
                         iterator_types = ["parallel"]}
        ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) { ... }
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect",
    "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect",
    // kiln.roi_align's sample loops, whose trip count depends on the region.
    "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect",
  ];
}

def CollapseFusionsPass : Pass<"kiln-collapse-fusions", "mlir::func::FuncOp"> {
  let summary = "Turn each lowered kiln.fusion region into one linalg.generic";
  let description = [{
    Runs after `kiln-lower-to-linalg`, when a `kiln.fusion` region holds
    linalg and tensor ops. The region becomes one all-parallel
    `linalg.generic` over its iteration space (the shape of its results),
    with one output per region result, whose body computes each output
    element from the region's inputs ("compute at point"):

    - an elementwise or broadcast producer becomes scalar code in the body;
    - a reduction (matmul, convolution, pooling, reduce) becomes an `scf.for`
      nest with its accumulators in registers (several reduction
      dimensions none of which feeds a computed index, as a reduce over
      several axes or a whole tensor has: one loop over their product, the
      coordinates split off its induction variable, so `kiln-map-to-gpu`
      can spread it over a warp or a block);
    - data movement (`tensor.pad`, slices, reshapes, transposes,
      concatenation) becomes index arithmetic, with `scf.if` where it
      chooses between sources (padding, the parts of a concatenation);
    - a body's `tensor.extract` of a tensor the region computes (gather,
      gather_elements, tile, slices with negative steps) is evaluated at
      the computed index: the producer is computed there, not read;
    - region inputs are read with `tensor.extract` at computed indices.

    What this guarantees about index arithmetic (tested pattern by pattern
    in `test/Target/CUDA/fused-index-arithmetic.test` and on random graphs
    by `test/e2e/fusion_fuzz.py`, fused against unfused and onnxruntime):

    - each point form hands its source exactly one index per dimension
      (a mismatch is an error, never a read past the end), including rank
      0: a collapse to a scalar reads its source at index 0;
    - a gather index, whether a constant or data, 0-D or N-D, on any axis,
      is wrapped once when negative and clamped to the axis, exactly as the
      unfused gather kernel does, and then indexes the producer's value at
      that point (chains of gathers compose their indices);
    - slices (negative starts and steps included), pads, concatenations,
      splits, broadcasts (Expand), tiles, transposes and reshapes map an
      output coordinate to the one source coordinate the op defines; pads
      and concatenations guard each source with `scf.if`, so no read is
      out of bounds;
    - every value computed in the body stays mapped to the op that
      computes it until the body is complete (a read of a computed tensor
      is not cloned and patched afterwards: that left dangling values,
      issue 10).

    Nothing computed inside the region reaches memory, so the region is one
    kernel. Code that depends only on outer coordinates is emitted outside
    the loops that do not need it: a row reduction consumed by a broadcast
    (softmax's max and sum, layer norm's mean and variance) is computed once
    per point of the row's coordinates, at the top of the body, where
    `kiln-map-to-gpu` recognises it and makes it a block-wide reduction.
    A region it cannot express (an op with no point form) stays as separate
    kernels, with a warning naming the op.

    Example (matmul with a bias epilogue):

    ```mlir
    %y = kiln.fusion "matmul" -> tensor<4x8xf32> { ... }
    // becomes
    %y = linalg.generic {iterator_types = ["parallel", "parallel"]}
        outs(%e : tensor<4x8xf32>) {
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %acc = scf.for %k = %c0 to %c16 step %c1 iter_args(%a = %zero) -> (f32) {
        %l = tensor.extract %lhs[%i, %k] : tensor<4x16xf32>
        %r = tensor.extract %rhs[%k, %j] : tensor<16x8xf32>
        ...
      }
      %bias = tensor.extract %b[%j] : tensor<8xf32>
      %sum = arith.addf %acc, %bias : f32
      linalg.yield %sum : f32
    }
    ```
  }];
  let dependentDialects = [
    "mlir::affine::AffineDialect",
    "mlir::arith::ArithDialect",
    "mlir::linalg::LinalgDialect",
    "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect",
  ];
}

def SelectContractionKernelsPass
    : Pass<"kiln-select-contraction-kernels", "mlir::ModuleOp"> {
  let summary = "Decide each contraction region's template kernel and its tiling";
  let description = [{
    The decision half of the template kernels (ARCHITECTURE.md section 6,
    "decide, then emit"): for every `kiln.fusion` region anchored on a
    matmul, a 2-D convolution or attention, find the problem its kernel
    would compute (shapes, dtypes, layouts, strides, the epilogue's output
    type) exactly as `kiln-match-contractions` will, pick the kernel, and
    attach it to the region as a typed attribute, `kiln.kernel`:

    - `#kiln.gemm_config` for matmuls and NHWC convolutions (implicit
      GEMM): `mma.sync` tensor cores for bf16/f16 operands, tf32 tensor
      cores for a matmul `kiln-lower-precision` marked `kiln.tf32`, an FFMA
      kernel for fp32; with `wgmma=true` and `chip=sm_90` the warp-
      specialised `wgmma` kernels (sm_90a) first, and with `tma=true` the
      TMA producer for plain bf16/f16 GEMMs whose operands TMA can address;
    - `#kiln.depthwise_config` for depthwise convolutions (one input
      channel per group);
    - `#kiln.attention_config` for `attention` regions (`kiln-fuse`'s rule
      5), the wgmma kernel on sm_90 with `wgmma=true`.

    Configs come, in this order, from a `tune-cache` entry for the problem
    (one that still passes the config checks; otherwise a warning), from
    tuning (`tune`: each distinct problem missing from the cache has its
    first `tune-max-candidates` candidates compiled and timed in
    `tune-worker`, a child process, each checked against the heuristic's
    pick on the same inputs; the winner is added to the cache, written
    atomically), or from the heuristic (`pickConfig`). A corrupt or
    foreign cache is ignored with a warning. `kiln.kernel_origin` says
    where the config came from (`tuned (cache)`, `tuned (now, ...)`,
    `heuristic`). A tf32 matmul whose row-major weight the wgmma kernel
    would rather read K-major gets `kiln.weight_kmajor` (the problem the
    config was chosen for has B column-major).

    A region that does not fit gets `kiln.generic_reason` instead (kilnc
    `--stats` prints it): no matmul, another contraction or a row op in
    it, results not computed from one another, an op with no epilogue
    form, partially broadcast batch dimensions, 1-D operands, no config for
    the shape, or (with `check-nvrtc`) NVRTC missing; for convolutions also
    `nchw` or 1-D/3-D ones, a filter computed at run time whose channels
    need padding, and for depthwise ones a filter computed at run time.
    The IR is otherwise left as it was, except for the splits that say
    what a kernel is: a region of matmuls side by side (Q, K and V)
    becomes one region per matmul, and an attention region no kernel fits
    becomes its scores region and its P V matmul (the first part's
    `kiln.selection_note` says why). A region that already has a
    `kiln.kernel` keeps it.

    **Size buckets** (`size-buckets`, kilnc `--size-buckets`). With one
    symbolic dim N = MIN..MAX (`kiln.dim_ranges`) and a GEMM or
    convolution whose M is N x rows per sample with the rows as A's
    leading slices (so its launch scales with N), the range is cut at the
    given sizes into buckets, and each bucket but the last gets the config
    chosen for M at its largest size (or at the opt, when the bucket holds
    it) where that differs from the region's own: `kiln.kernel_variants =
    [{kernel = <config>, min = lo, max = hi}, ...]`. `auto` cuts once at
    ceil(MAX / 8) when MAX >= 16; `off` (the default of the pass) makes
    none. kiln-match-contractions builds each bucket's kernels and guards
    their launches (#kiln.size_guard); the runtime runs the bucket of the
    run's size. Errors: a size that is not a number or not in MIN..MAX-1
    (one line, naming it).

    Nothing is compiled (no NVRTC is needed, except to tune), so the
    selection is tested on its own (`kiln-select-contraction-kernels.mlir`).

    Example:

    ```mlir
    %y = kiln.fusion "matmul" -> tensor<64x16xf32> {
      %m = kiln.matmul %x, %w : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
      %r = kiln.relu %m : tensor<64x16xf32>
      kiln.yield %r : tensor<64x16xf32>
    }
    // becomes
    %y = kiln.fusion "matmul" -> tensor<64x16xf32> attributes {
        kiln.kernel = #kiln.gemm_config<family = mma_f16, tile = 128x16x64,
          warp_tile = 32x16, stages = 4, split_k = 1, producer = cp_async,
          swizzle = xor16>,
        kiln.kernel_origin = "heuristic"} { ... }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture the kernels are chosen for: sm_80 or sm_90">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "On sm_90, bf16/fp16 and tf32 matmuls and convolutions try the "
           "warp-specialised wgmma kernels (sm_90a) before mma.sync, and "
           "attention gets the wgmma attention kernel">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "With wgmma: the producer loads plain-GEMM operands with TMA "
           "(tensor maps the runtime encodes at load) where the strides "
           "allow; false: cp.async">,
    Option<"checkNvrtc", "check-nvrtc", "bool", /*default=*/"false",
           "Keep every region generic, saying why, when NVRTC cannot be "
           "loaded (kilnc sets it; the selection itself compiles nothing)">,
    Option<"tune", "tune", "bool", /*default=*/"false",
           "Time each problem's candidate configs in kiln-tune-worker and "
           "keep the fastest that matches the heuristic's pick">,
    Option<"tuneDevice", "tune-device", "std::string", /*default=*/"\"cuda\"",
           "Where candidates are timed: cuda (CUDA events) or emu (the "
           "performance model's estimate)">,
    Option<"tuneCache", "tune-cache", "std::string", /*default=*/"\"\"",
           "Tune cache (JSON) read for configs, and with tune written with "
           "the new winners">,
    Option<"tuneMaxCandidates", "tune-max-candidates", "unsigned",
           /*default=*/"8", "Candidates timed per problem">,
    Option<"tuneWorker", "tune-worker", "std::string", /*default=*/"\"\"",
           "The kiln-tune-worker executable">,
    Option<"tuneTimeout", "tune-timeout", "unsigned", /*default=*/"60",
           "Seconds one candidate may run">,
    Option<"tuneExport", "tune-export", "std::string", /*default=*/"\"\"",
           "With tune: write the jobs of the problems the cache lacks into "
           "this directory instead of running them (the heuristic "
           "compiles)">,
    Option<"tuneImport", "tune-import", "std::string", /*default=*/"\"\"",
           "A directory of exported jobs that have run: their winners are "
           "added to the cache first">,
    Option<"sizeBuckets", "size-buckets", "std::string", /*default=*/"\"off\"",
           "Kernel variants per size range of the one symbolic dim: off, "
           "auto (one cut at ceil(max / 8) when max >= 16) or the largest "
           "size of each bucket but the last, comma-separated (4,16)">,
  ];
  // arith and math: epilogue checks build ops' scalar bodies (ScalarSemantics.h).
  let dependentDialects = ["mlir::ml_program::MLProgramDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect"];
}

def MatchContractionsPass : Pass<"kiln-match-contractions", "mlir::ModuleOp"> {
  let summary = "Turn contraction regions into the template kernels their configs name";
  let description = [{
    A `kiln.fusion` region anchored on a `kiln.matmul` (2-D or batched),
    whose other ops are the matmul's elementwise epilogue, becomes one
    tiled kernel from the CUDA C++ templates: `mma.sync` tensor cores for
    bf16/f16 operands, tf32 tensor cores for a matmul `kiln-lower-precision`
    marked `kiln.tf32`, and an FFMA kernel (shared-memory and register
    blocking, no TF32) for fp32. The epilogue is generated from the region's
    ops and runs on the accumulators in registers; the specialised kernel's
    CUDA C++ source goes into a `gpu.binary` (an `offload` object with the
    `kiln.cuda_source` property and its `kiln.nvrtc_options`), which the
    target step compiles with NVRTC (the artifact builder, or kilnc
    `--emit=ptx`: distinct sources once, in parallel, through the kernel
    cache), and is called with `kiln.call_kernel` (two calls and a
    workspace for split-K). A kernel identical to one already made (the
    same source and options: convolutions of one shape and epilogue) is
    not declared again: its calls launch the first one's binary. Operands are read where they lie:
    reshapes of region inputs are free and a transpose of the last two
    dimensions makes a column-major operand; other operand producers (a
    cast to bf16) and values the epilogue reads that the region computes
    without the matmul are split off into regions of their own.

    A region anchored on a 2-D `kiln.conv` in `nhwc` (strides, pads,
    dilations and groups of any size) becomes one implicit-GEMM kernel of
    the same families: the image is read in place, the conv's bias and the
    epilogue (`kiln.batch_norm` folded as `(x - mean) * rsqrt(var + eps) *
    scale + bias`, residual adds, activations, casts) run on the
    accumulators. The filter `[O, KH, KW, C/groups]` is read as it is when
    `C/groups` is a multiple of the K chunk (8 for 16-bit operands, 4 for
    f32); otherwise its channels are zero-padded at compile time into a new
    weight global (`@<name>_cpad`), whose `kiln.origin` gains the `pad`
    step so `kiln-run --weights` replays it. A region with two results
    computed one from the other (a convolution's f32 value a residual add
    reads and its bf16 copy for the next convolution; a matmul's value and
    its activation) becomes one kernel that stores both, from the same
    accumulators: C and a second output no wider than C (the call has two
    outputs). With more results, or a second one wider than the first, the
    kernel stores the one the others are computed from and the others move
    to a region after it, as they do for depthwise convolutions.

    The `wgmma` kernels (sm_90a) are a cp.async producer warpgroup feeding
    mbarrier-guarded stages to one or two consumer warpgroups; `kilnc
    --stats` names the family each region got. tf32 wgmma reads both
    operands K-major: for a region with `kiln.weight_kmajor`, a row-major
    `[K][N]` f32 weight global is stored transposed in a new global
    (`@<name>_kmajor`, its `kiln.origin` gains `transpose 1,0`), and other
    MN-major operands are transposed by the kernel as it stages them. A
    config with `producer = tma` (`cp.async.bulk.tensor`) gives calls that
    carry `kiln.tensor_maps`, one dictionary per tensor-map
    parameter (after the scalars: `param`, the operand the map's address
    comes from, `dtype`, `dims`, `strides`, `box`, `swizzle`,
    `l2_promotion`, `oob_fill`), which the artifact builder records for the
    runtime to encode at load; `--stats` says `producer TMA` or `producer
    cp.async` per wgmma region.

    The pass follows what `kiln-select-contraction-kernels` decided: a
    region with a `kiln.kernel` attribute becomes the kernel it names, with
    that config (the kernel calls carry it as `kiln.kernel` too); a region
    without one keeps its generic kernel, and the module's
    `kiln.contraction_report` lists each region's kernel and config, or its
    `kiln.generic_reason`. A config the region's problem does not allow (a
    family of another precision, wgmma on sm_80, a tile the problem's
    alignment or TMA's strides rule out, a depthwise vector that does not
    divide the channels) is an error naming the config and the reason.

    A depthwise convolution (one input channel per group, O a multiple of
    C) becomes the CUDA-core depthwise kernel
    (`include/kiln/Target/CUDA/DepthwiseKernels.h`) with the same fused
    epilogue: each thread computes a vector of consecutive output channels
    of one pixel, and the filter is reordered at compile time to
    `[KH][KW][O][1]` into `@<name>_dw`, whose origin gains the `reshape`
    and `transpose` steps. A depthwise filter computed at run time keeps
    the generic kernel.

    A region of kind `attention` (`kiln-fuse`'s rule 5: matmul, elementwise
    scale and masks, last-axis softmax, casts, matmul, elementwise
    epilogue) becomes one flash-attention kernel
    (`include/kiln/Target/CUDA/AttentionKernels.h`): online softmax, K/V
    tiles through shared memory, both products on `mma.sync` for bf16/fp16
    and FFMA for fp32; the scores are never stored. Q, K and V are read in
    place through reshapes, transposes, broadcasts (GQA/MQA heads) and
    constant scales; an operand computed otherwise is split off first. The
    ops between the matmuls become the kernel's score body (a `kiln.select`
    on a constant triangle is an index test, and lets the kernel skip key
    tiles past a causal diagonal; other conditions and additive masks are
    read with their broadcast), those after the second its output
    epilogue. A region that does not fit (a 16-bit head dimension that is
    not a multiple of 16, a head dimension above 256, more than two
    non-unit batch dimensions, NVRTC missing) was split back into its
    scores region and its P V matmul by the selection, and the report says
    why ("attention split (...)").

    Example:

    ```mlir
    %y = kiln.fusion "matmul" -> tensor<64x16xf32> {
      %m = kiln.matmul %x, %w : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
      %a = kiln.add %m, %bias : tensor<64x16xf32>, tensor<16xf32> -> tensor<64x16xf32>
      %r = kiln.relu %a : tensor<64x16xf32>
      kiln.yield %r : tensor<64x16xf32>
    }
    // with kiln.kernel = #kiln.gemm_config<...> becomes
    gpu.binary @kiln_gemm_0 [#gpu.object<#nvvm.target<chip = "sm_90">,
        properties = {kiln.cuda_source, kiln.nvrtc_options = [...]},
        offload = "// Generated by Kiln: mma_f16 ...">]
    %e = tensor.empty() : tensor<64x16xf32>
    %y = kiln.call_kernel @kiln_gemm_0::@kiln_gemm_0 ins(%x, %w, %bias : ...)
        outs(%e : tensor<64x16xf32>) grid [1, 1, 1] block [128, 1, 1]
        scalars [64 : i32, 0, 1024] {pointer_order = array<i32: 0, 1, 3, 2>} -> tensor<64x16xf32>
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture the kernels are compiled for: sm_80 or sm_90">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::ml_program::MLProgramDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect"];
}

def LowerRecurrencePass : Pass<"kiln-lower-recurrence", "mlir::ModuleOp"> {
  let summary = "Turn each kiln.recurrence into one persistent kernel";
  let description = [{
    Each `kiln.recurrence` (one direction of an RNN, GRU or LSTM layer)
    becomes one `kiln.call_kernel` of the persistent recurrence kernel
    (`include/kiln/Target/CUDA/RecurrenceKernels.h`,
    `templates/Recurrence.cuh`): one launch runs all T steps. The batch is
    cut into chunks of up to 16 rows (fewer when a chunk's state does not
    fit in shared memory), one cluster each, side by side in the grid.
    Within a cluster the blocks stay resident; each owns ceil(H / blocks)
    hidden units with every gate of them, keeps its rows of R in shared memory when they fit (padded
    rows; else it reads them from global memory every step) and its cell
    state in shared memory, and holds the full h of the last step. Per
    step a block multiplies its rows of R by h in fp32, applies the cell
    (activations, clip, peepholes, sequence_lens masking), writes its part
    of y and stores its new h units into every block's next h buffer; one
    step barrier follows (two for GRU without linear_before_reset, whose
    h gate reads r * h of every unit). On sm_90 the blocks are one
    thread-block cluster of up to 8 (`__cluster_dims__`): h moves through
    distributed shared memory (`mapa`, `st.shared::cluster`) and the step
    barrier is `barrier.cluster.arrive.release` / `wait.acquire`. On sm_80
    the kernel is one block.

    Operands are read where they lie: a chain of `kiln.reshape` and
    contiguous `kiln.slice` ops (one direction of ONNX's `[D, ...]` R,
    states and peepholes) is followed to its buffer and becomes an element
    offset in the kernel. The kernel's CUDA C++ source goes into a
    `gpu.binary` compiled in the target step, as the contraction templates'
    do. The module's `kiln.recurrence_report` lists each kernel, its
    blocks and threads, where R lives and the launches per sequence (one).

    A recurrence whose state does not fit in a block's shared memory even
    for one batch row (the importer only makes ones with H <= 4096, which
    fit sm_80's) is an error naming the op and the bytes.

    `blocks` forces the blocks per cluster (1, 2, 4 or 8; 0 picks: the
    largest power of two up to min(8, H) on sm_90, 1 on sm_80) and
    `weights-in-shared=false` keeps R in global memory, for tests.

    Example:

    ```mlir
    %y, %h, %c = kiln.recurrence <lstm> %x, %r, %h0 initial_c(%c0) {...}
    // becomes
    gpu.binary @kiln_rnn_0 [#gpu.object<..., offload = "// Generated by Kiln: persistent lstm, ...">]
    %y, %h, %c = kiln.call_kernel @kiln_rnn_0::@kiln_rnn_0
        ins(%x, %r, %h0, %c0 : ...) outs(%e0, %e1, %e2 : ...)
        grid [8, 1, 1] block [128, 1, 1] {dynamic_shared_bytes = 152960 : i32} -> ...
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture the kernels are compiled for: sm_80 or sm_90">,
    Option<"blocks", "blocks", "unsigned", /*default=*/"0",
           "Blocks per cluster (1, 2, 4 or 8); 0 picks from the chip and H">,
    Option<"weightsInShared", "weights-in-shared", "bool", /*default=*/"true",
           "Keep each block's rows of R in shared memory when they fit">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::tensor::TensorDialect"];
}

def DistinctResultsPass : Pass<"kiln-distinct-results", "mlir::func::FuncOp"> {
  let summary = "Give each function result its own value";
  let description = [{
    A model may return one value under several names (two identical ops
    become one after CSE). Every function result must become its own
    out-parameter buffer, so each repeated `func.return` operand is replaced
    by a `linalg.copy` of it. Runs right before bufferization.

    Example:

    ```mlir
    return %a, %a : tensor<4xf32>, tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %c = linalg.copy ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    return %a, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let dependentDialects = [
    "mlir::linalg::LinalgDialect",
    "mlir::tensor::TensorDialect",
  ];
}

def MaterializeCallOperandsPass
    : Pass<"kiln-materialize-call-operands", "mlir::func::FuncOp"> {
  let summary = "Copy buffer views passed to a device loop's body into whole buffers";
  let description = [{
    After bufferization a call of a device-side loop's body (a function
    marked `kiln.device_loop`, docs/architecture.md "Device-side loops")
    may pass a view of a buffer: a Split part or a Slice is a
    `memref.subview`, an unfused Reshape an `expand_shape` or
    `collapse_shape`. The artifact builder binds the body's arguments to
    kernel parameters, which take whole buffers, so each such operand is
    copied into a buffer of its own first (a `memref.copy`, which
    kiln-select-generic-kernels and kiln-map-to-gpu make a kernel). Whole
    buffers (function arguments, `memref.alloc`, `memref.get_global`) pass
    as they are. Runs right after bufferization.

    Example:

    ```mlir
    %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
    call @loop_body(%flag, %i, %v) : (...) -> ()
    // becomes
    %w = memref.alloc() : memref<4xf32>
    memref.copy %v, %w : memref<4xf32, strided<[1]>> to memref<4xf32>
    call @loop_body(%flag, %i, %w) : (...) -> ()
    ```
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def MaterializeWeightsPass : Pass<"kiln-materialize-weights", "mlir::ModuleOp"> {
  let summary = "Turn immutable ml_program globals into tensor constants";
  let description = [{
    For inference, weights are constants: each `ml_program.global_load_const`
    of an immutable global becomes an `arith.constant` holding the global's
    value (the same resource blob, not a copy), and globals left without
    uses are erased. Bufferization then places the constants in
    `memref.global`s, which the artifact builder packs into the weights
    section. A global's `kiln.origin` (the initializer it was read from and
    the steps since) moves into the module attribute `kiln.weight_origins`,
    keyed by the blob, where the artifact builder finds it. Reading a
    mutable or uninitialized global is an error.

    Example:

    ```mlir
    ml_program.global private @w(dense_resource<w> : tensor<64xf32>) : tensor<64xf32>
    %w = ml_program.global_load_const @w : tensor<64xf32>
    // becomes
    %w = arith.constant dense_resource<w> : tensor<64xf32>
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def SelectGenericKernelsPass
    : Pass<"kiln-select-generic-kernels", "mlir::func::FuncOp"> {
  let summary = "Decide each generated kernel's shape: strategy and parameters";
  let description = [{
    The decision half of the generated kernels (ARCHITECTURE.md section 6):
    for every `linalg.generic` and `memref.copy` on buffers, pick how
    `kiln-map-to-gpu` maps it to blocks and threads and record it as
    `kiln.kernel = #kiln.generic_kernel<strategy, parameters>`. The rules,
    in order (the first that applies wins; the kernels themselves are
    described under `kiln-map-to-gpu`):

    1. `block_reduction` (`threads`: the reduction rounded up to a power of
       two, at most `block-size`): one output, a reduction of at least 32
       iterations folded with add/mul/max/min, at most 16384 outputs;
    2. for a fused generic whose body holds row loops over outer
       coordinates only: `column_reduction` or `whole_reduction`
       (`splits`, with `reduction-kernels` and every output its own row;
       split only when the output tiles leave SMs idle), else
       `strip_rows` (`threads` 32 and `rows_per_block` for rows up to 1024
       when there are rows for every SM, else a block of 64-1024 threads;
       with `row-kernels`, rows of at most 32 positions a thread), else
       `block_rows` (`threads`);
    3. `tiled_transpose` (`tile` 32, with `tiled-transpose`): a read
       contiguous along another loop dimension than the write;
    4. `vectorized` (`vector_width` 16 bytes over the narrowest element, at
       most 8; `block`; with `vectorize`): at least one access proven
       contiguous and aligned;
    5. `thread_per_output` (`block`).

    A generic that already has a `kiln.kernel` keeps it. Dynamic iteration
    spaces and generics on tensors are errors, as in `kiln-map-to-gpu`.

    Example:

    ```mlir
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%a : memref<1024xf32>) outs(%b : memref<1024xf32>) { ... }
    // becomes
    linalg.generic {..., kiln.kernel = #kiln.generic_kernel<vectorized,
        vector_width = 4, block = 256>} ...
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture: its SM count and resident threads per SM "
           "(runtime/targets/gpus.ini, TargetInfo.h) size the kernels">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"0",
           "Streaming multiprocessors to size kernels for instead of the "
           "chip's (0: the chip's; tests)">,
    Option<"vectorize", "vectorize", "bool", /*default=*/"true",
           "Vectorise elementwise kernels (128-bit accesses where proven "
           "contiguous and aligned)">,
    Option<"rowKernels", "row-kernels", "bool", /*default=*/"true",
           "Row kernels for fused row reductions: a warp (rows up to 1024) "
           "or a block per row, the row's strip in registers, producers "
           "computed once; false: the block-per-row / thread-per-output "
           "kernels (A/B switch)">,
    Option<"tiledTranspose", "tiled-transpose", "bool", /*default=*/"true",
           "Transposes and layout changes through padded 32x32 "
           "shared-memory tiles; false: the elementwise kernels (A/B "
           "switch)">,
    Option<"reductionKernels", "reduction-kernels", "bool",
           /*default=*/"true",
           "Column reductions (threads across the kept innermost dim) and "
           "deterministic two-pass whole-tensor reductions; false: the row "
           "kernels (A/B switch)">,
  ];
  let dependentDialects = ["kiln::KilnDialect", "mlir::gpu::GPUDialect",
                           "mlir::linalg::LinalgDialect"];
}

def MapToGpuPass : Pass<"kiln-map-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Turn each linalg op on buffers into the gpu.launch its kiln.kernel names";
  let description = [{
    Runs after bufferization and `kiln-select-generic-kernels`. Every
    `linalg.generic` (named ops are generalized first) and `memref.copy`
    becomes one `gpu.launch`, shaped as its `kiln.kernel =
    #kiln.generic_kernel<...>` says (a generic without one is an error; a
    strategy whose analysis does not hold for the generic, such as a tiled
    transpose without a transposed read, is an error naming the strategy
    and the reason). The shapes, and when the selection picks each (in
    this order: block reduction, row kernels, tiled transpose, vectorised,
    thread per output):

    - `vectorized`: vectorised elementwise (all-parallel ops and fused
      regions without loops in their body): each thread owns groups of V
      consecutive points of the flattened iteration space, V = 16 bytes
      over the narrowest element accessed (4 for f32, 8 for bf16/f16; at
      most 8; 1-byte elements are not vectorised yet), in a grid-stride loop over at most `sm-count` x
      (the chip's resident threads per SM / `block-size`) blocks. Each access (an
      indexing map, or a body load at index arithmetic of `linalg.index`
      values) whose address is provably contiguous over the group and
      aligned to min(16, V x element bytes) from its buffer's base becomes
      one `vector.load`/`vector.store` with that `alignment` (PTX
      `ld.global.v4`); a broadcast the group does not leave becomes one
      scalar load; anything else (views at offsets that are not a multiple
      of 16 bytes, transposed reads, div/rem index arithmetic) a load per
      point. The size modulo V is a scalar tail run by the first threads.
      Used when at least one access is a vector.
    - `thread_per_output`: a thread per output element: a 1-D grid of `block-size`-thread blocks
      over the flattened parallel iterations; each thread walks the
      reduction dimensions (if any) serially. Used for contractions, whose
      reductions are short and whose outputs are many, and elementwise ops
      with no contiguous access.
    - `block_reduction`: a block per output element: when the op has one output, a reduction
      of at least a warp (32 iterations), at most 16384 outputs, and a body
      that combines into the output with add, mul, max or min. The block has
      the row length rounded up to a power of two threads (at most
      `block-size`); they stride over the reduction and combine partial
      results with `gpu.all_reduce` (warp shuffles and shared memory), so no
      thread walks a whole row alone: softmax, layer norm, reduce_*, global
      pooling and vector-matrix products.
    - `strip_rows` (and `block_rows`): row kernels: a fused kernel (an all-parallel
      generic, kiln-collapse-fusions) whose body holds reduction loops
      (`scf.for` with one accumulator folded by add/mul/max/min) that
      depend on outer coordinates only: a warp per row for rows up to
      1024 (`block-size` / 32 rows per block), else a block of 64-1024
      threads per row. Each thread keeps fixed positions of the row (at
      most 32), evaluates each loop's body there, combines in registers
      and meets the other threads in a `gpu.shuffle xor` butterfly (warp)
      or a `gpu.all_reduce` (block). The phases are cloned straight-line
      with equivalent read-only ops reused, so the row is loaded once and
      its fused producers are computed once. f64/i64 warp rows, rows over
      32768 and `row-kernels=false` get a block per row (`block_rows`): each loop
      strided over the block's threads, ending in a `gpu.all_reduce`.
    - `tiled_transpose`: an all-parallel generic
      without loops in its body (a transpose, an NCHW<->NHWC layout change,
      with elementwise ops on the moved values; any element type of 8-64
      bits) whose write is contiguous along loop dimension dW and one of
      whose reads (an input map or a body load at `linalg.index` values)
      is contiguous along another dimension dR. Each block of 32x8 threads
      moves a 32x32 tile of the (dR, dW) plane: phase 1 reads along dR
      (coalesced) into a workgroup tile, 4 elements per thread; a
      `gpu.barrier`; phase 2 reads the tile's columns and writes along dW
      (coalesced), running the rest of the body there. Tile rows are padded
      to an odd number of 4-byte words (1 element for 4- and 8-byte types,
      2 for 2-byte, 4 for 1-byte), so the column reads are free of bank
      conflicts. Every read contiguous along dR is staged (a tile each); the
      other dimensions are folded into the 1-D grid; ragged edges are
      guarded.
    - `column_reduction` and `whole_reduction`: a
      fused reduction whose every output is one row. When some read of the
      row is contiguous along the innermost output dimension (ReduceSum
      over axis 0, batch-norm statistics over N,H,W of NHWC), blocks of 32x8
      threads: x over 32 consecutive outputs (coalesced), y over 8 slices
      of the row, partials through a [8][33] workgroup tile and combined in
      a fixed order; a long row with too few output tiles for the GPU is
      split over S blocks writing partials to a scratch `memref.alloc`,
      combined in order by a second kernel. Otherwise, with at most 32
      outputs and rows over 8192 (a scalar loss, ReduceL2 of a tensor): a
      two-pass tree, pass 1 a grid of blocks per output over grid-stride
      ranges (each block's total to a scratch buffer), pass 2 a block per
      output over those partials. Both are deterministic (no atomics). A
      body with several row loops (LogSumExp) runs them in turn.

    Views of buffers (subviews, reshapes) are recreated inside the kernel,
    so every kernel argument is a whole buffer: the runtime passes one
    pointer per buffer.

    Example:

    ```mlir
    linalg.generic {iterator_types = ["parallel", "reduction"]} ...
    // becomes (block per row)
    gpu.launch blocks(%b, ...) in (%gx = %rows, ...) threads(%t, ...) in (%bx = %c256, ...) {
      ... scf.for %r = %t to %cols step %c256 ... gpu.all_reduce add ...
    }
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block of the second pass of a split column "
           "reduction">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "GPU architecture: its SM count and resident threads per SM "
           "(runtime/targets/gpus.ini, TargetInfo.h) size grid-stride grids">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"0",
           "Streaming multiprocessors to size grids for instead of the "
           "chip's (0: the chip's; tests)">,
  ];
  let dependentDialects = [
    "mlir::affine::AffineDialect",
    "mlir::arith::ArithDialect",
    "mlir::gpu::GPUDialect",
    "mlir::linalg::LinalgDialect",
    "mlir::memref::MemRefDialect",
    "mlir::scf::SCFDialect",
    "mlir::vector::VectorDialect",
  ];
}

def AlignKernelArgsPass : Pass<"kiln-align-kernel-args", "mlir::ModuleOp"> {
  let summary = "Say on each kernel's buffer parameters that they are aligned";
  let description = [{
    After outlining, every memref parameter of a generated kernel is a
    whole buffer of the memory plan: an arena buffer (offsets 256-byte
    aligned, `kArenaAlignment`) or a weight (64-byte aligned,
    `kWeightAlignment`), at a device allocation that is itself 256-byte
    aligned. This pass records that as `llvm.align = <alignment>` on the
    parameter, which the NVVM lowering turns into `.param .u64 .ptr .align
    16` in the PTX, so that LLVM may keep the 128-bit `vector.load`s and
    `vector.store`s kiln-map-to-gpu emits (and prove more itself).

    A parameter gets the attribute only when every launch of its kernel
    passes a function argument, an allocation or a global there (not a view
    at an unknown offset), and only with static shapes; a kernel without
    launches is left alone. LLVM may widen loads up to their known
    alignment (its load-store vectorizer makes one 16-byte load of three
    adjacent f32 loads), which must not read past the buffer (the emulator
    checks each buffer's exact bounds), so a buffer whose byte size is not
    a multiple of `alignment` gets the largest power of two dividing its
    size (none when that is 1).

    Example:

    ```mlir
    gpu.func @k(%arg0: memref<1024xf32>) kernel
    // becomes
    gpu.func @k(%arg0: memref<1024xf32> {llvm.align = 16 : i64}) kernel
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"16",
           "Alignment (bytes) the runtime guarantees for every buffer">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def NameKernelsPass : Pass<"kiln-name-kernels", "mlir::ModuleOp"> {
  let summary = "Give every outlined kernel its module's unique name";
  let description = [{
    Kernel outlining names every kernel after its parent function
    (`@main_kernel`) and only the enclosing `gpu.module`s get unique names.
    This pass renames each kernel to its module's name and updates the
    launches, so kernel names are unique across the artifact and PTX entry
    names say which launch they belong to.

    Outlining also drops the launches' attributes, so `kiln-map-to-gpu`
    lists each function's kernel decisions in launch order
    (`kiln.launch_kernels`); this pass puts each back on its
    `gpu.launch_func` as `kiln.kernel` (kilnc `--stats` prints them) and
    removes the list.

    Example:

    ```mlir
    gpu.module @main_kernel_3 { gpu.func @main_kernel(...) kernel { ... } }
    gpu.launch_func @main_kernel_3::@main_kernel ...
    // becomes
    gpu.module @main_kernel_3 { gpu.func @main_kernel_3(...) kernel { ... } }
    gpu.launch_func @main_kernel_3::@main_kernel_3 ...
    ```
  }];
}

def LowerKernelCallsPass : Pass<"kiln-lower-kernel-calls", "mlir::ModuleOp"> {
  let summary = "Launch precompiled kernels: kiln.call_kernel to gpu.launch_func";
  let description = [{
    After bufferization, each `kiln.call_kernel` on memrefs becomes a
    `gpu.launch_func` of its `gpu.binary` entry with the op's grid, block
    and dynamic shared memory; the kernel operands are the inputs, the
    outputs, then the scalars as `arith.constant`s of their own type. The
    module becomes a `gpu.container_module`. A call still on tensors is an
    error (it must be bufferized first).

    A split-K template GEMM (its `kiln.kernel` is a `#kiln.gemm_config`
    with `split_k` above 1) finishes in its own launch: the last split of
    each output tile sums the partials, behind a u32 semaphore per tile
    that must be zero before the launch and that the kernel leaves zero.
    Such launches get one more pointer after the call's own,
    `memref.get_global @kiln_split_k_semaphores`: a mutable, zero-initialised
    global of the largest grid's tile count (`grid.x * grid.y * grid.z /
    split_k`), shared by every split-K launch since launches run in order.
    The artifact builder makes it a zeroed buffer that the runtime zeroes
    once, at load (docs/artifact-format.md, `zeroed-buffers`).

    Example:

    ```mlir
    kiln.call_kernel @gemm0::@gemm0 ins(%a, %b : memref<64x32xbf16>, memref<32x16xbf16>)
        outs(%c : memref<64x16xf32>) grid [1, 1, 1] block [128, 1, 1] scalars [64 : i32]
    // becomes
    %m = arith.constant 64 : i32
    gpu.launch_func @gemm0::@gemm0 blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%a : memref<64x32xbf16>, %b : memref<32x16xbf16>, %c : memref<64x16xf32>, %m : i32)
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::gpu::GPUDialect",
                           "mlir::memref::MemRefDialect"];
}

def ContractFloatOpsPass : Pass<"kiln-contract-float-ops", "mlir::gpu::GPUModuleOp"> {
  let summary = "Allow the code generator to fuse multiplies and adds (FMA)";
  let description = [{
    Marks every `arith.mulf`, `arith.addf` and `arith.subf` in a GPU module
    `fastmath<contract>`, so the NVPTX backend fuses a multiply feeding an
    add into one `fma.rn` instruction: one rounding instead of two, one
    instruction instead of two in every multiply-accumulate loop. This is
    what CUDA compilers do by default (`nvcc --fmad=true`); without it the
    backend writes `mul.rn`/`add.rn`, which `ptxas` must not fuse. Other
    fast-math flags an op has are kept; host code is not touched.

    Example:

    ```mlir
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    // becomes
    %p = arith.mulf %a, %b fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

#endif // KILN_CONVERSION_PASSES_TD
