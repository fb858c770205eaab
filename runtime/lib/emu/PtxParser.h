//===- PtxParser.h - PTX text to decoded kernels for the emulator -*- C++
//-*-===//
//
// The emulator never looks at PTX text while it runs: parsePtx turns a module
// into kernels whose instructions name register slots, not register names.
// Every operand is a slot: real registers first, then one slot per distinct
// immediate or symbol address (filled once per warp), then the special
// registers (%tid, %ctaid, ...) the kernel reads. So an instruction reads
// its sources the same way whatever they were in the text. An instruction
// or directive the emulator does not know is an error naming its line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_EMU_PTXPARSER_H
#define KILN_RUNTIME_LIB_EMU_PTXPARSER_H

#include "kiln/runtime/Error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime::emu {

/// The "no slot" value (kNoSlot, below), for declarations that precede it.
constexpr uint32_t kNoSlotValue = ~0u;

enum class Type : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
  /// TensorFloat-32: an f32 bit pattern of which mma reads the upper 19 bits.
  TF32,
  /// The 8-bit floats of the fp8 mma and wgmma shapes: E4M3 (bias 7, no
  /// infinities, S.1111.111 is NaN, max 448) and E5M2 (bias 15, IEEE-like).
  E4M3,
  E5M2,
  /// Two of them in 16 bits (cvt only; the first operand in the upper byte).
  E4M3x2,
  E5M2x2,
};

/// Size of a value of `type` in bytes (0 for None, 1 for Pred).
unsigned typeBytes(Type type);
bool isSigned(Type type);
bool isFloat(Type type);
const char *typeName(Type type);

enum class Op : uint8_t {
  Mov,
  Add,
  Sub,
  Mul,
  Mad,
  Fma,
  Div,
  Rem,
  Neg,
  Abs,
  Min,
  Max,
  And,
  Or,
  Xor,
  Not,
  Shl,
  Shr,
  Setp,
  Selp,
  Cvt,
  Cvta,
  Ld,
  St,
  Bra,
  Ret,
  Exit,
  Bar,
  Shfl,
  Ex2,
  Lg2,
  Rcp,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Copysign,
  Bfe,
  Bfi,
  Popc,
  Clz,
  Brev,
  Membar,
  /// Funnel shift: shf.{l,r}.{wrap,clamp}.b32.
  Shf,
  /// atom/red: `subop` is an AtomOp; red has no destination.
  Atom,
  Red,
  /// vote.sync: `subop` is a VoteMode.
  Vote,
  Activemask,
  /// redux.sync: `subop` is an AtomOp (add/min/max/and/or/xor).
  Redux,
  /// prmt: `subop` is a PrmtMode.
  Prmt,
  Bfind,
  /// slct.dtype.ctype d, a, b, c: c >= 0 ? a : b (type, srcType).
  Slct,
  Lop3,
  /// testp: `subop` is a TestpOp.
  Testp,
  Mul24,
  Mad24,
  Sad,
  Cnot,
  Bmsk,
  Szext,
  /// dp4a.atype.btype (type, srcType).
  Dp4a,
  /// mov from %clock/%clock64/%globaltimer*: `subop` says which.
  Clock,
  /// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: vec = count.
  Ldmatrix,
  /// mma.sync.aligned: `subop` is an MmaShape; the operand slots are
  /// Kernel::operandLists[target ..].
  Mma,
  /// cp.async.{ca,cg}.shared.global [dst], [src], size{, src-size}.
  CpAsync,
  CpAsyncCommit,
  /// cp.async.wait_group N (src[0]) / wait_all (numSrc == 0).
  CpAsyncWait,
  /// stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 [a], {r...}:
  /// src[0] is the address, src[1..vec] the registers.
  Stmatrix,
  /// set.cmp{.bool}.dtype.stype d, a, b{, {!}c}: all ones (or 1.0f) or 0.
  Set,
  /// dp2a.{lo,hi}.atype.btype (mulMode Lo/Hi; type, srcType).
  Dp2a,
  /// match.sync.{any,all}.b32/b64 d{|p}, a, membermask: subop 0 any, 1 all.
  Match,
  /// setmaxnreg.{inc,dec}.sync.aligned.u32 N (checked when decoded; no
  /// effect: the emulator's registers are not a per-SM budget).
  Setmaxnreg,
  /// elect.sync d|p, membermask: d = the leader lane, p true in it.
  Elect,
  /// mbarrier.* and cp.async.mbarrier.arrive: `subop` is an MbarrierOp.
  Mbarrier,
  /// wgmma.*: `subop` is a WgmmaOp; mma_async's shape and operands are in
  /// Kernel::wgmmas[target].
  Wgmma,
  /// cp.async.bulk{.tensor}*, and their commit/wait groups: `subop` is a
  /// BulkOp.
  BulkCopy,
  /// mapa{.shared::cluster}.{u32,u64} d, a, rank (ExecCluster.cpp).
  Mapa,
  /// barrier.cluster.arrive (subop 0) / .wait (subop 1).
  ClusterBarrier,
};

/// The mbarrier operations (ExecMbarrier.cpp).
enum class MbarrierOp : uint8_t {
  Init,
  Arrive,
  ArriveDrop,
  ArriveExpectTx,
  ExpectTx,
  CompleteTx,
  TestWait,
  TryWait,
  Inval,
  /// cp.async.mbarrier.arrive (`aux` 1: .noinc).
  CpAsyncArrive,
};
/// wgmma.fence, mma_async, commit_group, wait_group N.
enum class WgmmaOp : uint8_t { Fence, MmaAsync, Commit, Wait };
/// The bulk copies (ExecBulkCopy.cpp).
enum class BulkOp : uint8_t {
  /// cp.async.bulk.tensor.Nd.shared.global ... [dst], [tmap, {c..}], [mbar].
  TensorLoad,
  /// cp.async.bulk.tensor.Nd.global.shared ... [tmap, {c..}], [src].
  TensorStore,
  /// TensorLoad with .multicast::cluster: the box lands in every block of
  /// the ctaMask operand (operandLists after the coordinates).
  TensorLoadMulticast,
  /// cp.async.bulk.shared.global ... [dst], [src], size, [mbar].
  Load,
  /// cp.async.bulk.global.shared.bulk_group [dst], [src], size.
  Store,
  Commit,
  Wait,
};

/// One wgmma.mma_async: shape, types, and its operand slots.
struct WgmmaInfo {
  uint32_t n = 0; ///< 8..256
  uint32_t k = 0; ///< 16 (f16/bf16), 8 (tf32) or 32 (e4m3/e5m2)
  /// A's type; B's is bType (they differ only for e4m3 x e5m2).
  Type abType = Type::None;
  Type bType = Type::None;
  /// Kernel::operandLists[dFirst .. dFirst + n/2): the accumulators.
  uint32_t dFirst = 0;
  /// A from registers: operandLists[aFirst .. +4); else aDesc is the slot.
  bool aFromRegisters = false;
  uint32_t aFirst = 0;
  uint32_t aDesc = kNoSlotValue;
  uint32_t bDesc = kNoSlotValue;
  /// scale-d: a predicate (or immediate) slot.
  uint32_t scaleD = kNoSlotValue;
  int scaleA = 1, scaleB = 1;
  bool transA = false, transB = false;
};

enum class AtomOp : uint8_t {
  None,
  Add,
  Min,
  Max,
  Inc,
  Dec,
  And,
  Or,
  Xor,
  Exch,
  Cas
};
enum class VoteMode : uint8_t { All, Any, Uni, Ballot };
enum class PrmtMode : uint8_t { Default, F4e, B4e, Rc8, Ecl, Ecr, Rc16 };
enum class TestpOp : uint8_t {
  Finite,
  Infinite,
  Number,
  NotANumber,
  Normal,
  Subnormal
};
/// bar/barrier: sync (wait), arrive (no wait), red (wait and reduce);
/// bar.warp.sync (the member lanes of one warp meet).
enum class BarMode : uint8_t { Sync, Arrive, RedPopc, RedAnd, RedOr, WarpSync };
/// membar/fence (`subop`): fence.proxy.async orders the generic proxy
/// against the async proxy (the race checker tracks it; no other effect).
/// Other: nothing to order in one block's host thread. ProxyAsync:
/// fence.proxy.async (the race checker follows it). Memory: membar.{cta,gl,
/// sys} and fence.{sc,acq_rel}.{cta,gpu,sys}, which order global memory
/// between blocks that run on other host threads (a host fence).
enum class FenceKind : uint8_t { Other, ProxyAsync, Memory };
/// setp's optional .and/.or/.xor with a third predicate.
enum class BoolOp : uint8_t { None, And, Or, Xor };
enum class ClockKind : uint8_t {
  Clock,
  Clock64,
  GlobalTimer,
  GlobalTimerLo,
  GlobalTimerHi
};
/// The mma.sync shapes and types the emulator knows.
enum class MmaShape : uint8_t {
  /// m16n8k16, f16 or bf16 inputs (a: 4 regs, b: 2), f32 accumulators.
  M16N8K16F32,
  /// m16n8k16, f16 inputs, f16 accumulators (c, d: 2 regs of f16x2).
  M16N8K16F16,
  /// m16n8k8, f16 or bf16 inputs (a: 2 regs, b: 1), f32 accumulators.
  M16N8K8F32,
  /// m16n8k8, tf32 inputs (a: 4 regs, b: 2), f32 accumulators.
  M16N8K8Tf32,
  /// m16n8k32, s8 or u8 inputs (a: 4 regs of 4 bytes, b: 2), s32
  /// accumulators (c, d: 4 regs).
  M16N8K32I8,
  /// m16n8k16, s8 or u8 inputs (a: 2 regs, b: 1), s32 accumulators.
  M16N8K16I8,
  /// m16n8k32, e4m3 or e5m2 inputs (a: 4 regs of 4 bytes, b: 2, the int8
  /// layout), f32 accumulators; srcType is A's type, aux 1 when B is e5m2.
  M16N8K32F8,
};

/// The K of an mma.sync shape.
inline unsigned mmaK(MmaShape shape) {
  switch (shape) {
  case MmaShape::M16N8K32I8:
  case MmaShape::M16N8K32F8:
    return 32;
  case MmaShape::M16N8K16F32:
  case MmaShape::M16N8K16F16:
  case MmaShape::M16N8K16I8:
    return 16;
  default:
    return 8;
  }
}

enum class Space : uint8_t { Generic, Global, Shared, Local, Param, Const };

enum class Rounding : uint8_t {
  None,
  Rn,
  Rz,
  Rm,
  Rp,
  Rni,
  Rzi,
  Rmi,
  Rpi,
  /// Round to nearest, ties away from zero (cvt.rna.tf32.f32).
  Rna,
};

enum class Cmp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
};

enum class MulMode : uint8_t { None, Lo, Hi, Wide };
enum class ShflMode : uint8_t { Up, Down, Bfly, Idx };

/// Values the emulator fills per warp, per block or per launch.
enum class Special : uint8_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
  NWarpId,
  LanemaskEq,
  LanemaskLt,
  LanemaskLe,
  LanemaskGt,
  LanemaskGe,
  /// %smid, %gridid: 0; %nsmid: 1.
  Smid,
  Nsmid,
  GridId,
  /// %dynamic_smem_size and %total_smem_size, in bytes.
  DynamicSmemSize,
  TotalSmemSize,
  /// Clusters (sm_90): the block's place in its cluster, the cluster's
  /// shape, the cluster's place in the grid (LaunchSpec::cluster).
  ClusterCtaidX,
  ClusterCtaidY,
  ClusterCtaidZ,
  ClusterNctaidX,
  ClusterNctaidY,
  ClusterNctaidZ,
  ClusterCtarank,
  ClusterNctarank,
  ClusteridX,
  ClusteridY,
  ClusteridZ,
  NclusteridX,
  NclusteridY,
  NclusteridZ,
  /// 1 when the launch named a cluster shape (LaunchSpec::explicitCluster).
  IsExplicitCluster,
};

constexpr uint32_t kNoSlot = ~0u;

struct Instruction {
  Op op = Op::Mov;
  /// The instruction type (the destination type for cvt).
  Type type = Type::None;
  /// cvt's source type.
  Type srcType = Type::None;
  Space space = Space::Generic;
  Rounding rounding = Rounding::None;
  Cmp cmp = Cmp::Eq;
  MulMode mulMode = MulMode::None;
  ShflMode shflMode = ShflMode::Bfly;
  bool ftz = false;
  bool sat = false;
  /// min/max.NaN.
  bool propagateNaN = false;
  /// f16/bf16 .relu (negative results become +0) and cvt .satfinite.
  bool relu = false;
  bool satfinite = false;
  /// cvta.to.<space> (else cvta.<space>).
  bool toSpace = false;
  bool negateGuard = false;
  /// Integer carry chains: `.cc` writes the carry flag, `madc`/`addc` read it.
  bool carryOut = false;
  bool carryIn = false;
  /// shf: shift left (else right); clamp the amount to 32 (else wrap mod 32).
  /// bmsk/szext: clamp (else wrap). bfind: .shiftamt (in shiftLeft).
  bool shiftLeft = false;
  bool shiftClamp = false;
  /// vote's source predicate, setp's third predicate and bar.red's predicate
  /// are negated (`!%p`).
  bool negateSrc = false;
  /// ldmatrix .trans.
  bool transpose = false;
  /// Op-specific flags: mbarrier's .parity, cp.async.mbarrier.arrive's
  /// .noinc, setmaxnreg's .inc, the bulk copies' dimension count.
  uint8_t aux = 0;
  /// The op-specific mode (AtomOp, VoteMode, PrmtMode, TestpOp, BarMode,
  /// ClockKind, MmaShape, FenceKind; for setp a BoolOp).
  uint8_t subop = 0;
  /// ld/st vector width (1, 2 or 4); for mov, a pack/unpack of this many.
  uint8_t vec = 1;
  uint8_t numDst = 0;
  uint8_t numSrc = 0;
  /// Guard predicate slot, or kNoSlot.
  uint32_t guard = kNoSlot;
  uint32_t dst[4] = {kNoSlot, kNoSlot, kNoSlot, kNoSlot};
  /// ld/st: src[0] is the address slot; st's values follow (up to 4 for a
  /// .v4 store, hence 5 entries).
  uint32_t src[5] = {kNoSlot, kNoSlot, kNoSlot, kNoSlot, kNoSlot};
  /// The immediate part of an address ([%rd1+16]).
  int64_t offset = 0;
  /// bra: the index of the target instruction.
  uint32_t target = 0;
  /// 1-based line in the module's PTX text.
  uint32_t line = 0;
};

/// A constant slot: an immediate, or the address of a symbol.
struct Constant {
  uint32_t slot = 0;
  uint64_t value = 0;
  /// The module-level variable whose device address this is, or -1.
  int32_t globalVar = -1;
};

struct SpecialSlot {
  uint32_t slot = 0;
  Special which = Special::TidX;
};

struct KernelParam {
  std::string name;
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct Kernel {
  std::string name;
  std::vector<Instruction> code;
  /// All slots: registers, constants, specials.
  uint32_t numSlots = 0;
  /// Declared width in bits of each slot (64 for constants and specials).
  std::vector<uint8_t> slotBits;
  std::vector<Constant> constants;
  std::vector<SpecialSlot> specials;
  std::vector<KernelParam> params;
  uint32_t paramBytes = 0;
  /// Static shared memory; dynamic shared memory (.extern .shared) starts at
  /// dynamicSharedOffset.
  uint64_t staticSharedBytes = 0;
  uint64_t dynamicSharedOffset = 0;
  /// Per-thread local memory (.local, e.g. libdevice's argument-reduction
  /// scratch); local addresses are offsets into the thread's own copy.
  uint64_t localBytes = 0;
  /// .maxntid, 0 where absent.
  uint32_t maxThreads = 0;
  /// .reqnctapercluster (a kernel compiled with __cluster_dims__): the
  /// cluster shape every launch of it has; 0 where absent.
  uint32_t clusterX = 0, clusterY = 0, clusterZ = 0;
  /// Line of the .entry, for messages.
  uint32_t line = 0;
  /// Instruction text per line is not kept; messages quote the opcode.
  std::vector<std::string> opcodeText;
  /// Operand slots of instructions with more operands than Instruction
  /// holds (mma.sync): d..., a..., b..., c... from Instruction::target.
  std::vector<uint32_t> operandLists;
  /// wgmma.mma_async instructions (Instruction::target indexes this).
  std::vector<WgmmaInfo> wgmmas;
};

/// A module-scope .global or .const variable.
struct GlobalVar {
  std::string name;
  Space space = Space::Global;
  uint64_t size = 0;
  uint64_t align = 1;
  /// Initial bytes (size() == size; zeros where there is no initializer).
  std::vector<uint8_t> init;
};

struct Module {
  std::vector<Kernel> kernels;
  std::vector<GlobalVar> globals;
};

/// Parses a PTX module. Errors read "PTX line N: ...".
Expected<Module> parsePtx(std::string_view text);

} // namespace kiln::runtime::emu

#endif // KILN_RUNTIME_LIB_EMU_PTXPARSER_H
