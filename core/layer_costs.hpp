// Per-layer costs, as a cost file's `layers:` list gives them (docs/costs.md)
// and `pipevm.profile_torch` measures them, and what a cut of the layers
// into pieces makes of them: a piece's forward, backward halves, held bytes
// and the message it sends. The cut itself is text "0-2,3-4,5" (inclusive
// layer ranges, in model order), the form `--cut` takes and a program's
// `cut` declaration records. Not here: reading the YAML (config/), choosing
// a cut (synthesize/), or running one (train/).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_shape.hpp"

namespace pipevm {

// One layer's costs: times in the cost file's unit, bytes per micro-batch.
struct LayerCost {
  double fwd = 0;
  double bwd_input = 0;
  double bwd_weight = 0;
  double activation_bytes = 0;         // kept from its forward until its backward
  double weight_activation_bytes = 0;  // what its weight pass still needs after the input half
  double parameter_bytes = 0;
  double output_bytes = 0;  // the message when the model is cut after it
  friend bool operator==(const LayerCost&, const LayerCost&) = default;
};

// A piece's costs: the sums over its layers, and the message its last
// layer's output makes (0 when it is the model's last piece).
struct PieceCost {
  double fwd = 0;
  double bwd_input = 0;
  double bwd_weight = 0;
  double activation_bytes = 0;
  double weight_activation_bytes = 0;
  double parameter_bytes = 0;
  double output_bytes = 0;
};

PieceCost piece_cost(const std::vector<LayerCost>& layers, LayerRange range);

// "0-2,3-4,5": every layer of [0, layers) in exactly one non-empty piece,
// in order. Empty with `error` set (saying which piece and why) otherwise.
std::optional<std::vector<LayerRange>> parse_cut(std::string_view text, int layers, std::string& error);
std::string cut_text(const std::vector<LayerRange>& cut);

// `pieces` runs of consecutive layers whose counts differ by at most one,
// the longer ones first. Throws std::invalid_argument unless
// 1 <= pieces <= layers.
std::vector<LayerRange> even_cut(int layers, int pieces);

}  // namespace pipevm
