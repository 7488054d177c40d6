// The cut chosen with the schedule (cut_search.hpp).
#include "cut_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "compile.hpp"
#include "layer_cut_costs.hpp"

namespace pipevm::synthesis {

int piece_of(Placement placement, const Config& config, int stage, int chunk) {
  return piece_at(position_of(placement, config, stage, chunk));
}

double piece_time(const PieceCost& piece) { return piece.fwd + piece.bwd_input + piece.bwd_weight; }

namespace {

std::vector<PieceCost> piece_costs(const std::vector<LayerCost>& layers, const std::vector<LayerRange>& cut) {
  std::vector<PieceCost> pieces;
  for (const LayerRange& range : cut) pieces.push_back(piece_cost(layers, range));
  return pieces;
}

}  // namespace

Costs costs_of_cut(const Costs& base, const std::vector<LayerCost>& layers,
                   const std::vector<LayerRange>& cut, Placement placement, const Config& config) {
  const std::vector<PieceCost> pieces = piece_costs(layers, cut);
  Costs costs = costs_by_piece(base, placement, config, pieces);
  // The pieces' sums are the costs: the layers would time a program by
  // its own cut (or the even one), not by this one.
  costs.layers.clear();
  // A stage's own keys, for whatever reads a stage without its chunk: the
  // sums of its chunks.
  for (Costs& stage : costs.stages) {
    if (stage.chunks.empty()) continue;
    stage.fwd = stage.bwd_input = stage.bwd_weight = 0;
    for (const Costs& chunk : stage.chunks) {
      stage.fwd += chunk.fwd;
      stage.bwd_input += chunk.bwd_input;
      stage.bwd_weight += chunk.bwd_weight;
    }
  }
  double message = 0;
  for (const PieceCost& piece : pieces) message = std::max(message, piece.output_bytes);
  if (message > 0) costs.act_bytes = costs.grad_bytes = message;
  return costs;
}

std::vector<std::uint64_t> stage_bytes(const ComputeOrder& order, const std::vector<LayerCost>& layers,
                                       const std::vector<LayerRange>& cut) {
  const std::vector<PieceCost> pieces = piece_costs(layers, cut);
  const int chunks = chunks_per_rank(order.placement, order.config);
  std::vector<std::uint64_t> bytes;
  for (int s = 0; s < static_cast<int>(order.stages.size()); ++s) {
    const auto piece = [&](int chunk) -> const PieceCost& {
      return pieces.at(static_cast<std::size_t>(piece_of(order.placement, order.config, s, chunk)));
    };
    double fixed = 0;
    for (int c = 0; c < chunks; ++c) fixed += piece(c).parameter_bytes;
    double held = 0;
    double peak = 0;
    for (const Pass& pass : order.stages[static_cast<std::size_t>(s)]) {
      const PieceCost& p = piece(pass.chunk);
      switch (pass.kind) {
        case PassKind::forward: held += p.activation_bytes; break;
        case PassKind::backward: held -= p.activation_bytes; break;
        case PassKind::backward_input: held += p.weight_activation_bytes - p.activation_bytes; break;
        case PassKind::backward_weight: held -= p.weight_activation_bytes; break;
      }
      peak = std::max(peak, held);
    }
    bytes.push_back(static_cast<std::uint64_t>(std::ceil(fixed + peak)));
  }
  return bytes;
}

std::optional<std::vector<LayerRange>> min_max_cut(const std::vector<LayerCost>& layers, int pieces,
                                                   const PieceAllowed& allowed) {
  const int count = static_cast<int>(layers.size());
  if (pieces < 1 || pieces > count) return std::nullopt;
  std::vector<double> prefix(static_cast<std::size_t>(count) + 1, 0);
  for (int l = 0; l < count; ++l) {
    prefix[static_cast<std::size_t>(l) + 1] =
        prefix[static_cast<std::size_t>(l)] + piece_time(piece_cost(layers, {l, l + 1}));
  }
  // best[k][l]: the first l layers in k pieces, as (slowest, sum of squares);
  // from[k][l]: where its last piece starts.
  using Score = std::tuple<double, double>;
  constexpr double kNone = std::numeric_limits<double>::infinity();
  const auto cells = static_cast<std::size_t>(count) + 1;
  std::vector<std::vector<Score>> best(static_cast<std::size_t>(pieces) + 1,
                                       std::vector<Score>(cells, Score{kNone, kNone}));
  std::vector<std::vector<int>> from(static_cast<std::size_t>(pieces) + 1, std::vector<int>(cells, -1));
  best[0][0] = {0, 0};
  for (int k = 1; k <= pieces; ++k) {
    for (int l = k; l <= count - (pieces - k); ++l) {
      for (int j = k - 1; j < l; ++j) {
        const Score& before = best[static_cast<std::size_t>(k) - 1][static_cast<std::size_t>(j)];
        if (std::isinf(std::get<0>(before))) continue;
        if (allowed && !allowed(k - 1, piece_cost(layers, {j, l}))) continue;
        const double t = prefix[static_cast<std::size_t>(l)] - prefix[static_cast<std::size_t>(j)];
        const Score score{std::max(std::get<0>(before), t), std::get<1>(before) + t * t};
        Score& cell = best[static_cast<std::size_t>(k)][static_cast<std::size_t>(l)];
        if (score < cell) {
          cell = score;
          from[static_cast<std::size_t>(k)][static_cast<std::size_t>(l)] = j;
        }
      }
    }
  }
  if (from[static_cast<std::size_t>(pieces)][static_cast<std::size_t>(count)] < 0) return std::nullopt;
  std::vector<LayerRange> cut(static_cast<std::size_t>(pieces));
  int end = count;
  for (int k = pieces; k >= 1; --k) {
    const int begin = from[static_cast<std::size_t>(k)][static_cast<std::size_t>(end)];
    cut[static_cast<std::size_t>(k) - 1] = {begin, end};
    end = begin;
  }
  return cut;
}

std::vector<std::vector<LayerRange>> all_cuts(int layers, int pieces) {
  std::vector<std::vector<LayerRange>> cuts;
  std::vector<LayerRange> cut;
  const auto extend = [&](const auto& self, int begin) -> void {
    const int left = pieces - static_cast<int>(cut.size());
    if (left == 1) {
      cut.push_back({begin, layers});
      cuts.push_back(cut);
      cut.pop_back();
      return;
    }
    for (int end = begin + 1; end <= layers - (left - 1); ++end) {
      cut.push_back({begin, end});
      self(self, end);
      cut.pop_back();
    }
  };
  if (pieces >= 1 && pieces <= layers) extend(extend, 0);
  return cuts;
}

namespace {

// One cut synthesized: its result, or the least bytes any order of it needs
// when none fits.
struct Evaluated {
  std::vector<LayerRange> cut;
  std::optional<Result> result;
  std::uint64_t least_bytes = 0;
  std::string error;
};

using Rank = std::tuple<double, double>;  // makespan, longest span

Rank rank_of(const Result& result) { return {result.simulation.timeline.makespan, result.longest_span}; }

double weight_memory_of(const std::vector<LayerCost>& layers, double otherwise) {
  double activations = 0;
  double weight = 0;
  for (const LayerCost& layer : layers) {
    activations += layer.activation_bytes;
    weight += layer.weight_activation_bytes;
  }
  if (activations <= 0) return otherwise;
  return std::clamp(weight / activations, 0.0, 1.0);
}

class CutSearch {
 public:
  explicit CutSearch(const CutRequest& request)
      : request_(request), config_(request.request.config), placement_(request.request.placement) {}

  // Synthesizes `cut` with `seconds` for its improvement step.
  Evaluated evaluate(const std::vector<LayerRange>& cut, double seconds, bool limited = true) const {
    Request each = request_.request;
    each.costs = costs_of_cut(request_.request.costs, request_.layers, cut, placement_, config_);
    each.weight_memory = weight_memory_of(request_.layers, request_.request.weight_memory);
    each.memory_limit = 0;
    each.memory_bytes = limited ? request_.memory_bytes : 0;
    each.time_limit_seconds = seconds;
    if (seconds <= 0) each.progress = {};  // screening: the finalists report progress
    const std::vector<LayerCost>& layers = request_.layers;
    each.count_bytes = [&layers, cut](const Result& result) { return stage_bytes(result.order, layers, cut); };
    Evaluated evaluated{cut, {}, 0, {}};
    evaluated.result = synthesize(each, evaluated.error);
    if (evaluated.result) {
      evaluated.result->peak_bytes = stage_bytes(evaluated.result->order, layers, cut);
    } else if (each.memory_bytes > 0) {
      each.memory_bytes = 0;
      each.memory_limit = least_memory_limit();
      std::string ignored;
      if (const auto tightest = synthesize(each, ignored)) {
        const auto bytes = stage_bytes(tightest->order, layers, cut);
        evaluated.least_bytes = *std::max_element(bytes.begin(), bytes.end());
      }
    }
    return evaluated;
  }

  // Screens `cut` (seeds only) once; the cuts screened so far by text.
  const Evaluated& screen(const std::vector<LayerRange>& cut) {
    const std::string key = cut_text(cut);
    auto found = screened_.find(key);
    if (found == screened_.end()) found = screened_.emplace(key, evaluate(cut, 0)).first;
    return found->second;
  }

  // The best screened cut that fits, by makespan then longest span.
  const Evaluated* best() const {
    const Evaluated* best = nullptr;
    for (const auto& [key, evaluated] : screened_) {
      if (evaluated.result && (!best || rank_of(*evaluated.result) < rank_of(*best->result))) best = &evaluated;
    }
    return best;
  }

  int screened() const { return static_cast<int>(screened_.size()); }

  std::uint64_t least_bytes() const {
    std::uint64_t least = std::numeric_limits<std::uint64_t>::max();
    for (const auto& [key, evaluated] : screened_) {
      if (evaluated.least_bytes > 0) least = std::min(least, evaluated.least_bytes);
    }
    return least;
  }

  // The min-max cut whose pieces fit the limit at the in-flight counts (in
  // micro-batches per chunk) `held` gives each stage, scaled by `scale`.
  std::optional<std::vector<LayerRange>> memory_aware_cut(const std::vector<double>& held, double scale) const {
    const int chunks = chunks_per_rank(placement_, config_);
    std::vector<int> stage_of_piece(static_cast<std::size_t>(model_pieces(placement_, config_)));
    for (int s = 0; s < config_.stages; ++s) {
      for (int c = 0; c < chunks; ++c) {
        stage_of_piece[static_cast<std::size_t>(piece_of(placement_, config_, s, c))] = s;
      }
    }
    const double budget = static_cast<double>(request_.memory_bytes) / chunks;
    return min_max_cut(request_.layers, static_cast<int>(stage_of_piece.size()), [&](int piece, const PieceCost& p) {
      const double in_flight =
          std::max(1.0, std::ceil(held[static_cast<std::size_t>(stage_of_piece[static_cast<std::size_t>(piece)])] * scale - 1e-9));
      return p.parameter_bytes + in_flight * p.activation_bytes <= budget;
    });
  }

 private:
  const CutRequest& request_;
  Config config_;
  Placement placement_;
  std::map<std::string, Evaluated> screened_;
};

// Moves one boundary of `cut` by one layer, each piece kept non-empty.
std::vector<std::vector<LayerRange>> neighbours(const std::vector<LayerRange>& cut) {
  std::vector<std::vector<LayerRange>> moved;
  for (std::size_t b = 0; b + 1 < cut.size(); ++b) {
    for (const int step : {-1, 1}) {
      std::vector<LayerRange> next = cut;
      next[b].end += step;
      next[b + 1].begin += step;
      if (next[b].size() > 0 && next[b + 1].size() > 0) moved.push_back(std::move(next));
    }
  }
  return moved;
}

// Rounds of boundary moves at most: each round screens 2 (pieces - 1) cuts.
constexpr int kMoveRounds = 8;

std::string request_error(const CutRequest& request) {
  const int pieces = model_pieces(request.request.placement, request.request.config);
  const int layers = static_cast<int>(request.layers.size());
  if (layers == 0) return "the costs give no layers: a cut needs a cost file with `layers:`";
  if (pieces > layers) {
    return "cannot cut " + std::to_string(layers) + " layers into " + std::to_string(pieces) +
           " non-empty pieces: use fewer stages or chunks";
  }
  if (request.choice == CutChoice::given) {
    std::string error;
    if (!parse_cut(cut_text(request.cut), layers, error)) return "the cut: " + error;
    if (static_cast<int>(request.cut.size()) != pieces) {
      return "the cut `" + cut_text(request.cut) + "` has " + std::to_string(request.cut.size()) +
             " pieces but the placement runs " + std::to_string(pieces) + " (stages x chunks)";
    }
  }
  return {};
}

std::string how_searched(int timed, bool enumerated, const std::vector<LayerRange>& chosen,
                         const std::vector<LayerRange>& even, const std::optional<std::vector<LayerRange>>& min_max) {
  std::string how = enumerated ? "every cut (" + std::to_string(timed) + ") synthesized"
                               : "searched over " + std::to_string(timed) +
                                     " cuts (even, min-max, memory-aware, boundary moves)";
  if (chosen == even) how += "; the even cut";
  else if (min_max && chosen == *min_max) how += "; the min-max cut";
  return how;
}

// The program's text with its `cut` line after the placement line,
// compiled back, so that the program records the cut it was made for.
bool record_cut_line(CutResult& cut, std::string& error) {
  Result& result = cut.result;
  const std::size_t line_end = result.text.find('\n') + 1;
  std::string text = result.text.substr(0, line_end) + "cut " + cut_text(cut.cut) + "\n" + result.text.substr(line_end);
  Diagnostics diagnostics;
  auto program =
      compile(std::make_shared<const SourceFile>("synthesized.pipe", text), result.program.config, diagnostics);
  if (!program) {
    error = "the program with its cut does not compile: " +
            (diagnostics.all().empty() ? std::string("no reason given") : diagnostics.all().front().message);
    return false;
  }
  result.text = std::move(text);
  result.program = std::move(*program);
  return true;
}

}  // namespace

std::optional<CutResult> synthesize_cut(const CutRequest& request, std::string& error) {
  error = request_error(request);
  if (!error.empty()) return std::nullopt;
  const Config& config = request.request.config;
  const Placement placement = request.request.placement;
  const int pieces = model_pieces(placement, config);
  const int layers = static_cast<int>(request.layers.size());
  CutSearch search(request);
  const double seconds = request.request.time_limit_seconds;

  if (request.choice != CutChoice::search) {
    const std::vector<LayerRange> cut = request.choice == CutChoice::even ? even_cut(layers, pieces) : request.cut;
    Evaluated evaluated = search.evaluate(cut, seconds);
    if (!evaluated.result) {
      error = evaluated.error;
      return std::nullopt;
    }
    CutResult result{std::move(*evaluated.result), cut,
                     request.choice == CutChoice::even ? "the even cut (--cut even)" : "given (--cut)", 1, {}, 0, 0};
    result.stage_bytes = result.result.peak_bytes;
    result.memory_bytes = request.memory_bytes;
    result.weight_memory = weight_memory_of(request.layers, request.request.weight_memory);
    if (!record_cut_line(result, error)) return std::nullopt;
    return result;
  }

  const std::vector<LayerRange> even = even_cut(layers, pieces);
  const auto min_max = min_max_cut(request.layers, pieces);
  const bool enumerate = request.enumerate_small && layers <= kEnumerateLayers && config.stages <= kEnumerateStages;
  if (enumerate) {
    for (const auto& cut : all_cuts(layers, pieces)) search.screen(cut);
  } else {
    search.screen(even);
    search.screen(*min_max);
    if (request.memory_bytes > 0) {
      // In-flight counts from schedules that the limit does not bind, and
      // from the best so far: pieces of stages that hold more get fewer bytes.
      std::vector<std::vector<double>> profiles;
      if (const Evaluated free = search.evaluate(*min_max, 0, false); free.result) {
        profiles.push_back(free.result->peak_memory);
      }
      if (const Evaluated* best = search.best()) profiles.push_back(best->result->peak_memory);
      for (const auto& held : profiles) {
        for (const double scale : {1.0, 0.75, 0.5}) {
          if (const auto cut = search.memory_aware_cut(held, scale)) search.screen(*cut);
        }
      }
    }
    for (int round = 0; round < kMoveRounds; ++round) {
      const Evaluated* current = search.best();
      if (!current) break;
      const Rank before = rank_of(*current->result);
      const std::vector<LayerRange> from = current->cut;
      for (const auto& next : neighbours(from)) search.screen(next);
      if (!(rank_of(*search.best()->result) < before)) break;
    }
  }
  const Evaluated* chosen = search.best();
  if (!chosen) {
    error = "a memory limit of " + std::to_string(request.memory_bytes) +
            " bytes per stage is below what any cut and schedule needs: the least that works is " +
            std::to_string(search.least_bytes()) + " bytes (one micro-batch's activations per stage)";
    return std::nullopt;
  }
  // The finalists get the improvement step: the chosen cut, and the even
  // and the min-max cut, so that the result is never longer than either's.
  std::vector<std::vector<LayerRange>> finalists{chosen->cut, even, *min_max};
  std::optional<CutResult> result;
  double even_makespan = 0;
  double min_max_makespan = 0;
  for (std::size_t i = 0; i < finalists.size(); ++i) {
    const auto& cut = finalists[i];
    if (std::find(finalists.begin(), finalists.begin() + static_cast<std::ptrdiff_t>(i), cut) !=
        finalists.begin() + static_cast<std::ptrdiff_t>(i)) {
      continue;
    }
    Evaluated evaluated = seconds > 0 ? search.evaluate(cut, seconds / 3) : search.screen(cut);
    if (!evaluated.result) continue;
    const double makespan = evaluated.result->simulation.timeline.makespan;
    if (cut == even) even_makespan = makespan;
    if (cut == *min_max) min_max_makespan = makespan;
    if (!result || rank_of(*evaluated.result) < rank_of(result->result)) {
      result = CutResult{std::move(*evaluated.result), cut, {}, 0, {}, 0, 0};
    }
  }
  if (!result) {
    error = "no finalist cut fits the memory limit after its improvement step";
    return std::nullopt;
  }
  result->cuts_timed = search.screened();
  result->how = how_searched(result->cuts_timed, enumerate, result->cut, even, min_max);
  result->stage_bytes = result->result.peak_bytes;
  result->even_makespan = even_makespan;
  result->min_max_makespan = min_max_makespan;
  result->memory_bytes = request.memory_bytes;
  result->weight_memory = weight_memory_of(request.layers, request.request.weight_memory);
  if (!record_cut_line(*result, error)) return std::nullopt;
  return result;
}

std::optional<CutRequest> cut_request_of(const Request& request, const std::string& cut, std::string& error) {
  CutRequest cut_request;
  cut_request.request = request;
  cut_request.layers = request.costs.layers;
  cut_request.memory_bytes =
      request.memory_bytes > 0 ? request.memory_bytes : static_cast<std::uint64_t>(std::llround(request.memory_limit));
  if (cut == "even") {
    cut_request.choice = CutChoice::even;
  } else if (!cut.empty()) {
    auto parsed = parse_cut(cut, static_cast<int>(cut_request.layers.size()), error);
    if (!parsed) {
      error = "--cut " + cut + ": " + error;
      return std::nullopt;
    }
    cut_request.choice = CutChoice::given;
    cut_request.cut = std::move(*parsed);
  }
  return cut_request;
}

std::string describe_cut(const CutResult& result) {
  std::string text = cut_text(result.cut) + ", " + result.how;
  const auto figure = [](double makespan) { return makespan > 0 ? format_time(makespan) : std::string("none fits"); };
  if (result.cuts_timed > 1) {
    text += "; makespan " + format_time(result.result.simulation.timeline.makespan) + " against the even cut's " +
            figure(result.even_makespan) + " and the min-max cut's " + figure(result.min_max_makespan);
  }
  return text;
}

void record_cut(const CutResult& result, HeaderInputs& inputs) {
  inputs.memory_limit = 0;
  inputs.memory_bytes = result.memory_bytes;
  inputs.memory_model = "the cost file's layers";
  inputs.bytes_counted = "parameter-bytes plus held activation-bytes of the cut's layers";
  inputs.cut = describe_cut(result);
  inputs.weight_memory = result.weight_memory;
}

}  // namespace pipevm::synthesis
