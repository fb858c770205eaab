//===- kiln-train.cpp - Train a model compiled with kilnc --train ---------===//
//
//   kiln-train model.train.kiln --data x.npy --labels y.npy
//              [--val-data xv.npy --val-labels yv.npy] --epochs E
//              [--batch B] [--seed S] [--checkpoint-dir DIR] [--resume]
//              [--history loss.csv] [--device cuda|emu] [--trace FILE.json]
//   mpirun -np N kiln-train model.train.kiln ...   (kilnc --data-parallel)
//              [--collective-engine auto|mpi|nccl]
//
// Everything that can be checked before training is checked first (the
// artifact, the data against the signature, the labels' dtype, shape and
// range, NaN in the data, the checkpoint directory), so bad input is one line
// on stderr, exit status 1, and no file is written. Epochs shuffle with a
// generator seeded from --seed and the epoch, so a run resumed from an epoch
// checkpoint takes the same batches as an uninterrupted one.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Collective.h"
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Profile.h"
#include "kiln/runtime/TargetTable.h"
#include "kiln/runtime/Trainer.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <unistd.h>

using namespace kiln::runtime;
namespace fs = std::filesystem;

namespace {

constexpr const char *kUsage = R"(usage: kiln-train MODEL.train.kiln --data X.npy --labels Y.npy [options]

Trains a model compiled with kilnc --train: train_step over shuffled batches,
eval on the validation set after every epoch.

options:
  --data FILE          training inputs: N samples along the first axis
  --labels FILE        training labels: N along the first axis
  --val-data FILE      validation inputs (with --val-labels): accuracy (or
  --val-labels FILE    mean squared error) after every epoch
  --epochs E           epochs to train (default 1)
  --batch B            batch size: must be the batch the model was compiled
                       for (default: that batch)
  --seed S             shuffle seed (default 0)
  --checkpoint-dir DIR write DIR/checkpoint.safetensors after every epoch
  --resume             continue from DIR/checkpoint.safetensors
  --history FILE       loss history CSV (default DIR/loss.csv with
                       --checkpoint-dir); scripts/plot-loss.py draws it
  --export FILE        after training, write the ONNX model the artifact was
                       compiled from with the trained weights (its
                       initializers replaced) to FILE
  --predict FILE       after training, run eval on --val-data and write its
                       output for every sample to FILE (.npy)
  --onnx MODEL         the ONNX model for --export (default: the .onnx file
                       named in the artifact's compiler options)
  --device DEV         cuda (default), cuda:N, or emu
  --quiet              no progress output
  --profile            emu: after training, the host time per kernel (where
                       the emulator spends a step)
  --collective-timeout S
                       under mpirun: seconds a gradient all-reduce may wait
                       for the other ranks before this one exits with an
                       error (default 300; 0 waits forever)
  --collective-engine E
                       auto (default), mpi or nccl: the engine that averages
                       the gradients. auto: nccl on --device cuda when
                       libnccl.so.2 loads (KILN_NCCL_LIBRARY overrides the
                       path), else mpi; emu always uses mpi. nccl also runs
                       at world size 1 (a check of the engine)
  --trace FILE.json    a Chrome trace of the first step: kernels on a
                       "compute" track, gradient all-reduces on a
                       "collectives" track
  --trace-times T      modelled (default on emu: each launch's estimated
                       time from the performance model, each all-reduce's
                       from the ring cost model) or measured (default on
                       cuda: event times; on emu the emulator's host time)
  --trace-ranks N      the ranks the trace's ring models (default: the job's)
  --link-gbps G        the ring's link bandwidth in GB/s (default: the
                       target's collective_bandwidth_gbps in gpus.ini)
  --link-latency-us L  its latency per ring step (default: the target's
                       collective_latency_us)

Data parallelism: run a kilnc --train --data-parallel artifact under
`mpirun -np N`. Each rank takes its shard of every global batch of N x B
samples (B: the compiled batch), the gradients are averaged across the
ranks, every rank applies the same update; rank 0 alone prints, validates
and writes checkpoints and the history. On --device cuda rank r uses GPU
(local rank) unless --device cuda:N names one.
)";

struct Options {
  std::string model, data, labels, valData, valLabels, checkpointDir, history;
  std::string exportPath, onnxModel, predictPath;
  std::string device = "cuda";
  std::string collectiveEngine = "auto", trace, traceTimes;
  uint64_t epochs = 1, seed = 0, traceRanks = 0;
  double collectiveTimeout = 300;
  std::optional<double> linkGbps, linkLatencyUs;
  std::optional<uint64_t> batch;
  bool resume = false, quiet = false, profile = false;
};

Error usageError(const std::string &message) {
  return Error::failure(message + " (kiln-train --help)");
}

Expected<uint64_t> parseNumber(const std::string &flag,
                               const std::string &text) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || text[0] == '-')
    return usageError(flag + " '" + text + "' is not a non-negative integer");
  return static_cast<uint64_t>(value);
}

Expected<Options> parseArguments(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> Expected<std::string> {
      if (i + 1 >= argc)
        return usageError(arg + " needs a value");
      return std::string(argv[++i]);
    };
    auto set = [&](std::string &field) -> Error {
      Expected<std::string> v = value();
      if (!v)
        return v.takeError();
      field = *v;
      return Error::success();
    };
    auto setNumber = [&](uint64_t &field) -> Error {
      Expected<std::string> v = value();
      if (!v)
        return v.takeError();
      Expected<uint64_t> n = parseNumber(arg, *v);
      if (!n)
        return n.takeError();
      field = *n;
      return Error::success();
    };
    Error err;
    if (arg == "-h" || arg == "--help")
      return Error::failure("");
    else if (arg == "--data")
      err = set(options.data);
    else if (arg == "--labels")
      err = set(options.labels);
    else if (arg == "--val-data")
      err = set(options.valData);
    else if (arg == "--val-labels")
      err = set(options.valLabels);
    else if (arg == "--checkpoint-dir")
      err = set(options.checkpointDir);
    else if (arg == "--history")
      err = set(options.history);
    else if (arg == "--device")
      err = set(options.device);
    else if (arg == "--export")
      err = set(options.exportPath);
    else if (arg == "--predict")
      err = set(options.predictPath);
    else if (arg == "--onnx")
      err = set(options.onnxModel);
    else if (arg == "--epochs")
      err = setNumber(options.epochs);
    else if (arg == "--seed")
      err = setNumber(options.seed);
    else if (arg == "--collective-engine") {
      err = set(options.collectiveEngine);
      if (!err && options.collectiveEngine != "auto" &&
          options.collectiveEngine != "mpi" &&
          options.collectiveEngine != "nccl")
        return usageError("--collective-engine '" + options.collectiveEngine +
                          "' is not auto, mpi or nccl");
    } else if (arg == "--trace")
      err = set(options.trace);
    else if (arg == "--trace-times") {
      err = set(options.traceTimes);
      if (!err && options.traceTimes != "modelled" &&
          options.traceTimes != "measured")
        return usageError("--trace-times '" + options.traceTimes +
                          "' is not modelled or measured");
    } else if (arg == "--trace-ranks") {
      err = setNumber(options.traceRanks);
      if (!err && options.traceRanks == 0)
        return usageError("--trace-ranks must be at least 1");
    } else if (arg == "--link-gbps" || arg == "--link-latency-us") {
      Expected<std::string> v = value();
      if (!v)
        return v.takeError();
      char *end = nullptr;
      double number = std::strtod(v->c_str(), &end);
      bool bandwidth = arg == "--link-gbps";
      if (v->empty() || *end || !(bandwidth ? number > 0 : number >= 0) ||
          !std::isfinite(number))
        return usageError(arg + " '" + *v + "' is not a number " +
                          (bandwidth ? "above 0" : ">= 0"));
      (bandwidth ? options.linkGbps : options.linkLatencyUs) = number;
    } else if (arg == "--collective-timeout") {
      Expected<std::string> v = value();
      if (!v)
        return v.takeError();
      char *end = nullptr;
      options.collectiveTimeout = std::strtod(v->c_str(), &end);
      if (v->empty() || *end || !(options.collectiveTimeout >= 0))
        return usageError("--collective-timeout '" + *v +
                          "' is not a number of seconds >= 0");
    } else if (arg == "--batch") {
      uint64_t b = 0;
      err = setNumber(b);
      options.batch = b;
    } else if (arg == "--resume")
      options.resume = true;
    else if (arg == "--quiet")
      options.quiet = true;
    else if (arg == "--profile")
      options.profile = true;
    else if (!arg.empty() && arg[0] == '-')
      return usageError("unknown option '" + arg + "'");
    else if (options.model.empty())
      options.model = arg;
    else
      return usageError("more than one model given ('" + options.model +
                        "', '" + arg + "')");
    if (err)
      return err;
  }
  if (options.model.empty())
    return usageError("no model given");
  if (options.data.empty() || options.labels.empty())
    return usageError("--data and --labels are required");
  if (options.valData.empty() != options.valLabels.empty())
    return usageError("--val-data and --val-labels go together");
  if (!options.predictPath.empty() && options.valData.empty())
    return usageError("--predict needs --val-data and --val-labels");
  if (options.resume && options.checkpointDir.empty())
    return usageError("--resume needs --checkpoint-dir");
  if (!options.trace.empty() && options.profile)
    return usageError("--trace and --profile each count the launches: use "
                      "one at a time");
  if (options.history.empty() && !options.checkpointDir.empty())
    options.history = (fs::path(options.checkpointDir) / "loss.csv").string();
  return options;
}

/// Reads and checks a dataset's two files.
Expected<Dataset> loadDataset(const std::string &dataPath,
                              const std::string &labelsPath,
                              const BatchSignature &sig) {
  Dataset set;
  Expected<NpyArray> data = readNpy(dataPath);
  if (!data)
    return data.takeError();
  Expected<NpyArray> labels = readNpy(labelsPath);
  if (!labels)
    return labels.takeError();
  set.data = data.take();
  set.labels = labels.take();
  if (Error err = checkDataset(set, sig, dataPath, labelsPath))
    return err;
  return set;
}

/// Runs eval over `val` and writes its (single) output for every sample,
/// the last batch's padding dropped, to `path` as .npy.
Error writePredictions(TrainingSession &session, const Dataset &val,
                       const BatchSignature &sig, const std::string &path) {
  if (!sig.evalOutput)
    return Error::failure("--predict: eval has more than one output");
  const TensorSignature &out = *sig.evalOutput;
  std::vector<uint8_t> rows;
  uint64_t rowBytes = 0;
  for (uint64_t start = 0; start < val.count; start += sig.batch) {
    std::vector<uint64_t> indices;
    for (uint64_t i = 0; i < sig.batch; ++i)
      indices.push_back(std::min(start + i, val.count - 1)); // pad the last
    if (Error err = session.bindBatch(sig.dataName,
                                      gatherSamples(val.data, indices, *sig.data)))
      return err;
    if (Error err = session.evaluate())
      return err;
    Expected<HostTensor> y = session.readEvalOutput(sig.evalOutputName);
    if (!y)
      return y.takeError();
    rowBytes = y->data.size() / sig.batch;
    uint64_t valid = std::min(sig.batch, val.count - start);
    rows.insert(rows.end(), y->data.begin(),
                y->data.begin() + valid * rowBytes);
  }
  Shape shape = out.shape;
  shape[0] = static_cast<int64_t>(val.count);
  return writeNpy(path, out.dtype, shape, rows.data(), rows.size());
}

/// Checks that DIR exists (creating it) and takes files.
Error checkWritableDir(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec && !fs::is_directory(dir))
    return Error::failure(fmt::format("{}: cannot create the checkpoint "
                                      "directory: {}",
                                      dir, ec.message()));
  std::string probe = (fs::path(dir) / ".kiln-train-probe").string();
  FILE *f = std::fopen(probe.c_str(), "w");
  if (!f)
    return Error::failure(fmt::format("{}: the checkpoint directory is not "
                                      "writable: {}",
                                      dir, std::strerror(errno)));
  std::fclose(f);
  std::remove(probe.c_str());
  return Error::success();
}

/// Set once the job's communicator exists: an error on one rank then ends
/// every rank, instead of leaving them waiting in the next all-reduce.
std::shared_ptr<Communicator> jobCommunicator;

int fail(const Error &err) {
  if (jobCommunicator && jobCommunicator->size() > 1) {
    fmt::print(stderr, "kiln-train: error: rank {}: {}\n",
               jobCommunicator->rank(), err.message());
    jobCommunicator->abort(1);
  }
  fmt::print(stderr, "kiln-train: error: {}\n", err.message());
  return 1;
}

int run(Options options) {
  // Under mpirun: one rank of a data-parallel job.
  Expected<WorldInfo> world = detectWorld();
  if (!world)
    return fail(world.takeError());
  const bool emu = options.device == "emu";
  if (options.collectiveEngine == "nccl" && emu)
    return fail(Error::failure("--collective-engine nccl reduces GPU memory: "
                               "--device emu uses the MPI engine"));
  if (options.traceTimes.empty())
    options.traceTimes = emu ? "modelled" : "measured";
  if (!options.trace.empty() && options.traceTimes == "modelled" && !emu)
    return fail(Error::failure("--trace-times modelled counts the launches "
                               "on emu: use --device emu, or measured"));
  // Explicit nccl also runs at world size 1 (the device check's run).
  const bool collectives =
      world->size > 1 || options.collectiveEngine == "nccl";
  std::string engine = options.collectiveEngine;
  if (engine == "auto")
    engine = collectives && !emu && loadNcclLibrary() ? "nccl" : "mpi";
  if (engine == "nccl")
    if (Expected<int> loaded = loadNcclLibrary(); !loaded)
      return fail(loaded.takeError());
  if (collectives && world->size == 1) {
    // One process: NCCL at world size 1 needs no MPI to share its id.
    jobCommunicator = createLocalCommunicator();
  } else if (collectives) {
    Expected<std::shared_ptr<Communicator>> comm =
        createMpiCommunicator({options.collectiveTimeout});
    if (!comm)
      return fail(comm.error().withContext(fmt::format(
          "rank {} of {} (started by {})", world->rank, world->size,
          world->launcher)));
    jobCommunicator = comm.take();
    if (jobCommunicator->size() != world->size ||
        jobCommunicator->rank() != world->rank)
      return fail(Error::failure(fmt::format(
          "MPI says rank {} of {}, the launcher's environment rank {} of {}",
          jobCommunicator->rank(), jobCommunicator->size(), world->rank,
          world->size)));
    // One GPU per rank, from the local rank, unless the user named one.
    if (options.device == "cuda")
      options.device = fmt::format("cuda:{}", world->localRank);
  }
  const int rank = world->rank, ranks = world->size;
  const bool leader = rank == 0;
  if (!leader)
    options.quiet = true;
  Expected<Artifact> read = readArtifact(options.model);
  if (!read)
    return fail(read.takeError());
  auto artifact = std::make_shared<const Artifact>(read.take());
  if (artifact->entryPoints.empty())
    return fail(Error::failure(options.model +
                               ": not a training artifact (no entry points): "
                               "compile it with kilnc --train"));
  if (ranks > 1 && artifact->collectives.empty())
    return fail(Error::failure(fmt::format(
        "{}: {} ranks, but the artifact has no gradient all-reduce: compile "
        "it with kilnc --train --data-parallel",
        options.model, ranks)));
  if (uint32_t shards = artifact->shardOptimizer.shards;
      shards != 0 && shards != uint32_t(ranks))
    return fail(Error::failure(fmt::format(
        "{}: compiled with --shard-optimizer={} for {} ranks, but the job has "
        "{}: recompile with --shard-optimizer={}",
        options.model, shards, shards, ranks, ranks)));
  if (!options.checkpointDir.empty() && leader)
    if (Error err = checkWritableDir(options.checkpointDir))
      return fail(err);
  // --trace: the target's figures and the ring, checked before training.
  std::optional<GpuTarget> traceTarget;
  RingModel ring;
  if (!options.trace.empty() && leader)
    if (Error err = checkWritable(options.trace))
      return fail(err);
  if (!options.trace.empty() && options.traceTimes == "modelled") {
    Expected<std::vector<GpuTarget>> table = loadTargetTable();
    if (!table)
      return fail(table.takeError());
    Expected<GpuTarget> target = findTarget(*table, artifact->target);
    if (!target)
      return fail(target.takeError());
    traceTarget = target.take();
    ring.ranks = uint32_t(options.traceRanks ? options.traceRanks : ranks);
    ring.bandwidthGBps =
        options.linkGbps.value_or(traceTarget->collectiveBandwidthGBps);
    ring.latencyMicros =
        options.linkLatencyUs.value_or(traceTarget->collectiveLatencyUs);
    if (ring.ranks > 1 && !(ring.bandwidthGBps > 0))
      return fail(Error::failure(fmt::format(
          "--trace: target {} has no collective_bandwidth_gbps in its "
          "gpus.ini entry: give --link-gbps",
          traceTarget->name)));
  }
  std::string checkpointPath =
      options.checkpointDir.empty()
          ? ""
          : (fs::path(options.checkpointDir) / "checkpoint.safetensors")
                .string();
  std::string onnxModel = options.onnxModel;
  if (!options.exportPath.empty() && onnxModel.empty()) {
    // The first .onnx argument kilnc was given.
    std::string word;
    for (size_t i = 0; i <= artifact->compilerOptions.size(); ++i) {
      char c = i < artifact->compilerOptions.size()
                   ? artifact->compilerOptions[i]
                   : ' ';
      if (c != ' ') {
        word += c;
        continue;
      }
      if (onnxModel.empty() && word.size() > 5 && word[0] != '-' &&
          word.compare(word.size() - 5, 5, ".onnx") == 0)
        onnxModel = word;
      word.clear();
    }
    if (onnxModel.empty())
      return fail(Error::failure(options.model +
                                 ": the artifact does not name its ONNX "
                                 "model: give --onnx MODEL for --export"));
  }
  if (!options.exportPath.empty() && !fs::exists(onnxModel))
    return fail(Error::failure(onnxModel + ": no such ONNX model (for "
                                           "--export; give --onnx MODEL)"));
  if (options.resume && !fs::exists(checkpointPath))
    return fail(Error::failure(checkpointPath + ": no checkpoint to resume"));

  Expected<std::unique_ptr<Device>> device = createDevice(options.device);
  if (!device)
    return fail(device.takeError());
  std::shared_ptr<Device> sharedDevice(device.take());
  if (jobCommunicator && engine == "nccl") {
    // MPI bootstraps NCCL (the unique id) and stays for barrier and abort.
    Expected<std::shared_ptr<Communicator>> nccl = createNcclCommunicator(
        {options.collectiveTimeout}, jobCommunicator, sharedDevice);
    if (!nccl)
      return fail(nccl.error().withContext(
          fmt::format("rank {} of {}: the NCCL engine", rank, ranks)));
    jobCommunicator = nccl.take();
  }
  if (jobCommunicator && leader && !options.quiet)
    fmt::print("data parallel: {} rank(s), collective engine {}\n", ranks,
               jobCommunicator->engine());
  if (options.profile)
    if (Error err = sharedDevice->setProfiling({true, 0, 1}))
      return fail(err);
  Expected<std::unique_ptr<TrainingSession>> created =
      TrainingSession::create(artifact, sharedDevice);
  if (!created)
    return fail(created.error().withContext(options.model));
  TrainingSession &session = **created;
  session.setCommunicator(jobCommunicator);
  if (!options.exportPath.empty()) {
    // The model must take the weights before any time is spent training.
    Expected<std::map<std::string, HostTensor>> initial = session.weights();
    if (!initial)
      return fail(initial.takeError());
    if (Error err = exportOnnxWeights(onnxModel, "", *initial))
      return fail(err);
  }
  Expected<BatchSignature> sig = batchSignature(session, options.model);
  if (!sig)
    return fail(sig.takeError());
  if (options.batch && *options.batch != sig->batch)
    return fail(Error::failure(fmt::format(
        "--batch {}: the model was compiled for batch {} (recompile with "
        "--shape to change it)",
        *options.batch, sig->batch)));
  Expected<Dataset> train = loadDataset(options.data, options.labels, *sig);
  if (!train)
    return fail(train.takeError());
  // Each rank's batch is the compiled one; a global batch is one from
  // every rank, rank r taking samples [r*B, (r+1)*B) of it.
  const uint64_t globalBatch = sig->batch * uint64_t(ranks);
  // kilnc --train --dim N=lo..B (docs/runtime.md "Training with a run-time
  // batch"): the samples an epoch has left over are one smaller last
  // global batch instead of being dropped when every rank gets at least lo
  // of them (lastShare).
  const uint64_t leftOver = train->count % globalBatch;
  const uint64_t lastBatch =
      sig->minBatch < sig->batch && leftOver / uint64_t(ranks) >= sig->minBatch
          ? leftOver
          : 0;
  if (train->count < globalBatch && lastBatch == 0)
    return fail(Error::failure(
        ranks == 1
            ? fmt::format("{}: {} samples, fewer than one batch of {}",
                          options.data, train->count, sig->batch)
            : fmt::format("{}: {} samples, fewer than one global batch of "
                          "{} ({} ranks x {})",
                          options.data, train->count, globalBatch, ranks,
                          sig->batch)));
  std::optional<Dataset> val;
  if (!options.valData.empty()) {
    Expected<Dataset> v = loadDataset(options.valData, options.valLabels, *sig);
    if (!v)
      return fail(v.takeError());
    if (v->count == 0)
      return fail(Error::failure(options.valData + ": no samples"));
    val = v.take();
  }

  uint64_t firstEpoch = 0;
  // Loss scaling adds the scale after each step and the skipped flag.
  bool scalesLoss = session.scalesLoss();
  std::string history =
      scalesLoss ? std::string("step,epoch,loss,metric,value,loss_scale,"
                               "skipped\n")
                 : std::string(kHistoryHeader);
  if (options.resume) {
    Expected<std::map<std::string, std::string>> meta =
        session.loadCheckpoint(checkpointPath);
    if (!meta)
      return fail(meta.takeError());
    auto epoch = meta->find(std::string(kMetaEpochsDone));
    auto seed = meta->find(std::string(kMetaSeed));
    if (epoch == meta->end() || seed == meta->end())
      return fail(Error::failure(checkpointPath +
                                 ": not written by kiln-train (no epoch)"));
    if (seed->second != std::to_string(options.seed))
      return fail(Error::failure(fmt::format(
          "{}: written with --seed {}, this run has --seed {}", checkpointPath,
          seed->second, options.seed)));
    firstEpoch = std::stoull(epoch->second);
    if (auto h = meta->find(std::string(kMetaHistory)); h != meta->end())
      history = h->second;
  }

  bool tty = !options.quiet && isatty(fileno(stderr));
  uint64_t steps = train->count / globalBatch + (lastBatch ? 1 : 0);
  uint64_t stepsRun = 0;
  double stepSeconds = 0;
  for (uint64_t epoch = firstEpoch; epoch < options.epochs; ++epoch) {
    std::vector<uint64_t> order = epochOrder(train->count, options.seed, epoch);
    auto start = std::chrono::steady_clock::now();
    double lossSum = 0;
    uint64_t skipped = 0;
    for (uint64_t s = 0; s < steps; ++s) {
      uint64_t first = s * globalBatch + uint64_t(rank) * sig->batch;
      uint64_t size = sig->batch;
      const bool last = lastBatch && s + 1 == steps;
      if (last) {
        BatchShare share =
            lastShare(lastBatch, uint64_t(rank), uint64_t(ranks));
        first = s * globalBatch + share.first;
        size = share.size;
      }
      // Uneven shares weight each rank's gradients and loss by its size.
      if (Error err =
              session.setBatchShare(last ? size : 0, last ? lastBatch : 0))
        return fail(err);
      std::vector<uint64_t> indices(order.begin() + first,
                                    order.begin() + first + size);
      if (Error err = session.bindBatch(
              sig->dataName, gatherSamples(train->data, indices, *sig->data)))
        return fail(err);
      if (Error err = session.bindBatch(
              sig->labelsName, gatherSamples(train->labels, indices, *sig->labels)))
        return fail(err);
      auto stepStart = std::chrono::steady_clock::now();
      const bool tracing = traceTarget && stepsRun == 0;
      const bool timing = !options.trace.empty() && !traceTarget &&
                          stepsRun == 0;
      if (tracing)
        if (Error err = sharedDevice->setProfiling({true, 0, 1}))
          return fail(err);
      if (timing) {
        Expected<StepTimeline> timeline = session.timedStep();
        if (!timeline)
          return fail(timeline.takeError());
        if (leader)
          if (Error err = writeTextFile(options.trace,
                                        stepTimelineToJson(*timeline)))
            return fail(err);
      } else if (Error err = session.step())
        return fail(err);
      if (tracing) {
        std::vector<LaunchProfile> launches =
            sharedDevice->takeLaunchProfiles();
        if (Error err = sharedDevice->setProfiling(ProfilingOptions()))
          return fail(err);
        Expected<StepTimeline> timeline =
            modelStepTimeline(*artifact, launches, *traceTarget, ring);
        if (!timeline)
          return fail(timeline.takeError().withContext("--trace"));
        if (leader)
          if (Error err = writeTextFile(options.trace,
                                        stepTimelineToJson(*timeline)))
            return fail(err);
      }
      stepSeconds += std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - stepStart)
                         .count();
      ++stepsRun;
      Expected<float> loss = session.loss();
      if (!loss)
        return fail(loss.takeError());
      lossSum += *loss;
      Expected<uint64_t> step = session.stepCount();
      history += fmt::format("{},{},{:.9g},,", step ? *step : 0, epoch + 1,
                             *loss);
      if (scalesLoss) {
        Expected<bool> wasSkipped = session.lastStepSkipped();
        if (!wasSkipped)
          return fail(wasSkipped.takeError());
        Expected<float> scale = session.lossScale();
        if (!scale)
          return fail(scale.takeError());
        skipped += *wasSkipped;
        history += fmt::format(",{:.9g},{}", *scale, int(*wasSkipped));
      }
      history += "\n";
      if (tty) {
        double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        double rate = double((s + 1) * globalBatch) / std::max(seconds, 1e-9);
        double eta = double(steps - s - 1) * globalBatch / rate;
        int filled = int(30.0 * double(s + 1) / double(steps));
        fmt::print(stderr, "\repoch {}/{} [{}{}] step {}/{} loss {:.4f} "
                           "{:.0f} samples/s ETA {:.0f}s ",
                   epoch + 1, options.epochs, std::string(filled, '#'),
                   std::string(30 - filled, '.'), s + 1, steps, *loss, rate,
                   eta);
      }
    }
    if (tty)
      fmt::print(stderr, "\n");
    std::string line = fmt::format("epoch {}/{}: mean loss {:.6f}", epoch + 1,
                                   options.epochs, lossSum / double(steps));
    if (scalesLoss) {
      Expected<float> scale = session.lossScale();
      if (!scale)
        return fail(scale.takeError());
      line += fmt::format(", loss scale {:g}, skipped steps {}", *scale,
                          skipped);
    }
    if (val && leader) {
      Expected<Metric> metric = validate(session, *val, *sig);
      if (!metric)
        return fail(metric.takeError());
      line += fmt::format(", {} {:.6f}", metric->name, metric->value);
      history += fmt::format(",{},,{},{:.9g}{}\n", epoch + 1, metric->name,
                             metric->value, scalesLoss ? ",," : "");
    }
    if (!options.quiet)
      fmt::print("{}\n", line);
    // ZeRO: every rank gathers the optimizer state, rank 0 writes it.
    if (!checkpointPath.empty() && (leader || session.shardsOptimizer())) {
      std::map<std::string, std::string> meta = {
          {std::string(kMetaEpochsDone), std::to_string(epoch + 1)},
          {std::string(kMetaSeed), std::to_string(options.seed)},
          {std::string(kMetaHistory), history}};
      if (Error err = session.saveCheckpoint(checkpointPath, meta))
        return fail(err);
    }
  }
  if (stepsRun && !options.quiet)
    fmt::print("train: {} steps, {:.3f} ms/step (train_step: batch upload, "
               "launches, state update), {:.1f} samples/s\n",
               stepsRun, stepSeconds * 1e3 / double(stepsRun),
               double(stepsRun * globalBatch) / stepSeconds);
  if (!leader)
    return 0; // Rank 0 writes every file.
  if (!options.exportPath.empty()) {
    Expected<std::map<std::string, HostTensor>> weights = session.weights();
    if (!weights)
      return fail(weights.takeError());
    if (Error err = exportOnnxWeights(onnxModel, options.exportPath, *weights))
      return fail(err);
    if (!options.quiet)
      fmt::print("exported {} trained weights to {}\n", weights->size(),
                 options.exportPath);
  }
  if (!options.predictPath.empty())
    if (Error err = writePredictions(session, *val, *sig, options.predictPath))
      return fail(err);
  if (options.profile) {
    std::map<std::string, std::pair<double, uint64_t>> byKernel;
    double total = 0;
    for (const LaunchProfile &launch : sharedDevice->takeLaunchProfiles()) {
      auto &entry = byKernel[launch.kernel];
      entry.first += launch.hostSeconds;
      ++entry.second;
      total += launch.hostSeconds;
    }
    std::vector<std::pair<double, std::string>> sorted;
    for (auto &[name, entry] : byKernel)
      sorted.push_back({entry.first, name});
    std::sort(sorted.rbegin(), sorted.rend());
    fmt::print("profile: {:.3f} s of emulated kernels\n", total);
    for (auto &[seconds, name] : sorted)
      fmt::print("  {:<40} {:8.3f} s {:6} launches\n", name, seconds,
                 byKernel[name].second);
  }
  if (!options.history.empty()) {
    // Atomic: a kill or a full disk leaves the previous history (or none).
    if (Error err = writeFileAtomically(options.history, history.data(),
                                        history.size()))
      return fail(err);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Expected<Options> options = parseArguments(argc, argv);
  if (!options) {
    if (options.error().message().empty()) {
      fmt::print("{}", kUsage);
      return 0;
    }
    return fail(options.takeError());
  }
  int status = run(*options);
  // The engine goes before static destruction: NCCL's communicator is
  // destroyed while its device and MPI are still there.
  jobCommunicator.reset();
  return status;
}
