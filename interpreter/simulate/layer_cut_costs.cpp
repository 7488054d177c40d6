// Per-layer costs over a program's cut (layer_cut_costs.hpp).
#include "layer_cut_costs.hpp"

#include <algorithm>

#include "layer_costs.hpp"

namespace pipevm {

namespace {

int piece_of(const Program& program, int stage, int chunk) {
  return piece_at(position_of(program.placement, program.config, stage, chunk));
}

// The bytes a compute instruction's layers keep (`activation-bytes`) and
// keep after the input half of their backward (`weight-activation-bytes`).
PieceCost held_by(const Program& program, const std::vector<LayerCost>& layers,
                  const std::vector<LayerRange>& cut, int stage, const Instruction& in) {
  const int layer = layer_of(in);
  if (layer != kNoLayer) return piece_cost(layers, {layer, layer + 1});
  return piece_cost(layers, cut[static_cast<std::size_t>(piece_of(program, stage, in.chunk))]);
}

// A rank's activation bytes at their peak: a forward (or a recomputation)
// keeps its layers' activation-bytes until its backward; an input half
// frees them but keeps the weight-activation-bytes until the weight half.
double peak_activations(const Program& program, const std::vector<LayerCost>& layers,
                        const std::vector<LayerRange>& cut, int rank) {
  const int stage = stage_of(program.config, rank);
  double held = 0;
  double peak = 0;
  for (const Instruction& whole : program.rank(rank)) {
    for (int h = 0; h < half_count(whole); ++h) {
      const Instruction in = half(whole, h);
      const CostKind kind = info(in.op).cost;
      const PieceCost piece = held_by(program, layers, cut, stage, in);
      switch (kind) {
        case CostKind::fwd:
        case CostKind::recompute:
          held += piece.activation_bytes;
          break;
        case CostKind::bwd:
        case CostKind::bwd_allreduce:
        case CostKind::bwd_reduce_scatter:
          held -= piece.activation_bytes;
          break;
        case CostKind::bwd_input:
          held += piece.weight_activation_bytes - piece.activation_bytes;
          break;
        case CostKind::bwd_weight:
          held -= piece.weight_activation_bytes;
          break;
        case CostKind::none:
        case CostKind::load:
        case CostKind::message:
        case CostKind::allreduce:
        case CostKind::allgather:
        case CostKind::reduce_scatter:
        case CostKind::zero_grad:
        case CostKind::optimizer:
        case CostKind::fwd_bwd:
        case CostKind::host_copy:
          break;
      }
      peak = std::max(peak, held);
    }
  }
  return peak;
}

}  // namespace

Costs costs_by_piece(const Costs& given, Placement placement, const Config& config,
                     const std::vector<PieceCost>& pieces) {
  Costs costs = given;
  costs.bwd.reset();
  costs.fwd_bwd.reset();
  costs.recompute.reset();
  costs.compute_rows = 0;
  const int chunks = chunks_per_rank(placement, config);
  costs.stages.clear();
  for (int s = 0; s < config.stages; ++s) {
    Costs stage = costs.entry(s, 0);
    stage.bwd.reset();
    stage.fwd_bwd.reset();
    stage.recompute.reset();
    stage.stages.clear();
    stage.chunks.clear();
    stage.layers.clear();
    std::vector<Costs> of_chunks;
    for (int c = 0; c < chunks; ++c) {
      const PieceCost& piece = pieces[static_cast<std::size_t>(piece_at(position_of(placement, config, s, c)))];
      Costs chunk = stage;
      chunk.fwd = piece.fwd;
      chunk.bwd_input = piece.bwd_input;
      chunk.bwd_weight = piece.bwd_weight;
      of_chunks.push_back(chunk);
    }
    stage.fwd = of_chunks.front().fwd;
    stage.bwd_input = of_chunks.front().bwd_input;
    stage.bwd_weight = of_chunks.front().bwd_weight;
    if (chunks > 1) stage.chunks = std::move(of_chunks);
    costs.stages.push_back(std::move(stage));
  }
  return costs;
}

std::optional<LayerCutCosts> layer_cut_costs(const Costs& costs, const Program& program, std::string& error) {
  const int layers = static_cast<int>(costs.layers.size());
  const int pieces = model_pieces(program.placement, program.config);
  LayerCutCosts result;
  result.declared = !program.cut.empty();
  if (result.declared) {
    if (program.cut.back().end != layers) {
      error = "the program's cut " + cut_text(program.cut) + " covers " + std::to_string(program.cut.back().end) +
              " layers, but the per-layer costs give " + std::to_string(layers);
      return std::nullopt;
    }
    result.cut = program.cut;
  } else {
    if (pieces > layers) {
      error = "the per-layer costs give " + std::to_string(layers) + " layers, fewer than the program's " +
              std::to_string(pieces) + " model pieces";
      return std::nullopt;
    }
    result.cut = even_cut(layers, pieces);
  }
  std::vector<PieceCost> of_pieces;
  result.boundary_bytes.push_back(0);
  for (const LayerRange& range : result.cut) {
    of_pieces.push_back(piece_cost(costs.layers, range));
    result.boundary_bytes.push_back(of_pieces.back().output_bytes);
  }
  result.costs = costs_by_piece(costs, program.placement, program.config, of_pieces);
  for (int rank = 0; rank < program.ranks(); ++rank) {
    result.peak_activation_bytes.push_back(peak_activations(program, costs.layers, result.cut, rank));
  }
  return result;
}

std::string describe_cut(const LayerCutCosts& costs) {
  if (costs.declared) return "the program's cut " + cut_text(costs.cut);
  return "the even cut " + cut_text(costs.cut) + " (the program declares no cut)";
}

}  // namespace pipevm
