//===- Artifact.h - The .kiln artifact: model, reader, writer ---*- C++ -*-===//
//
// Everything the runtime needs to run a compiled model, and nothing it has to
// compile: the input/output signature, the weights, one PTX kernel (plus an
// optional cubin) per fusion region, the launch list and the static memory
// plan. The compiler fills an Artifact and calls writeArtifact; the runtime
// calls readArtifact, which trusts nothing in the file without checking it.
// The byte layout is in docs/artifact-format.md.
//
// Stability: readArtifact, parseArtifact and the signature fields of
// Artifact (inputs, outputs, target, compilerVersion) are stable (as
// Runtime.h); the rest of Artifact mirrors the file format and changes with
// it. The file format's own compatibility rules are in
// docs/artifact-format.md ("Versioning").
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_H

#include "kiln/runtime/DType.h"
#include "kiln/runtime/Error.h"
#include "kiln/runtime/HostSteps.h"
#include "kiln/runtime/Npy.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// The format version this code writes. It reads every 1.x file; see
/// "Versioning" in docs/artifact-format.md.
constexpr uint32_t kArtifactFormatMajor = 1;
constexpr uint32_t kArtifactFormatMinor = 12;
/// The oldest minor version this code still reads (it reads them all).
constexpr uint32_t kArtifactFormatOldestMinor = 0;

/// Every weight starts at a multiple of this in the file (and in the weights
/// region on the device).
constexpr uint64_t kWeightAlignment = 64;
/// Every buffer of the memory plan starts at a multiple of this in the arena.
constexpr uint64_t kArenaAlignment = 256;

/// Immutable bytes: either owned, or a view into memory (a mapped file) that
/// stays alive as long as any Blob refers to it. Copies share the bytes.
class Blob {
public:
  Blob() = default;
  static Blob copyOf(const void *data, size_t size);
  static Blob fromVector(std::vector<uint8_t> bytes);
  /// Bytes owned by `keepAlive`, which is held as long as the Blob lives.
  static Blob view(std::shared_ptr<const void> keepAlive, const uint8_t *data,
                   size_t size);

  /// `size` bytes from `offset` (which must lie inside), sharing ownership.
  Blob slice(size_t offset, size_t size) const;

  const uint8_t *data() const { return ptr; }
  size_t size() const { return length; }
  bool empty() const { return length == 0; }

  /// Zero-pads to a multiple of `alignment`, appends the bytes and returns
  /// the offset they start at. Shared or borrowed bytes are copied first.
  uint64_t append(const void *data, size_t size, uint64_t alignment = 1);

private:
  std::shared_ptr<std::vector<uint8_t>> owned;
  std::shared_ptr<const void> keepAlive;
  const uint8_t *ptr = nullptr;
  size_t length = 0;
};

/// Format 1.6, section `symbolic-dims`: a size the model leaves open
/// (kilnc --dim NAME=MIN..MAX[:OPT]). The artifact is compiled at `max`.
struct SymbolicDim {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t opt = 1;
  /// Whether every op keeps slices along this dim independent, so that a
  /// run at any size in [min, max] may pad the inputs to `max` (zeros in
  /// the tail) and slice the outputs. When false the artifact runs `max`
  /// only and `reason` says why (naming the node).
  bool separable = false;
  std::string reason;
};

/// One dimension of a signature tensor that follows a symbolic dim: its
/// size is the symbol's value times `factor` (1 for inputs; an output may
/// merge the symbol with the dims after it, as a Reshape [N, S, H] ->
/// [N*S, H] does).
struct SymbolicAxis {
  uint32_t dim = 0;
  uint32_t symbol = 0;
  uint64_t factor = 1;
};

/// A graph input or output. It lives in the arena at `arenaOffset`, inside
/// memory-plan buffer `buffer`.
struct TensorSignature {
  std::string name;
  DType dtype = DType::F32;
  /// The compiled shape (each symbolic dim at its maximum).
  Shape shape;
  uint64_t arenaOffset = 0;
  uint32_t buffer = 0;
  /// Format 1.6: the dims that follow a symbolic dim (Artifact::symbolicDims),
  /// in increasing `dim` order; empty for a static tensor.
  std::vector<SymbolicAxis> symbolicAxes;
};

/// Format 1.9, section `signature-groups`: a sequence or optional graph
/// input or output of the model, which the compiler made a fixed number of
/// signature tensors (kilnc --sequence NAME=N, --absent NAME). A sequence's
/// tensors are named NAME[0] ... NAME[N-1] (sequenceElementName), a present
/// optional tensor is NAME; an absent optional has none.
enum class SignatureGroupKind : uint32_t {
  Sequence = 1,
  Optional = 2,
  OptionalSequence = 3,
};

/// "sequence", "optional", "optional-sequence".
std::string_view signatureGroupKindName(SignatureGroupKind kind);

struct SignatureGroup {
  std::string name;
  SignatureGroupKind kind = SignatureGroupKind::Sequence;
  /// False for an optional compiled absent (then `count` is 0).
  bool present = true;
  /// Its tensors: inputs (or outputs) [first, first + count) of the
  /// signature.
  uint32_t first = 0;
  uint32_t count = 0;

  /// Whether its tensors form a sequence (bound as a list).
  bool isSequence() const {
    return kind == SignatureGroupKind::Sequence ||
           kind == SignatureGroupKind::OptionalSequence;
  }
};

/// The name of tensor `index` of sequence `name`: "name[index]".
std::string sequenceElementName(std::string_view name, size_t index);

/// A constant tensor, stored in the artifact's weight data at `offset`.
struct Weight {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t offset = 0;
  /// How the compiler made it from an ONNX initializer, one step per line
  /// ("initializer f32 64x3x7x7 conv1_w_0", "transpose 0,2,3,1", "pad L H",
  /// "reshape S", "convert bf16|f16|tf32"; docs/artifact-format.md), so
  /// bindWeights can rebuild it from new initializer values. Empty when the
  /// weight was computed from more than one value and cannot be rebound.
  std::string origin;
};

/// An initializer the compiler built into the kernels as a constant (too
/// small to be a weight, or needed at compile time): bindWeights checks that
/// a new value given for it is unchanged, since it cannot be rebound.
struct InlinedInitializer {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;
};

/// What one kernel parameter is, and so how a launch's value for it becomes
/// the 4 or 8 bytes the kernel receives.
enum class ParamKind : uint8_t {
  /// A device pointer: arena base + the launch's value (a byte offset).
  ArenaPointer = 1,
  /// A device pointer: weights base + the launch's value (a byte offset).
  WeightsPointer = 2,
  /// A 32-bit immediate (the low 32 bits of the launch's value).
  Scalar32 = 3,
  /// A 64-bit immediate.
  Scalar64 = 4,
  /// Format 1.4: a 128-byte TMA tensor map (CUDA's `const __grid_constant__
  /// CUtensorMap`, `.param .align 64 .b8 name[128]` in the PTX), which the
  /// runtime encodes at load time from Artifact::tensorMaps[launch's value].
  TensorMap = 5,
};

/// "arena-pointer", "weights-pointer", "scalar32", "scalar64", "tensor-map".
std::string_view paramKindName(ParamKind kind);

struct KernelParam {
  ParamKind kind = ParamKind::ArenaPointer;
  /// For messages and tools only; may be empty.
  std::string name;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

/// What ptxas reported when it assembled a kernel (`ptxas -v`): the inputs
/// of an occupancy estimate (Profile.h). Format 1.2, section
/// `kernel-resources`.
struct KernelResources {
  uint32_t registersPerThread = 0;
  /// Shared memory the kernel declares statically (`.shared` variables);
  /// the launch's dynamic shared memory comes on top.
  uint32_t staticSharedBytes = 0;
  /// Local memory per thread: the stack frame, spills included.
  uint32_t stackFrameBytes = 0;
  uint32_t spillStoreBytes = 0;
  uint32_t spillLoadBytes = 0;
};

/// Format 1.9, section `launch-scales`: launch `launch` does the work of
/// slices 0..N-1 along symbolic dim `symbol` (size N this run) in its first
/// ceil(N * numerator / denominator) blocks along grid dimension `gridDim`
/// (0 x, 1 y, 2 z); the blocks after them only compute padded slices, so
/// the runtime launches that many (never more than the kernel's compiled
/// count). At N = max the count is the compiled one. A launch without a
/// record runs its compiled grid at every size.
struct LaunchScale {
  uint32_t launch = 0;
  uint32_t symbol = 0;
  uint32_t gridDim = 0;
  uint64_t numerator = 1;
  uint64_t denominator = 1;
};

/// Format 1.11, section `launch-guards`: launch `launch` runs only when the
/// size of symbolic dim `symbol` this run lies in [min, max]; otherwise the
/// runtime skips it. kilnc emits a GEMM or convolution whose rows follow
/// the symbol as one launch per size bucket (kilnc --size-buckets), each
/// computing the whole result into the same buffer with tiles chosen for
/// its bucket, and guards them so that exactly one runs at every size
/// (docs/runtime.md "Size buckets"). Records are in increasing launch
/// order, one per launch at most.
struct LaunchGuard {
  uint32_t launch = 0;
  uint32_t symbol = 0;
  int64_t min = 0;
  int64_t max = 0;
};

/// Format 1.12, section `control-regions`: device-side control flow over
/// the launch list (an ONNX Loop whose trip count or condition is known
/// only at run time). A While region repeats launches [firstLaunch,
/// firstLaunch + launchCount) as long as the byte at arena offset
/// `flagOffset` (inside memory-plan buffer `flagBuffer`) is nonzero, testing
/// it before every iteration, the first included; the launches themselves
/// rewrite the flag (the loop body computes `cond and i + 1 < M`). Regions
/// are listed by increasing firstLaunch and nest properly (a region inside
/// another lies wholly within its range; an outer region comes before the
/// regions it contains). The session reads the flag byte back from the
/// device before each iteration (on cuda a synchronous read, so such an
/// artifact is not captured into a CUDA graph; conditional WHILE graph
/// nodes are the next step): docs/runtime.md "Device-side loops".
enum class ControlRegionKind : uint32_t {
  While = 1,
};
/// "while" (or "unknown").
std::string_view controlRegionKindName(ControlRegionKind kind);
struct ControlRegion {
  ControlRegionKind kind = ControlRegionKind::While;
  uint32_t firstLaunch = 0;
  uint32_t launchCount = 0;
  uint32_t flagBuffer = 0;
  uint64_t flagOffset = 0;
};

/// Format 1.10, section `size-masks`: signature input `input` is not bound
/// by the user; the runtime fills it for each run from the size n of
/// symbolic dim `symbol`. It is a vector of the symbol's maximum times
/// `factor` elements (f32, f16 or bf16): 0 at positions i < n * factor, -inf
/// after them. The compiler adds it to each softmax along the symbol, so
/// the positions the runtime padded get probability 0 (docs/runtime.md
/// "Sizes at run time").
///
/// Kind KeepMask: the same vector with 1 at the valid positions and 0 at
/// the padded ones; the compiler multiplies a value by it before a sum, a
/// mean or a contraction over the symbol. Kind MeanScale: an f32 scalar the
/// runtime sets to max / n; the compiler multiplies a mean over the symbol
/// by it, which turns the mean over the maximum's count into the mean over
/// the n given slices.
enum class SizeMaskKind : uint32_t {
  AdditiveMask = 0,
  KeepMask = 1,
  MeanScale = 2,
};
struct SizeMask {
  uint32_t input = 0;
  uint32_t symbol = 0;
  SizeMaskKind kind = SizeMaskKind::AdditiveMask;
  uint64_t factor = 1;
};

/// One GPU kernel: its PTX (always present, JIT-compiled when no cubin
/// matches the device), an optional cubin for one sm, its launch geometry
/// and its parameter layout.
struct Kernel {
  /// The PTX `.entry` name.
  std::string name;
  std::string ptx;
  std::vector<uint8_t> cubin;
  /// The sm the cubin was built for (e.g. 90); 0 when there is no cubin.
  uint32_t cubinSm = 0;
  Dim3 grid;
  Dim3 block;
  uint32_t dynamicSharedBytes = 0;
  std::vector<KernelParam> params;
  /// Registers and static shared memory, when the compiler assembled the
  /// kernel (absent in artifacts before format 1.2 and without ptxas).
  std::optional<KernelResources> resources;
};

/// One kernel launch: the kernel's index and one value per parameter.
struct Launch {
  uint32_t kernel = 0;
  std::vector<uint64_t> args;
};

/// The most dimensions a tensor map has (CUDA's limit).
constexpr uint32_t kTensorMapMaxRank = 5;

/// Format 1.4, section `tensor-maps`: how the runtime builds one TMA tensor
/// map (cuTensorMapEncodeTiled's arguments, docs/artifact-format.md). A
/// launch passes it as a ParamKind::TensorMap argument whose value is the
/// record's index; the map's global address is the launch's value of
/// parameter `addressParam` (a pointer parameter of the same kernel), so a
/// record serves every launch of its kernel. Dimension 0 is the innermost,
/// contiguous one; the enum fields hold CUDA's CUtensorMap* values.
struct TensorMapRecord {
  uint32_t addressParam = 0;
  DType dtype = DType::BF16;
  uint32_t rank = 2;
  /// Elements per dimension (1 to 2^32).
  uint64_t globalDims[kTensorMapMaxRank] = {};
  /// Bytes between consecutive indices of dimensions 1..rank-1 (multiples
  /// of 16, below 2^40).
  uint64_t globalStrides[kTensorMapMaxRank - 1] = {};
  /// The box one copy moves (1 to 256 elements a dimension).
  uint32_t boxDims[kTensorMapMaxRank] = {};
  /// Elements between box points a dimension (1 to 8; 1 = dense).
  uint32_t elementStrides[kTensorMapMaxRank] = {1, 1, 1, 1, 1};
  /// CUtensorMapInterleave: 0 none.
  uint32_t interleave = 0;
  /// CUtensorMapSwizzle: 0 none, 1 32 B, 2 64 B, 3 128 B.
  uint32_t swizzle = 0;
  /// CUtensorMapL2promotion: 0 none, 1 64 B, 2 128 B, 3 256 B.
  uint32_t l2Promotion = 0;
  /// CUtensorMapFloatOOBfill: 0 zeros, 1 NaN (FMA requests).
  uint32_t oobFill = 0;
};

/// One buffer of the static memory plan, live from launch `firstUse` to
/// launch `lastUse` (inclusive).
struct ArenaBuffer {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t firstUse = 0;
  uint32_t lastUse = 0;
};

struct ArenaLayout {
  uint64_t arenaSize = 0;
  std::vector<ArenaBuffer> buffers;
};

/// Format 1.3, section `training`: after an entry point's launches, the
/// runtime copies output `output` over state tensor `state` (the new weights
/// and optimizer state a train step computed).
struct StateUpdate {
  uint32_t output = 0;
  uint32_t state = 0;
};

/// Format 1.5, section `collectives`: what a collective step does.
enum class CollectiveKind : uint32_t {
  /// Every rank's elements summed, divided by the world size, written back
  /// on every rank (data-parallel gradient averaging).
  AllReduceMean = 1,
  /// The same mean with bf16 (2) or f16 (3) values on the wire, f32 sums
  /// and per-rank error feedback (kilnc --allreduce-dtype; Collective.h
  /// allReduceMeanCompressed).
  AllReduceMeanBf16 = 2,
  AllReduceMeanF16 = 3,
  /// Format 1.7: the same mean through PowerSGD low-rank compression with
  /// error feedback (kilnc --allreduce-dtype=powersgd:R): the bucket's
  /// matrices (Artifact::powerSgd) go as rank-R factors, the rest of the
  /// bucket in f32 (Collective.h allReduceMeanPowerSgd).
  AllReducePowerSgd = 4,
  /// Format 1.8, ZeRO stage 1 (kilnc --shard-optimizer=N; section
  /// `shard-optimizer`): elements [offset, offset + count) of every rank's
  /// shard of `state` (the gradients padded to N x S elements, rank r's
  /// shard its elements [r*S, (r+1)*S)) summed across the ranks, divided by
  /// the world size, and written to the same elements of this rank's
  /// `grad.shard` (Communicator::reduceScatterMean).
  ReduceScatterMean = 5,
  /// Format 1.8, ZeRO stage 1: elements [offset, offset + count) of every
  /// rank's `params.shard` gathered into the same elements of each rank's
  /// shard of `state` (the weights; elements past its end are dropped).
  AllGather = 6,
};

/// "all-reduce-mean", "all-reduce-mean-bf16", "all-reduce-mean-f16",
/// "all-reduce-powersgd", "reduce-scatter-mean", "all-gather".
std::string_view collectiveKindName(CollectiveKind kind);

/// One collective step of a data-parallel training artifact (kilnc --train
/// --data-parallel): `elementCount` elements of state tensor `state` from
/// element `elementOffset` (one gradient bucket), reduced across the ranks
/// once launch `afterLaunch` has run. Steps run in list order (the order
/// the backward pass completes the buckets); every step of an entry point
/// finishes before the entry point returns.
struct CollectiveStep {
  CollectiveKind kind = CollectiveKind::AllReduceMean;
  uint32_t state = 0;
  uint64_t elementOffset = 0;
  uint64_t elementCount = 0;
  uint32_t afterLaunch = 0;
};

/// Format 1.7, section `powersgd`: one gradient the all-reduce-powersgd step
/// `step` compresses: `rows` x `cols` f32 elements (a weight of shape
/// [d0, d1, ...] as [d0, d1 x ...]) from element `elementOffset` of the
/// step's state tensor, inside the step's range.
struct PowerSgdMatrix {
  uint32_t step = 0;
  uint64_t elementOffset = 0;
  uint64_t rows = 0;
  uint64_t cols = 0;
};

/// Format 1.7, section `powersgd`: the approximation rank, the seed of the
/// initial Q factors, and the matrices of every all-reduce-powersgd step
/// (ordered by step, then offset; they do not overlap). `rank` 0: absent.
struct PowerSgdConfig {
  uint32_t rank = 0;
  uint64_t seed = 0;
  std::vector<PowerSgdMatrix> matrices;
};

/// Format 1.8, section `shard-optimizer` (ZeRO stage 1, kilnc
/// --shard-optimizer=N): the world size the artifact was compiled for and
/// the state tensors that hold one rank's shard (S elements). `shards` 0:
/// absent.
struct ShardOptimizerConfig {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t shards = 0;
  /// This rank's averaged gradients (the reduce-scatter-mean steps' output).
  uint32_t gradShard = 0;
  /// This rank's slice of the weights, which train_update reads and
  /// updates and the all-gather steps gather.
  uint32_t paramsShard = 0;
  /// The squared gradient norm (f32 scalar): train_grad_norm writes the
  /// shard's part, the runtime the sum over the ranks that train_update
  /// reads; kNone without clipping and loss scaling.
  uint32_t squaredNorm = kNone;
  /// Optimizer state held as one shard per rank (opt.m, opt.v):
  /// checkpoints gather them whole.
  std::vector<uint32_t> sharded;
};

/// A function of a training artifact (`train_step`, `eval`): a contiguous
/// range of the launch list, the signature inputs it reads and the outputs
/// it writes (indices into Artifact::inputs / outputs), and the state it
/// replaces when it finishes.
struct EntryPoint {
  std::string name;
  uint32_t firstLaunch = 0;
  uint32_t launchCount = 0;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<StateUpdate> updates;
};

/// A combined training artifact names an entry point's signature tensors
/// `<entry>:<name>` (combineEntryPoints); this is `<name>`, the name the
/// model and the user know (a name without the prefix is returned whole).
inline std::string entryLocalName(const std::string &name) {
  return name.substr(name.find(':') + 1);
}

/// Part of a flat state tensor that is one model weight: `name` (the ONNX
/// initializer), `shape`, starting `elementOffset` elements in.
struct StateSegment {
  std::string name;
  uint64_t elementOffset = 0;
  Shape shape;
};

/// Device memory that lives across runs of a session (trainable weights,
/// optimizer state, the step counter): an arena range whose buffer is live
/// for the whole launch list, so nothing else ever shares its bytes.
struct StateTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t arenaOffset = 0;
  uint32_t buffer = 0;
  /// The initial value (exactly the tensor's bytes), or empty for zeros.
  std::vector<uint8_t> initial;
  std::vector<StateSegment> segments;
};

/// A compiled model.
struct Artifact {
  /// The format version of the file it was read from (what writeArtifact
  /// writes for a new one).
  uint32_t formatMajor = kArtifactFormatMajor;
  uint32_t formatMinor = kArtifactFormatMinor;
  std::string compilerVersion;
  /// The compiler options, as one string, for reproducing the build.
  std::string compilerOptions;
  /// The GPU architecture the PTX targets: "sm_80", "sm_90", "sm_90a", ...
  std::string target = "sm_90";

  std::vector<TensorSignature> inputs;
  std::vector<TensorSignature> outputs;
  std::vector<Weight> weights;
  /// All weights, each at its `offset`. In a stripped artifact
  /// (stripWeights) the last `strippedWeightBytes` bytes are missing: they
  /// hold weights with an origin, which bindWeights fills in.
  Blob weightData;
  uint64_t strippedWeightBytes = 0;
  std::vector<InlinedInitializer> inlinedInitializers;
  std::vector<Kernel> kernels;
  std::vector<Launch> launches;
  /// Format 1.4: the tensor maps TensorMap parameters refer to.
  std::vector<TensorMapRecord> tensorMaps;
  ArenaLayout memoryPlan;
  /// Training artifacts (format 1.3): the entry points and the persistent
  /// state. Empty for an inference artifact, whose whole launch list is one
  /// run.
  std::vector<EntryPoint> entryPoints;
  std::vector<StateTensor> state;
  /// Data-parallel training artifacts (format 1.5): the gradient buckets'
  /// collective steps. Empty otherwise.
  std::vector<CollectiveStep> collectives;
  /// Format 1.7: PowerSGD's matrices, present exactly when a collective
  /// step is all-reduce-powersgd.
  PowerSgdConfig powerSgd;
  /// Format 1.8: ZeRO stage 1, present exactly when a collective step is
  /// reduce-scatter-mean or all-gather.
  ShardOptimizerConfig shardOptimizer;
  /// Format 1.6, section `zeroed-buffers`: memory-plan buffers that must
  /// hold zeros before the first launch (split-K's per-tile semaphores,
  /// which every kernel that uses them leaves zero again). Each is live for
  /// the whole launch list, so no other buffer shares its bytes; the
  /// session zeroes them when it is created (and again after a run that
  /// did not complete every block).
  std::vector<uint32_t> zeroedBuffers;
  /// Format 1.6: the symbolic dims the signature's tensors refer to
  /// (TensorSignature::symbolicAxes). Empty: every shape is fixed.
  std::vector<SymbolicDim> symbolicDims;
  /// Format 1.9: the launches whose grid follows a symbolic dim's size, in
  /// increasing launch order, at most one per launch. Empty: every launch
  /// runs its compiled grid.
  std::vector<LaunchScale> launchScales;
  /// Format 1.11: the launches that run only at some sizes.
  std::vector<LaunchGuard> launchGuards;
  /// Format 1.12: device-side loops over ranges of the launch list.
  std::vector<ControlRegion> controlRegions;
  /// Format 1.10: the signature inputs the runtime fills from the run's
  /// sizes (SizeMask), in increasing input order. Empty: the user binds
  /// every input.
  std::vector<SizeMask> sizeMasks;
  /// The size mask input `name` is (nullptr: the user binds it).
  const SizeMask *findSizeMask(std::string_view name) const;
  /// Format 1.9: the model's sequence and optional inputs and outputs, in
  /// signature order (SignatureGroup). Empty: every input and output is a
  /// tensor of the model.
  std::vector<SignatureGroup> inputGroups;
  std::vector<SignatureGroup> outputGroups;
  /// Format 1.9, section `host-steps`: the steps on STRING tensors that run
  /// on the host before the first launch or after the last (HostSteps.h).
  /// Empty: the model has none.
  HostProgram host;

  /// Appends a weight (copying `data`, which holds exactly the tensor's
  /// bytes) at the next aligned offset of weightData and returns its index.
  Expected<uint32_t> addWeight(std::string name, DType dtype, Shape shape,
                               const void *data, uint64_t size);

  /// Lookups by name; nullptr when absent.
  const TensorSignature *findInput(std::string_view name) const;
  const TensorSignature *findOutput(std::string_view name) const;
  const SignatureGroup *findInputGroup(std::string_view name) const;
  const SignatureGroup *findOutputGroup(std::string_view name) const;

  const EntryPoint *findEntryPoint(std::string_view name) const;
  const StateTensor *findState(std::string_view name) const;

  /// The numeric sm of `target` (90 for "sm_90a"), or 0 if it is malformed.
  uint32_t targetSm() const;
};

/// Leaves out the bytes of every weight that has an origin: those weights
/// move to the end of the weight data (launch arguments follow them) and
/// `strippedWeightBytes` records their size. The result cannot run until
/// bindWeights restores them. Idempotent.
Error stripWeights(Artifact &artifact);

/// Where bindWeights reads an initializer: its values, given its name, or
/// nullopt when the source has none.
using InitializerSource = std::function<Expected<std::optional<NpyArray>>(
    const std::string &initializer)>;

/// Rebuilds every weight that has an origin from its initializer, replaying
/// the recorded steps (transpose, zero pad, reshape, conversion to bf16/f16
/// or rounding to tf32, all round-to-nearest-even), and leaves the artifact
/// complete (strippedWeightBytes 0). Each initializer's dtype and shape must
/// be the recorded ones; an error names the weight and the initializer. An
/// inlined initializer the source has a value for must be unchanged.
/// On error the artifact is unchanged.
Error bindWeights(Artifact &artifact, const InitializerSource &source);

/// Checks everything that must hold for the runtime to use an artifact
/// safely (indices, offsets and sizes in range, shapes valid, the memory plan
/// free of overlaps between live buffers, ...). The first problem found is
/// returned, naming the section and the tensor, kernel, launch or buffer.
Error verifyArtifact(const Artifact &artifact);

/// Format 1.9: the `host-steps` section against the signature (each step
/// checked by verifyHostStep; every value defined before it is read).
/// verifyArtifact calls it.
Error verifyHostProgram(const Artifact &artifact);

/// Verifies, then writes to a temporary file in the destination directory and
/// renames it over `path`: an existing file is never left half-written.
Error writeArtifact(const Artifact &artifact, const std::string &path);

/// The complete file image writeArtifact would write (for tests and tools).
Expected<std::vector<uint8_t>> serializeArtifact(const Artifact &artifact);

struct ReadOptions {
  /// Verify the checksum of the weight data too (reads every weight page).
  bool verifyWeightChecksum = true;
};

/// Maps the file read-only, checks magic, version, header, section table,
/// every section checksum, every offset and size, then verifyArtifact. The
/// returned artifact's weightData is a view into the mapping.
Expected<Artifact> readArtifact(const std::string &path,
                                const ReadOptions &options = {});

/// As readArtifact, for a complete file image held in memory. `displayName`
/// starts every error message.
Expected<Artifact> parseArtifact(const Blob &image,
                                 std::string_view displayName,
                                 const ReadOptions &options = {});

} // namespace kiln::runtime

#endif // KILN_RUNTIME_ARTIFACT_H
