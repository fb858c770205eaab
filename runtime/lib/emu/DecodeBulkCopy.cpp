//===- DecodeBulkCopy.cpp - cp.async.bulk{.tensor} and their groups -------===//
//
// TMA and the non-tensor bulk copies: the direction from the order of the
// state spaces (the first is the destination), the tensor's dimension
// count, and the operands, which go to Kernel::operandLists from
// Instruction::target as addresses of three entries (pushAddress):
//   tensor load:  dst, tmap, mbar, then the coordinates' slots
//   tensor store: src, tmap, then the coordinates' slots
//   bulk load:    dst, src, mbar, then the size's slot
//   bulk store:   dst, src, then the size's slot
// The tensor map is a generic address: a `__grid_constant__` parameter's
// (kParamWindow, after cvta.param) or global memory. Also
// cp.async.bulk.prefetch (no effect).
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeBulkCopyModifier(DecodedInstruction &d,
                                           std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::CpAsync && m == "bulk") {
    inst.op = Op::BulkCopy;
    inst.subop = uint8_t(BulkOp::Load);
    return true;
  }
  if (inst.op != Op::BulkCopy)
    return false;
  if (m == "tensor") {
    inst.subop = uint8_t(BulkOp::TensorLoad);
    return true;
  }
  if (m.size() == 2 && m[1] == 'd' && m[0] >= '1' && m[0] <= '5') {
    inst.aux = static_cast<uint8_t>(m[0] - '0');
    return true;
  }
  if (m == "commit_group") {
    inst.subop = uint8_t(BulkOp::Commit);
    return true;
  }
  if (m == "wait_group") {
    inst.subop = uint8_t(BulkOp::Wait);
    return true;
  }
  if (m == "prefetch") { // cp.async.bulk.prefetch{.tensor}: a hint
    inst.op = Op::Membar;
    return true;
  }
  return m == "tile" || m == "read" || m == "bulk_group" ||
         m == "mbarrier::complete_tx::bytes" || m == "L2::cache_hint";
}

Error KernelBuilder::pushAddress(std::string_view operand, uint32_t line) {
  Instruction scratch;
  scratch.numSrc = 1;
  if (Error err = address(operand, line, scratch))
    return err;
  uint64_t offset = static_cast<uint64_t>(scratch.offset);
  kernel.operandLists.push_back(scratch.src[0]);
  kernel.operandLists.push_back(static_cast<uint32_t>(offset));
  kernel.operandLists.push_back(static_cast<uint32_t>(offset >> 32));
  return Error::success();
}

Error KernelBuilder::decodeBulkCopyOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  for (std::string_view part : d.parts)
    if (part == "im2col" ||
        part == "im2col_no_offs" || part == "tile::gather4" ||
        part == "tile::scatter4" || part == "cp_mask")
      return makeError("PTX line {}: '{}' is not emulated (.{})", line,
                       d.opcode, part);
  BulkOp op = BulkOp(inst.subop);
  if (op == BulkOp::Commit)
    return expectOperands(d, 0);
  if (op == BulkOp::Wait) {
    if (Error err = expectOperands(d, 1))
      return err;
    return readSources(d, 0);
  }
  bool hint = false, multicast = false;
  for (std::string_view part : d.parts) {
    hint |= part == "L2::cache_hint";
    multicast |= part == "multicast::cluster";
  }
  if (d.spaces.size() != 2)
    return makeError("PTX line {}: '{}' needs a destination and a source "
                     "state space",
                     line, d.opcode);
  bool toGlobal = d.spaces[0] == "global";
  bool fromGlobal = d.spaces[1] == "global";
  if (toGlobal == fromGlobal)
    return makeError("PTX line {}: '{}' is not emulated (only global <-> "
                     "shared copies are)",
                     line, d.opcode);
  if (op == BulkOp::TensorLoad && toGlobal)
    op = BulkOp::TensorStore;
  if (multicast && op != BulkOp::TensorLoad)
    return makeError("PTX line {}: '{}' is not emulated (.multicast::cluster "
                     "on a copy other than a tensor load)",
                     line, d.opcode);
  if (op == BulkOp::Load && toGlobal)
    op = BulkOp::Store;
  inst.subop = uint8_t(op);
  bool tensor = op == BulkOp::TensorLoad || op == BulkOp::TensorStore;
  if (tensor && inst.aux == 0)
    return makeError("PTX line {}: '{}' needs a dimension (.1d to .5d)", line,
                     d.opcode);
  bool completesTx = false;
  for (std::string_view part : d.parts)
    completesTx |= part == "mbarrier::complete_tx::bytes";
  bool isLoad = op == BulkOp::TensorLoad || op == BulkOp::Load;
  if (isLoad != completesTx)
    return makeError("PTX line {}: '{}': loads into shared memory complete "
                     "on an mbarrier (.mbarrier::complete_tx::bytes), stores "
                     "use .bulk_group",
                     line, d.opcode);
  size_t want = (op == BulkOp::TensorLoad    ? 3
                 : op == BulkOp::TensorStore ? 2
                 : op == BulkOp::Load        ? 4
                                             : 3) +
                (hint ? 1 : 0) + (multicast ? 1 : 0);
  if (Error err = expectOperands(d, want))
    return err;
  inst.target = static_cast<uint32_t>(kernel.operandLists.size());
  if (!tensor) {
    if (Error err = pushAddress(operands[0], line))
      return err;
    if (Error err = pushAddress(operands[1], line))
      return err;
    if (op == BulkOp::Load)
      if (Error err = pushAddress(operands[3], line))
        return err;
    Expected<uint32_t> size = sourceSlot(operands[2], line);
    if (!size)
      return size.takeError();
    kernel.operandLists.push_back(*size);
    return Error::success();
  }
  // [tmap, {c0, c1, ...}]
  std::string_view box = trim(operands[op == BulkOp::TensorLoad ? 1 : 0]);
  size_t comma = box.find(',');
  size_t open = box.find('{');
  if (box.size() < 2 || box.front() != '[' || box.back() != ']' ||
      comma == std::string_view::npos || open == std::string_view::npos ||
      open < comma)
    return makeError("PTX line {}: expected [tensorMap, {{coordinates}}], "
                     "got '{}'",
                     line, box);
  std::string_view mapName = trim(box.substr(1, comma - 1));
  std::string_view coords = trim(box.substr(comma + 1, box.size() - comma - 2));
  Expected<std::vector<std::string_view>> elements = vectorElements(d, coords);
  if (!elements)
    return elements.takeError();
  if (elements->size() != inst.aux)
    return makeError("PTX line {}: '{}' takes {} coordinates, got {}", line,
                     d.opcode, inst.aux, elements->size());
  std::string_view data = operands[op == BulkOp::TensorLoad ? 0 : 1];
  if (Error err = pushAddress(data, line))
    return err;
  // The tensor map's generic address (cvta.param of a parameter, or global
  // memory).
  if (Error err = pushAddress("[" + std::string(mapName) + "]", line))
    return err;
  if (op == BulkOp::TensorLoad)
    if (Error err = pushAddress(operands[2], line))
      return err;
  for (std::string_view e : *elements) {
    Expected<uint32_t> slot = sourceSlot(e, line);
    if (!slot)
      return slot.takeError();
    kernel.operandLists.push_back(*slot);
  }
  if (multicast) { // [dst], [tmap, {..}], [mbar], ctaMask{, policy}
    Expected<uint32_t> mask = sourceSlot(operands[3], line);
    if (!mask)
      return mask.takeError();
    kernel.operandLists.push_back(*mask);
    inst.subop = uint8_t(BulkOp::TensorLoadMulticast);
  }
  return Error::success();
}

} // namespace kiln::runtime::emu::detail
