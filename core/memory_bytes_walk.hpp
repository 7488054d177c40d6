// The byte walk of one rank's stream (memory_bytes.hpp), as a class whose
// parts live in three files: memory_bytes.cpp (the walk, compute, messages),
// memory_bytes_holds.cpp (Hold and Drop) and memory_bytes_policy.cpp
// (FwdCheckpoint, Recompute, Offload, Reload). Internal to the core.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "memory_bytes.hpp"

namespace pipevm::bytes_walk {

enum class Grad : std::uint8_t { none, whole, shard };

// A per-micro-batch value's state: absent, held, or held by a send only.
enum Held : std::uint8_t { absent = 0, live = 1, sending = 2 };

class RankBytesWalk {
 public:
  RankBytesWalk(const Program& program, const MemoryShape& shape,
                const std::vector<LayerRange>& split)
      : program_(program), shape_(shape), split_(split) {
    const int layers = layer_count(shape.layer_widths);
    parameters_.resize(static_cast<std::size_t>(layers));
    for (int l = 0; l < layers; ++l) {
      parameters_[static_cast<std::size_t>(l)] = layer_parameters(shape, l);
    }
  }

  using Moment = std::function<void(std::size_t index, const RankBytes& now)>;
  // Calls `moment` before the first instruction (index = stream size) and
  // after each; returns the peak. Misplaced Holds and Drops go to
  // `findings` when given.
  RankBytes walk(int rank, const Moment& moment, std::vector<HoldFinding>* findings = nullptr);

 private:
  struct Chunk {
    LayerRange layers;
    bool first = false;    // holds the model's first layer (no input gradient)
    bool last = false;     // holds the model's last layer (the loss)
    std::size_t base = 0;  // of its cells' boundary slots
    // The chunks of the rank whose output is its input, and whose input
    // gradient is its output gradient (the turn of a V); -1: none.
    int act_from = -1;
    int grad_from = -1;
  };
  struct Pending {
    std::size_t slot;
    bool activation;  // A (else G)
    Instruction in;
  };

  std::uint64_t floats(int boundary) const {
    return rows_ *
           static_cast<std::uint64_t>(shape_.layer_widths[static_cast<std::size_t>(boundary)]);
  }
  std::size_t slot(const Chunk& c, std::uint32_t mb, int boundary) const {
    return c.base + mb * static_cast<std::size_t>(c.layers.size() + 1) +
           static_cast<std::size_t>(boundary - c.layers.begin);
  }
  void set(std::vector<std::uint8_t>& values, std::uint64_t& total, std::size_t s, int boundary,
           Held to);
  void free_value(std::vector<std::uint8_t>& values, std::uint64_t& total, std::size_t s,
                  int boundary);
  void compute(const Instruction& in);
  // A forward of layers `these` of a cell (Fwd, and Recompute over its chunk).
  void forward(const Chunk& c, std::uint32_t mb, LayerRange these);
  void backward_layer(const Chunk& c, std::uint32_t mb, int l, bool input, bool weight);
  // A layer's stashes of micro-batch mb through its forward (pass 1), input
  // half (2) and weight half (3); nothing when the shape has none.
  void stash(int l, std::uint32_t mb, std::uint8_t pass);
  void message(const Instruction& in);
  // The turn of a V: a cell's input (act) or top gradient (grad) not
  // received is taken from the chunk of the rank that made it, as a send
  // and a receive completed at once.
  void take_on_rank(const Chunk& c, std::uint32_t mb, MessageKind kind);
  void wait(const Instruction& in);
  void reduce(const Instruction& in, bool scatter);
  void hold(const Instruction& in);
  void hold_weight_gradient(const Instruction& in, LayerRange layers);
  // Reports a weight gradient held apart of `layers` (clamped to the
  // model's) that a reduction or a step would leave out of the sum, or
  // ZeroGrad or the step's end lose.
  void unsummed(LayerRange layers, const char* what);
  void finding(DiagnosticKind kind, std::string message) {
    if (findings_) findings_->push_back({rank_, index_, kind, std::move(message)});
  }
  std::size_t apart_index(int layer, std::uint32_t mb) const {
    return static_cast<std::size_t>(layer) * micro_batches_ + mb;
  }
  RankBytes now() const;

  // Memory policies (memory_bytes_policy.cpp). Where a cell's stash (what
  // its backward reads) is: on the device, only its input there
  // (FwdCheckpoint), on its way to host memory, there, or on its way back.
  enum Where : std::uint8_t { on_device, input_only, offloading, on_host, reloading };
  std::size_t cell_of(std::uint16_t chunk, std::uint32_t mb) const {
    return static_cast<std::size_t>(chunk) * micro_batches_ + mb;
  }
  void forward_checkpoint(const Chunk& c, std::uint32_t mb);
  // Offload and Reload start their copies; a wait completes them.
  void copy(const Instruction& in);
  void wait_copies(const Instruction& in);
  void finish_copy(std::uint16_t chunk, std::uint32_t mb, bool to_host);
  void record_copy(std::uint64_t floats);
  // A value leaves the device: gone, or a message while a send reads it.
  void leave_device(std::size_t s, int boundary);
  // A checkpointed cell's output is sent: that was its last use.
  void sent_checkpointed_output(const Chunk& c, std::uint32_t mb, std::size_t s);

  const Program& program_;
  const MemoryShape& shape_;
  std::vector<LayerRange> split_;
  std::vector<std::uint64_t> parameters_;
  std::uint64_t rows_ = 1;
  int rank_ = 0;
  int stage_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<std::uint8_t> held_;             // per layer: one of the rank's chunks computes it
  std::vector<int> group_;                     // per layer: members it is sharded over (0: whole)
  std::vector<std::uint8_t> gathered_;         // per layer
  std::vector<Grad> grad_;                     // per layer
  std::vector<std::uint8_t> a_, g_;            // per (chunk, micro-batch, boundary): Held
  std::vector<std::uint8_t> a_held_, g_held_;  // ... a Hold keeps it
  std::vector<std::uint8_t> a_past_, g_past_;  // ... its last use is past
  // Per (layer, micro-batch): the weight gradient is held apart (Hold wgrad;
  // made: its backward ran), and whether its backward ran at all.
  // apart_reported: made, then reported as missing from a sum (counted in
  // the sum from there, so that its Drop is no second finding).
  enum Apart : std::uint8_t { not_apart = 0, apart_held = 1, apart_made = 2, apart_reported = 3 };
  std::vector<std::uint8_t> apart_, weight_done_;
  std::vector<std::uint8_t> stash_;        // per (layer, micro-batch): the last pass done, 0 none
  std::vector<std::uint32_t> apart_made_;  // per layer: gradients held apart
  std::size_t micro_batches_ = 0;
  std::size_t index_ = 0;
  std::vector<HoldFinding>* findings_ = nullptr;
  std::vector<Pending> pending_;
  std::uint64_t activations_ = 0, activation_gradients_ = 0, messages_ = 0;
  std::uint64_t reduced_gradients_ = 0;  // stashed by input halves for their weight halves
  // Memory policies: per cell, Where its stash is and the floats it has in
  // host memory (or on their way there or back); per boundary slot and per
  // (layer, micro-batch), whether the activation or the layer's stash is
  // among them; the copies not yet completed, oldest first; floats in host
  // memory now and at most so far.
  std::vector<std::uint8_t> where_;
  std::vector<std::uint64_t> host_floats_;
  std::vector<std::uint8_t> a_host_, stash_host_;
  struct Copy {
    std::uint16_t chunk;
    std::uint32_t mb;
    bool to_host;
  };
  std::vector<Copy> copies_;
  std::uint64_t host_ = 0, host_peak_ = 0;

 public:
  // Where copy() writes each Offload's and Reload's bytes, by Program::code
  // index (host_copy_bytes); null: nowhere.
  std::vector<std::uint64_t>* copy_bytes = nullptr;
};

}  // namespace pipevm::bytes_walk
