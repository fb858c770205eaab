//===- TemplateEmission.cpp - Template kernels compiled at serialisation --===//

#include "kiln/Target/CUDA/TemplateEmission.h"

#include "kiln/Target/CUDA/Nvrtc.h"
#include "kiln/runtime/Version.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/StringMap.h"

#include <mutex>

using namespace mlir;

namespace kiln {

namespace {
constexpr llvm::StringLiteral kSourceProperty = "kiln.cuda_source";
constexpr llvm::StringLiteral kOptionsProperty = "kiln.nvrtc_options";
} // namespace

gpu::ObjectAttr templateSourceObject(MLIRContext *ctx, llvm::StringRef chip,
                                     llvm::StringRef source,
                                     llvm::ArrayRef<std::string> nvrtcOptions) {
  Builder b(ctx);
  Attribute target =
      parseAttribute(("#nvvm.target<chip = \"" + chip + "\">").str(), ctx);
  SmallVector<Attribute> options;
  for (const std::string &option : nvrtcOptions)
    options.push_back(b.getStringAttr(option));
  DictionaryAttr properties = b.getDictionaryAttr(
      {b.getNamedAttr(kSourceProperty, b.getUnitAttr()),
       b.getNamedAttr(kOptionsProperty, b.getArrayAttr(options))});
  return gpu::ObjectAttr::get(ctx, target, gpu::CompilationTarget::Offload,
                              b.getStringAttr(source), properties, nullptr);
}

bool isTemplateSource(gpu::ObjectAttr object) {
  DictionaryAttr properties = object.getProperties();
  return object.getFormat() == gpu::CompilationTarget::Offload &&
         properties && properties.get(kSourceProperty);
}

llvm::Error emitTemplateKernels(ModuleOp module, KernelCache &cache,
                                TemplateEmissionStats *stats) {
  struct Job {
    std::string name, source, key;
    std::vector<std::string> options;
    std::string ptx, error;
    double seconds = 0;
    bool cached = false;
  };
  std::vector<Job> jobs;
  llvm::StringMap<size_t> byKey;
  SmallVector<std::pair<gpu::BinaryOp, size_t>> binaries;
  std::string nvrtcVersion;
  for (auto binary : module.getOps<gpu::BinaryOp>()) {
    if (binary.getObjects().size() != 1)
      continue;
    auto object = dyn_cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    if (!object || !isTemplateSource(object))
      continue;
    if (nvrtcVersion.empty()) {
      runtime::Expected<std::string> version = nvrtc::version();
      if (!version)
        return llvm::createStringError(
            "kernel " + binary.getSymName().str() + ": " +
            version.error().message());
      nvrtcVersion = *version;
    }
    Job job;
    job.name = binary.getSymName().str();
    job.source = object.getObject().getValue().str();
    if (auto options =
            object.getProperties().getAs<ArrayAttr>(kOptionsProperty))
      for (Attribute option : options)
        job.options.push_back(cast<StringAttr>(option).getValue().str());
    // Everything the PTX depends on: the source (templates and epilogue
    // inlined, no headers), the options and NVRTC's version; Kiln's
    // version too, to be safe across releases.
    SmallVector<llvm::StringRef> parts{"nvrtc", nvrtcVersion,
                                       runtime::buildInfo().version,
                                       job.source};
    for (const std::string &option : job.options)
      parts.push_back(option);
    job.key = KernelCache::hashKey(parts);
    auto [it, isNew] = byKey.try_emplace(job.key, jobs.size());
    if (isNew) {
      jobs.push_back(std::move(job));
    } else {
      // NVRTC names the program's internal symbols after it; the shortest
      // name of the binaries sharing a source keeps them as they were when
      // each region compiled its own program.
      std::string &name = jobs[it->second].name;
      if (job.name.size() < name.size() ||
          (job.name.size() == name.size() && job.name < name))
        name = job.name;
    }
    binaries.push_back({binary, it->second});
  }
  if (jobs.empty())
    return llvm::Error::success();

  // Distinct kernels, in parallel (NVRTC compiles independent programs on
  // several threads; MLIR's pool has as many threads as the machine has
  // cores, or one with --mlir-disable-threading).
  parallelForEach(module.getContext(), jobs, [&](Job &job) {
    if (std::optional<std::string> ptx = cache.lookup("ptx", job.key)) {
      job.ptx = std::move(*ptx);
      job.cached = true;
      return;
    }
    runtime::Expected<nvrtc::CompileResult> compiled =
        nvrtc::compileToPtx(job.source, job.name, job.options);
    if (!compiled) {
      job.error = compiled.error().message();
      return;
    }
    job.ptx = std::move(compiled->ptx);
    job.seconds = compiled->seconds;
    cache.store("ptx", job.key, job.ptx);
  });
  for (const Job &job : jobs)
    if (!job.error.empty())
      return llvm::createStringError(job.error);

  MLIRContext *ctx = module.getContext();
  for (auto [binary, index] : binaries) {
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    // The binary's own name is the one in its source, so the PTX of a
    // source shared by several binaries (split-K's two entries) fits each.
    binary.setObjectsAttr(ArrayAttr::get(
        ctx, {gpu::ObjectAttr::get(ctx, object.getTarget(),
                                   gpu::CompilationTarget::Assembly,
                                   StringAttr::get(ctx, jobs[index].ptx),
                                   DictionaryAttr{}, nullptr)}));
  }
  if (stats) {
    stats->binaries += binaries.size();
    stats->distinct += jobs.size();
    for (const Job &job : jobs) {
      stats->cached += job.cached;
      stats->nvrtcSeconds += job.seconds;
    }
  }
  return llvm::Error::success();
}

std::string templateKernelKey(const contraction::GemmKernels &kernels) {
  std::string key = kernels.source;
  for (const std::string &option : kernels.nvrtcOptions)
    key += "\n//" + option;
  return key;
}

void nameTemplateKernels(contraction::GemmKernels &kernels,
                         llvm::StringRef name) {
  auto rename = [&](std::string &text) {
    std::string out;
    llvm::StringRef rest = text;
    for (size_t at;
         (at = rest.find(kEntryPlaceholder)) != llvm::StringRef::npos;
         rest = rest.drop_front(at + kEntryPlaceholder.size()))
      out += (rest.take_front(at) + name).str();
    text = out + rest.str();
  };
  rename(kernels.source);
  for (contraction::GemmKernel &kernel : kernels.kernels)
    rename(kernel.name);
}

} // namespace kiln
