// The search and its last step (synthesize.hpp).
#include "synthesize.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <sstream>
#include <tuple>

#include "check.hpp"
#include "compile.hpp"
#include "heuristic.hpp"
#include "place_comms.hpp"

namespace pipevm::synthesis {

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<const SourceFile> builder_file() {
  static const auto file = std::make_shared<const SourceFile>("synthesized.pipe", "");
  return file;
}

// What the search minimises: the Zero Bubble paper's cost, the longest
// stage span (what a step costs when steps follow each other: a stage
// starts its next step when it ends this one), then the makespan.
using Score = std::tuple<double, double>;

// Each stage's first forward start and last compute end, and its compute.
struct StageSpan {
  double first = std::numeric_limits<double>::infinity();
  double last = 0;
  double work = 0;
};

std::vector<StageSpan> stage_spans(const Program& program, const Timeline& timeline) {
  std::vector<StageSpan> spans(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) {
    StageSpan& span = spans[static_cast<std::size_t>(r)];
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
    for (std::size_t i = begin; i < end; ++i) {
      if (info(program.code[i].op).cls != OpClass::compute) continue;
      const InstructionTime& t = timeline.times[i];
      span.first = std::min(span.first, t.started);
      span.last = std::max(span.last, t.started + t.busy);
      span.work += t.busy;
    }
  }
  return spans;
}

double longest_span(const Program& program, const Timeline& timeline) {
  double longest = 0;
  for (const StageSpan& s : stage_spans(program, timeline)) {
    if (s.last > s.first) longest = std::max(longest, s.last - s.first);
  }
  return longest;
}

struct Timed {
  Score score;
  Simulation simulation;
  BuiltProgram built;
};

std::optional<Timed> time_order(const ComputeOrder& order, const Costs& costs) {
  Timed timed{{}, {}, program_for_timing(order, builder_file())};
  Diagnostics diagnostics;
  auto simulation = simulate(timed.built.program, costs, diagnostics);
  if (!simulation) return std::nullopt;
  timed.simulation = std::move(*simulation);
  timed.score = {longest_span(timed.built.program, timed.simulation.timeline),
                 timed.simulation.timeline.makespan};
  return timed;
}

bool split_backward(const Costs& costs) {
  const auto splits = [](const Costs& c) {
    return !c.bwd.has_value() || c.bwd_input > 0 || c.bwd_weight > 0;
  };
  return splits(costs) &&
         std::all_of(costs.stages.begin(), costs.stages.end(), [&](const Costs& stage) {
           return splits(stage) && std::all_of(stage.chunks.begin(), stage.chunks.end(), splits);
         });
}

// With one chunk per stage: a stage's span holds its compute and two idle
// times no order avoids. Head: from its first forward's start, its first
// backward waits for that micro-batch's forward to end and travel to the
// last stage and back (`round_trip`); meanwhile only forwards can run, as
// many as memory holds. Tail: after its last forward ends, that
// micro-batch's backward waits the same round trip; meanwhile only the
// backward and weight passes of what the stage holds can run, at most what
// fits in the memory limit. The two windows are disjoint when memory holds
// fewer than all micro-batches (the last forward then follows the first
// backward).
double stage_idle_bound(const Problem& problem, double forward, double backward,
                        double weight, double round_trip) {
  const int m = problem.config.micro_batches;
  const double limit = std::min<double>(m, std::floor(problem.memory_limit + 1e-9));
  const int held = static_cast<int>(limit);
  const double head = std::max(0.0, forward + round_trip - held * forward);
  double tail_work = 0;
  for (int pending_backwards = 1; pending_backwards <= held; ++pending_backwards) {
    const double room = problem.memory_limit - pending_backwards;
    int pending_weights = m - pending_backwards;
    if (problem.split_backward && problem.weight_memory > 0 && std::isfinite(room)) {
      pending_weights = std::min(pending_weights,
                                 static_cast<int>(std::floor(room / problem.weight_memory + 1e-9)));
    }
    if (!problem.split_backward) pending_weights = 0;
    tail_work = std::max(tail_work, (pending_backwards - 1) * (backward + weight) + pending_weights * weight);
  }
  const double tail = std::max(0.0, round_trip - tail_work);
  return held < m ? head + tail : std::max(head, tail);
}

// No schedule of these passes has a shorter longest stage span (first
// forward's start to last pass's end): every stage computes all its passes
// in its span, and the first stage's span holds its forwards and, after the
// last of them, that micro-batch's round trip through the lane. With one
// chunk per stage, each stage's compute plus its unavoidable idle
// (stage_idle_bound).
double lower_bound(const Problem& problem) {
  const Costs& costs = problem.costs;
  const Config& c = problem.config;
  const int chunks = chunks_per_rank(problem.placement, c);
  const int lane = lane_length(problem.placement, c);
  std::vector<int> owner(static_cast<std::size_t>(lane), 0);
  std::vector<int> chunk_at(static_cast<std::size_t>(lane), 0);
  for (int s = 0; s < c.stages; ++s) {
    for (int k = 0; k < chunks; ++k) {
      const auto at = static_cast<std::size_t>(position_of(problem.placement, c, s, k).position);
      owner[at] = s;
      chunk_at[at] = k;
    }
  }
  // The passes of the chunk at lane position `at`, at its own costs. With
  // one chunk per stage, position s is stage s.
  const auto cost_at = [&](CostKind kind, int at) {
    const auto where = static_cast<std::size_t>(at);
    return costs.duration(kind, owner[where], chunk_at[where]);
  };
  // Loads are data instructions, not compute: a stage may run all of them
  // before its first pass, outside the span, so no term counts them.
  const auto forward = [&](int at) { return cost_at(CostKind::fwd, at); };
  const auto backward = [&](int at) {
    return cost_at(problem.split_backward ? CostKind::bwd_input : CostKind::bwd, at);
  };
  const auto weight = [&](int at) {
    return problem.split_backward ? cost_at(CostKind::bwd_weight, at) : 0.0;
  };
  double bound = 0;
  for (int s = 0; s < c.stages; ++s) {
    double work = 0;
    for (int k = 0; k < chunks; ++k) {
      const int at = position_of(problem.placement, c, s, k).position;
      work += c.micro_batches * (forward(at) + backward(at) + weight(at));
    }
    bound = std::max(bound, work);
  }
  double trip = c.micro_batches * forward(0);
  for (int at = 1; at < lane; ++at) {
    trip += costs.message_time(MessageKind::act) + forward(at) + backward(at) +
            costs.message_time(MessageKind::grad);
  }
  trip += backward(0) + weight(0);
  bound = std::max(bound, trip);
  if (chunks != 1) return bound;
  for (int s = 0; s < c.stages; ++s) {
    double round_trip = 0;
    for (int q = s + 1; q < c.stages; ++q) {
      round_trip += costs.message_time(MessageKind::act) + forward(q) + backward(q) +
                    costs.message_time(MessageKind::grad);
    }
    const double work = c.micro_batches * (forward(s) + backward(s) + weight(s));
    bound = std::max(bound, work + stage_idle_bound(problem, forward(s), backward(s), weight(s),
                                                    round_trip));
  }
  // A stage's last backward-input follows every later stage's, and a later
  // stage q, starting after stage s's first forward reached it, computes
  // all its passes but the weight passes it may still hold (memory bounds
  // how many) before its last backward-input ends.
  const int m = c.micro_batches;
  for (int s = 0; s < c.stages; ++s) {
    double chain = 0;
    for (int q = s + 1; q < c.stages; ++q) {
      chain += forward(q - 1) + costs.message_time(MessageKind::act) + backward(q - 1) +
               costs.message_time(MessageKind::grad);
      double held_weights = 0;
      if (problem.split_backward) {
        held_weights = m;
        if (problem.weight_memory > 0) {
          held_weights = std::min<double>(m, std::floor(problem.memory_limit / problem.weight_memory + 1e-9));
        }
      }
      const double before_last_backward = m * (forward(q) + backward(q) + weight(q)) - held_weights * weight(q);
      bound = std::max(bound, chain + before_last_backward + weight(s));
    }
  }
  return bound;
}

// The local search: random moves on one stage's order, each re-simulated;
// a move is kept when the score does not get worse.
class LocalSearch {
 public:
  LocalSearch(const Problem& problem, ComputeOrder order, Timed timed, Clock::time_point deadline,
              int move_limit, double bound, const std::function<void(const Progress&)>& progress,
              Clock::time_point started, int& evaluations)
      : problem_(problem),
        current_(std::move(order)),
        current_score_(timed.score),
        best_(current_),
        best_score_(timed.score),
        deadline_(deadline),
        move_limit_(move_limit),
        bound_(bound),
        progress_(progress),
        started_(started),
        evaluations_(evaluations) {}

  int run() {
    int kept = 0;
    int moves = 0;
    const int stages = problem_.config.stages;
    while (Clock::now() < deadline_ && (move_limit_ == 0 || moves < move_limit_) &&
           std::get<0>(best_score_) > bound_ * (1 + 1e-12)) {
      const int s = std::uniform_int_distribution<int>(0, stages - 1)(random_);
      auto& passes = current_.stages[static_cast<std::size_t>(s)];
      if (passes.size() < 2) continue;
      const std::vector<Pass> before = passes;
      if (!move(passes)) continue;
      if (!fits(passes)) {
        passes = before;
        continue;
      }
      ++evaluations_;
      ++moves;
      const auto timed = time_order(current_, problem_.costs);
      if (!timed || timed->score > current_score_) {
        passes = before;
        continue;
      }
      current_score_ = timed->score;
      if (current_score_ < best_score_) {
        best_ = current_;
        best_score_ = current_score_;
        ++kept;
        if (progress_) {
          progress_({std::get<1>(best_score_),
                     std::chrono::duration<double>(Clock::now() - started_).count(), evaluations_});
        }
      }
    }
    return kept;
  }

  const ComputeOrder& best() const { return best_; }

 private:
  static bool depends(const Pass& a, const Pass& b) {
    return a.micro_batch == b.micro_batch && a.chunk == b.chunk;
  }

  // Swaps two adjacent independent passes, or moves a weight pass to
  // another place after its backward-input.
  bool move(std::vector<Pass>& passes) {
    const auto n = static_cast<int>(passes.size());
    const int j = std::uniform_int_distribution<int>(0, n - 2)(random_);
    if (passes[static_cast<std::size_t>(j)].kind != PassKind::backward_weight ||
        std::uniform_int_distribution<int>(0, 1)(random_) == 0) {
      if (depends(passes[static_cast<std::size_t>(j)], passes[static_cast<std::size_t>(j) + 1])) {
        return false;
      }
      std::swap(passes[static_cast<std::size_t>(j)], passes[static_cast<std::size_t>(j) + 1]);
      return true;
    }
    const Pass weight = passes[static_cast<std::size_t>(j)];
    passes.erase(passes.begin() + j);
    int earliest = 0;
    for (int k = 0; k < n - 1; ++k) {
      const Pass& p = passes[static_cast<std::size_t>(k)];
      if (p.kind == PassKind::backward_input && depends(p, weight)) earliest = k + 1;
    }
    const int to = std::uniform_int_distribution<int>(earliest, n - 1)(random_);
    passes.insert(passes.begin() + to, weight);
    return to != j;
  }

  bool fits(const std::vector<Pass>& passes) const {
    ComputeOrder one;
    one.stages.push_back(passes);
    return peak_memory(one, problem_.weight_memory)[0] <= problem_.memory_limit + 1e-9;
  }

  const Problem& problem_;
  ComputeOrder current_;
  Score current_score_;
  ComputeOrder best_;
  Score best_score_;
  Clock::time_point deadline_;
  int move_limit_;
  double bound_;
  const std::function<void(const Progress&)>& progress_;
  Clock::time_point started_;
  int& evaluations_;
  std::mt19937 random_{28};
};

std::string flat_text(const Program& program) {
  const Config& c = program.config;
  std::string text = "placement " + std::string(name(program.placement)) + "\n";
  text += "check stages " + std::to_string(c.stages) + " micro_batches " +
          std::to_string(c.micro_batches) + " chunks " + std::to_string(c.chunks) + "\n";
  for (int r = 0; r < program.ranks(); ++r) text += disassemble_rank(program, r);
  return text;
}

// The checker's findings as one line; empty when the program is clean.
std::string check_failure(const Program& program, bool posted_order) {
  CheckOptions options;
  options.p2p_posted_order = posted_order;
  const CheckResult result = check(program, options);
  if (result.ok()) return {};
  const std::string mode = posted_order ? "check --p2p-order posted" : "check";
  if (result.diagnostics.empty()) return mode + " suppressed findings";
  return mode + " finds: " + result.diagnostics.front().message;
}

// Places communication around a timed order, compiles the text back and
// checks it both ways.
std::optional<Result> finish(const ComputeOrder& order, const Timed& timed, const Costs& costs,
                             double weight_memory, std::string& error) {
  const BuiltProgram placed =
      program_with_placed_comms(order, pass_end_times(timed.built, timed.simulation.timeline),
                                builder_file());
  Result result;
  result.order = order;
  result.text = flat_text(placed.program);
  Diagnostics diagnostics;
  auto compiled = compile(std::make_shared<const SourceFile>("synthesized.pipe", result.text),
                          order.config, diagnostics);
  if (!compiled) {
    error = "the synthesized program does not compile: " +
            (diagnostics.all().empty() ? std::string("no reason given") : diagnostics.all().front().message);
    return std::nullopt;
  }
  result.program = std::move(*compiled);
  for (const bool posted : {false, true}) {
    error = check_failure(result.program, posted);
    if (!error.empty()) {
      error = "the synthesized program fails " + error;
      return std::nullopt;
    }
  }
  auto simulation = simulate(result.program, costs, diagnostics);
  if (!simulation) {
    error = "the synthesized program cannot be simulated";
    return std::nullopt;
  }
  result.simulation = std::move(*simulation);
  result.order_makespan = std::get<1>(timed.score);
  result.longest_span = longest_span(result.program, result.simulation.timeline);
  result.bubble_rate_zb = zero_bubble_rate(result.program, result.simulation.timeline);
  const double per_micro_batch = chunks_per_rank(order.placement, order.config);
  for (const double peak : peak_memory(order, weight_memory)) {
    result.peak_memory.push_back(peak / per_micro_batch);
  }
  return result;
}

// A number as a person writes it (0.5, 16), for messages.
std::string compact(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string request_error(const Request& request) {
  const Config& c = request.config;
  if (request.placement == Placement::mirror) {
    return "placement mirror (DualPipe) is not synthesized: use looped or v";
  }
  if (request.placement == Placement::v && c.chunks != 2) {
    return "placement v holds two chunks per stage: use --chunks 2";
  }
  if (c.dp != 1) return "synthesis plans one pipeline: use dp 1";
  if (request.memory_limit != 0 && request.memory_limit < least_memory_limit()) {
    return "a memory limit of " + compact(request.memory_limit) +
           " M_B is below what any schedule needs: the least that works is 1 (one micro-batch's "
           "activations per stage)";
  }
  if (!(request.weight_memory >= 0 && request.weight_memory <= 1)) {
    return "--weight-memory must be between 0 and 1 (the fraction of a forward's activations a "
           "backward-input leaves for its weight pass)";
  }
  return {};
}

}  // namespace

double least_memory_limit() { return 1; }

double zero_bubble_rate(const Program& program, const Timeline& timeline) {
  double cost = 0;
  double work = 0;
  for (const StageSpan& s : stage_spans(program, timeline)) {
    if (s.last > s.first) cost = std::max(cost, s.last - s.first);
    work = std::max(work, s.work);
  }
  return cost > 0 ? (cost - work) / cost : 0;
}

namespace {

// The peak bytes of each stage of `program` under `shape`, as `check`
// counts them.
std::vector<std::uint64_t> stage_bytes(const Program& program, const MemoryShape& shape) {
  std::vector<std::uint64_t> bytes;
  for (const RankBytes& rank : peak_bytes(program, shape)) bytes.push_back(rank.total());
  return bytes;
}

bool bytes_fit(const std::vector<std::uint64_t>& bytes, std::uint64_t limit) {
  return !bytes.empty() &&
         std::all_of(bytes.begin(), bytes.end(), [&](std::uint64_t b) { return b <= limit; });
}

std::optional<Result> synthesize_in_activations(const Request& request, std::string& error);

// A limit in bytes: a binary search over whole M_B limits from 1 to m for
// the largest whose result fits (more memory rarely makes a schedule worse),
// each search given its share of the time; the best result that fits.
std::optional<Result> synthesize_in_bytes(const Request& request, std::string& error) {
  const int most = request.config.micro_batches;
  const int searches = static_cast<int>(std::ceil(std::log2(most + 1.0))) + 1;
  Request each = request;
  each.memory_bytes = 0;
  each.time_limit_seconds = request.time_limit_seconds / searches;
  const auto at = [&](int limit) {
    each.memory_limit = limit;
    auto result = synthesize_in_activations(each, error);
    if (result) {
      result->peak_bytes = stage_bytes(result->program, request.memory_shape);
      result->memory_limit = limit;
    }
    return result;
  };
  std::optional<Result> best = at(1);
  if (!best) return std::nullopt;
  if (!bytes_fit(best->peak_bytes, request.memory_bytes)) {
    const std::uint64_t least =
        *std::max_element(best->peak_bytes.begin(), best->peak_bytes.end());
    error = "a memory limit of " + std::to_string(request.memory_bytes) +
            " bytes is below what any schedule needs for this model: the least that works is " +
            std::to_string(least) + " bytes (one micro-batch's activations per stage)";
    return std::nullopt;
  }
  int fits = 1;
  int too_much = most + 1;
  while (too_much - fits > 1) {
    const int middle = (fits + too_much) / 2;
    auto result = at(middle);
    if (result && bytes_fit(result->peak_bytes, request.memory_bytes)) {
      fits = middle;
      if (std::tie(result->longest_span, result->simulation.timeline.makespan) <=
          std::tie(best->longest_span, best->simulation.timeline.makespan)) {
        best = std::move(result);
      }
    } else {
      too_much = middle;
    }
  }
  error.clear();
  return best;
}

std::optional<Result> synthesize_in_activations(const Request& request, std::string& error) {
  const auto started = Clock::now();
  error = request_error(request);
  if (!error.empty()) return std::nullopt;
  Problem problem;
  problem.placement = request.placement;
  problem.config = request.config;
  problem.costs = request.costs;
  problem.split_backward = split_backward(request.costs);
  problem.weight_memory = problem.split_backward ? request.weight_memory : 1;
  if (request.memory_limit > 0) {
    problem.memory_limit = request.memory_limit * chunks_per_rank(request.placement, request.config);
  }

  // The candidates: handcrafted orders that fit, then the greedy grid.
  std::vector<std::pair<std::string, ComputeOrder>> candidates;
  for (NamedOrder& named : handcrafted_orders(problem)) {
    const auto peaks = peak_memory(named.order, problem.weight_memory);
    const bool fits = std::all_of(peaks.begin(), peaks.end(),
                                  [&](double p) { return p <= problem.memory_limit + 1e-9; });
    if (fits) candidates.emplace_back(std::move(named.name), std::move(named.order));
  }
  int grid_point = 0;
  for (const GreedyChoices& choices : greedy_grid()) {
    if (auto order = greedy_order(problem, choices)) {
      candidates.emplace_back("greedy #" + std::to_string(grid_point), std::move(*order));
    }
    ++grid_point;
  }
  int evaluations = 0;
  std::optional<Timed> best;
  std::size_t best_index = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!order_error(candidates[i].second).empty()) continue;
    ++evaluations;
    auto timed = time_order(candidates[i].second, problem.costs);
    if (timed && (!best || timed->score < best->score)) {
      best = std::move(timed);
      best_index = i;
      if (request.progress) {
        request.progress({std::get<1>(best->score),
                          std::chrono::duration<double>(Clock::now() - started).count(),
                          evaluations});
      }
    }
  }
  if (!best) {
    error = "no schedule found within the memory limit of " + compact(request.memory_limit) +
            " M_B per stage; the least that works is " + compact(least_memory_limit());
    return std::nullopt;
  }
  const double bound = lower_bound(problem);
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(request.time_limit_seconds));
  LocalSearch search(problem, candidates[best_index].second, *best, deadline, request.move_limit,
                     bound, request.progress, started, evaluations);
  const int improvements = search.run();
  ComputeOrder order = search.best();
  auto timed = time_order(order, problem.costs);
  auto result = finish(order, *timed, problem.costs, problem.weight_memory, error);
  if (!result) return std::nullopt;
  result->origin = candidates[best_index].first;
  result->lower_bound = bound;
  result->evaluations = evaluations;
  result->improvements = improvements;
  return result;
}

}  // namespace

std::optional<Result> synthesize(const Request& request, std::string& error) {
  if (request.memory_bytes > 0) return synthesize_in_bytes(request, error);
  auto result = synthesize_in_activations(request, error);
  if (result) result->memory_limit = request.memory_limit;
  return result;
}

std::optional<Result> lower(const ComputeOrder& order, const Costs& costs, double weight_memory,
                            std::string& error) {
  error = order_error(order);
  if (!error.empty()) return std::nullopt;
  auto timed = time_order(order, costs);
  if (!timed) {
    error = "the compute order deadlocks: a stage waits for a pass another stage runs later";
    return std::nullopt;
  }
  auto result = finish(order, *timed, costs, weight_memory, error);
  if (!result) return std::nullopt;
  Problem problem;
  problem.placement = order.placement;
  problem.config = order.config;
  problem.costs = costs;
  problem.split_backward = split_backward(costs);
  result->origin = "given order";
  result->lower_bound = lower_bound(problem);
  result->evaluations = 1;
  return result;
}

bool is_optimal(const Result& result) {
  return result.longest_span <= result.lower_bound * (1 + 1e-9);
}

}  // namespace pipevm::synthesis
