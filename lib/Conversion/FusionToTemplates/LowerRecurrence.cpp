//===- LowerRecurrence.cpp - kiln.recurrence to the persistent kernel -----===//
//
// Each kiln.recurrence becomes one kiln.call_kernel of the persistent
// recurrence kernel (include/kiln/Target/CUDA/RecurrenceKernels.h); the
// pass description (Passes.td) has the design. Operands are traced through
// reshapes and contiguous slices to their buffers, so one direction's R,
// states and peepholes are read in place at an element offset.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Kiln/IR/Kiln.h"
#include "kiln/Target/CUDA/RecurrenceKernels.h"
#include "kiln/Target/CUDA/TargetInfo.h"
#include "kiln/Target/CUDA/TemplateEmission.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln {
#define GEN_PASS_DEF_LOWERRECURRENCEPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
namespace cx = kiln::contraction;

namespace {

/// A value as a buffer and the element offset of its first element.
struct InPlace {
  Value buffer;
  uint64_t offset = 0;
};

/// Follows reshapes and slices that keep the elements contiguous (every
/// dimension after the first one cut is whole, steps 1) up to the buffer.
InPlace traceInPlace(Value v) {
  InPlace result{v, 0};
  while (Operation *def = result.buffer.getDefiningOp()) {
    if (auto reshape = dyn_cast<kiln::ReshapeOp>(def)) {
      result.buffer = reshape.getInput();
      continue;
    }
    auto slice = dyn_cast<kiln::SliceOp>(def);
    if (!slice)
      break;
    auto type = dyn_cast<RankedTensorType>(slice.getInput().getType());
    if (!type || !type.hasStaticShape())
      break;
    ArrayRef<int64_t> shape = type.getShape();
    ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                      steps = slice.getSteps();
    // Contiguous: unit steps, extent 1 before the first dim cut to more
    // than one index, whole dims after it.
    size_t rank = shape.size(), first = rank;
    bool contiguous = llvm::all_of(steps, [](int64_t s) { return s == 1; });
    for (size_t d = 0; d < rank && contiguous; ++d) {
      bool whole = starts[d] == 0 && limits[d] == shape[d];
      if (first == rank) {
        if (limits[d] - starts[d] != 1)
          first = d;
      } else {
        contiguous = whole;
      }
    }
    if (!contiguous)
      break;
    int64_t stride = 1;
    uint64_t offset = 0;
    for (size_t d = rank; d-- > 0;) {
      offset += static_cast<uint64_t>(starts[d] * stride);
      stride *= shape[d];
    }
    result.offset += offset;
    result.buffer = slice.getInput();
  }
  return result;
}

std::optional<cx::DType> dtypeOf(Type type) {
  if (type.isF32())
    return cx::DType::F32;
  if (type.isF16())
    return cx::DType::F16;
  if (type.isBF16())
    return cx::DType::BF16;
  return std::nullopt;
}

struct LowerRecurrencePass
    : kiln::impl::LowerRecurrencePassBase<LowerRecurrencePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<kiln::RecurrenceOp> ops;
    module.walk([&](kiln::RecurrenceOp op) { ops.push_back(op); });
    if (ops.empty())
      return;
    const kiln::TargetInfo *target = kiln::TargetInfo::forChip(chip);
    if (!target) {
      module.emitError("kiln-lower-recurrence: unknown chip '")
          << chip << "' (known: " << kiln::TargetInfo::supportedChips() << ")";
      return signalPassFailure();
    }
    SmallVector<Attribute> report;
    for (kiln::RecurrenceOp op : ops)
      if (failed(lower(op, *target, report)))
        return signalPassFailure();
    MLIRContext *ctx = module.getContext();
    SmallVector<Attribute> lines;
    if (auto old = module->getAttrOfType<ArrayAttr>(
            kiln::KilnDialect::RecurrenceReportAttrHelper::getNameStr()))
      llvm::append_range(lines, old.getValue());
    llvm::append_range(lines, report);
    module->setAttr(kiln::KilnDialect::RecurrenceReportAttrHelper::getNameStr(),
                    ArrayAttr::get(ctx, lines));
  }

  LogicalResult lower(kiln::RecurrenceOp op, const kiln::TargetInfo &target,
                      SmallVectorImpl<Attribute> &report) {
    auto xType = cast<RankedTensorType>(op.getInputProjection().getType());
    std::optional<cx::DType> type = dtypeOf(xType.getElementType());
    if (!type)
      return op.emitOpError("the recurrence kernel reads f32, f16 or bf16");
    cx::RecurrenceProblem p;
    p.cell = op.getCell() == kiln::RecurrentCell::Rnn ? cx::RecurrentCell::Rnn
             : op.getCell() == kiln::RecurrentCell::Gru
                 ? cx::RecurrentCell::Gru
                 : cx::RecurrentCell::Lstm;
    p.steps = static_cast<uint64_t>(xType.getDimSize(0));
    p.batch = static_cast<uint64_t>(xType.getDimSize(1));
    p.hidden = static_cast<uint64_t>(
        cast<RankedTensorType>(op.getRecurrence().getType()).getDimSize(1));
    p.type = *type;
    p.reverse = op.getReverse();
    if (std::optional<APFloat> clip = op.getClip())
      p.clip = clip->convertToFloat();
    p.linearBeforeReset = op.getLinearBeforeReset();
    p.inputForget = op.getInputForget();
    for (auto [name, alpha, beta] :
         llvm::zip_equal(op.getActivations(), op.getActivationAlpha(),
                         op.getActivationBeta()))
      p.activations.push_back(
          {cast<StringAttr>(name).getValue().str(), alpha, beta});

    // The pointers, in the kernel's parameter order, and their offsets.
    SmallVector<Value> inputs;
    auto add = [&](Value v, uint64_t &offset) {
      InPlace in = traceInPlace(v);
      inputs.push_back(in.buffer);
      offset = in.offset;
    };
    add(op.getInputProjection(), p.offsetX);
    add(op.getRecurrence(), p.offsetR);
    add(op.getInitialH(), p.offsetH0);
    if (Value c0 = op.getInitialC())
      add(c0, p.offsetC0);
    if (Value peep = op.getPeepholes()) {
      p.peepholes = true;
      add(peep, p.offsetP);
    }
    if (Value lens = op.getSequenceLens()) {
      p.sequenceLens = true;
      add(lens, p.offsetLens);
    }
    if (Value bias = op.getResetBias()) {
      p.resetBias = true;
      add(bias, p.offsetResetBias);
    }

    uint32_t sm = target.sm();
    uint32_t maxShared = target.maxSharedBytesPerBlock();
    cx::RecurrenceConfig config = cx::pickRecurrenceConfig(p, sm, maxShared);
    if (blocks) {
      config.blocks = blocks;
      config.threads = cx::recurrenceThreads(p, blocks, config.kSplit);
    }
    if (!weightsInShared || cx::recurrenceLayout(p, config).total > maxShared)
      config.recurrentWeightsShared = false;
    if (std::string why =
            cx::recurrenceUnsupportedReason(p, config, sm, maxShared);
        !why.empty())
      return op.emitOpError("cannot become a persistent kernel on ")
             << chip << ": " << why;

    cx::GenerateOptions options;
    options.smVersion = sm;
    options.name = kiln::kEntryPlaceholder.str();
    kiln::runtime::Expected<cx::GemmKernels> kernels =
        cx::specializeRecurrence(p, config, options);
    if (!kernels)
      return op.emitOpError(kernels.error().message());
    std::string name = nameKernel(*kernels);
    const cx::GemmKernel &kernel = kernels->kernels.front();

    MLIRContext *ctx = op.getContext();
    ModuleOp module = getOperation();
    if (declared.insert(name).second) {
      OpBuilder moduleBuilder(ctx);
      moduleBuilder.setInsertionPointToStart(module.getBody());
      gpu::BinaryOp::create(moduleBuilder, op.getLoc(), name, nullptr,
                            ArrayAttr::get(ctx, {kiln::templateSourceObject(
                                                    ctx, chip, kernels->source,
                                                    kernels->nvrtcOptions)}));
    }

    OpBuilder b(op);
    SmallVector<Value> outputs;
    for (Value result : op.getResults()) {
      auto resultType = cast<RankedTensorType>(result.getType());
      outputs.push_back(tensor::EmptyOp::create(
          b, op.getLoc(), resultType.getShape(), resultType.getElementType()));
    }
    auto call = kiln::CallKernelOp::create(
        b, op.getLoc(), op.getResultTypes(),
        SymbolRefAttr::get(ctx, name, {FlatSymbolRefAttr::get(ctx, name)}),
        inputs, outputs,
        b.getDenseI32ArrayAttr({static_cast<int32_t>(kernel.grid.x), 1, 1}),
        b.getDenseI32ArrayAttr({static_cast<int32_t>(kernel.block.x), 1, 1}),
        b.getI32IntegerAttr(static_cast<int32_t>(kernel.dynamicSharedBytes)),
        b.getArrayAttr({}), DenseI32ArrayAttr());
    // Per step: G H x H multiply-adds per batch row, and the cell.
    int64_t flops = static_cast<int64_t>(2 * p.steps * p.batch * p.gates() *
                                         p.hidden * p.hidden);
    call->setAttr(kiln::KilnDialect::FlopsAttrHelper::getNameStr(),
                  b.getI64IntegerAttr(flops));
    report.push_back(StringAttr::get(
        ctx, llvm::formatv("{0}: {1}; T {2}, B {3}, H {4}{5}: 1 launch per "
                           "sequence, {6} bytes of shared memory per block",
                           name, cx::describeRecurrence(p, config), p.steps,
                           p.batch, p.hidden, p.reverse ? ", reverse" : "",
                           kernel.dynamicSharedBytes)
                 .str()));
    op->replaceAllUsesWith(call.getResults());
    op->erase();
    return success();
  }

  /// Gives the kernel its name (kiln_rnn_N); an identical kernel (the same
  /// source: two layers of one shape) shares the first one's binary.
  std::string nameKernel(cx::GemmKernels &kernels) {
    auto [it, isNew] = names.try_emplace(kiln::templateKernelKey(kernels), "");
    if (isNew)
      it->second = "kiln_rnn_" + std::to_string(names.size() - 1);
    std::string name = it->second;
    kiln::nameTemplateKernels(kernels, name);
    return name;
  }

  llvm::StringMap<std::string> names;
  llvm::StringSet<> declared;
};

} // namespace
