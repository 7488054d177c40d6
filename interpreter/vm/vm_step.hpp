// What the VM's files share: VmStep, one execution of one rank's stream,
// whose dispatch and per-instruction work are in vm.cpp, whose
// reductions are in vm_reductions.cpp and whose turn of a V is vm_turn.cpp's. Not part of the public interface
// (vm.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "vm.hpp"

namespace pipevm {

// One execution of one rank's stream.
class VmStep {
 public:
  VmStep(const Program& program, Machine& machine)
      : program_(program), m_(machine), code_(program.rank(machine.rank_)) {}

  StepResult run(VmObserver* observer);

 private:
  using Chunk = Machine::Chunk;

  [[noreturn]] void fail(DiagnosticKind kind, const std::string& message) const {
    throw VmError(kind,
                  "rank " + std::to_string(m_.rank_) + ": " + disassemble(*in_) + ": " + message,
                  index_);
  }
  [[noreturn]] void unsupported(const std::string& message) const {
    fail(DiagnosticKind::RuntimeUnsupported, message);
  }

  void execute(const Instruction& in);
  Chunk& chunk_of(const Instruction& in);
  Chunk& chunk_at(const Instruction& in);  // a piece operand: the chunk alone
  // A compute step's chunk: refuses a sharded chunk whose weights are not gathered.
  Chunk& weights_of(const Instruction& in);
  static dataflow::PieceEnds ends(const Chunk& chunk) {
    return {chunk.piece.is_first(), chunk.piece.is_last()};
  }
  std::uint16_t& flags_of(const Instruction& in) { return chunk_of(in).flags[in.micro_batch]; }
  int peer_of(const Instruction& in) const;
  int tag_of(const Instruction& in) const {
    return m_.tags_.tag(message_key(program_.placement, program_.config, m_.stage_, in));
  }

  void load_input(const Instruction& in);
  void load_target(const Instruction& in);
  void forward(const Instruction& in);
  // Memory policies (vm_memory_policy.cpp).
  void forward_checkpoint(const Instruction& in);
  void recompute(const Instruction& in);
  void start_host_copy(const Instruction& in);
  void finish_host_copy(const Machine::PendingMessage& copy);
  // Refuses a backward of a cell whose stash is not on the device.
  void require_stash(Chunk& chunk, const Instruction& in);
  // The turn of a V (vm_turn.cpp): the cell's input, or output gradient,
  // taken from the chunk of this rank that made it; false when none has.
  bool take_input_on_rank(Chunk& chunk, const Instruction& in);
  // The chunk of this rank (`from`) that made the value of kind `kind` the
  // cell takes; null when there is none or it has not made it yet.
  Chunk* source_on_rank(const Instruction& in, MessageKind kind, int& from);
  bool take_output_gradient_on_rank(Chunk& chunk, const Instruction& in);
  void backward_input(const Instruction& in);
  void backward_weight(const Instruction& in, bool reduce_per_layer);
  // The layers an instruction works on: its `layer L`, else its chunk's.
  runtime::LayerRange layers_of(const Chunk& chunk, const Instruction& in) const;
  void gather_or_release(const Instruction& in, bool gather);
  void reduce_scatter(const Instruction& in);
  void send(const Instruction& in);
  void receive(const Instruction& in);
  void wait(const Instruction& in);
  void wait_all();
  void complete(const Machine::PendingMessage& message);
  void all_reduce(Group group, int layer);
  void sum_over_holders();
  void require_no_pending() const;
  void optimizer_step();
  void hold_or_drop(const Instruction& in, bool hold);
  // A reduction or a step of `layer` (every layer: kNoLayer) of the rank's
  // chunks would miss a weight gradient held apart.
  void refuse_held_weight_gradients(int layer, const char* operation);
  void finish_step();

  const Program& program_;
  Machine& m_;
  std::span<const Instruction> code_;
  const Instruction* in_ = nullptr;
  std::size_t index_ = 0;
  bool timed_ = false;          // an observer reads the clock
  std::int64_t split_ns_ = -1;  // a fused Bwd's input half ended here; -1: none
  StepResult result_;
};

}  // namespace pipevm
