//===- DeviceLoops.cpp - Device-side loops in the launch list -------------===//
//
// A device-loop call `call @body(state..., invariants..., finals...)` (after
// bufferization: k state buffers, the invariant operands, k out-parameters)
// becomes, in place:
//
//   S_j = alloc; copy S_j <- state_j            (the loop state, its own
//                                                buffers: never the
//                                                caller's, which may be
//                                                inputs read again later)
//   region while S_0 != 0:
//     the body's ops, its arguments bound to S_j, the invariants and the
//     finals (the body writes the next state into the finals)
//     copy S_j <- finals_j
//   copy finals_j <- S_j for the carried values (j >= 2), so that a loop
//   that runs no iteration gives its initial values
//
// The copies are launches of one hand-written PTX kernel, kiln_copy_bytes,
// in a gpu.binary of its own (the emulator runs it like every kernel). The
// body's flag is `cond and i + 1 < M` (the importer adds it), so the
// runtime only reads one byte before each iteration.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/CUDA/DeviceLoops.h"

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace kiln {
namespace {

constexpr llvm::StringLiteral kCopyModule = "kiln_loop_copy";
constexpr llvm::StringLiteral kCopyKernel = "kiln_copy_bytes";
constexpr uint32_t kCopyBlock = 256;

/// kiln_copy_bytes(dst, src, n): n bytes from src to dst, 4-byte words by a
/// grid-stride loop (every buffer starts 64-byte aligned), the last n % 4
/// bytes by thread 0 of block 0. The header lines come from the module's
/// other kernels, so the PTX version and target match theirs.
std::string copyKernelPtx(llvm::StringRef header) {
  return header.str() + R"(
.visible .entry kiln_copy_bytes(
	.param .u64 kiln_copy_bytes_param_0,
	.param .u64 kiln_copy_bytes_param_1,
	.param .u64 kiln_copy_bytes_param_2
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<16>;

	ld.param.u64 	%rd1, [kiln_copy_bytes_param_0];
	ld.param.u64 	%rd2, [kiln_copy_bytes_param_1];
	ld.param.u64 	%rd3, [kiln_copy_bytes_param_2];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mul.wide.u32 	%rd4, %r1, %r2;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd4, %rd4, %rd5;
	mul.wide.u32 	%rd6, %r4, %r2;
	shr.u64 	%rd7, %rd3, 2;
	mov.u64 	%rd8, %rd4;
$L_words:
	setp.ge.u64 	%p1, %rd8, %rd7;
	@%p1 bra 	$L_tail;
	shl.b64 	%rd9, %rd8, 2;
	add.s64 	%rd10, %rd2, %rd9;
	ld.global.u32 	%r5, [%rd10];
	add.s64 	%rd11, %rd1, %rd9;
	st.global.u32 	[%rd11], %r5;
	add.s64 	%rd8, %rd8, %rd6;
	bra.uni 	$L_words;
$L_tail:
	setp.ne.s64 	%p2, %rd4, 0;
	@%p2 bra 	$L_done;
	shl.b64 	%rd12, %rd7, 2;
$L_bytes:
	setp.ge.u64 	%p3, %rd12, %rd3;
	@%p3 bra 	$L_done;
	add.s64 	%rd13, %rd2, %rd12;
	ld.global.u8 	%r6, [%rd13];
	add.s64 	%rd14, %rd1, %rd12;
	st.global.u8 	[%rd14], %r6;
	add.s64 	%rd12, %rd12, 1;
	bra.uni 	$L_bytes;
$L_done:
	ret;
}
)";
}

uint64_t byteSize(MemRefType type) {
  return static_cast<uint64_t>(type.getNumElements()) *
         std::max<uint64_t>(1, (type.getElementTypeBitWidth() + 7) / 8);
}

llvm::Error errorAt(Operation *op, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 op->getName().getStringRef().str() + ": " +
                                     message.str());
}

class Expander {
public:
  explicit Expander(func::FuncOp host)
      : host(host), module(host->getParentOfType<ModuleOp>()) {}

  llvm::Error run() {
    SmallVector<func::CallOp> calls;
    host.walk([&](func::CallOp call) { calls.push_back(call); });
    for (func::CallOp call : calls)
      if (llvm::Error err = expand(call))
        return err;
    for (func::FuncOp body : bodies)
      if (SymbolTable::symbolKnownUseEmpty(body, module))
        body.erase();
    return llvm::Error::success();
  }

  std::vector<ExpandedDeviceLoop> loops;

private:
  llvm::Error expand(func::CallOp call) {
    auto body = module.lookupSymbol<func::FuncOp>(call.getCallee());
    int64_t k = deviceLoopStateCount(body);
    if (!body || k == 0)
      return errorAt(call, "calls @" + call.getCallee().str() +
                               ", which is not a device-side loop's body; "
                               "the runtime only launches kernels");
    std::optional<DeviceLoopParts> parts = deviceLoopParts(call, k);
    if (!parts || call.getNumResults() ||
        body.getNumArguments() != call.getNumOperands() ||
        body.getBlocks().size() != 1)
      return errorAt(call, "calls device-loop body @" + body.getSymName().str() +
                               " with operands that do not fit it");
    if (!llvm::is_contained(bodies, body))
      bodies.push_back(body);
    OpBuilder b(call);
    Location loc = call.getLoc();
    // The loop state's own buffers, loaded from the call's state operands.
    SmallVector<Value> state;
    for (Value in : parts->state) {
      auto type = dyn_cast<MemRefType>(in.getType());
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
        return errorAt(call, "has a loop state that is not a static buffer");
      state.push_back(memref::AllocOp::create(b, loc, type));
    }
    for (auto [to, from] : llvm::zip(state, parts->state))
      if (llvm::Error err = copy(b, loc, to, from))
        return err;
    Operation *before = b.getInsertionPoint() == b.getBlock()->begin()
                            ? nullptr
                            : &*std::prev(b.getInsertionPoint());
    size_t index = loops.size();
    loops.push_back({before, nullptr, state[0]});

    IRMapping map;
    Block &entry = body.front();
    size_t n = entry.getNumArguments();
    for (auto [i, arg] : llvm::enumerate(entry.getArguments())) {
      Value to = i < static_cast<size_t>(k) ? state[i]
                 : i + k < n               ? parts->invariants[i - k]
                                           : parts->finals[i + k - n];
      map.map(arg, to);
    }
    SmallVector<func::CallOp> nested;
    for (Operation &op : entry.without_terminator()) {
      if (auto copyOp = dyn_cast<memref::CopyOp>(op)) {
        if (llvm::Error err = copy(b, loc, map.lookup(copyOp.getTarget()),
                                   map.lookup(copyOp.getSource())))
          return err;
        continue;
      }
      Operation *clone = b.clone(op, map);
      if (auto inner = dyn_cast<func::CallOp>(clone))
        nested.push_back(inner);
    }
    // The next state back into the loop's buffers.
    for (auto [to, from] : llvm::zip(state, parts->finals))
      if (llvm::Error err = copy(b, loc, to, from))
        return err;
    Operation *last = &*std::prev(b.getInsertionPoint());
    loops[index].last = last;
    // The carried values' final state (the flag and the counter are not
    // results of the Loop).
    for (auto [j, pair] : llvm::enumerate(llvm::zip(parts->finals, state)))
      if (j >= 2)
        if (llvm::Error err =
                copy(b, loc, std::get<0>(pair), std::get<1>(pair)))
          return err;
    call.erase();
    for (func::CallOp inner : nested)
      if (llvm::Error err = expand(inner))
        return err;
    return llvm::Error::success();
  }

  /// A launch of kiln_copy_bytes: all of `from` into `to`.
  llvm::Error copy(OpBuilder &b, Location loc, Value to, Value from) {
    auto type = cast<MemRefType>(to.getType());
    if (from.getType() != to.getType())
      return llvm::createStringError(
          "a device loop copies between buffers of different types");
    if (llvm::Error err = ensureCopyKernel())
      return err;
    uint64_t bytes = byteSize(type);
    uint64_t words = std::max<uint64_t>(1, bytes / 4);
    uint64_t blocks = std::min<uint64_t>(4096, (words + kCopyBlock - 1) / kCopyBlock);
    auto index = [&](uint64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(v));
    };
    Value one = index(1);
    gpu::KernelDim3 grid{index(blocks), one, one};
    gpu::KernelDim3 block{index(std::min<uint64_t>(kCopyBlock, words)), one,
                          one};
    Value count =
        arith::ConstantIntOp::create(b, loc, static_cast<int64_t>(bytes), 64);
    auto kernel = SymbolRefAttr::get(
        b.getStringAttr(kCopyModule),
        {FlatSymbolRefAttr::get(b.getStringAttr(kCopyKernel))});
    gpu::LaunchFuncOp::create(b, loc, kernel, grid, block, Value(),
                              ValueRange{to, from, count},
                              /*asyncObject=*/Value());
    return llvm::Error::success();
  }

  /// The copy kernel's gpu.binary, added once, its PTX object made like
  /// the module's other kernels' (same target attribute and PTX header).
  llvm::Error ensureCopyKernel() {
    if (module.lookupSymbol(kCopyModule))
      return llvm::Error::success();
    gpu::ObjectAttr model;
    for (auto binary : module.getOps<gpu::BinaryOp>())
      if (binary.getObjects().size() == 1)
        if ((model = dyn_cast<gpu::ObjectAttr>(binary.getObjects()[0])))
          break;
    if (!model)
      return llvm::createStringError(
          "a device-side loop needs the module's kernels compiled to PTX "
          "first");
    // The PTX header: everything before the first entry or function.
    llvm::StringRef ptx = model.getObject().getValue();
    size_t end = std::min(ptx.find(".visible"), ptx.find(".entry"));
    for (llvm::StringRef key : {".extern", ".global", ".shared", ".const",
                                ".func", ".weak"})
      end = std::min(end, ptx.find(key));
    llvm::StringRef header = ptx.take_front(end);
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    auto object = gpu::ObjectAttr::get(
        module.getContext(), model.getTarget(), model.getFormat(),
        b.getStringAttr(copyKernelPtx(header)), nullptr, nullptr);
    gpu::BinaryOp::create(b, module.getLoc(), kCopyModule, nullptr,
                          ArrayRef<Attribute>{object});
    return llvm::Error::success();
  }

  func::FuncOp host;
  ModuleOp module;
  SmallVector<func::FuncOp> bodies;
};

} // namespace

llvm::Expected<std::vector<ExpandedDeviceLoop>>
expandDeviceLoops(func::FuncOp host) {
  Expander expander(host);
  if (llvm::Error err = expander.run())
    return std::move(err);
  return std::move(expander.loops);
}

} // namespace kiln
