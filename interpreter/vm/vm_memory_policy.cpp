// The VM's memory policies: FwdCheckpoint and Recompute run on the piece
// (runtime/model_offload.cpp), Offload and Reload post a copy on the
// Machine's HostCopies that a WaitOffload, WaitReload or WaitAll completes
// (the link's rule, wait_requests), as an ISend's Wait completes it. A
// recomputed forward is the same forward on the same input and weights, so
// the backward reads the values a Fwd would have left, bit for bit.
// Leaves out: whether the program may (check_memory_policy.cpp), the bytes
// (the ledger sees the piece's buffers come and go).
#include "vm_step.hpp"

namespace pipevm {

void VmStep::forward_checkpoint(const Instruction& in) {
  Chunk& chunk = weights_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  if (flags & dataflow::forwarded) unsupported("the micro-batch was already forwarded");
  if (flags & dataflow::input_pending) {
    unsupported("its input is still being received: wait for the IRecv first");
  }
  if (!(flags & dataflow::present(Value::input, ends(chunk))) &&
      !take_input_on_rank(chunk, in)) {
    unsupported("its input was neither loaded nor received");
  }
  chunk.piece.forward_checkpoint(static_cast<int>(in.micro_batch));
  flags |= dataflow::forwarded;
  if (m_.comm_.pending() > 0) m_.comm_.progress();
}

void VmStep::recompute(const Instruction& in) {
  Chunk& chunk = weights_of(in);
  if (chunk.piece.stash_state(static_cast<int>(in.micro_batch)) !=
      runtime::StashState::input_only) {
    unsupported("no FwdCheckpoint kept its input to recompute from");
  }
  chunk.piece.recompute(static_cast<int>(in.micro_batch));
  if (m_.comm_.pending() > 0) m_.comm_.progress();
}

void VmStep::require_stash(Chunk& chunk, const Instruction& in) {
  switch (chunk.piece.stash_state(static_cast<int>(in.micro_batch))) {
    case runtime::StashState::on_device:
      return;
    case runtime::StashState::input_only:
      unsupported("its forward kept only its input (FwdCheckpoint): Recompute first");
    case runtime::StashState::offloading:
    case runtime::StashState::on_host:
      unsupported("its activations are offloaded: Reload and WaitReload first");
    case runtime::StashState::reloading:
      unsupported("its activations are still being reloaded: WaitReload first");
  }
}

void VmStep::start_host_copy(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  const int slot = static_cast<int>(in.micro_batch);
  if (info(in.op).direction == Direction::to_host) {
    chunk.piece.start_offload(slot, m_.host_copies_);
  } else {
    chunk.piece.start_reload(slot);
  }
  m_.pending_.push_back(
      {WaitDirection::none, MessageKind::none, in.micro_batch, in.chunk, -1, index_});
}

void VmStep::finish_host_copy(const Machine::PendingMessage& copy) {
  runtime::Piece& piece = m_.chunks_[copy.chunk].piece;
  const int slot = static_cast<int>(copy.micro_batch);
  if (info(code_[copy.instruction].op).direction == Direction::to_host) {
    piece.finish_offload(slot);
  } else {
    piece.finish_reload(slot);
  }
}

}  // namespace pipevm
