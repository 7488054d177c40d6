// The cut chosen with the schedule (issue 37): given per-layer costs, which
// contiguous layers each model piece holds (a stage's, or each chunk's
// under looped or v placement, pieces in the order the placement runs
// them), searched together with the order, under a memory limit in bytes.
// Each candidate cut turns the layers into per-chunk costs (piece_cost)
// and is handed to synthesize(), whose simulated makespan judges it.
// Candidates: the even cut, the min-max cut (an exact dynamic program over
// contiguous cuts minimising the slowest piece), memory-aware min-max cuts
// when the limit binds (each piece capped so that its stage's held bytes,
// at the in-flight counts a schedule for an earlier cut reached, fit),
// then moves of one boundary by one layer while they help; every cut when
// there are at most 8 layers and 4 stages. docs/synthesize.md says how.
// Not here: reading the costs (config/), the order search (synthesize.hpp),
// the header's text (header.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "header.hpp"
#include "layer_costs.hpp"
#include "synthesize.hpp"

namespace pipevm::synthesis {

enum class CutChoice : std::uint8_t { search, even, given };

struct CutRequest {
  // Placement, configuration, the costs' other keys (messages, load,
  // optimizer), time and move limits. Its memory fields are not read: the
  // limit is `memory_bytes`.
  Request request;
  std::vector<LayerCost> layers;
  // Per stage: its layers' parameter-bytes plus the activation bytes it
  // holds at its worst moment (stage_bytes below); 0: no limit.
  std::uint64_t memory_bytes = 0;
  CutChoice choice = CutChoice::search;
  std::vector<LayerRange> cut;  // CutChoice::given
  // Enumerate every cut on small instances (at most kEnumerateLayers layers
  // and kEnumerateStages stages); false: always the heuristic search (what
  // a test compares with enumeration).
  bool enumerate_small = true;
};

inline constexpr int kEnumerateLayers = 8;
inline constexpr int kEnumerateStages = 4;

struct CutResult {
  Result result;
  std::vector<LayerRange> cut;
  std::string how;              // how the cut was chosen, for the header
  int cuts_timed = 0;           // candidate cuts synthesized
  std::vector<std::uint64_t> stage_bytes;  // each stage's peak, as the limit counts it
  // The same synthesis on the even and the min-max cut (when searched):
  // the makespans the result is never longer than.
  double even_makespan = 0;
  double min_max_makespan = 0;
  std::uint64_t memory_bytes = 0;  // the limit the result meets (0: none)
  double weight_memory = 1;        // R the order search used: the layers' weight-activation-bytes / activation-bytes
};

// Model piece of (stage, chunk) under the request's placement.
int piece_of(Placement placement, const Config& config, int stage, int chunk);

// `base` with every stage's and chunk's compute keys (fwd, bwd-input,
// bwd-weight) the sums over its piece's layers, messages sized by the
// largest output-bytes of the cut's boundaries when any is given, and no
// `layers` left.
Costs costs_of_cut(const Costs& base, const std::vector<LayerCost>& layers,
                   const std::vector<LayerRange>& cut, Placement placement, const Config& config);

// Each stage's parameter-bytes plus the most activation bytes its passes
// hold at once: a forward keeps its piece's activation-bytes, a
// backward-input frees them and keeps weight-activation-bytes until the
// weight pass; a fused backward frees them.
std::vector<std::uint64_t> stage_bytes(const ComputeOrder& order, const std::vector<LayerCost>& layers,
                                       const std::vector<LayerRange>& cut);

// A piece's time in the min-max objective: fwd + bwd-input + bwd-weight.
double piece_time(const PieceCost& piece);

// The contiguous cut into `pieces` that minimises the slowest piece's time
// (ties: the smaller sum of squared piece times), every piece within
// `allowed` when given; nullopt when no cut is allowed.
using PieceAllowed = std::function<bool(int piece, const PieceCost&)>;
std::optional<std::vector<LayerRange>> min_max_cut(const std::vector<LayerCost>& layers, int pieces,
                                                   const PieceAllowed& allowed = {});

// Every cut of `layers` layers into `pieces` non-empty pieces.
std::vector<std::vector<LayerRange>> all_cuts(int layers, int pieces);

// Nullopt with `error` (one line) when the request is bad or no cut and
// order fits the limit.
std::optional<CutResult> synthesize_cut(const CutRequest& request, std::string& error);

// What `pipevm synthesize` and pipevm.synthesize make of a request whose
// costs give `layers:`: `cut` is "" (search), "even" or a cut
// ("0-2,3-4,5"); the limit is bytes per stage, a number without a unit
// (Request::memory_limit) read as bytes too. Nullopt with `error` for a
// cut that does not parse against the layers.
std::optional<CutRequest> cut_request_of(const Request& request, const std::string& cut, std::string& error);

// The header's `cut:` line after "# cut: ": the cut, how it was chosen, and
// the makespans of the even and min-max cuts it was held to.
std::string describe_cut(const CutResult& result);
// What the header says of a cut result: that line, the byte limit and how
// bytes were counted, the weight memory R the search used.
void record_cut(const CutResult& result, HeaderInputs& inputs);

}  // namespace pipevm::synthesis
