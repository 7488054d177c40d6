// The turn of a V in the VM: values two chunks of one rank hand each other
// with no message (local_source_chunk, program.hpp). A forward of chunk 1
// whose input no Recv brought copies chunk 0's output into it; a backward
// of chunk 0 whose output gradient no Recv brought copies chunk 1's input
// gradient into it, which was that gradient's only use. The bytes are those
// of a send and a receive completed at once at the consumer's step, as the
// byte walk counts them (core/memory_bytes.cpp). A message to the rank
// itself, the older form, is taken as any received value is (vm.cpp).
// Leaves out: whether the program may (the checker's dataflow rules).
#include <algorithm>

#include "vm_step.hpp"

namespace pipevm {

Machine::Chunk* VmStep::source_on_rank(const Instruction& in, MessageKind kind, int& from) {
  from = local_source_chunk(program_.placement, program_.config, m_.stage_, in.chunk, kind);
  if (from < 0) return nullptr;
  Chunk& source = m_.chunks_[static_cast<std::size_t>(from)];
  const std::uint16_t made =
      kind == MessageKind::act ? dataflow::forwarded : dataflow::input_gradient_done;
  return (source.flags[in.micro_batch] & made) ? &source : nullptr;
}

bool VmStep::take_input_on_rank(Chunk& chunk, const Instruction& in) {
  int from = -1;
  Chunk* made = source_on_rank(in, MessageKind::act, from);
  if (made == nullptr) return false;
  Chunk& source = *made;
  const int slot = static_cast<int>(in.micro_batch);
  const runtime::StashState stash = source.piece.stash_state(slot);
  if (stash != runtime::StashState::on_device && stash != runtime::StashState::input_only) {
    unsupported("its input, the output of chunk " + std::to_string(from) +
                " on this rank, is offloaded (Reload and WaitReload it first)");
  }
  const std::span<const float> output = source.piece.output(slot);
  if (output.empty()) {
    unsupported("its input, the output of chunk " + std::to_string(from) + ", is gone");
  }
  const std::span<float> into = chunk.piece.take_input(slot, m_.rows_);
  std::copy(output.begin(), output.end(), into.begin());
  // A checkpointed forward's output had no other use (as a blocking Send of it).
  if (stash == runtime::StashState::input_only) {
    source.piece.begin_output_send(slot);
    source.piece.end_output_send(slot);
  }
  chunk.flags[in.micro_batch] |= dataflow::input_received;
  return true;
}

bool VmStep::take_output_gradient_on_rank(Chunk& chunk, const Instruction& in) {
  int from = -1;
  Chunk* made = source_on_rank(in, MessageKind::grad, from);
  if (made == nullptr) return false;
  Chunk& source = *made;
  const int slot = static_cast<int>(in.micro_batch);
  const std::span<const float> gradient = source.piece.input_gradient(slot);
  if (gradient.empty()) {
    unsupported("its output gradient, the input gradient of chunk " + std::to_string(from) +
                ", is gone (sent elsewhere)");
  }
  const std::span<float> into = chunk.piece.take_output_gradient(slot);
  std::copy(gradient.begin(), gradient.end(), into.begin());
  source.piece.end_input_gradient_send(slot);
  chunk.flags[in.micro_batch] |= dataflow::output_gradient_received;
  return true;
}

}  // namespace pipevm
