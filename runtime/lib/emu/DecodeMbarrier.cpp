//===- DecodeMbarrier.cpp - mbarrier, cp.async.mbarrier.arrive, fences ----===//
//
// The mbarrier family on shared memory: init, arrive (with a count,
// .expect_tx, arrive_drop), expect_tx, complete_tx, test_wait and try_wait
// (with .parity, and try_wait's suspend-time hint), inval, and cp.async's
// arrive-on (.noinc). Operands: dst[0] the state or predicate (kNoSlot for
// '_'), src[0] the mbarrier's address (offset in Instruction::offset),
// src[1] the count, tx-count, state or parity. Also the sm_90 fence
// qualifiers (fence.proxy.async*, fence.mbarrier_init.release.cluster),
// which have no emulated effect.
//
//===----------------------------------------------------------------------===//

#include "ParserInternal.h"

namespace kiln::runtime::emu::detail {

bool KernelBuilder::decodeMbarrierModifier(DecodedInstruction &d,
                                           std::string_view m) {
  Instruction &inst = d.inst;
  if (inst.op == Op::Membar) {
    // fence.proxy.async{.shared::cta,.global,...}, fence.proxy.tensormap,
    // fence.mbarrier_init.release.cluster, prefetch.tensormap: one block
    // runs on one host thread, so there is nothing to order (the race
    // checker follows fence.proxy.async).
    if (m == "async")
      inst.subop = uint8_t(FenceKind::ProxyAsync);
    // membar.{cta,gl,sys}, fence.{sc,acq_rel}.{cta,gpu,sys} (__threadfence:
    // split-K's last-block handshake, SplitKReduce.cuh).
    bool memory = m == "gl" || m == "sys" || m == "gpu" || m == "cta" ||
                  m == "sc" || m == "acq_rel";
    if (memory && FenceKind(inst.subop) == FenceKind::Other)
      inst.subop = uint8_t(FenceKind::Memory);
    return memory || m == "proxy" || m == "async" || m == "mbarrier_init" ||
           m == "cluster" || m == "alias" || m == "tensormap" ||
           m == "tensor" || m == "tile" || m == "1d" || m == "2d" ||
           m == "3d" || m == "4d" || m == "5d";
  }
  if (inst.op == Op::CpAsync && m == "mbarrier") {
    inst.op = Op::Mbarrier;
    inst.subop = uint8_t(MbarrierOp::CpAsyncArrive);
    return true;
  }
  if (inst.op != Op::Mbarrier)
    return false;
  MbarrierOp op = MbarrierOp(inst.subop);
  if (op == MbarrierOp::CpAsyncArrive) {
    if (m == "arrive")
      return true;
    if (m == "noinc") {
      inst.aux = 1;
      return true;
    }
    return false;
  }
  if (m == "init")
    inst.subop = uint8_t(MbarrierOp::Init);
  else if (m == "arrive")
    inst.subop = uint8_t(MbarrierOp::Arrive);
  else if (m == "arrive_drop")
    inst.subop = uint8_t(MbarrierOp::ArriveDrop);
  else if (m == "expect_tx")
    inst.subop = uint8_t(op == MbarrierOp::Arrive ? MbarrierOp::ArriveExpectTx
                                                  : MbarrierOp::ExpectTx);
  else if (m == "complete_tx")
    inst.subop = uint8_t(MbarrierOp::CompleteTx);
  else if (m == "test_wait")
    inst.subop = uint8_t(MbarrierOp::TestWait);
  else if (m == "try_wait")
    inst.subop = uint8_t(MbarrierOp::TryWait);
  else if (m == "inval")
    inst.subop = uint8_t(MbarrierOp::Inval);
  else if (m == "parity")
    inst.aux = 1;
  else
    return false;
  return true;
}

Error KernelBuilder::decodeMbarrierOperands(DecodedInstruction &d) {
  Instruction &inst = d.inst;
  const std::vector<std::string_view> &operands = d.operands;
  const uint32_t line = d.line;
  // The first part after "mbarrier" names the operation; a bare
  // "mbarrier.b64" is not one.
  if (d.parts.size() < 2 ||
      (d.parts[0] == "mbarrier" && parseType(d.parts[1]) != Type::None))
    return unknownInstruction(d);
  if (inst.type != Type::B64)
    return makeError("PTX line {}: '{}' needs .b64 (mbarrier objects are 64 "
                     "bits)",
                     line, d.opcode);
  auto addressAt = [&](size_t i) -> Error {
    inst.numSrc = 1;
    return address(operands[i], line, inst);
  };
  switch (MbarrierOp(inst.subop)) {
  case MbarrierOp::Init:     // [addr], count
  case MbarrierOp::ExpectTx: // [addr], txCount
  case MbarrierOp::CompleteTx:
    if (Error err = expectOperands(d, 2))
      return err;
    if (Error err = addressAt(0))
      return err;
    return readSources(d, 1);
  case MbarrierOp::Inval:
  case MbarrierOp::CpAsyncArrive: // [addr]
    if (Error err = expectOperands(d, 1))
      return err;
    return addressAt(0);
  case MbarrierOp::Arrive: // state, [addr]{, count}
  case MbarrierOp::ArriveDrop:
  case MbarrierOp::ArriveExpectTx: // state, [addr], txCount
    if (operands.size() != 2 && operands.size() != 3)
      return makeError("PTX line {}: '{}' takes 2 or 3 operands", line,
                       d.opcode);
    if (MbarrierOp(inst.subop) == MbarrierOp::ArriveExpectTx &&
        operands.size() != 3)
      return makeError("PTX line {}: '{}' needs a tx-count", line, d.opcode);
    if (Error err = readDest(d, operands[0]))
      return err;
    if (Error err = addressAt(1))
      return err;
    return readSources(d, 2);
  case MbarrierOp::TestWait: // p, [addr], state|parity
  case MbarrierOp::TryWait:  // p, [addr], state|parity{, suspendTimeHint}
    if (operands.size() != 3 &&
        !(MbarrierOp(inst.subop) == MbarrierOp::TryWait &&
          operands.size() == 4))
      return makeError("PTX line {}: wrong operands for '{}'", line, d.opcode);
    if (Error err = readDest(d, operands[0]))
      return err;
    if (Error err = addressAt(1))
      return err;
    if (Error err = readSources(d, 2))
      return err;
    inst.numSrc = 2; // the suspend-time hint is only a hint
    return Error::success();
  }
  return unknownInstruction(d);
}

} // namespace kiln::runtime::emu::detail
