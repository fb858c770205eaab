//===- PtxParser.h - PTX text to decoded kernels for the emulator -*- C++ -*-===//
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
};

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
  bool shiftLeft = false;
  bool shiftClamp = false;
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
  /// Line of the .entry, for messages.
  uint32_t line = 0;
  /// Instruction text per line is not kept; messages quote the opcode.
  std::vector<std::string> opcodeText;
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
