//===- TrainingCompile.cpp - --train: two entry points, one artifact ------===//
//
// The module after kiln-optimizer holds @train_step, @eval, the weight
// globals and a kiln.training attribute with the flat layout of the
// trainable weights. Each entry point is compiled in a clone of its own, so
// the pipeline (which packs one host function) needs no change; template
// kernels of @eval whose names another entry point already uses are renamed
// before packing, since kernel names are unique across an artifact.
//
//===----------------------------------------------------------------------===//

#include "TrainingCompile.h"

#include "kiln/Compiler/SeparableDims.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/runtime/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

using namespace mlir;
namespace rt = kiln::runtime;

namespace kiln {

namespace {

llvm::Error optimizerError(llvm::StringRef spec, const llvm::Twine &what) {
  return compileError(CompileError::Kind::User,
                      "--optimizer '" + spec + "': " + what);
}

/// Sets kiln-optimizer's option `key` (kebab-case) from `value`.
llvm::Error setOptimizerOption(OptimizerPassOptions &o, llvm::StringRef spec,
                               llvm::StringRef pair, llvm::StringRef key,
                               llvm::StringRef value) {
  double *real = llvm::StringSwitch<double *>(key)
                     .Case("lr", &o.lr)
                     .Case("momentum", &o.momentum)
                     .Case("beta1", &o.beta1)
                     .Case("beta2", &o.beta2)
                     .Case("eps", &o.eps)
                     .Case("weight-decay", &o.weightDecay)
                     .Case("gamma", &o.gamma)
                     .Case("min-lr", &o.minLr)
                     .Default(nullptr);
  int64_t *count = llvm::StringSwitch<int64_t *>(key)
                       .Case("warmup-steps", &o.warmupSteps)
                       .Case("step-size", &o.stepSize)
                       .Case("total-steps", &o.totalSteps)
                       .Default(nullptr);
  if (key == "schedule") {
    o.schedule = value.str();
    return llvm::Error::success();
  }
  if (real && !value.getAsDouble(*real))
    return llvm::Error::success();
  if (count && !value.getAsInteger(10, *count))
    return llvm::Error::success();
  if (real || count)
    return optimizerError(spec, "'" + pair + "': '" + value +
                                    "' is not " +
                                    (real ? "a number" : "a whole number"));
  return optimizerError(
      spec, "'" + pair +
                "' is not KEY=VALUE with KEY one of lr, momentum, beta1, "
                "beta2, eps, weight_decay, schedule, warmup_steps, "
                "step_size, gamma, total_steps, min_lr");
}

/// The rank of --allreduce-dtype=powersgd:R (R from 1 to 1024); nullopt for
/// anything else.
std::optional<uint32_t> powerSgdRank(llvm::StringRef spec) {
  unsigned rank = 0;
  if (!spec.consume_front("powersgd:") || spec.getAsInteger(10, rank) ||
      rank < 1 || rank > 1024)
    return std::nullopt;
  return rank;
}

} // namespace

llvm::Expected<OptimizerPassOptions>
optimizerOptionsFor(const TrainingOptions &training,
                    llvm::StringRef precision) {
  llvm::StringRef spec = training.optimizer;
  OptimizerPassOptions options;
  auto [name, rest] = spec.split(':');
  options.optimizer = name.str();
  llvm::SmallVector<llvm::StringRef> pairs;
  if (!rest.empty())
    rest.split(pairs, ',');
  for (llvm::StringRef pair : pairs) {
    auto [key, value] = pair.split('=');
    std::string flag = key.trim().str();
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (value.empty())
      return optimizerError(
          spec, "'" + pair +
                    "' is not KEY=VALUE with KEY one of lr, momentum, beta1, "
                    "beta2, eps, weight_decay, schedule, warmup_steps, "
                    "step_size, gamma, total_steps, min_lr");
    if (llvm::Error err =
            setOptimizerOption(options, spec, pair, flag, value.trim()))
      return std::move(err);
  }
  if (training.gradClip < 0)
    return compileError(CompileError::Kind::User,
                        "--grad-clip must not be negative");
  options.gradClip = training.gradClip;
  // --loss-scale: dynamic by default with fp16, whose gradients underflow.
  std::string lossScale = training.lossScale;
  if (lossScale.empty())
    lossScale = precision == "fp16" ? "dynamic" : "none";
  llvm::StringRef value(lossScale);
  double scale = 0;
  if (lossScale == "none") {
    options.lossScale = "none";
  } else if (lossScale == "dynamic") {
    options.lossScale = "dynamic";
    options.lossScaleInit = training.lossScaleInit;
    options.lossScaleGrowthInterval = training.lossScaleGrowthInterval;
  } else if (value.consume_front("static:") && !value.getAsDouble(scale) &&
             scale > 0 && std::isfinite(scale)) {
    options.lossScale = "static";
    options.lossScaleInit = scale;
  } else {
    return compileError(CompileError::Kind::User,
                        "--loss-scale '" + lossScale +
                            "': expected dynamic, static:S with S > 0, or "
                            "none");
  }
  options.seed = training.seed;
  if (!training.dataParallel && training.bucketMb != 25)
    return compileError(CompileError::Kind::User,
                        "--bucket-mb needs --data-parallel");
  if (training.allreduceDtype != "fp32" && training.allreduceDtype != "bf16" &&
      training.allreduceDtype != "fp16" &&
      !powerSgdRank(training.allreduceDtype))
    return compileError(CompileError::Kind::User,
                        "--allreduce-dtype '" + training.allreduceDtype +
                            "': expected fp32, bf16, fp16 or powersgd:R "
                            "(R a rank from 1 to 1024)");
  if (!training.dataParallel && training.allreduceDtype != "fp32")
    return compileError(CompileError::Kind::User,
                        "--allreduce-dtype needs --data-parallel");
  if (!(training.bucketMb > 0) || !std::isfinite(training.bucketMb))
    return compileError(CompileError::Kind::User,
                        "--bucket-mb must be a positive number of MiB");
  options.dataParallel = training.dataParallel;
  if (training.shardOptimizer < 0 || training.shardOptimizer > 65536)
    return compileError(CompileError::Kind::User,
                        "--shard-optimizer=N: N is the job's number of "
                        "ranks, from 1 to 65536");
  if (training.shardOptimizer > 0 && !training.dataParallel)
    return compileError(CompileError::Kind::User,
                        "--shard-optimizer needs --data-parallel");
  if (training.shardOptimizer > 0 && training.allreduceDtype != "fp32")
    return compileError(CompileError::Kind::User,
                        "--shard-optimizer does not combine with "
                        "--allreduce-dtype (the reduce-scatter sends fp32)");
  options.shardOptimizer = training.shardOptimizer;
  if (training.dataParallel && training.shardOptimizer == 0)
    options.bucketElements =
        std::max<int64_t>(int64_t(training.bucketMb * 1024 * 1024) / 4, 1);
  return options;
}

namespace {

/// Little-endian bytes of a weight's initial value.
std::vector<uint8_t> globalBytes(ml_program::GlobalOp global) {
  Attribute value = global.getValueAttr();
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(value)) {
    ArrayRef<char> data = resource.getData();
    return std::vector<uint8_t>(data.begin(), data.end());
  }
  auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!dense)
    return {};
  ArrayRef<char> raw = dense.getRawData();
  if (!dense.isSplat())
    return std::vector<uint8_t>(raw.begin(), raw.end());
  std::vector<uint8_t> bytes;
  for (int64_t i = 0; i < dense.getNumElements(); ++i)
    bytes.insert(bytes.end(), raw.begin(), raw.end());
  return bytes;
}

/// The ONNX initializer a global was imported from (its origin's first line
/// "initializer DTYPE SHAPE NAME"), or its symbol name.
std::string weightName(ml_program::GlobalOp global) {
  if (auto origin = global->getAttrOfType<StringAttr>(
          KilnDialect::OriginAttrHelper::getNameStr())) {
    llvm::StringRef line = origin.getValue().split('\n').first;
    if (line.consume_front("initializer ")) {
      line = line.split(' ').second.split(' ').second; // dtype, shape
      if (!line.empty())
        return line.str();
    }
  }
  return global.getSymName().str();
}

/// The first value of a state argument, when kiln-optimizer gave it one
/// (`kiln.initial`, e.g. the RNG key from --seed); empty means zeros.
std::vector<uint8_t> initialStateBytes(func::FuncOp step, unsigned arg) {
  auto initial = step.getArgAttrOfType<DenseElementsAttr>(
      arg, KilnDialect::InitialAttrHelper::getNameStr());
  if (!initial)
    return {};
  ArrayRef<char> raw = initial.getRawData();
  std::vector<uint8_t> bytes(raw.begin(), raw.end());
  if (initial.isSplat() && initial.getNumElements() > 1) {
    bytes.clear();
    for (int64_t i = 0; i < initial.getNumElements(); ++i)
      bytes.insert(bytes.end(), raw.begin(), raw.end());
  }
  return bytes;
}

/// Renames kernel module `binary` (and its kernel, when it has the same
/// name) to `name`, in the PTX text and in every launch.
void renameKernelModule(ModuleOp module, gpu::BinaryOp binary,
                        llvm::StringRef name) {
  MLIRContext *ctx = module.getContext();
  std::string old = binary.getSymName().str();
  SmallVector<Attribute> objects;
  for (Attribute attr : binary.getObjects()) {
    auto object = cast<gpu::ObjectAttr>(attr);
    std::string text = object.getObject().getValue().str();
    std::string renamed;
    for (size_t pos = 0;;) {
      size_t at = text.find(old, pos);
      renamed += text.substr(pos, at == std::string::npos ? at : at - pos);
      if (at == std::string::npos)
        break;
      renamed += name.str();
      pos = at + old.size();
    }
    objects.push_back(gpu::ObjectAttr::get(
        ctx, object.getTarget(), object.getFormat(),
        StringAttr::get(ctx, renamed), object.getProperties(),
        object.getKernels()));
  }
  binary.setObjectsAttr(ArrayAttr::get(ctx, objects));
  binary.setSymName(name);
  module.walk([&](gpu::LaunchFuncOp launch) {
    if (launch.getKernelModuleName().getValue() != old)
      return;
    llvm::StringRef kernel = launch.getKernelName().getValue();
    launch.setKernelAttr(SymbolRefAttr::get(
        StringAttr::get(ctx, name),
        {FlatSymbolRefAttr::get(ctx, kernel == old ? name : kernel)}));
  });
}

/// A flat f32 state tensor of `size` elements whose segments are the
/// globals of `layout` ([{global = @g, offset = O}, ...]), initialised from
/// their values.
llvm::Expected<rt::StateSpec> flatStateSpec(ModuleOp module,
                                            llvm::StringRef name,
                                            ArrayAttr layout, int64_t size) {
  rt::StateSpec spec{name.str(), {}, {}};
  spec.initial.resize(size * 4);
  for (Attribute entry : layout) {
    auto dict = cast<DictionaryAttr>(entry);
    auto ref = dict.getAs<FlatSymbolRefAttr>("global");
    int64_t offset = dict.getAs<IntegerAttr>("offset").getInt();
    auto global = module.lookupSymbol<ml_program::GlobalOp>(ref.getAttr());
    if (!global)
      return llvm::createStringError(name + " global @" +
                                     ref.getValue().str() + " is missing");
    auto type = cast<RankedTensorType>(global.getType());
    std::vector<uint8_t> bytes = globalBytes(global);
    if (bytes.size() != size_t(type.getNumElements()) * 4 ||
        offset + type.getNumElements() > size)
      return llvm::createStringError(name + " global @" +
                                     ref.getValue().str() +
                                     " has no f32 initial value");
    std::copy(bytes.begin(), bytes.end(), spec.initial.begin() + offset * 4);
    spec.segments.push_back(
        {weightName(global), uint64_t(offset),
         rt::Shape(type.getShape().begin(), type.getShape().end())});
  }
  return spec;
}

} // namespace

namespace {

/// The PowerSGD matrices of a data-parallel artifact's buckets: each
/// weight of `layout` with at least two dims, as [d0, d1 x ...], whose
/// smaller side exceeds `rank` (a rank-r approximation of a matrix with
/// min(rows, cols) <= r sends no fewer values than the matrix itself, so
/// those and the 1-D weights, biases and norms, stay exact, as PyTorch's
/// powerSGD_hook does). A bucket with such a matrix becomes an
/// all-reduce-powersgd step; the others stay all-reduce-mean.
llvm::Expected<std::vector<rt::PowerSgdMatrix>>
powerSgdMatrices(ModuleOp module, ArrayAttr layout, uint32_t rank,
                 std::vector<rt::CollectiveStep> &buckets,
                 ArrayRef<uint64_t> flatOffsets) {
  std::vector<rt::PowerSgdMatrix> matrices;
  for (Attribute entry : layout) {
    auto dict = cast<DictionaryAttr>(entry);
    uint64_t offset = dict.getAs<IntegerAttr>("offset").getInt();
    auto global = module.lookupSymbol<ml_program::GlobalOp>(
        dict.getAs<FlatSymbolRefAttr>("global").getAttr());
    if (!global)
      return llvm::createStringError("--allreduce-dtype=powersgd: a weight's "
                                     "global is missing");
    auto type = cast<RankedTensorType>(global.getType());
    if (type.getRank() < 2 || !type.hasStaticShape())
      continue;
    uint64_t rows = type.getDimSize(0);
    uint64_t cols = type.getNumElements() / std::max<int64_t>(rows, 1);
    if (std::min(rows, cols) <= rank)
      continue;
    for (size_t i = 0; i < buckets.size(); ++i)
      if (offset >= flatOffsets[i] &&
          offset < flatOffsets[i] + buckets[i].elementCount) {
        buckets[i].kind = rt::CollectiveKind::AllReducePowerSgd;
        matrices.push_back({uint32_t(i),
                            offset - flatOffsets[i] + buckets[i].elementOffset,
                            rows, cols});
      }
  }
  std::sort(matrices.begin(), matrices.end(),
            [](const rt::PowerSgdMatrix &a, const rt::PowerSgdMatrix &b) {
              return std::tie(a.step, a.elementOffset) <
                     std::tie(b.step, b.elementOffset);
            });
  return matrices;
}

/// The artifact of a module kiln-optimizer has run on. Errors are plain
/// strings; compileTraining adds the file and the first diagnostic.
/// The last launch of `entry` that passes the arena buffer at
/// `arenaOffset` (kernels take whole buffers, and an output's buffer is
/// nobody else's from its first write on, so for an output only written
/// that is its last writer), if any.
std::optional<uint32_t> lastLaunchOf(const rt::Artifact &artifact,
                                     const rt::EntryPoint &entry,
                                     uint64_t arenaOffset) {
  std::optional<uint32_t> last;
  for (uint32_t i = entry.firstLaunch;
       i < entry.firstLaunch + entry.launchCount; ++i) {
    const rt::Launch &launch = artifact.launches[i];
    const rt::Kernel &kernel = artifact.kernels[launch.kernel];
    for (size_t p = 0; p < kernel.params.size() && p < launch.args.size(); ++p)
      if (kernel.params[p].kind == rt::ParamKind::ArenaPointer &&
          launch.args[p] == arenaOffset)
        last = i;
  }
  return last;
}

/// The gradient buckets of a data-parallel artifact, as kiln-optimizer
/// made them (`kiln.training`'s `buckets`: PyTorch DDP's grouping, from
/// the last weight to the first): one all-reduce step each, over its
/// state (`grad`, or `grad.k` when there are several), after the launch of
/// @train_step that writes its last element. `flatOffsets` receives where
/// each bucket starts in the flat gradients.
llvm::Expected<std::vector<rt::CollectiveStep>>
gradientBuckets(const rt::Artifact &artifact, ArrayAttr list,
                rt::CollectiveKind kind, std::vector<uint64_t> &flatOffsets) {
  const rt::EntryPoint *step = artifact.findEntryPoint("train_step");
  if (!step || step->launchCount == 0)
    return llvm::createStringError("--data-parallel: train_step has no "
                                   "launches");
  std::vector<rt::CollectiveStep> buckets;
  for (Attribute attr : list) {
    auto bucket = cast<DictionaryAttr>(attr);
    StringRef name = bucket.getAs<StringAttr>("state").getValue();
    uint32_t state = 0;
    while (state < artifact.state.size() && artifact.state[state].name != name)
      ++state;
    const rt::StateUpdate *update = nullptr;
    for (const rt::StateUpdate &u : step->updates)
      if (u.state == state)
        update = &u;
    if (!update)
      return llvm::createStringError("--data-parallel: train_step does not "
                                     "write the gradient state '" +
                                     name.str() + "'");
    rt::CollectiveStep collective;
    collective.kind = kind;
    collective.state = state;
    collective.elementOffset = 0;
    collective.elementCount = bucket.getAs<IntegerAttr>("count").getInt();
    // A bucket no launch writes (its gradients are constants) is complete
    // from the start; after the first launch is the earliest place.
    collective.afterLaunch =
        lastLaunchOf(artifact, *step,
                     artifact.outputs[update->output].arenaOffset)
            .value_or(step->firstLaunch);
    buckets.push_back(collective);
    flatOffsets.push_back(bucket.getAs<IntegerAttr>("offset").getInt());
  }
  return buckets;
}

/// ZeRO stage 1 (--shard-optimizer=N): the `shard-optimizer` section and
/// the collective steps. kiln-optimizer made @train_update work on S =
/// ceil(size / N) elements (`grad.shard`, `params.shard`, `opt.m`, ...)
/// and padded `grad` to N x S. Each bucket is the same columns [c, c + k)
/// of every rank's shard (N x k elements, at most `bucketBytes`), so one
/// reduce-scatter gives each rank exactly its columns: a reduce-scatter-mean
/// step per bucket after @train_step, an all-gather step per bucket after
/// @train_update.
llvm::Error shardOptimizerSteps(rt::Artifact &artifact, int64_t shards,
                                uint64_t bucketBytes) {
  auto stateIndex = [&](llvm::StringRef name) -> std::optional<uint32_t> {
    for (uint32_t i = 0; i < artifact.state.size(); ++i)
      if (artifact.state[i].name == name)
        return i;
    return std::nullopt;
  };
  std::optional<uint32_t> grad = stateIndex("grad"),
                          gradShard = stateIndex("grad.shard"),
                          params = stateIndex("params"),
                          paramsShard = stateIndex("params.shard");
  const rt::EntryPoint *step = artifact.findEntryPoint("train_step");
  const rt::EntryPoint *update = artifact.findEntryPoint("train_update");
  if (!grad || !gradShard || !params || !paramsShard || !step || !update ||
      step->launchCount == 0 || update->launchCount == 0)
    return llvm::createStringError(
        "--shard-optimizer: the artifact lacks a state (grad, grad.shard, "
        "params, params.shard) or the launches of train_step/train_update");
  rt::ShardOptimizerConfig config;
  config.shards = uint32_t(shards);
  config.gradShard = *gradShard;
  config.paramsShard = *paramsShard;
  if (std::optional<uint32_t> norm = stateIndex("grad.sqnorm"))
    config.squaredNorm = *norm;
  for (llvm::StringRef name : {"opt.m", "opt.v"})
    if (std::optional<uint32_t> index = stateIndex(name))
      config.sharded.push_back(*index);
  std::optional<uint64_t> shardBytes =
      rt::tensorByteSize(rt::DType::F32, artifact.state[*gradShard].shape);
  if (!shardBytes || *shardBytes == 0)
    return llvm::createStringError("--shard-optimizer: state grad.shard has "
                                   "no static size");
  uint64_t shard = *shardBytes / 4;
  uint64_t columns = std::max<uint64_t>(bucketBytes / 4 / uint64_t(shards), 1);
  uint32_t afterStep = step->firstLaunch + step->launchCount - 1;
  uint32_t afterUpdate = update->firstLaunch + update->launchCount - 1;
  std::vector<rt::CollectiveStep> gathers;
  for (uint64_t first = 0; first < shard; first += columns) {
    rt::CollectiveStep bucket;
    bucket.kind = rt::CollectiveKind::ReduceScatterMean;
    bucket.state = *grad;
    bucket.elementOffset = first;
    bucket.elementCount = std::min(columns, shard - first);
    bucket.afterLaunch = afterStep;
    artifact.collectives.push_back(bucket);
    bucket.kind = rt::CollectiveKind::AllGather;
    bucket.state = *params;
    bucket.afterLaunch = afterUpdate;
    gathers.push_back(bucket);
  }
  llvm::append_range(artifact.collectives, gathers);
  artifact.shardOptimizer = std::move(config);
  return llvm::Error::success();
}

llvm::Expected<rt::Artifact>
compileTrainingArtifact(ModuleOp module, const PipelineOptions &pipeline,
                        const ArtifactOptions &artifactOptions,
                        const TrainingOptions &trainingOptions,
                        const llvm::StringMap<SeparableDims> &entryDims,
                        PhaseRunner &runner) {
  auto training = module->getAttrOfType<DictionaryAttr>(
      KilnDialect::TrainingAttrHelper::getNameStr());
  if (!training)
    return llvm::createStringError("the module has no kiln.training layout "
                                   "(kiln-optimizer did not run)");
  auto layout = training.getAs<ArrayAttr>("layout");
  auto size = training.getAs<IntegerAttr>("size");
  if (!layout || !size)
    return llvm::createStringError("kiln.training lacks layout or size");

  // The initial params and the weight each segment of them is.
  llvm::Expected<rt::StateSpec> params =
      flatStateSpec(module, "params", layout, size.getInt());
  if (!params)
    return params.takeError();
  std::vector<rt::StateSpec> specs = {*params};
  // Batch norms' running statistics: each segment an ONNX initializer too,
  // so checkpoints and --export carry them like the weights.
  if (auto statsLayout = training.getAs<ArrayAttr>("stats_layout")) {
    auto statsSize = training.getAs<IntegerAttr>("stats_size");
    if (!statsSize)
      return llvm::createStringError("kiln.training lacks stats_size");
    llvm::Expected<rt::StateSpec> stats =
        flatStateSpec(module, "bn.stats", statsLayout, statsSize.getInt());
    if (!stats)
      return stats.takeError();
    specs.push_back(std::move(*stats));
  }
  // Every other state train_step reads (optimizer moments, the step
  // counter, the loss scale, ...), in argument order; zeros unless the
  // argument carries a `kiln.initial` value.
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return llvm::createStringError("the module has no @train_step");
  // With --data-parallel, @train_update's too (the gradients `grad`), and
  // with --shard-optimizer @train_grad_norm's.
  auto update = module.lookupSymbol<func::FuncOp>("train_update");
  auto gradNorm = module.lookupSymbol<func::FuncOp>("train_grad_norm");
  llvm::StringSet<> listed = {"params", "bn.stats"};
  for (func::FuncOp func : {step, gradNorm, update}) {
    if (!func)
      continue;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto state = func.getArgAttrOfType<StringAttr>(
          i, KilnDialect::StateAttrHelper::getNameStr());
      if (!state || !listed.insert(state.getValue()).second)
        continue;
      specs.push_back(
          {state.getValue().str(), initialStateBytes(func, i), {}});
    }
  }
  // A state only written (--shard-optimizer's padded `grad`, which the
  // runtime reduce-scatters): zeros, kept where train_step leaves it.
  for (func::FuncOp func : {step, gradNorm, update}) {
    if (!func)
      continue;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto state = func.getResultAttrOfType<StringAttr>(
          i, KilnDialect::StateAttrHelper::getNameStr());
      if (state && listed.insert(state.getValue()).second)
        specs.push_back({state.getValue().str(), {}, {}});
    }
  }

  std::vector<rt::EntryPointArtifact> parts;
  llvm::StringSet<> kernelModules;
  SmallVector<llvm::StringRef> entries = {"train_step"};
  if (gradNorm)
    entries.push_back("train_grad_norm");
  if (update)
    entries.push_back("train_update");
  entries.push_back("eval");
  for (llvm::StringRef entry : entries) {
    OwningOpRef<ModuleOp> copy(module.clone());
    for (auto func : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
      if (func.getSymName() != entry)
        func.erase();
    if (!copy->lookupSymbol<func::FuncOp>(entry))
      return llvm::createStringError("the module has no @" + entry.str());
    // The same phases as inference, named after the entry point in
    // progress and timing ("train_step graph").
    // Size buckets are an inference feature: a training step's launches
    // run their compiled grids (docs/runtime.md "Size buckets").
    PipelineOptions entryPipeline = pipeline;
    entryPipeline.sizeBuckets = "off";
    if (failed(runner.runPhases(*copy, Phase::Kiln, Phase::Ptx, entryPipeline,
                                (entry + " ").str())))
      return llvm::createStringError("compiling @" + entry.str() + " failed");
    for (auto binary :
         llvm::make_early_inc_range(copy->getOps<gpu::BinaryOp>())) {
      if (kernelModules.contains(binary.getSymName()))
        renameKernelModule(*copy, binary,
                           (entry + "_" + binary.getSymName()).str());
      kernelModules.insert(binary.getSymName());
    }
    ArtifactOptions options = artifactOptions;
    options.function = entry.str();
    runner.startPhase((entry + (options.ptxasPath.empty()
                                    ? " artifact"
                                    : " artifact (ptxas)"))
                          .str());
    std::optional<TimingScope> timing =
        runner.timePhase((entry + " artifact").str());
    llvm::Expected<rt::Artifact> built = buildArtifact(*copy, options);
    timing.reset();
    if (!built)
      return llvm::createStringError("@" + entry.str() + ": " +
                                     llvm::toString(built.takeError()));
    // kilnc --dim: which inputs follow a symbol, and the size masks the
    // runtime fills (combineEntryPoints joins the entry points' symbols).
    if (auto dims = entryDims.find(entry); dims != entryDims.end())
      attachSymbolicDims(dims->second, *built);
    parts.push_back({entry.str(), std::move(*built)});
  }
  rt::Expected<rt::Artifact> combined =
      rt::combineEntryPoints(std::move(parts), specs);
  if (!combined)
    return llvm::createStringError(combined.error().message());
  rt::Artifact artifact = combined.take();
  if (update) {
    rt::CollectiveKind kind =
        trainingOptions.allreduceDtype == "bf16"
            ? rt::CollectiveKind::AllReduceMeanBf16
        : trainingOptions.allreduceDtype == "fp16"
            ? rt::CollectiveKind::AllReduceMeanF16
            : rt::CollectiveKind::AllReduceMean;
    std::vector<uint64_t> flatOffsets;
    if (trainingOptions.shardOptimizer > 0) {
      if (llvm::Error err = shardOptimizerSteps(
              artifact, trainingOptions.shardOptimizer,
              uint64_t(trainingOptions.bucketMb * 1024 * 1024)))
        return std::move(err);
    } else {
      auto list = training.getAs<ArrayAttr>("buckets");
      if (!list)
        return llvm::createStringError("kiln.training lacks the gradient "
                                       "buckets (kiln-optimizer)");
      llvm::Expected<std::vector<rt::CollectiveStep>> buckets =
          gradientBuckets(artifact, list, kind, flatOffsets);
      if (!buckets)
        return buckets.takeError();
      artifact.collectives = std::move(*buckets);
    }
    if (std::optional<uint32_t> rank =
            powerSgdRank(trainingOptions.allreduceDtype)) {
      llvm::Expected<std::vector<rt::PowerSgdMatrix>> matrices =
          powerSgdMatrices(module, layout, *rank, artifact.collectives,
                           flatOffsets);
      if (!matrices)
        return matrices.takeError();
      // No weight large enough to compress: a plain fp32 artifact.
      if (!matrices->empty())
        artifact.powerSgd = {*rank, trainingOptions.seed,
                             std::move(*matrices)};
    }
    if (rt::Error err = rt::verifyArtifact(artifact))
      return llvm::createStringError(err.message());
  }
  return artifact;
}

} // namespace

llvm::Expected<CompileResult>
compileTraining(const CompileOptions &options, OwningOpRef<ModuleOp> module,
                const ArtifactOptions &artifactOptions, PhaseRunner &runner) {
  auto userError = [](const llvm::Twine &message) {
    return compileError(CompileError::Kind::User, message);
  };
  // --emit=kiln prints the module after kiln-optimizer (train_step and eval
  // in kiln IR); the later phases run per entry point.
  bool printKiln = options.stopAfter == Phase::Kiln;
  if (options.stripWeights || (options.stopAfter && !printKiln))
    return userError("--train does not combine with --strip-weights or "
                     "--emit other than kiln yet");
  // A device-side loop (a Loop with a run-time trip count or condition)
  // has no gradient rule: backpropagation through it would store every
  // iteration's values, a number known only at run time.
  for (auto func : module->getOps<func::FuncOp>())
    if (deviceLoopStateCount(func)) {
      std::string node = "a Loop";
      module->walk([&](func::CallOp call) {
        if (call.getCallee() == func.getSymName())
          if (auto name = dyn_cast<NameLoc>(call.getLoc()))
            node = "node '" + name.getName().str() + "' (Loop)";
      });
      return userError(options.input + ": " + node +
                       " runs on the device (its trip count or condition is "
                       "only known at run time): training through it is not "
                       "supported; give it a constant trip count of at most "
                       "1024 so that it unrolls");
    }
  llvm::Expected<OptimizerPassOptions> optimizer =
      optimizerOptionsFor(options.training, options.pipeline.precision);
  if (!optimizer)
    return optimizer.takeError();
  PassManager pm = PassManager::on<ModuleOp>(&runner.getContext());
  // kilnc --dim: a batch smaller than compiled runs padded, as inference
  // does (SeparableDims.h). @train_grad is analysed once its norms are in
  // training form and the loss is appended, before the reverse sweep, so
  // that the size masks (a keep mask and max / n on the loss's mean over
  // the batch, on batch norms' statistics) are differentiated with the
  // forward graph; @main (eval) is analysed as inference is. Keyed by the
  // entry point each becomes.
  llvm::StringMap<SeparableDims> entryDims;
  // The loss and gradients (@train_grad), unless a .mlir input has them.
  if (!module->lookupSymbol<func::FuncOp>("train_grad")) {
    TrainingGradientOptions gradient = options.training.gradient;
    gradient.gradientsAsMain = false;
    gradient.lossSeedArgument = optimizer->lossScale != "none";
    if ((*module)->hasAttr(KilnDialect::DimRangesAttrHelper::getNameStr()))
      gradient.forwardHook = [&](func::FuncOp grad, Value) {
        ModuleOp m = grad->getParentOfType<ModuleOp>();
        for (auto [function, entry] :
             {std::pair{grad.getSymName(), StringRef("train_step")},
              std::pair{StringRef("main"), StringRef("eval")}}) {
          SeparableDims dims = analyzeSeparableDims(m, function);
          insertSizeMasks(m, dims, function);
          entryDims[entry] = std::move(dims);
        }
        return success();
      };
    addTrainingGradientPasses(pm, gradient);
  }
  addTrainingStepPasses(pm, *optimizer);
  runner.startPhase("optimizer");
  std::optional<TimingScope> timing = runner.timePhase("optimizer");
  if (failed(runner.run(pm, *module)))
    return userError(options.input + ": " +
                     runner.diagnosticOr("the optimizer pass failed"));
  timing.reset();
  CompileResult result;
  if (!printKiln) {
    llvm::Expected<rt::Artifact> artifact =
        compileTrainingArtifact(*module, options.pipeline, artifactOptions,
                                options.training, entryDims, runner);
    if (!artifact) {
      std::string diagnostic = runner.diagnosticOr("");
      return userError(options.input + ": " +
                       llvm::toString(artifact.takeError()) +
                       (diagnostic.empty() ? "" : ": " + diagnostic));
    }
    result.artifact = std::move(*artifact);
  }
  if (options.stats) {
    CompileStats stats;
    if (auto report = (*module)->getAttrOfType<DictionaryAttr>(
            KilnDialect::RematReportAttrHelper::getNameStr())) {
      auto get = [&](StringRef key) -> uint64_t {
        auto attr = report.getAs<IntegerAttr>(key);
        return attr ? attr.getInt() : 0;
      };
      stats.remat = CompileStats::Remat{get("kept"), get("kept_bytes"),
                                        get("recomputed"),
                                        get("recomputed_bytes")};
    }
    // The joined symbols, and per symbol the nodes each entry point masks
    // (every training launch runs its compiled grid).
    if (result.artifact) {
      stats.symbolicDims = result.artifact->symbolicDims;
      for (size_t s = 0; s < stats.symbolicDims.size(); ++s) {
        CompileStats::ScaledLaunches counts;
        counts.total = result.artifact->launches.size();
        counts.readsPadding = true;
        for (llvm::StringRef entry : {"train_step", "eval"}) {
          auto dims = entryDims.find(entry);
          if (dims == entryDims.end())
            continue;
          for (const SeparableDims::MaskSite &site : dims->second.maskSites)
            if (site.symbol == s)
              counts.maskedNodes.push_back(entry.str() + ": " +
                                           describeMaskSite(site));
        }
        stats.scaledLaunches.push_back(std::move(counts));
      }
    }
    result.stats = std::move(stats);
  }
  result.module = std::move(module);
  return std::move(result);
}

} // namespace kiln
