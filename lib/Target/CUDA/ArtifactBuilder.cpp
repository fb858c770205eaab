//===- ArtifactBuilder.cpp - Compiled module to .kiln artifact
//---------------===//
//
// Host-side ops are few after the gpu phase: buffers (function arguments,
// memref.alloc, memref.get_global) and gpu.launch_func. Anything else on the
// host is an error: the runtime only launches kernels. A constant global is
// a weight; a mutable one initialised to zeros (split-K's semaphores,
// kiln-lower-kernel-calls) is a zeroed buffer: an arena buffer live for the
// whole launch list that the runtime zeroes before the first run.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/ArtifactBuilder.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDA/DeviceLoops.h"
#include "kiln/Target/CUDA/TemplateEmission.h"

#include "kiln/Dialect/Kiln/IR/WeightOrigins.h"
#include "kiln/runtime/MemoryPlan.h"
#include "kiln/runtime/Version.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <map>
#include <mutex>


using namespace mlir;
namespace rt = kiln::runtime;

namespace kiln {

char EnvironmentError::ID = 0;

std::string defaultPtxasPath() {
  if (const char *env = std::getenv("KILN_PTXAS"))
    return env;
#ifdef KILN_PTXAS_PATH
  if (llvm::sys::fs::can_execute(KILN_PTXAS_PATH))
    return KILN_PTXAS_PATH;
#endif
  if (auto found = llvm::sys::findProgramByName("ptxas"))
    return *found;
  return "";
}

std::optional<rt::KernelResources>
parsePtxasResources(llvm::StringRef log, llvm::StringRef entry) {
  // ptxas -v prints, per entry:
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
  //   ptxas info    : Function properties for NAME
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 15 registers, used 1 barriers, 128 bytes smem
  // The "Used" line lists only what the kernel has (no smem, no barriers).
  std::string header = ("Compiling entry function '" + entry + "'").str();
  size_t start = log.find(header);
  if (start == llvm::StringRef::npos)
    return std::nullopt;
  llvm::StringRef rest = log.substr(start + header.size());
  rest = rest.take_front(rest.find("Compiling entry function"));
  // The number just before (or after) `word` in `text`.
  auto numberBefore = [](llvm::StringRef text, llvm::StringRef word)
      -> std::optional<uint32_t> {
    size_t at = text.find(word);
    if (at == llvm::StringRef::npos)
      return std::nullopt;
    llvm::StringRef digits = text.take_front(at).rtrim();
    size_t begin = digits.find_last_not_of("0123456789");
    digits = digits.drop_front(begin == llvm::StringRef::npos ? 0 : begin + 1);
    uint32_t value;
    if (digits.getAsInteger(10, value))
      return std::nullopt;
    return value;
  };
  auto numberAfter = [](llvm::StringRef text, llvm::StringRef word)
      -> std::optional<uint32_t> {
    size_t at = text.find(word);
    if (at == llvm::StringRef::npos)
      return std::nullopt;
    llvm::StringRef digits = text.drop_front(at + word.size()).ltrim();
    digits = digits.take_while([](char c) { return std::isdigit(c); });
    uint32_t value;
    if (digits.getAsInteger(10, value))
      return std::nullopt;
    return value;
  };
  std::optional<uint32_t> registers = numberAfter(rest, "Used ");
  if (!registers || !rest.contains(" registers"))
    return std::nullopt;
  rt::KernelResources resources;
  resources.registersPerThread = *registers;
  resources.staticSharedBytes = numberBefore(rest, " bytes smem").value_or(0);
  resources.stackFrameBytes =
      numberBefore(rest, " bytes stack frame").value_or(0);
  resources.spillStoreBytes =
      numberBefore(rest, " bytes spill stores").value_or(0);
  resources.spillLoadBytes =
      numberBefore(rest, " bytes spill loads").value_or(0);
  return resources;
}

namespace {

llvm::Error errorAt(Operation *op, const llvm::Twine &message) {
  std::string where;
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    where = " (" + name.getName().str() + ")";
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 op->getName().getStringRef().str() + where +
                                     ": " + message.str());
}

/// A `kiln.tensor_maps` entry (MatchContractions.cpp's tensorMapAttr) as a
/// record; `operands` is the launch's operand count (`param` must name one).
/// verifyArtifact checks the geometry later.
llvm::Expected<rt::TensorMapRecord> tensorMapFromAttr(DictionaryAttr dict,
                                                      unsigned operands) {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  if (!dict)
    return fail("not a dictionary");
  rt::TensorMapRecord map;
  auto u32 = [&](StringRef name, uint32_t &out) {
    auto attr = dict.getAs<IntegerAttr>(name);
    if (!attr)
      return false;
    out = static_cast<uint32_t>(attr.getInt());
    return true;
  };
  auto dtype = dict.getAs<StringAttr>("dtype");
  auto dims = dict.getAs<DenseI64ArrayAttr>("dims");
  auto strides = dict.getAs<DenseI64ArrayAttr>("strides");
  auto box = dict.getAs<DenseI64ArrayAttr>("box");
  if (!u32("param", map.addressParam) || !u32("swizzle", map.swizzle) ||
      !u32("l2_promotion", map.l2Promotion) || !u32("oob_fill", map.oobFill) ||
      !dtype || !dims || !strides || !box)
    return fail("a field is missing");
  std::optional<rt::DType> type = rt::parseDType(dtype.getValue().str());
  if (!type)
    return fail("unknown dtype '" + dtype.getValue() + "'");
  map.dtype = *type;
  size_t rank = dims.size();
  if (rank < 1 || rank > rt::kTensorMapMaxRank ||
      static_cast<size_t>(box.size()) != rank ||
      static_cast<size_t>(strides.size()) != rank - 1)
    return fail("dims, strides and box disagree on the rank");
  map.rank = static_cast<uint32_t>(rank);
  for (size_t d = 0; d < rank; ++d) {
    map.globalDims[d] = static_cast<uint64_t>(dims[d]);
    map.boxDims[d] = static_cast<uint32_t>(box[d]);
    if (d > 0)
      map.globalStrides[d - 1] = static_cast<uint64_t>(strides[d - 1]);
  }
  if (map.addressParam >= operands)
    return fail("param " + llvm::Twine(map.addressParam) +
                " is not one of the launch's " + llvm::Twine(operands) +
                " operands");
  return map;
}

std::optional<rt::DType> toDType(Type type) {
  if (type.isF32())
    return rt::DType::F32;
  if (type.isF16())
    return rt::DType::F16;
  if (type.isBF16())
    return rt::DType::BF16;
  if (type.isF64())
    return rt::DType::F64;
  if (type.isInteger(1))
    return rt::DType::Bool;
  if (isa<Float8E4M3FNType>(type))
    return rt::DType::F8E4M3FN;
  if (isa<Float8E4M3FNUZType>(type))
    return rt::DType::F8E4M3FNUZ;
  if (isa<Float8E5M2Type>(type))
    return rt::DType::F8E5M2;
  if (isa<Float8E5M2FNUZType>(type))
    return rt::DType::F8E5M2FNUZ;
  if (auto i = dyn_cast<IntegerType>(type)) {
    bool u = i.isUnsigned();
    switch (i.getWidth()) {
    case 8:
      return u ? rt::DType::U8 : rt::DType::I8;
    case 16:
      return u ? rt::DType::U16 : rt::DType::I16;
    case 32:
      return u ? rt::DType::U32 : rt::DType::I32;
    case 64:
      return u ? rt::DType::U64 : rt::DType::I64;
    default:
      break;
    }
  }
  return std::nullopt;
}

/// Little-endian bytes of a constant, splats expanded, i1 one byte each.
std::vector<uint8_t> constantBytes(ElementsAttr value) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    ArrayRef<char> data = resource.getData();
    return std::vector<uint8_t>(data.begin(), data.end());
  }
  auto dense = cast<DenseElementsAttr>(value);
  int64_t count = dense.getNumElements();
  if (dense.getElementType().isInteger(1)) {
    std::vector<uint8_t> bytes;
    for (bool b : dense.getValues<bool>())
      bytes.push_back(b);
    return bytes;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (!dense.isSplat())
    return std::vector<uint8_t>(raw.begin(), raw.end());
  std::vector<uint8_t> bytes;
  bytes.reserve(raw.size() * count);
  for (int64_t i = 0; i < count; ++i)
    bytes.insert(bytes.end(), raw.begin(), raw.end());
  return bytes;
}

rt::Shape shapeOf(MemRefType type) {
  return rt::Shape(type.getShape().begin(), type.getShape().end());
}

uint64_t byteSize(MemRefType type) {
  uint64_t element = type.getElementType().isInteger(1)
                         ? 1
                         : type.getElementTypeBitWidth() / 8;
  return element * type.getNumElements();
}

struct Assembled {
  std::vector<uint8_t> cubin;
  /// ptxas -v's report (parsePtxasResources reads each entry's resources).
  std::string log;
};

/// Assembles PTX with `ptxas -v`; the cubin bytes and the report, or an
/// error with its log.
llvm::Expected<Assembled> assemble(const std::string &ptxas,
                                   const std::string &ptx,
                                   const std::string &target,
                                   const std::string &kernel,
                                   llvm::StringRef entry) {
  llvm::SmallString<128> ptxPath, cubinPath, logPath;
  if (llvm::sys::fs::createTemporaryFile("kiln", "ptx", ptxPath) ||
      llvm::sys::fs::createTemporaryFile("kiln", "cubin", cubinPath) ||
      llvm::sys::fs::createTemporaryFile("kiln", "log", logPath))
    return llvm::make_error<EnvironmentError>(
        "cannot create temporary files for ptxas in " +
        llvm::sys::path::parent_path(ptxPath).str());
  auto cleanup = llvm::make_scope_exit([&] {
    llvm::sys::fs::remove(ptxPath);
    llvm::sys::fs::remove(cubinPath);
    llvm::sys::fs::remove(logPath);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec)
      return llvm::make_error<EnvironmentError>(
          "cannot write " + ptxPath.str().str() + ": " + ec.message());
    os << ptx;
    os.close();
    // Checked here: a stream destroyed with an error (a full disk) would
    // end the process with a fatal error.
    if (os.has_error()) {
      std::string reason = os.error().message();
      os.clear_error();
      return llvm::make_error<EnvironmentError>(
          "cannot write " + ptxPath.str().str() + " for ptxas: " + reason);
    }
  }
  // A template kernel compiled for sm_90a (wgmma, setmaxnreg) is assembled
  // for it; the cubin runs on the same sm_90 GPUs.
  std::string arch = "-arch=" + target;
  if (target == "sm_90" && ptx.find(".target sm_90a") != std::string::npos)
    arch += "a";
  llvm::StringRef args[] = {ptxas, "-v", arch, ptxPath, "-o", cubinPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(),
                                                logPath.str()};
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects);
  if (rc != 0) {
    // The errors, without -v's resource report.
    std::string errors;
    if (auto log = llvm::MemoryBuffer::getFile(logPath)) {
      llvm::SmallVector<llvm::StringRef> lines;
      (*log)->getBuffer().split(lines, '\n');
      for (llvm::StringRef line : lines)
        if (!line.trim().empty() && !line.starts_with("ptxas info") &&
            !line.contains("bytes stack frame"))
          errors += (errors.empty() ? "" : "\n") + line.rtrim().str();
    }
    // No message at all: ptxas could not run or write its output (a full
    // temporary directory), not a verdict on the PTX.
    if (errors.empty())
      return llvm::make_error<EnvironmentError>(
          "ptxas failed on kernel '" + kernel + "' (status " +
          std::to_string(rc) + ") without a message: check that " +
          llvm::sys::path::parent_path(cubinPath).str() +
          " has free space, or set KILN_PTXAS");
    return llvm::createStringError("ptxas rejected kernel '" + kernel +
                                   "': " + errors);
  }
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath, /*IsText=*/false);
  if (!cubin)
    return llvm::createStringError("cannot read the cubin of kernel '" +
                                   kernel + "'");
  Assembled result;
  result.cubin.assign((*cubin)->getBufferStart(), (*cubin)->getBufferEnd());
  if (auto log = llvm::MemoryBuffer::getFile(logPath))
    result.log = (*log)->getBuffer().str();
  return result;
}

/// `ptxas --version`'s last line ("Cuda compilation tools, release 13.0,
/// V13.0.48"), once per ptxas; empty when it does not run.
std::string ptxasVersion(const std::string &ptxas) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, isNew] = versions.try_emplace(ptxas);
  if (!isNew)
    return it->second;
  llvm::SmallString<128> out;
  if (llvm::sys::fs::createTemporaryFile("kiln-ptxas", "version", out))
    return "";
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove(out); });
  llvm::StringRef args[] = {ptxas, "--version"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, out.str(),
                                                out.str()};
  if (llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects) != 0)
    return "";
  if (auto text = llvm::MemoryBuffer::getFile(out))
    it->second = (*text)->getBuffer().trim().rsplit('\n').second.str();
  if (it->second.empty())
    it->second = "unknown";
  return it->second;
}

/// assemble() through the kernel cache: the cubin and ptxas's report are a
/// function of the PTX, the arch and ptxas's version.
llvm::Expected<Assembled> assembleCached(const std::string &ptxas,
                                         const std::string &ptx,
                                         const std::string &target,
                                         const std::string &kernel,
                                         llvm::StringRef entry,
                                         KernelCache &cache, bool &cached) {
  std::string version = ptxasVersion(ptxas);
  std::string key =
      KernelCache::hashKey({"ptxas", version, target, ptx});
  cached = false;
  if (!version.empty())
    if (std::optional<std::string> value = cache.lookup("cubin", key)) {
      // "<log size>\n<log><cubin>"
      llvm::StringRef rest(*value);
      auto [size, tail] = rest.split('\n');
      size_t logSize;
      if (!size.getAsInteger(10, logSize) && logSize <= tail.size()) {
        Assembled result;
        llvm::StringRef cubin = tail.drop_front(logSize);
        result.cubin.assign(cubin.begin(), cubin.end());
        result.log = tail.take_front(logSize).str();
        cached = true;
        return result;
      }
    }
  auto assembled = assemble(ptxas, ptx, target, kernel, entry);
  if (assembled && !version.empty())
    cache.store("cubin", key,
                std::to_string(assembled->log.size()) + "\n" +
                    assembled->log +
                    std::string(assembled->cubin.begin(),
                                assembled->cubin.end()));
  return assembled;
}

/// `text` with every `from` replaced by `to`.
std::string replaceAll(llvm::StringRef text, llvm::StringRef from,
                       llvm::StringRef to) {
  std::string out;
  while (true) {
    size_t at = text.find(from);
    out += text.substr(0, at).str();
    if (at == llvm::StringRef::npos)
      return out;
    out += to.str();
    text = text.substr(at + from.size());
  }
}

struct BufferInfo {
  MemRefType type;
  std::string name;
  bool isInput = false, isOutput = false;
  /// A mutable zero-initialised global: live for the whole launch list.
  bool isZeroed = false;
  int64_t firstUse = -1, lastUse = -1;
};

/// Whether every element of `value` is zero (integers or floats).
bool isAllZeros(ElementsAttr value) {
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.getElementType().isIntOrIndex())
      return llvm::all_of(dense.getValues<APInt>(),
                          [](const APInt &v) { return v.isZero(); });
    if (isa<FloatType>(dense.getElementType()))
      return llvm::all_of(dense.getValues<APFloat>(), [](const APFloat &v) {
        return v.isPosZero();
      });
  }
  return false;
}

} // namespace

llvm::Expected<rt::Artifact> buildArtifact(ModuleOp module,
                                           const ArtifactOptions &options,
                                           ArtifactStats *stats) {
  auto func = dyn_cast_or_null<func::FuncOp>(
      SymbolTable::lookupSymbolIn(module, options.function));
  if (!func || func.getBlocks().size() != 1)
    return llvm::createStringError("the module has no single-block func @" +
                                   options.function);
  // Emission: the template kernels' sources to PTX (distinct ones once, in
  // parallel, through the cache).
  KernelCache noCache;
  KernelCache &cache = options.kernelCache ? *options.kernelCache : noCache;
  {
    std::optional<mlir::TimingScope> timing;
    if (options.timing)
      timing.emplace(options.timing->nest("template kernels (NVRTC)"));
    TemplateEmissionStats emitted;
    if (llvm::Error err = emitTemplateKernels(module, cache, &emitted))
      return std::move(err);
    if (stats) {
      stats->templateBinaries = emitted.binaries;
      stats->templateSources = emitted.distinct;
      stats->templateCached = emitted.cached;
    }
  }

  // Device-side loops: their bodies' launches in place, between copies.
  llvm::Expected<std::vector<ExpandedDeviceLoop>> loops =
      expandDeviceLoops(func);
  if (!loops)
    return loops.takeError();

  rt::Artifact artifact;
  artifact.compilerVersion =
      rt::versionLine("kilnc") + " (LLVM/MLIR " LLVM_VERSION_STRING ")";
  artifact.compilerOptions = options.compilerOptions;
  artifact.target = options.target;

  // Buffers: arguments (inputs, then outputs marked bufferize.result), allocs.
  llvm::MapVector<Value, BufferInfo> buffers;
  for (BlockArgument arg : func.getArguments()) {
    auto type = dyn_cast<MemRefType>(arg.getType());
    if (!type || !type.getLayout().isIdentity())
      return llvm::createStringError("argument " +
                                     std::to_string(arg.getArgNumber()) +
                                     " of @" + options.function +
                                     " is not a plain buffer");
    BufferInfo info{type};
    if (auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), kiln::KilnDialect::NameAttrHelper::getNameStr()))
      info.name = name.getValue().str();
    info.isOutput = static_cast<bool>(
        func.getArgAttr(arg.getArgNumber(), "bufferize.result"));
    info.isInput = !info.isOutput;
    buffers.insert({arg, info});
  }

  // Initializers compiled in as constants: binding new weights checks them.
  for (const auto &[name, value] : options.inlinedInitializers) {
    std::optional<rt::DType> dtype =
        value ? toDType(value.getElementType()) : std::nullopt;
    if (!dtype)
      continue;
    artifact.inlinedInitializers.push_back(
        {name, *dtype,
         rt::Shape(value.getType().getShape().begin(),
                   value.getType().getShape().end()),
         constantBytes(value)});
  }

  // Weights: one per memref.global that a launch reads.
  llvm::DenseMap<Value, uint64_t> weightOffsets;
  // Kernel records by (module, entry, pointer kinds): launches of one
  // shared binary whose operands differ in kind (a weight here, an arena
  // buffer there) get a record each, since a record's parameter kinds say
  // how every launch's values become pointers.
  using KernelKey = std::tuple<std::string, std::string, std::string>;
  std::map<KernelKey, uint32_t> kernelIndex;
  llvm::StringMap<unsigned> kindVariants;
  std::vector<uint32_t> launchKernel;
  /// Each kernel's tensor-map records (indices into artifact.tensorMaps).
  std::map<KernelKey, std::vector<uint32_t>> kernelTensorMaps;
  llvm::DenseMap<StringAttr, gpu::BinaryOp> binaries;
  for (auto binary : module.getOps<gpu::BinaryOp>())
    binaries[binary.getSymNameAttr()] = binary;

  SmallVector<gpu::LaunchFuncOp> launches;
  llvm::DenseMap<Operation *, Value> zeroedGlobals;
  llvm::DenseMap<Operation *, uint64_t> globalWeights;
  for (Operation &op : func.front()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (!alloc.getType().hasStaticShape() ||
          !alloc.getType().getLayout().isIdentity())
        return errorAt(&op, "only static, contiguous buffers are supported");
      BufferInfo info{alloc.getType()};
      info.name = "buffer" + std::to_string(buffers.size());
      buffers.insert({alloc.getResult(), info});
    } else if (auto get = dyn_cast<memref::GetGlobalOp>(op)) {
      auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
          get, get.getNameAttr());
      auto value =
          global ? dyn_cast_or_null<ElementsAttr>(global.getInitialValueAttr())
                 : nullptr;
      if (global && !global.getConstant() && value && isAllZeros(value) &&
          get.getType().hasStaticShape() &&
          get.getType().getLayout().isIdentity()) {
        // Every get_global of it is the same buffer.
        auto [it, isNew] = zeroedGlobals.try_emplace(global, get.getResult());
        if (isNew) {
          BufferInfo info{get.getType()};
          info.name = global.getSymName().str();
          info.isZeroed = true;
          buffers.insert({get.getResult(), info});
        } else {
          get.getResult().replaceAllUsesWith(it->second);
        }
        continue;
      }
      std::optional<rt::DType> dtype = toDType(get.getType().getElementType());
      if (!value || !global.getConstant() || !dtype)
        return errorAt(&op, "reads a global that is not a supported constant");
      // One weight per global, however many functions read it (a device
      // loop's body is expanded into this one).
      auto known = globalWeights.find(global);
      if (known != globalWeights.end()) {
        weightOffsets[get.getResult()] = known->second;
        continue;
      }
      std::vector<uint8_t> bytes = constantBytes(value);
      auto index = artifact.addWeight(global.getSymName().str(), *dtype,
                                      shapeOf(get.getType()), bytes.data(),
                                      bytes.size());
      if (!index)
        return llvm::createStringError(index.error().message());
      artifact.weights[*index].origin = getBlobOrigin(module, value);
      weightOffsets[get.getResult()] = artifact.weights[*index].offset;
      globalWeights[global] = artifact.weights[*index].offset;
    } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
      launches.push_back(launch);
    } else if (isa<func::ReturnOp, memref::DeallocOp>(op) || isPure(&op)) {
      continue; // Constants and index arithmetic feed launch geometry.
    } else {
      return errorAt(
          &op,
          "is not supported on the host: the runtime only launches kernels");
    }
  }

  // Kernels and launch operands; buffer lifetimes in launch indices.
  struct PendingArg {
    rt::ParamKind kind;
    Value buffer;
    uint64_t value;
  };
  std::vector<std::vector<PendingArg>> pending;
  std::vector<std::string> kernelModules; // per artifact kernel
  for (auto [i, launch] : llvm::enumerate(launches)) {
    std::string kinds;
    for (Value operand : launch.getKernelOperands())
      kinds += isa<MemRefType>(operand.getType())
                   ? (weightOffsets.count(operand) ? 'w' : 'a')
                   : (operand.getType().isInteger(32) ? '4' : '8');
    KernelKey key{launch.getKernelModuleName().str(),
                  launch.getKernelName().str(), kinds};
    auto it = kernelIndex.find(key);
    if (it == kernelIndex.end()) {
      gpu::BinaryOp binary = binaries.lookup(launch.getKernelModuleName());
      if (!binary || binary.getObjects().size() != 1)
        return errorAt(launch, "kernel module @" +
                                   launch.getKernelModuleName().str() +
                                   " was not compiled to one PTX object");
      rt::Kernel kernel;
      kernel.name = launch.getKernelName().str();
      kernel.ptx = cast<gpu::ObjectAttr>(binary.getObjects()[0])
                       .getObject()
                       .getValue()
                       .str();
      // Another record of this entry with other pointer kinds: the same
      // PTX under a new entry name (record names are unique).
      unsigned variant =
          kindVariants[std::get<0>(key) + "::" + std::get<1>(key)]++;
      if (variant) {
        std::string renamed =
            kernel.name + "_kinds" + std::to_string(variant);
        kernel.ptx = replaceAll(kernel.ptx, ".entry " + kernel.name + "(",
                                ".entry " + renamed + "(");
        kernel.ptx = replaceAll(kernel.ptx, kernel.name + "_param_",
                                renamed + "_param_");
        kernel.name = renamed;
      }
      auto geometry = [&](Value v, uint32_t &out) {
        APInt value;
        if (!matchPattern(v, m_ConstantInt(&value)))
          return false;
        out = static_cast<uint32_t>(value.getZExtValue());
        return true;
      };
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      if (!geometry(grid.x, kernel.grid.x) ||
          !geometry(grid.y, kernel.grid.y) ||
          !geometry(grid.z, kernel.grid.z) ||
          !geometry(block.x, kernel.block.x) ||
          !geometry(block.y, kernel.block.y) ||
          !geometry(block.z, kernel.block.z))
        return errorAt(launch, "launch geometry is not constant");
      if (Value smem = launch.getDynamicSharedMemorySize())
        if (!geometry(smem, kernel.dynamicSharedBytes))
          return errorAt(launch, "dynamic shared memory size is not constant");
      // TMA tensor maps (kiln.tensor_maps, from kiln-match-contractions):
      // parameters after the operands, one record each.
      std::vector<std::string> names;
      if (auto maps = launch->getAttrOfType<ArrayAttr>(
              kiln::KilnDialect::TensorMapsAttrHelper::getNameStr())) {
        std::vector<uint32_t> records;
        for (Attribute attr : maps) {
          auto dict = dyn_cast<DictionaryAttr>(attr);
          auto name = dict ? dict.getAs<StringAttr>("name") : StringAttr();
          names.push_back(name ? name.str() : "tensorMap");
          auto map = tensorMapFromAttr(dyn_cast<DictionaryAttr>(attr),
                                       launch.getNumKernelOperands());
          if (!map)
            return errorAt(launch, "has a malformed kiln.tensor_maps entry: " +
                                       llvm::toString(map.takeError()));
          records.push_back(static_cast<uint32_t>(artifact.tensorMaps.size()));
          artifact.tensorMaps.push_back(*map);
        }
        kernelTensorMaps[key] = std::move(records);
      }
      for (Value operand : launch.getKernelOperands()) {
        rt::KernelParam param;
        if (isa<MemRefType>(operand.getType()))
          param.kind = weightOffsets.count(operand)
                           ? rt::ParamKind::WeightsPointer
                           : rt::ParamKind::ArenaPointer;
        else
          param.kind = operand.getType().isInteger(32)
                           ? rt::ParamKind::Scalar32
                           : rt::ParamKind::Scalar64;
        kernel.params.push_back(param);
      }
      for (std::string &name : names)
        kernel.params.push_back({rt::ParamKind::TensorMap, std::move(name)});
      it = kernelIndex
               .insert({key, static_cast<uint32_t>(artifact.kernels.size())})
               .first;
      kernelModules.push_back(std::get<0>(key));
      artifact.kernels.push_back(std::move(kernel));
    }
    launchKernel.push_back(it->second);
    std::vector<PendingArg> args;
    for (Value operand : launch.getKernelOperands()) {
      if (isa<MemRefType>(operand.getType())) {
        if (auto w = weightOffsets.find(operand); w != weightOffsets.end()) {
          args.push_back({rt::ParamKind::WeightsPointer, nullptr, w->second});
          continue;
        }
        auto b = buffers.find(operand);
        if (b == buffers.end())
          return errorAt(
              launch, "passes a buffer view; kernels must take whole buffers");
        BufferInfo &info = b->second;
        if (info.firstUse < 0)
          info.firstUse = static_cast<int64_t>(i);
        info.lastUse = static_cast<int64_t>(i);
        args.push_back({rt::ParamKind::ArenaPointer, operand, 0});
      } else {
        APInt value;
        if (!matchPattern(operand, m_ConstantInt(&value)))
          return errorAt(launch, "passes a scalar that is not a constant");
        args.push_back(
            {rt::ParamKind::Scalar64, nullptr, value.getZExtValue()});
      }
    }
    // Every launch of a kernel shares its records: the address comes from
    // the launch's own pointer argument.
    for (uint32_t record : kernelTensorMaps[key])
      args.push_back({rt::ParamKind::TensorMap, nullptr, record});
    pending.push_back(std::move(args));
  }

  // ptxas: every kernel's PTX to a cubin. A kernel carries its module's
  // whole PTX (split-K's main and reduction entries share one), so each
  // distinct PTX is assembled once, the distinct ones in parallel (ptxas
  // runs are separate processes), through the kernel cache.
  if (!options.ptxasPath.empty() && !artifact.kernels.empty()) {
    std::optional<mlir::TimingScope> timing;
    if (options.timing)
      timing.emplace(options.timing->nest("ptxas"));
    struct Job {
      size_t kernel; // the first kernel with this PTX
      std::optional<Assembled> result;
      std::string error;
      bool environment = false; // the error is an EnvironmentError
      bool cached = false;
    };
    std::vector<Job> jobs;
    llvm::StringMap<size_t> byPtx;
    std::vector<size_t> jobOf;
    for (auto [k, kernel] : llvm::enumerate(artifact.kernels)) {
      auto [it, isNew] = byPtx.try_emplace(kernel.ptx, jobs.size());
      if (isNew)
        jobs.push_back({k});
      jobOf.push_back(it->second);
    }
    std::mutex progressMutex;
    size_t done = 0;
    parallelForEach(module.getContext(), jobs, [&](Job &job) {
      const rt::Kernel &kernel = artifact.kernels[job.kernel];
      auto assembled = assembleCached(
          options.ptxasPath, kernel.ptx, options.target,
          kernelModules[job.kernel] + "::" + kernel.name, kernel.name, cache,
          job.cached);
      if (!assembled)
        llvm::handleAllErrors(
            assembled.takeError(),
            [&](const EnvironmentError &err) {
              job.error = err.message;
              job.environment = true;
            },
            [&](const llvm::ErrorInfoBase &err) { job.error = err.message(); });
      else
        job.result = std::move(*assembled);
      if (options.onKernelAssembled) {
        std::lock_guard<std::mutex> lock(progressMutex);
        options.onKernelAssembled(++done, jobs.size());
      }
    });
    for (const Job &job : jobs)
      if (!job.error.empty())
        return job.environment ? llvm::make_error<EnvironmentError>(job.error)
                               : llvm::createStringError(job.error);
    for (auto [k, kernel] : llvm::enumerate(artifact.kernels)) {
      const Assembled &assembled = *jobs[jobOf[k]].result;
      kernel.cubin = assembled.cubin;
      kernel.cubinSm = artifact.targetSm();
      kernel.resources = parsePtxasResources(assembled.log, kernel.name);
    }
    if (stats) {
      stats->assembled = jobs.size();
      for (const Job &job : jobs)
        stats->assembledCached += job.cached;
    }
  }

  // A device-side loop's launches repeat: a buffer used both inside its
  // range and outside it (the loop state, what the body reads from before
  // the loop, what it leaves for after) must hold its bytes across the whole
  // range; one used only inside keeps its lifetime within an iteration.
  llvm::DenseMap<Operation *, uint32_t> launchIndex;
  for (auto [i, launch] : llvm::enumerate(launches))
    launchIndex[launch] = static_cast<uint32_t>(i);
  for (const ExpandedDeviceLoop &loop : *loops) {
    Operation *op = loop.before ? loop.before->getNextNode()
                                : &func.front().front();
    while (op != loop.last && !isa<gpu::LaunchFuncOp>(op))
      op = op->getNextNode();
    auto flag = buffers.find(loop.flag);
    if (flag == buffers.end())
      return llvm::createStringError("a device-side loop's flag is not a "
                                     "buffer of the memory plan");
    rt::ControlRegion region;
    region.firstLaunch = launchIndex.lookup(op);
    region.launchCount = launchIndex.lookup(loop.last) - region.firstLaunch + 1;
    region.flagBuffer = static_cast<uint32_t>(flag - buffers.begin());
    artifact.controlRegions.push_back(region);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const rt::ControlRegion &region : artifact.controlRegions) {
      int64_t a = region.firstLaunch,
              b = a + static_cast<int64_t>(region.launchCount) - 1;
      for (auto &entry : buffers) {
        BufferInfo &info = entry.second;
        if (info.firstUse < 0 || info.lastUse < a || info.firstUse > b ||
            (info.firstUse >= a && info.lastUse <= b))
          continue;
        if (info.firstUse > a || info.lastUse < b)
          changed = true;
        info.firstUse = std::min(info.firstUse, a);
        info.lastUse = std::max(info.lastUse, b);
      }
    }
  }

  // Inputs are live for the whole run (so repeated runs, and CUDA graph
  // replays, may reuse bound inputs); outputs from their first write to the
  // end; intermediates from first to last launch that touches them.
  std::vector<rt::LiveBuffer> live;
  uint32_t last =
      launches.empty() ? 0 : static_cast<uint32_t>(launches.size() - 1);
  for (auto &[value, info] : buffers) {
    rt::LiveBuffer buffer;
    buffer.size = std::max<uint64_t>(byteSize(info.type), 1);
    buffer.firstUse = info.isInput || info.isZeroed || info.firstUse < 0
                          ? 0
                          : static_cast<uint32_t>(info.firstUse);
    buffer.lastUse =
        info.isInput || info.isOutput || info.isZeroed || info.lastUse < 0
            ? last
            : static_cast<uint32_t>(info.lastUse);
    live.push_back(buffer);
  }
  auto plan = rt::planMemory(live, rt::kArenaAlignment);
  if (!plan)
    return llvm::createStringError(plan.error().message());

  llvm::DenseMap<Value, uint64_t> offsets;
  for (auto [i, entry] : llvm::enumerate(buffers)) {
    const BufferInfo &info = entry.second;
    offsets[entry.first] = plan->offsets[i];
    artifact.memoryPlan.buffers.push_back({info.name, plan->offsets[i],
                                           live[i].size, live[i].firstUse,
                                           live[i].lastUse});
    if (info.isZeroed)
      artifact.zeroedBuffers.push_back(static_cast<uint32_t>(i));
    if (!info.isInput && !info.isOutput)
      continue;
    std::optional<rt::DType> dtype = toDType(info.type.getElementType());
    if (!dtype)
      return llvm::createStringError("tensor '" + info.name +
                                     "' has an unsupported element type");
    rt::TensorSignature signature{info.name, *dtype, shapeOf(info.type),
                                  plan->offsets[i], static_cast<uint32_t>(i)};
    (info.isInput ? artifact.inputs : artifact.outputs).push_back(signature);
  }
  artifact.memoryPlan.arenaSize = plan->arenaSize;
  for (rt::ControlRegion &region : artifact.controlRegions)
    region.flagOffset = plan->offsets[region.flagBuffer];

  for (auto [i, launch] : llvm::enumerate(launches)) {
    rt::Launch entry;
    entry.kernel = launchKernel[i];
    for (const PendingArg &arg : pending[i])
      entry.args.push_back(arg.buffer ? offsets.lookup(arg.buffer) : arg.value);
    artifact.launches.push_back(std::move(entry));
  }

  if (rt::Error err = rt::verifyArtifact(artifact))
    return llvm::createStringError("the artifact does not verify: " +
                                   err.message());
  // Launch scaling (#kiln.grid_scale, KilnKernelAttrs.td): each symbol by its
  // index among the module's kiln.dim_ranges, the order the separable-dims
  // analysis lists them in; attachSymbolicDims keeps the records of
  // separable symbols (verifyArtifact checks them when the file is written).
  llvm::StringMap<uint32_t> symbolIndex;
  if (auto ranges = module->getAttrOfType<DictionaryAttr>(
          kiln::KilnDialect::DimRangesAttrHelper::getNameStr()))
    for (NamedAttribute entry : ranges)
      if (auto range = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
          range && range.size() == 3)
        symbolIndex.try_emplace(entry.getName().getValue(),
                                static_cast<uint32_t>(symbolIndex.size()));
  for (auto [i, launch] : llvm::enumerate(launches)) {
    // The attribute's verifier checked its fields; the symbol must be one
    // of the module's ranges.
    auto scale = dyn_cast_or_null<kiln::GridScaleAttr>(
        kiln::KilnDialect::GridScaleAttrHelper(launch->getContext())
            .getAttr(launch));
    if (!scale)
      continue;
    auto index = symbolIndex.find(scale.getSymbol().getValue());
    if (index == symbolIndex.end())
      return errorAt(launch, "scales its grid by symbol '" +
                                 scale.getSymbol().getValue() +
                                 "', which has no --dim range");
    artifact.launchScales.push_back(
        {static_cast<uint32_t>(i), index->second,
         static_cast<uint32_t>(scale.getDim()),
         static_cast<uint64_t>(scale.getNumerator()),
         static_cast<uint64_t>(scale.getDenominator())});
  }
  // Size buckets (#kiln.size_guard from kiln-match-contractions).
  for (auto [i, launch] : llvm::enumerate(launches)) {
    auto guard = dyn_cast_or_null<kiln::SizeGuardAttr>(
        kiln::KilnDialect::SizeGuardAttrHelper(launch->getContext())
            .getAttr(launch));
    if (!guard)
      continue;
    auto index = symbolIndex.find(guard.getSymbol().getValue());
    if (index == symbolIndex.end())
      return errorAt(launch, "is guarded by symbol '" +
                                 guard.getSymbol().getValue() +
                                 "', which has no --dim range");
    artifact.launchGuards.push_back({static_cast<uint32_t>(i), index->second,
                                     guard.getMin(), guard.getMax()});
  }
  if (stats) {
    stats->kernels = artifact.kernels.size();
    stats->arenaBytes = plan->arenaSize;
    stats->naiveArenaBytes = plan->naiveSize;
    stats->weightBytes = artifact.weightData.size();
  }
  return artifact;
}

} // namespace kiln
