//===- ParseOperands.cpp - Registers, immediates and addresses ------------===//
//
// Every operand becomes a slot: declared registers first, then one slot per
// distinct immediate or symbol address (parameters are offsets into the
// parameter buffer, shared variables offsets into the block's shared
// memory, module variables device addresses bound at load), then the
// special registers the kernel reads. Also the operand helpers the
// instruction families' decoders share.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

#include <algorithm>
#include <iterator>

namespace kiln::runtime::emu::detail {

/// Splits at top-level commas (not inside [] or {}).
std::vector<std::string_view> splitOperands(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[' || s[i] == '{')
      ++depth;
    else if (s[i] == ']' || s[i] == '}')
      --depth;
    else if (s[i] == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string_view last = trim(s.substr(start));
  if (!last.empty() || !out.empty())
    out.push_back(last);
  return out;
}

bool parseInteger(std::string_view s, int64_t &value) {
  s = trim(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (!s.empty() && (s.back() == 'U' || s.back() == 'u'))
    s.remove_suffix(1);
  if (s.empty())
    return false;
  uint64_t v = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (char c : s.substr(2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        return false;
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(c))
                        ? c - '0'
                        : (std::tolower(c) - 'a' + 10));
    }
  } else if (s.size() > 1 && s[0] == '0' &&
             std::isdigit(static_cast<unsigned char>(s[1]))) {
    for (char c : s.substr(1)) {
      if (c < '0' || c > '7')
        return false;
      v = v * 8 + (c - '0');
    }
  } else {
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c)))
        return false;
      v = v * 10 + (c - '0');
    }
  }
  value = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

/// 0fXXXXXXXX (f32 bits) and 0dXXXXXXXXXXXXXXXX (f64 bits).
bool parseFloatBits(std::string_view s, uint64_t &bits, bool &isF32) {
  if (s.size() < 3 || s[0] != '0' ||
      (s[1] != 'f' && s[1] != 'F' && s[1] != 'd' && s[1] != 'D'))
    return false;
  isF32 = s[1] == 'f' || s[1] == 'F';
  size_t digits = isF32 ? 8 : 16;
  if (s.size() != 2 + digits)
    return false;
  uint64_t v = 0;
  for (char c : s.substr(2)) {
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      return false;
    v = v * 16 + (std::isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : (std::tolower(c) - 'a' + 10));
  }
  bits = v;
  return true;
}

namespace {

struct SpecialName {
  const char *name;
  Special which;
};

constexpr SpecialName kSpecials[] = {
    {"%tid.x", Special::TidX},
    {"%tid.y", Special::TidY},
    {"%tid.z", Special::TidZ},
    {"%ntid.x", Special::NtidX},
    {"%ntid.y", Special::NtidY},
    {"%ntid.z", Special::NtidZ},
    {"%ctaid.x", Special::CtaidX},
    {"%ctaid.y", Special::CtaidY},
    {"%ctaid.z", Special::CtaidZ},
    {"%nctaid.x", Special::NctaidX},
    {"%nctaid.y", Special::NctaidY},
    {"%nctaid.z", Special::NctaidZ},
    {"%laneid", Special::LaneId},
    {"%warpid", Special::WarpId},
    {"%nwarpid", Special::NWarpId},
    {"%lanemask_eq", Special::LanemaskEq},
    {"%lanemask_lt", Special::LanemaskLt},
    {"%lanemask_le", Special::LanemaskLe},
    {"%lanemask_gt", Special::LanemaskGt},
    {"%lanemask_ge", Special::LanemaskGe},
    {"%smid", Special::Smid},
    {"%nsmid", Special::Nsmid},
    {"%gridid", Special::GridId},
    {"%dynamic_smem_size", Special::DynamicSmemSize},
    {"%total_smem_size", Special::TotalSmemSize},
    {"%cluster_ctaid.x", Special::ClusterCtaidX},
    {"%cluster_ctaid.y", Special::ClusterCtaidY},
    {"%cluster_ctaid.z", Special::ClusterCtaidZ},
    {"%cluster_nctaid.x", Special::ClusterNctaidX},
    {"%cluster_nctaid.y", Special::ClusterNctaidY},
    {"%cluster_nctaid.z", Special::ClusterNctaidZ},
    {"%cluster_ctarank", Special::ClusterCtarank},
    {"%cluster_nctarank", Special::ClusterNctarank},
    {"%clusterid.x", Special::ClusteridX},
    {"%clusterid.y", Special::ClusteridY},
    {"%clusterid.z", Special::ClusteridZ},
    {"%nclusterid.x", Special::NclusteridX},
    {"%nclusterid.y", Special::NclusteridY},
    {"%nclusterid.z", Special::NclusteridZ},
    {"%is_explicit_cluster", Special::IsExplicitCluster},
};

} // namespace

uint32_t KernelBuilder::constantSlot(uint64_t value, int32_t globalVar) {
  if (globalVar == -1) {
    auto it = constantSlots.find(value);
    if (it != constantSlots.end())
      return it->second;
  }
  uint32_t slot = addSlot(64);
  kernel.constants.push_back({slot, value, globalVar});
  if (globalVar == -1)
    constantSlots[value] = slot;
  return slot;
}

Expected<uint32_t> KernelBuilder::sourceSlot(std::string_view operand,
                                             uint32_t line) {
  operand = trim(operand);
  if (operand.empty())
    return makeError("PTX line {}: empty operand", line);
  if (operand[0] != '%') { // registers need no '%' ("{ .reg .b32 tmp; ...")
    auto it = registers.find(std::string(operand));
    if (it != registers.end())
      return it->second;
  }
  if (operand[0] == '%') {
    auto it = registers.find(std::string(operand));
    if (it != registers.end())
      return it->second;
    for (const SpecialName &special : kSpecials) {
      if (operand == special.name) {
        auto found = specialSlots.find(static_cast<int>(special.which));
        if (found != specialSlots.end())
          return found->second;
        uint32_t slot = addSlot(32);
        kernel.specials.push_back({slot, special.which});
        specialSlots[static_cast<int>(special.which)] = slot;
        return slot;
      }
    }
    return makeError("PTX line {}: unknown register '{}'", line, operand);
  }
  uint64_t bits = 0;
  bool isF32 = false;
  if (parseFloatBits(operand, bits, isF32))
    return constantSlot(bits);
  int64_t value = 0;
  if (parseInteger(operand, value))
    return constantSlot(static_cast<uint64_t>(value));
  auto symbol = symbols.find(std::string(operand));
  if (symbol != symbols.end())
    return constantSlot(symbol->second);
  for (const std::string &name : dynamicSharedSymbols)
    if (operand == name)
      return constantSlot(0, kDynamicSharedMarker);
  auto global = globalIndex.find(std::string(operand));
  if (global != globalIndex.end())
    return constantSlot(0, static_cast<int32_t>(global->second));
  return makeError("PTX line {}: cannot read operand '{}'", line, operand);
}

Expected<uint32_t> KernelBuilder::destSlot(std::string_view operand,
                                           uint32_t line) {
  operand = trim(operand);
  if (operand == "_")
    return kNoSlot;
  auto it = registers.find(std::string(operand));
  if (it == registers.end())
    return makeError("PTX line {}: '{}' is not a declared register", line,
                     operand);
  return it->second;
}

/// [%rd1], [%rd1+8], [%rd1+-4], [sym], [sym+4], [1024].
Error KernelBuilder::address(std::string_view operand, uint32_t line,
                             Instruction &inst) {
  operand = trim(operand);
  if (operand.size() < 2 || operand.front() != '[' || operand.back() != ']')
    return makeError("PTX line {}: expected an address, got '{}'", line,
                     operand);
  std::string_view inside = trim(operand.substr(1, operand.size() - 2));
  size_t plus = inside.find('+', 1);
  size_t minus = inside.find('-', 1);
  size_t split = std::min(plus, minus);
  std::string_view base = trim(inside.substr(0, split));
  int64_t offset = 0;
  if (split != std::string_view::npos) {
    std::string_view rest = trim(inside.substr(split + (inside[split] == '+')));
    if (!parseInteger(rest, offset))
      return makeError("PTX line {}: bad address offset in '{}'", line,
                       operand);
  }
  int64_t absolute = 0;
  lastAddressIsCallParam = false;
  if (parseInteger(base, absolute)) {
    inst.src[0] = constantSlot(0);
    inst.offset = absolute + offset;
    return Error::success();
  }
  lastAddressIsCallParam = callParams.count(std::string(base)) != 0;
  Expected<uint32_t> slot = sourceSlot(base, line);
  if (!slot)
    return slot.takeError();
  inst.src[0] = *slot;
  inst.offset = offset;
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Operand helpers for the instruction families' decoders
//===----------------------------------------------------------------------===//

Error KernelBuilder::expectOperands(const DecodedInstruction &d, size_t n) {
  if (d.operands.size() != n)
    return makeError("PTX line {}: '{}' takes {} operands, got {}", d.line,
                     d.opcode, n, d.operands.size());
  return Error::success();
}

Error KernelBuilder::readSources(DecodedInstruction &d, size_t first) {
  Instruction &inst = d.inst;
  for (size_t i = first; i < d.operands.size(); ++i) {
    Expected<uint32_t> slot = sourceSlot(d.operands[i], d.line);
    if (!slot)
      return slot.takeError();
    if (inst.numSrc == std::size(inst.src))
      return makeError("PTX line {}: too many source operands", d.line);
    inst.src[inst.numSrc++] = *slot;
  }
  return Error::success();
}

Error KernelBuilder::readDest(DecodedInstruction &d, std::string_view operand) {
  Expected<uint32_t> slot = destSlot(operand, d.line);
  if (!slot)
    return slot.takeError();
  d.inst.dst[d.inst.numDst++] = *slot;
  return Error::success();
}

Error KernelBuilder::readPairedDest(DecodedInstruction &d,
                                    std::string_view operand, bool padMissing) {
  size_t bar = operand.find('|');
  if (Error err = readDest(d, operand.substr(0, bar)))
    return err;
  if (bar != std::string_view::npos)
    return readDest(d, operand.substr(bar + 1));
  if (padMissing)
    d.inst.dst[d.inst.numDst++] = kNoSlot;
  return Error::success();
}

Error KernelBuilder::readNegatableSource(DecodedInstruction &d,
                                         std::string_view operand) {
  operand = trim(operand);
  if (!operand.empty() && operand[0] == '!') {
    d.inst.negateSrc = true;
    operand.remove_prefix(1);
  }
  Expected<uint32_t> slot = sourceSlot(operand, d.line);
  if (!slot)
    return slot.takeError();
  d.inst.src[d.inst.numSrc++] = *slot;
  return Error::success();
}

Expected<std::vector<std::string_view>>
KernelBuilder::vectorElements(const DecodedInstruction &d,
                              std::string_view operand) {
  operand = trim(operand);
  if (operand.size() < 2 || operand.front() != '{' || operand.back() != '}')
    return makeError("PTX line {}: expected a vector operand, got '{}'", d.line,
                     operand);
  return splitOperands(operand.substr(1, operand.size() - 2));
}

Error KernelBuilder::unknownInstruction(const DecodedInstruction &d) const {
  return makeError("PTX line {}: unsupported instruction '{}' in kernel '{}'",
                   d.line, d.opcode, kernel.name);
}

} // namespace kiln::runtime::emu::detail
