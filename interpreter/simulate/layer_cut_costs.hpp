// What per-layer costs (Costs::layers, a cost file's `layers:`) make of a
// program: each stage's (each chunk's) compute the sums over the layers of
// its piece of the cut (piece_cost), each message the output-bytes of the
// layer before its boundary, and each rank's activation bytes at their
// peak. The cut is the program's `cut` declaration, or the even cut when
// it declares none. Not here: choosing a cut (synthesize/), reading the
// file (config/cost_files.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costs.hpp"
#include "layer_costs.hpp"
#include "program.hpp"

namespace pipevm {

struct LayerCutCosts {
  Costs costs;                       // per stage, per chunk where a rank holds several
  std::vector<LayerRange> cut;       // in model order, one per model piece
  bool declared = false;             // the program's cut; false: the even cut
  std::vector<double> boundary_bytes;  // per piece boundary: 0, piece 0's output, ..., 0
  std::vector<double> peak_activation_bytes;  // per rank
};

// `given` with each stage's compute keys (fwd, bwd-input, bwd-weight; per
// chunk where a rank holds several, the stage's own keys then its first
// chunk's) the sums of its piece's layers, pieces placed by `placement`;
// bwd, fwd-bwd and recompute dropped (their defaults follow the pieces).
Costs costs_by_piece(const Costs& given, Placement placement, const Config& config,
                     const std::vector<PieceCost>& pieces);

// Empty, with `error` saying why, when the program's cut does not cover
// the layers the costs give, or the model has fewer layers than pieces.
std::optional<LayerCutCosts> layer_cut_costs(const Costs& costs, const Program& program,
                                             std::string& error);

// "the program's cut 0-2,3-4,5-6", or "the even cut 0-3,4-6 (the program
// declares no cut)".
std::string describe_cut(const LayerCutCosts& costs);

}  // namespace pipevm
