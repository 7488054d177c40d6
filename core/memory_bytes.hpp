// Memory in bytes: what one rank holds at its worst moment, by category,
// from its stream alone (memory depends on the order of a rank's own
// instructions, not on when its partners arrive), so the checker and the
// simulator report the same figures, and `pipevm run --report` measures the
// same rules in the runtime's own buffers (runtime/memory_ledger.hpp).
// docs/memory.md says what is counted and when it is freed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "diagnostics.hpp"
#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm {

// The model being run, as far as its bytes go.
struct MemoryShape {
  std::vector<int> layer_widths = default_layer_widths();
  std::vector<LayerRange> split;  // empty: the program's split, else split_layers
  int element_bytes = 4;          // float32
  int rows = 1;                   // samples in one micro-batch
  int optimizer_states = 2;       // state floats per parameter: Adam 2, momentum 1, SGD 0
  bool bias = true;               // every layer has a bias (out floats besides out x in)
  // Layers that are not the MLP's (the ViT's blocks): per layer, its
  // parameter count, and what it keeps between its passes
  // (runtime/vit_model.hpp's stashes). Such a layer's stashes hold all its
  // backward reads, so its input is gone after its forward. Empty: layers
  // of out x in weights (and biases) that keep nothing but their
  // boundaries, whose input lives until their weight gradient.
  struct LayerStash {
    // floats per row
    std::uint64_t forward_for_input = 0;     // forward -> input half (activations)
    std::uint64_t forward_for_weight = 0;    // forward -> weight half (activations)
    std::uint64_t gradients_for_weight = 0;  // input half -> weight half (activation gradients)
    // floats per micro-batch, whatever its rows: weight gradients the input
    // half reduces for the weight half to add (the ViT's LayerNorm scales
    // and shifts), input half -> weight half (gradients)
    std::uint64_t reduced_gradients = 0;
  };
  std::vector<std::uint64_t> layer_parameter_counts;
  std::vector<LayerStash> layer_stashes;
};

// The bytes of one rank at one moment, by category: on the device (total()),
// and apart from them in host memory (what Offload moved there).
struct RankBytes {
  int rank = 0;
  int stage = 0;
  std::uint64_t weights = 0;      // whole layers, own shards and gathered copies
  std::uint64_t gradients = 0;    // weight gradients: whole, or own shards after a reduce-scatter
  std::uint64_t optimizer = 0;    // optimizer state (own shards of sharded layers)
  std::uint64_t activations = 0;  // layer inputs and outputs kept for the backward
  std::uint64_t activation_gradients = 0;  // gradients between layers and at the chunk's ends
  std::uint64_t messages = 0;              // values kept only for a send still in flight
  std::uint64_t host = 0;  // stashes offloaded to host memory (or on their way): not in total()
  std::uint64_t host_peak = 0;  // the most `host` at this moment or any before it
  // The device's bytes: what memory limits apply to.
  std::uint64_t total() const {
    return weights + gradients + optimizer + activations + activation_gradients + messages;
  }
  friend bool operator==(const RankBytes&, const RankBytes&) = default;
};

// Floats of one layer's parameters under `shape` (weights, and the bias if any).
std::uint64_t layer_parameters(const MemoryShape& shape, int layer);
// A member's share of `whole` floats split over `members`: ceil(whole / members).
std::uint64_t shard_of(std::uint64_t whole, int members);

// Per rank, in rank order: the first moment (before the first instruction
// or after one) at which its device total is largest, with host_peak the
// most host bytes of any moment. Empty when the model cannot be cut into
// the program's pieces.
std::vector<RankBytes> peak_bytes(const Program& program, const MemoryShape& shape);
// Per rank, the bytes after each of its instructions: `after[r][i]` follows
// instruction i of rank r's stream (what the runtime's ledger samples).
std::vector<std::vector<RankBytes>> bytes_after_each(const Program& program,
                                                     const MemoryShape& shape);

// Per Program::code index, the bytes each Offload and Reload copies
// between the device and host memory (0 elsewhere): what the simulator's
// host link takes time for. Empty when the model cannot be cut into the
// program's pieces.
std::vector<std::uint64_t> host_copy_bytes(const Program& program, const MemoryShape& shape);

// A misplaced Hold or Drop, or a weight gradient held apart that a
// reduction, a step or the step's end would leave out of the sum: found by
// the same walk, for the checker (PV2044, PV2045).
struct HoldFinding {
  int rank = 0;
  std::size_t index = 0;  // in the rank's stream
  DiagnosticKind kind = DiagnosticKind::HoldMisuse;
  std::string message;
};
// Per rank, in order; empty when the program has no Hold or Drop.
std::vector<HoldFinding> hold_findings(const Program& program);

// [{"rank", "stage", "peak_bytes", "weights", "gradients", "optimizer",
//   "activations", "activation_gradients", "messages", "host",
//   "peak_host_bytes"}] per rank: peak_bytes is the device's peak, the
// categories and host are at that moment, peak_host_bytes the host's peak.
nlohmann::json bytes_to_json(const std::vector<RankBytes>& ranks);

}  // namespace pipevm
