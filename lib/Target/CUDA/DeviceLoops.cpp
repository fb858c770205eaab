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
// Each group of copies is one launch of a hand-written PTX kernel,
// kiln_copy_state_<n> (grid row j copies pair j), in a gpu.binary of its
// own (the emulator runs it like every kernel): a loop's iteration costs
// its body's launches plus one. The
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

constexpr uint32_t kCopyBlock = 256;

/// The copy kernel for `count` copies, `kiln_copy_state_<count>(dst0, src0,
/// n0, dst1, src1, n1, ...)`: grid row y copies n_y bytes from src_y to
/// dst_y, 4-byte words by a grid-stride loop along x (every buffer starts
/// 64-byte aligned), the last n_y % 4 bytes by the row's first thread. One
/// launch moves a whole loop state. The header lines come from the module's
/// other kernels, so the PTX version and target match theirs.
std::string copyKernelPtx(llvm::StringRef header, unsigned count) {
  std::string name = "kiln_copy_state_" + std::to_string(count);
  std::string ptx = header.str() + "\n.visible .entry " + name + "(\n";
  for (unsigned i = 0; i < 3 * count; ++i)
    ptx += "\t.param .u64 " + name + "_param_" + std::to_string(i) +
           (i + 1 < 3 * count ? ",\n" : "\n");
  ptx += ")\n{\n\t.reg .pred \t%p<5>;\n\t.reg .b32 \t%r<8>;\n"
         "\t.reg .b64 \t%rd<16>;\n\t.reg .b64 \t%a<" +
         std::to_string(3 * count) + ">;\n\n";
  for (unsigned i = 0; i < 3 * count; ++i)
    ptx += "\tld.param.u64 \t%a" + std::to_string(i) + ", [" + name +
           "_param_" + std::to_string(i) + "];\n";
  // Row y's (dst, src, n): the first copy's, replaced by copy j's when
  // %ctaid.y == j.
  ptx += "\tmov.u32 \t%r7, %ctaid.y;\n"
         "\tmov.b64 \t%rd1, %a0;\n\tmov.b64 \t%rd2, %a1;\n"
         "\tmov.b64 \t%rd3, %a2;\n";
  for (unsigned j = 1; j < count; ++j) {
    std::string k = std::to_string(j);
    ptx += "\tsetp.eq.u32 \t%p4, %r7, " + k + ";\n";
    for (unsigned f = 0; f < 3; ++f)
      ptx += "\tselp.b64 \t%rd" + std::to_string(f + 1) + ", %a" +
             std::to_string(3 * j + f) + ", %rd" + std::to_string(f + 1) +
             ", %p4;\n";
  }
  ptx += R"(	cvta.to.global.u64 	%rd1, %rd1;
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
  return ptx;
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
    std::optional<DeviceLoopParts> parts = deviceLoopParts(call, body);
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
    if (llvm::Error err = copies(b, loc, state, parts->state))
      return err;
    Operation *before = b.getInsertionPoint() == b.getBlock()->begin()
                            ? nullptr
                            : &*std::prev(b.getInsertionPoint());
    size_t index = loops.size();
    loops.push_back({before, nullptr, state[0]});

    IRMapping map;
    Block &entry = body.front();
    size_t n = entry.getNumArguments();
    size_t outs = parts->finals.size();
    for (auto [i, arg] : llvm::enumerate(entry.getArguments())) {
      Value to = i < static_cast<size_t>(k) ? state[i]
                 : i + outs < n            ? parts->invariants[i - k]
                                           : parts->finals[i + outs - n];
      map.map(arg, to);
    }
    SmallVector<func::CallOp> nested;
    for (Operation &op : entry.without_terminator()) {
      if (auto copyOp = dyn_cast<memref::CopyOp>(op)) {
        Value to = map.lookup(copyOp.getTarget());
        Value from = map.lookup(copyOp.getSource());
        if (llvm::Error err = copies(b, loc, to, from))
          return err;
        continue;
      }
      Operation *clone = b.clone(op, map);
      if (auto inner = dyn_cast<func::CallOp>(clone))
        nested.push_back(inner);
    }
    // The next state back into the loop's buffers.
    if (llvm::Error err =
            copies(b, loc, state, parts->finals.take_front(state.size())))
      return err;
    Operation *last = &*std::prev(b.getInsertionPoint());
    loops[index].last = last;
    // The carried values' final state (the flag and the counter are not
    // results of the Loop).
    if (state.size() > 2)
      if (llvm::Error err =
              copies(b, loc, parts->finals.take_front(state.size()).drop_front(2),
                     ValueRange(state).drop_front(2)))
        return err;
    call.erase();
    for (func::CallOp inner : nested)
      if (llvm::Error err = expand(inner))
        return err;
    return llvm::Error::success();
  }

  /// One launch of kiln_copy_state_<n>: all of from[j] into to[j].
  llvm::Error copies(OpBuilder &b, Location loc, ValueRange to,
                     ValueRange from) {
    uint64_t words = 1;
    SmallVector<Value> operands;
    for (auto [dst, src] : llvm::zip_equal(to, from)) {
      if (dst.getType() != src.getType())
        return llvm::createStringError(
            "a device loop copies between buffers of different types");
      uint64_t bytes = byteSize(cast<MemRefType>(dst.getType()));
      words = std::max(words, bytes / 4);
      operands.append({dst, src,
                       arith::ConstantIntOp::create(
                           b, loc, static_cast<int64_t>(bytes), 64)});
    }
    unsigned count = static_cast<unsigned>(to.size());
    FailureOr<SymbolRefAttr> kernel = copyKernel(count);
    if (failed(kernel))
      return llvm::createStringError(
          "a device-side loop needs the module's kernels compiled to PTX "
          "first");
    auto index = [&](uint64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(v));
    };
    Value one = index(1);
    uint64_t blocks =
        std::min<uint64_t>(4096, (words + kCopyBlock - 1) / kCopyBlock);
    gpu::KernelDim3 grid{index(blocks), index(count), one};
    gpu::KernelDim3 block{index(std::min<uint64_t>(kCopyBlock, words)), one,
                          one};
    gpu::LaunchFuncOp::create(b, loc, *kernel, grid, block, Value(), operands,
                              /*asyncObject=*/Value());
    return llvm::Error::success();
  }

  /// The copy kernel for `count` copies in a gpu.binary of its own, added
  /// once, its PTX object made like the module's other kernels' (same
  /// target attribute and PTX header).
  FailureOr<SymbolRefAttr> copyKernel(unsigned count) {
    std::string name = "kiln_copy_state_" + std::to_string(count);
    std::string binaryName = "kiln_loop_copy_" + std::to_string(count);
    auto symbol = SymbolRefAttr::get(
        module.getContext(), binaryName,
        {FlatSymbolRefAttr::get(module.getContext(), name)});
    if (module.lookupSymbol(binaryName))
      return symbol;
    gpu::ObjectAttr model;
    for (auto binary : module.getOps<gpu::BinaryOp>())
      if (binary.getObjects().size() == 1)
        if ((model = dyn_cast<gpu::ObjectAttr>(binary.getObjects()[0])))
          break;
    if (!model)
      return failure();
    // The PTX header: everything before the first entry or function.
    llvm::StringRef ptx = model.getObject().getValue();
    size_t end = std::min(ptx.find(".visible"), ptx.find(".entry"));
    for (llvm::StringRef key : {".extern", ".global", ".shared", ".const",
                                ".func", ".weak"})
      end = std::min(end, ptx.find(key));
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    auto object = gpu::ObjectAttr::get(
        module.getContext(), model.getTarget(), model.getFormat(),
        b.getStringAttr(copyKernelPtx(ptx.take_front(end), count)), nullptr,
        nullptr);
    gpu::BinaryOp::create(b, module.getLoc(), binaryName, nullptr,
                          ArrayRef<Attribute>{object});
    return symbol;
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
