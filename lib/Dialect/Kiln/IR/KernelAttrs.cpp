//===- KernelAttrs.cpp - Kernel configurations: syntax and verifiers -------===//
//
// The attributes of KilnKernelAttrs.td print as `key = value` lists, tiles
// as `MxNxK`, so that a lit test can write a config by hand. The verifiers
// hold the rules that do not depend on the region (tile shapes, the fixed
// shapes of wgmma, the swizzle of each family); the lowerings check the
// rest against the problem and say when they cannot follow a config.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

namespace {

/// `key = value` pairs after the leading `<`, up to and including `>`.
/// `parseValue(key)` parses the value of a known key; an unknown or
/// repeated key is an error.
ParseResult
parseFields(AsmParser &parser,
            llvm::function_ref<ParseResult(StringRef key)> parseValue) {
  llvm::StringSet<> seen;
  if (succeeded(parser.parseOptionalGreater()))
    return success();
  do {
    StringRef key;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(at) << "'" << key << "' given twice";
    if (parseValue(key))
      return failure();
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseGreater();
}

/// `AxB` or `AxBxC` with exactly `count` positive dimensions.
ParseResult parseTile(AsmParser &parser, size_t count,
                      SmallVectorImpl<int64_t> &dims) {
  SMLoc at = parser.getCurrentLocation();
  dims.clear();
  if (parser.parseDimensionList(dims, /*allowDynamic=*/false,
                                /*withTrailingX=*/false))
    return failure();
  if (dims.size() != count)
    return parser.emitError(at) << "expected " << count
                                << " dimensions separated by 'x'";
  return success();
}

ParseResult parseInt(AsmParser &parser, int64_t &value) {
  return parser.parseInteger(value);
}

template <typename Enum>
ParseResult parseEnum(AsmParser &parser, Enum &value,
                      std::optional<Enum> (*symbolize)(StringRef)) {
  SMLoc at = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  std::optional<Enum> parsed = symbolize(word);
  if (!parsed)
    return parser.emitError(at) << "unknown value '" << word << "'";
  value = *parsed;
  return success();
}

ParseResult unknownKey(AsmParser &parser, StringRef key) {
  return parser.emitError(parser.getCurrentLocation())
         << "unknown parameter '" << key << "'";
}

ParseResult missing(AsmParser &parser, SMLoc at, StringRef key) {
  return parser.emitError(at) << "missing parameter '" << key << "'";
}

} // namespace

//===----------------------------------------------------------------------===//
// #kiln.gemm_config
//===----------------------------------------------------------------------===//

SmemSwizzle GemmConfigAttr::swizzleOf(GemmFamily family) {
  switch (family) {
  case GemmFamily::SimtF32:
    return SmemSwizzle::Padded;
  case GemmFamily::MmaF16:
  case GemmFamily::MmaTf32:
  case GemmFamily::MmaS8:
  case GemmFamily::MmaF8:
    return SmemSwizzle::Xor16;
  case GemmFamily::WgmmaF16:
  case GemmFamily::WgmmaTf32:
  case GemmFamily::WgmmaF8:
  case GemmFamily::WgmmaS8:
    return SmemSwizzle::B128;
  }
  llvm_unreachable("unknown GEMM family");
}

Attribute GemmConfigAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseLess())
    return {};
  std::optional<GemmFamily> family;
  SmallVector<int64_t> tile, sub;
  bool threadTile = false;
  int64_t stages = 0, splitK = 1;
  GemmProducer producer = GemmProducer::CpAsync;
  std::optional<SmemSwizzle> swizzle;
  auto field = [&](StringRef key) -> ParseResult {
    if (key == "family") {
      GemmFamily f;
      if (parseEnum(parser, f, symbolizeGemmFamily))
        return failure();
      family = f;
      return success();
    }
    if (key == "tile")
      return parseTile(parser, 3, tile);
    if (key == "warp_tile" || key == "thread_tile") {
      threadTile = key == "thread_tile";
      return parseTile(parser, 2, sub);
    }
    if (key == "stages")
      return parseInt(parser, stages);
    if (key == "split_k")
      return parseInt(parser, splitK);
    if (key == "producer")
      return parseEnum(parser, producer, symbolizeGemmProducer);
    if (key == "swizzle") {
      SmemSwizzle s;
      if (parseEnum(parser, s, symbolizeSmemSwizzle))
        return failure();
      swizzle = s;
      return success();
    }
    return unknownKey(parser, key);
  };
  if (parseFields(parser, field))
    return {};
  if (!family)
    return missing(parser, at, "family"), Attribute();
  if (tile.empty())
    return missing(parser, at, "tile"), Attribute();
  if (sub.empty())
    return missing(parser, at,
                   *family == GemmFamily::SimtF32 ? "thread_tile"
                                                  : "warp_tile"),
           Attribute();
  if ((*family == GemmFamily::SimtF32) != threadTile) {
    parser.emitError(at) << (threadTile ? "thread_tile is for simt_f32 only"
                                        : "simt_f32 takes thread_tile, not "
                                          "warp_tile");
    return {};
  }
  if (!stages)
    return missing(parser, at, "stages"), Attribute();
  return parser.getChecked<GemmConfigAttr>(
      at, parser.getContext(), *family, tile[0], tile[1], tile[2], sub[0],
      sub[1], stages, splitK, producer, swizzle.value_or(swizzleOf(*family)));
}

void GemmConfigAttr::print(AsmPrinter &printer) const {
  printer << "<family = " << stringifyGemmFamily(getFamily())
          << ", tile = " << getBlockM() << "x" << getBlockN() << "x"
          << getBlockK()
          << (getFamily() == GemmFamily::SimtF32 ? ", thread_tile = "
                                                 : ", warp_tile = ")
          << getSubM() << "x" << getSubN() << ", stages = " << getStages()
          << ", split_k = " << getSplitK()
          << ", producer = " << stringifyGemmProducer(getProducer())
          << ", swizzle = " << stringifySmemSwizzle(getSwizzle()) << ">";
}

LogicalResult
GemmConfigAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                       GemmFamily family, int64_t blockM, int64_t blockN,
                       int64_t blockK, int64_t subM, int64_t subN,
                       int64_t stages, int64_t splitK, GemmProducer producer,
                       SmemSwizzle swizzle) {
  for (int64_t d : {blockM, blockN, blockK})
    if (d <= 0 || !llvm::isPowerOf2_64(d))
      return emitError() << "tile sizes must be powers of two, not " << blockM
                         << "x" << blockN << "x" << blockK;
  if (subM <= 0 || subN <= 0)
    return emitError() << "the warp or thread tile must be positive";
  if (blockM % subM || blockN % subN)
    return emitError() << "the warp or thread tile " << subM << "x" << subN
                       << " does not divide the block tile " << blockM << "x"
                       << blockN;
  if (stages < 2 || stages > 8)
    return emitError() << "stages must be 2 to 8, not " << stages;
  if (splitK < 1)
    return emitError() << "split_k must be at least 1, not " << splitK;
  if (producer == GemmProducer::Tma && family != GemmFamily::WgmmaF16)
    return emitError() << "only wgmma_f16 has a TMA producer";
  if (swizzle != swizzleOf(family))
    return emitError() << stringifyGemmFamily(family) << " tiles use swizzle "
                       << stringifySmemSwizzle(swizzleOf(family)) << ", not "
                       << stringifySmemSwizzle(swizzle);
  switch (family) {
  case GemmFamily::WgmmaF16:
  case GemmFamily::WgmmaTf32:
  case GemmFamily::WgmmaF8:
  case GemmFamily::WgmmaS8: {
    int64_t k = family == GemmFamily::WgmmaF16 ? 64
                : family == GemmFamily::WgmmaF8 || family == GemmFamily::WgmmaS8
                    ? 128
                    : 32;
    if (blockM != 64 && blockM != 128)
      return emitError() << "wgmma's block M is 64 or 128, not " << blockM;
    if (blockN != 64 && blockN != 128 && blockN != 256)
      return emitError() << "wgmma's block N is 64, 128 or 256, not "
                         << blockN;
    if (blockK != k)
      return emitError() << stringifyGemmFamily(family)
                         << "'s block K is one 128-byte swizzle row (" << k
                         << "), not " << blockK;
    if (subM != 64 || subN != blockN)
      return emitError() << "wgmma's warp tile is 64 x block N";
    if (family == GemmFamily::WgmmaS8 && splitK != 1)
      return emitError() << "wgmma_s8 has no split-K (the requantization "
                            "needs the whole sum), not split_k = "
                         << splitK;
    break;
  }
  case GemmFamily::SimtF32:
    if (subM % 4 || subN % 4)
      return emitError() << "simt_f32's thread tile must be multiples of 4";
    break;
  case GemmFamily::MmaF16:
  case GemmFamily::MmaTf32:
    if (subM % 16 || subN % 16)
      return emitError() << "mma.sync warp tiles must be multiples of 16";
    if (blockK % (family == GemmFamily::MmaF16 ? 16 : 8))
      return emitError() << "the block's K must be a multiple of the mma's K";
    break;
  case GemmFamily::MmaS8:
  case GemmFamily::MmaF8:
    if (subM % 16 || subN % 16)
      return emitError() << "mma.sync warp tiles must be multiples of 16";
    if (blockK % 32)
      return emitError() << stringifyGemmFamily(family)
                         << "'s block K must be a multiple of 32 (the "
                            "m16n8k32 MMA's K), not "
                         << blockK;
    if (family == GemmFamily::MmaS8 && splitK != 1)
      return emitError() << "mma_s8 has no split-K (the requantization needs "
                            "the whole sum), not split_k = "
                         << splitK;
    break;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// #kiln.depthwise_config
//===----------------------------------------------------------------------===//

Attribute DepthwiseConfigAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  int64_t vector = 0, pixels = 0;
  if (parser.parseLess() ||
      parseFields(parser, [&](StringRef key) -> ParseResult {
        if (key == "vector")
          return parseInt(parser, vector);
        if (key == "pixels")
          return parseInt(parser, pixels);
        return unknownKey(parser, key);
      }))
    return {};
  if (!vector || !pixels)
    return missing(parser, at, vector ? "pixels" : "vector"), Attribute();
  return parser.getChecked<DepthwiseConfigAttr>(at, parser.getContext(),
                                                vector, pixels);
}

void DepthwiseConfigAttr::print(AsmPrinter &printer) const {
  printer << "<vector = " << getVector() << ", pixels = " << getPixels()
          << ">";
}

LogicalResult
DepthwiseConfigAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                            int64_t vector, int64_t pixels) {
  if (vector != 1 && vector != 2 && vector != 4 && vector != 8)
    return emitError() << "vector must be 1, 2, 4 or 8, not " << vector;
  if (pixels != 1 && pixels != 2)
    return emitError() << "pixels must be 1 or 2, not " << pixels;
  return success();
}

//===----------------------------------------------------------------------===//
// #kiln.attention_config
//===----------------------------------------------------------------------===//

Attribute AttentionConfigAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  std::optional<AttentionFamily> family;
  SmallVector<int64_t> tile;
  int64_t warps = 0, stages = 2;
  if (parser.parseLess() ||
      parseFields(parser, [&](StringRef key) -> ParseResult {
        if (key == "family") {
          AttentionFamily f;
          if (parseEnum(parser, f, symbolizeAttentionFamily))
            return failure();
          family = f;
          return success();
        }
        if (key == "tile")
          return parseTile(parser, 2, tile);
        if (key == "warps")
          return parseInt(parser, warps);
        if (key == "stages")
          return parseInt(parser, stages);
        return unknownKey(parser, key);
      }))
    return {};
  if (!family)
    return missing(parser, at, "family"), Attribute();
  if (tile.empty())
    return missing(parser, at, "tile"), Attribute();
  if (!warps)
    return missing(parser, at, "warps"), Attribute();
  return parser.getChecked<AttentionConfigAttr>(
      at, parser.getContext(), *family, tile[0], tile[1], warps, stages);
}

void AttentionConfigAttr::print(AsmPrinter &printer) const {
  printer << "<family = " << stringifyAttentionFamily(getFamily())
          << ", tile = " << getBlockM() << "x" << getBlockN()
          << ", warps = " << getWarps();
  if (getFamily() == AttentionFamily::WgmmaF16)
    printer << ", stages = " << getStages();
  printer << ">";
}

LogicalResult
AttentionConfigAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                            AttentionFamily family, int64_t blockM,
                            int64_t blockN, int64_t warps, int64_t stages) {
  if (blockM <= 0 || blockN <= 0 || warps <= 0)
    return emitError() << "tile and warps must be positive";
  if (family == AttentionFamily::WgmmaF16) {
    if (blockM != 64 && blockM != 128)
      return emitError() << "the wgmma attention kernel's block M is 64 or "
                            "128 (one or two consumer warpgroups), not "
                         << blockM;
    if (warps != 4 * (blockM / 64 + 1))
      return emitError() << "the wgmma attention kernel has a producer and "
                         << blockM / 64 << " consumer warpgroups: "
                         << 4 * (blockM / 64 + 1) << " warps, not " << warps;
    if (stages < 2 || stages > 4)
      return emitError() << "stages must be 2 to 4, not " << stages;
  } else if (stages != 2) {
    return emitError() << "only the wgmma attention kernel has stages";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// #kiln.generic_kernel
//===----------------------------------------------------------------------===//

ArrayRef<llvm::StringLiteral>
GenericKernelAttr::parameterNames(GenericStrategy strategy) {
  static constexpr llvm::StringLiteral block[] = {"block"};
  static constexpr llvm::StringLiteral vector[] = {"vector_width", "block"};
  static constexpr llvm::StringLiteral threads[] = {"threads"};
  static constexpr llvm::StringLiteral strip[] = {"threads",
                                                  "rows_per_block"};
  static constexpr llvm::StringLiteral splits[] = {"splits"};
  static constexpr llvm::StringLiteral tile[] = {"tile"};
  switch (strategy) {
  case GenericStrategy::ThreadPerOutput:
    return block;
  case GenericStrategy::Vectorized:
    return vector;
  case GenericStrategy::BlockReduction:
  case GenericStrategy::BlockRows:
    return threads;
  case GenericStrategy::StripRows:
    return strip;
  case GenericStrategy::ColumnReduction:
  case GenericStrategy::WholeReduction:
    return splits;
  case GenericStrategy::TiledTranspose:
    return tile;
  }
  llvm_unreachable("unknown generic strategy");
}

namespace {
/// The six integer parameters of #kiln.generic_kernel by name.
struct GenericParams {
  int64_t vectorWidth = 0, block = 0, threads = 0, rowsPerBlock = 0,
          splits = 0, tile = 0;
  int64_t *find(StringRef name) {
    return llvm::StringSwitch<int64_t *>(name)
        .Case("vector_width", &vectorWidth)
        .Case("block", &block)
        .Case("threads", &threads)
        .Case("rows_per_block", &rowsPerBlock)
        .Case("splits", &splits)
        .Case("tile", &tile)
        .Default(nullptr);
  }
};
} // namespace

Attribute GenericKernelAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  GenericStrategy strategy;
  if (parser.parseLess() ||
      parseEnum(parser, strategy, symbolizeGenericStrategy))
    return {};
  GenericParams params;
  ArrayRef<llvm::StringLiteral> names = parameterNames(strategy);
  if (succeeded(parser.parseOptionalComma())) {
    if (parseFields(parser, [&](StringRef key) -> ParseResult {
          int64_t *slot = params.find(key);
          if (!slot || !llvm::is_contained(names, key))
            return parser.emitError(parser.getCurrentLocation())
                   << stringifyGenericStrategy(strategy)
                   << " has no parameter '" << key << "'";
          return parseInt(parser, *slot);
        }))
      return {};
  } else if (parser.parseGreater()) {
    return {};
  }
  for (StringRef name : names)
    if (!*params.find(name))
      return missing(parser, at, name), Attribute();
  return parser.getChecked<GenericKernelAttr>(
      at, parser.getContext(), strategy, params.vectorWidth, params.block,
      params.threads, params.rowsPerBlock, params.splits, params.tile);
}

void GenericKernelAttr::print(AsmPrinter &printer) const {
  GenericParams params{getVectorWidth(), getBlock(),  getThreads(),
                       getRowsPerBlock(), getSplits(), getTile()};
  printer << "<" << stringifyGenericStrategy(getStrategy());
  for (StringRef name : parameterNames(getStrategy()))
    printer << ", " << name << " = " << *params.find(name);
  printer << ">";
}

LogicalResult
GenericKernelAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                          GenericStrategy strategy, int64_t vectorWidth,
                          int64_t block, int64_t threads,
                          int64_t rowsPerBlock, int64_t splits,
                          int64_t tile) {
  GenericParams params{vectorWidth, block, threads, rowsPerBlock, splits,
                       tile};
  ArrayRef<llvm::StringLiteral> names = parameterNames(strategy);
  for (StringRef name : {"vector_width", "block", "threads", "rows_per_block",
                         "splits", "tile"}) {
    int64_t value = *params.find(name);
    bool has = llvm::is_contained(names, name);
    if (has && value <= 0)
      return emitError() << name << " must be positive";
    if (!has && value != 0)
      return emitError() << stringifyGenericStrategy(strategy)
                         << " has no parameter '" << name << "'";
  }
  if (vectorWidth &&
      (vectorWidth < 2 || vectorWidth > 8 || !llvm::isPowerOf2_64(vectorWidth)))
    return emitError() << "vector_width must be 2, 4 or 8, not "
                       << vectorWidth;
  if (block > 1024)
    return emitError() << "a block has at most 1024 threads, not " << block;
  if (threads && (threads < 32 || threads > 1024 ||
                  !llvm::isPowerOf2_64(threads)))
    return emitError() << "threads must be a power of two from 32 to 1024, "
                          "not "
                       << threads;
  if (rowsPerBlock && threads * rowsPerBlock > 1024)
    return emitError() << "threads x rows_per_block exceeds 1024";
  if (rowsPerBlock > 1 && threads != 32)
    return emitError() << "several rows per block need a warp per row "
                          "(threads = 32)";
  return success();
}

//===----------------------------------------------------------------------===//
// Launch scaling
//===----------------------------------------------------------------------===//

LogicalResult
GridRowsAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                     int64_t rows, int64_t tile, int64_t a) {
  if (rows <= 0 || tile <= 0 || a < 0)
    return emitError() << "#kiln.grid_rows needs rows and tile above 0 and "
                          "an input index a of at least 0";
  return success();
}

LogicalResult
GridScaleAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                      StringAttr symbol, int64_t dim, int64_t numerator,
                      int64_t denominator) {
  if (!symbol || symbol.getValue().empty())
    return emitError() << "#kiln.grid_scale needs a symbol";
  if (dim < 0 || dim > 2)
    return emitError() << "#kiln.grid_scale dim must be 0, 1 or 2, not "
                       << dim;
  if (numerator <= 0 || denominator <= 0)
    return emitError() << "#kiln.grid_scale needs numerator and denominator "
                          "above 0";
  return success();
}

LogicalResult
SizeGuardAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                      StringAttr symbol, int64_t min, int64_t max) {
  if (!symbol || symbol.getValue().empty())
    return emitError() << "#kiln.size_guard needs a symbol";
  if (min < 0 || min > max)
    return emitError() << "#kiln.size_guard needs 0 <= min <= max, not " << min
                       << ".." << max;
  return success();
}

/// The launch-scaling attributes: each of its own type.
static LogicalResult verifyLaunchScaling(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == KilnDialect::GridRowsAttrHelper::getNameStr() &&
      !isa<GridRowsAttr>(value))
    return op->emitError() << "'" << name << "' must be a #kiln.grid_rows, not "
                           << value;
  if (name == KilnDialect::GridScaleAttrHelper::getNameStr() &&
      !isa<GridScaleAttr>(value))
    return op->emitError() << "'" << name
                           << "' must be a #kiln.grid_scale, not " << value;
  if (name == KilnDialect::SizeGuardAttrHelper::getNameStr() &&
      !isa<SizeGuardAttr>(value))
    return op->emitError() << "'" << name
                           << "' must be a #kiln.size_guard, not " << value;
  if (name == KilnDialect::KernelVariantsAttrHelper::getNameStr()) {
    auto list = dyn_cast<ArrayAttr>(value);
    if (!list || list.empty())
      return op->emitError() << "'" << name << "' must be a non-empty array";
    for (Attribute entry : list) {
      auto dict = dyn_cast<DictionaryAttr>(entry);
      auto min = dict ? dict.getAs<IntegerAttr>("min") : IntegerAttr();
      auto max = dict ? dict.getAs<IntegerAttr>("max") : IntegerAttr();
      if (!dict || !dict.get("kernel") || !min || !max || min.getInt() < 0 ||
          min.getInt() > max.getInt())
        return op->emitError()
               << "'" << name
               << "' holds {kernel = <config>, min = M, max = X} per size "
                  "bucket (0 <= M <= X), not "
               << entry;
    }
  }
  if (name == KilnDialect::LaunchGridScalesAttrHelper::getNameStr()) {
    auto list = dyn_cast<ArrayAttr>(value);
    if (!list)
      return op->emitError() << "'" << name << "' must be an array";
    for (Attribute entry : list) {
      auto none = dyn_cast<DictionaryAttr>(entry);
      if (!isa<GridScaleAttr>(entry) && !(none && none.empty()))
        return op->emitError() << "'" << name
                               << "' holds a #kiln.grid_scale or {} per "
                                  "launch, not "
                               << entry;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The `kiln.kernel` attribute
//===----------------------------------------------------------------------===//

LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (failed(verifyLaunchScaling(op, attr)) ||
      failed(verifyDeviceLoop(op, attr)))
    return failure();
  if (attr.getName() != KernelAttrHelper::getNameStr())
    return success();
  Attribute value = attr.getValue();
  if (isa<GemmConfigAttr, DepthwiseConfigAttr, AttentionConfigAttr>(value)) {
    // The region it was chosen for, the call that runs it, and the launch
    // that call becomes.
    if (!isa<FusionOp, CallKernelOp>(op) &&
        op->getName().getStringRef() != "gpu.launch_func")
      return op->emitError() << "'kiln.kernel' " << value
                             << " belongs on a kiln.fusion region, "
                                "kiln.call_kernel or gpu.launch_func";
    return success();
  }
  if (isa<GenericKernelAttr>(value))
    return success();
  return op->emitError() << "'kiln.kernel' must be a kernel configuration "
                            "(#kiln.gemm_config, #kiln.depthwise_config, "
                            "#kiln.attention_config or "
                            "#kiln.generic_kernel), not "
                         << value;
}
