// Memory in bytes: what one rank holds at its worst moment, by category,
// from its stream alone (memory depends on the order of a rank's own
// instructions, not on when its partners arrive), so the checker and the
// simulator report the same figures. docs/memory.md says what is counted
// and when it is freed. Not here: the VM's own buffers (it keeps every
// chunk whole; see vm_shards.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm {

// The model being run, as far as its bytes go.
struct MemoryShape {
  std::vector<int> layer_widths = default_layer_widths();
  std::vector<LayerRange> split;  // empty: split_layers into model_pieces(...)
  int element_bytes = 4;          // float32
  int rows = 1;                   // samples in one micro-batch
  int optimizer_states = 2;       // state floats per parameter: Adam 2, momentum 1, SGD 0
};

// One rank at its peak (the first moment its total is largest).
struct RankBytes {
  int rank = 0;
  int stage = 0;
  std::uint64_t weights = 0;               // own shards, or whole chunks (gathered or unsharded)
  std::uint64_t gradients = 0;             // weight gradients (own shard after a reduce-scatter)
  std::uint64_t optimizer = 0;             // optimizer state (own shard under ShardStep)
  std::uint64_t activations = 0;           // stashed forwards: every layer boundary of the chunk
  std::uint64_t activation_gradients = 0;  // output gradients waiting, input gradients unsent
  std::uint64_t messages = 0;              // buffers of requests in flight
  std::uint64_t total() const {
    return weights + gradients + optimizer + activations + activation_gradients + messages;
  }
};

// Per rank, in rank order. Empty when the model cannot be cut into the
// program's pieces.
std::vector<RankBytes> peak_bytes(const Program& program, const MemoryShape& shape);

// [{"rank", "stage", "peak_bytes", "weights", "gradients", "optimizer",
//   "activations", "activation_gradients", "messages"}] per rank.
nlohmann::json bytes_to_json(const std::vector<RankBytes>& ranks);

}  // namespace pipevm
