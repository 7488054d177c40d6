// Traces and cost profiles of real runs: a VmObserver that records the
// instructions of a few training steps on every rank, and the world-wide
// step that gathers them to world rank 0 and writes a Chrome trace (the
// format of `pipevm simulate --trace`, of one step) and a cost file (the
// medians of all recorded steps, and the message costs measured at
// start-up when given, for `pipevm simulate --costs`).
//
// It joins two targets that do not otherwise depend on each other: the
// simulator's writers (pipevm::simulate) and the VM and its Comm
// (pipevm::vm); pipevm::train links both. Ranks' clocks are each process's
// steady clock: comparable on one machine, not across machines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm.hpp"
#include "cost_fit.hpp"
#include "layer_costs.hpp"
#include "program.hpp"
#include "simulate.hpp"
#include "vm.hpp"

namespace pipevm {

class TraceRecorder final : public VmObserver {
 public:
  // Records steps [first_step, first_step + steps) of the run; a step begins
  // when instruction 0 of the rank's stream runs. Skip step 0 when there are
  // more: it allocates the buffers and is slower than the rest.
  TraceRecorder(int first_step, int steps)
      : first_step_(first_step), last_step_(first_step + steps) {}

  void on_instruction(int rank, std::size_t index, std::int64_t start_ns,
                      std::int64_t end_ns) override {
    if (index == 0) ++step_;
    const std::int64_t split = split_ns_;
    split_ns_ = -1;
    if (step_ < first_step_ || step_ >= last_step_) return;
    (step_ == first_step_ ? first_ : later_).push_back({rank, index, start_ns, end_ns, split});
  }
  void on_backward_split(int /*rank*/, std::size_t /*index*/, std::int64_t input_end_ns) override {
    split_ns_ = input_end_ns;
  }

  // Message costs measured apart (link_costs.hpp), written into the profile
  // beside the compute medians.
  void set_measured_links(const MeasuredLinks& links) { links_ = links; }
  // Per-layer costs measured apart (measure_layer_passes), written into the
  // profile as `layers:` beside the per-stage medians.
  void set_layer_costs(std::vector<LayerCost> layers) { layers_ = std::move(layers); }

  // World-wide: every rank calls it. World rank 0 writes the trace of the
  // first recorded step to `trace_path` and the medians of every recorded
  // step to `profile_path` (either may be empty). False, with `error`, when a
  // file cannot be written (on rank 0 only).
  bool write(runtime::Comm& comm, const Program& program, const std::string& trace_path,
             const std::string& profile_path, std::string& error);

 private:
  int recorded_steps() const;

  int first_step_;
  int last_step_;
  int step_ = -1;
  std::int64_t split_ns_ = -1;  // the next instruction's, when it is a fused Bwd
  std::vector<MeasuredInstruction> first_;
  std::vector<MeasuredInstruction> later_;
  MeasuredLinks links_;
  std::vector<LayerCost> layers_;
};

}  // namespace pipevm
