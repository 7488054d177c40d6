// The search and its last step (synthesize.hpp).
#include "synthesize.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <tuple>

#include "bound.hpp"
#include "checked_program.hpp"
#include "exact.hpp"
#include "heuristic.hpp"
#include "local_search.hpp"
#include "order_clock.hpp"
#include "place_comms.hpp"
#include "policy_search.hpp"
#include "seeds.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {

namespace {

using Clock = std::chrono::steady_clock;

bool split_backward(const Costs& costs) {
  const auto splits = [](const Costs& c) {
    return !c.bwd.has_value() || c.bwd_input > 0 || c.bwd_weight > 0;
  };
  return splits(costs) &&
         std::all_of(costs.stages.begin(), costs.stages.end(), [&](const Costs& stage) {
           return splits(stage) && std::all_of(stage.chunks.begin(), stage.chunks.end(), splits);
         });
}

// The exact step runs on problems of at most this many passes, and visits
// at most this many partial orders.
constexpr std::size_t kExactPasses = 48;
constexpr std::uint64_t kExactNodes = 20'000'000;

std::size_t pass_count(const Problem& problem) {
  const Config& c = problem.config;
  const auto cells = static_cast<std::size_t>(c.stages) *
                     static_cast<std::size_t>(chunks_per_rank(problem.placement, c)) *
                     static_cast<std::size_t>(c.micro_batches);
  return cells * (problem.split_backward ? 3 : 2);
}

bool fits(const Problem& problem, const ComputeOrder& order) {
  const auto peaks = peak_memory(order, problem.weight_memory);
  return std::all_of(peaks.begin(), peaks.end(),
                     [&](double peak) { return peak <= problem.memory_limit + 1e-9; });
}

// A placed program checked both ways and timed (check_and_time), with the
// figures of `order`; nullopt with `error` when it fails.
std::optional<Result> result_of(const ComputeOrder& order, const Program& placed, const Costs& costs,
                                double weight_memory, std::string& error) {
  auto checked = check_and_time(placed, costs, nullptr, error);
  if (!checked) return std::nullopt;
  Result result;
  result.order = order;
  result.text = std::move(checked->text);
  result.program = std::move(checked->program);
  result.simulation = std::move(checked->simulation);
  result.longest_span = longest_span(result.program, result.simulation.timeline);
  result.bubble_rate_zb = zero_bubble_rate(result.program, result.simulation.timeline);
  const double per_micro_batch = chunks_per_rank(order.placement, order.config);
  for (const double peak : peak_memory(order, weight_memory)) {
    result.peak_memory.push_back(peak / per_micro_batch);
  }
  return result;
}

// Places communication around a timed order, compiles the text back and
// checks it both ways.
std::optional<Result> finish(const ComputeOrder& order, const Timed& timed, const Costs& costs,
                             double weight_memory, std::string& error) {
  const BuiltProgram placed =
      program_with_placed_comms(order, pass_end_times(timed.built, timed.simulation.timeline),
                                builder_file());
  auto result = result_of(order, placed.program, costs, weight_memory, error);
  if (result) result->order_makespan = std::get<1>(timed.score);
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

// At one limit in M_B: the keep-only search, or with a limit and a memory
// policy the policy search around it (policy_search.hpp).
std::optional<Result> synthesize_at_limit(const Request& request, std::string& error) {
  if (request.memory_policy == MemoryPolicy::keep || request.memory_limit <= 0) {
    return synthesize_in_activations(request, error);
  }
  error = request_error(request);
  if (!error.empty()) return std::nullopt;
  return synthesize_with_policies(request, synthesize_in_activations, error);
}

// A limit in bytes: a binary search over whole M_B limits from 1 to m for
// the largest whose result fits (more memory rarely makes a schedule worse),
// each search given its share of the time; the best result that fits.
std::optional<Result> synthesize_in_bytes(const Request& request, std::string& error) {
  const int most = request.config.micro_batches;
  const int searches = static_cast<int>(std::ceil(std::log2(most + 1.0))) + 1;
  Request each = request;
  // The keep-only search runs at whole M_B limits and ignores the bytes; the
  // policy search prefers, of its candidates, those within them.
  if (request.memory_policy == MemoryPolicy::keep) each.memory_bytes = 0;
  each.time_limit_seconds = request.time_limit_seconds / searches;
  const auto at = [&](int limit) {
    each.memory_limit = limit;
    auto result = synthesize_at_limit(each, error);
    if (result) {
      result->peak_bytes = request.count_bytes ? request.count_bytes(*result)
                                               : stage_bytes(result->program, request.memory_shape);
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
  const Problem problem = problem_of(request);

  // Every seed that is an order and fits, timed; the best starts the search.
  const std::vector<Seed> candidates = seeds(problem);
  int evaluations = 0;
  int within_limit = 0;
  std::optional<Timed> best;
  std::size_t best_index = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const ComputeOrder& order = candidates[i].order;
    if (!order_error(order).empty() || !fits(problem, order)) continue;
    ++within_limit;
    ++evaluations;
    auto timed = time_order(order, problem.costs);
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
  const double seed_span = std::get<0>(best->score);
  LowerBound bound = lower_bound(problem);
  const auto seconds = [&](double fraction) {
    return started + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(request.time_limit_seconds * fraction));
  };
  // Small problems get the exact step for the second half of the time.
  const bool exact = request.time_limit_seconds > 0 && exact_search_applies(problem) &&
                     pass_count(problem) <= kExactPasses;
  LocalSearch search(problem, candidates[best_index].order, *best,
                     {seconds(exact ? 0.5 : 1), request.move_limit, bound.value, {}});
  int improvements = search.run(request.progress, started, evaluations);
  ComputeOrder order = search.best();
  auto timed = time_order(order, problem.costs);
  if (exact && std::get<0>(timed->score) > bound.value * (1 + 1e-9)) {
    const auto clock = time_compute_order(order, problem.costs);
    const ExactSearch found = exact_search(problem, clock->longest_span, kExactNodes, seconds(1));
    if (found.order) {
      auto better = time_order(*found.order, problem.costs);
      ++evaluations;
      if (better && better->score < timed->score) {
        order = *found.order;
        timed = std::move(better);
        ++improvements;
      }
    }
    if (found.proved && found.longest_span > bound.value) {
      bound.value = found.longest_span;
      bound.binding = "exact search over every order within the limit";
    }
  }
  auto result = finish(order, *timed, problem.costs, problem.weight_memory, error);
  if (!result) return std::nullopt;
  result->origin = candidates[best_index].origin;
  result->seed_span = seed_span;
  result->seeds = static_cast<int>(candidates.size());
  result->seeds_within_limit = within_limit;
  result->lower_bound = bound.value;
  result->bound_reason = bound.binding;
  result->evaluations = evaluations;
  result->improvements = improvements;
  return result;
}

}  // namespace

Problem problem_of(const Request& request) {
  Problem problem;
  problem.placement = request.placement;
  problem.config = request.config;
  problem.costs = request.costs;
  problem.split_backward = split_backward(request.costs);
  problem.weight_memory = problem.split_backward ? request.weight_memory : 1;
  if (request.memory_limit > 0) {
    problem.memory_limit = request.memory_limit * chunks_per_rank(request.placement, request.config);
  }
  return problem;
}

std::optional<Result> synthesize(const Request& request, std::string& error) {
  if (costs_may_overflow(request.costs, request.config)) {
    error = kCostsOverflow;
    return std::nullopt;
  }
  error = stage_entries_error(request.costs, request.config);
  if (!error.empty()) return std::nullopt;
  if (request.memory_bytes > 0) return synthesize_in_bytes(request, error);
  auto result = synthesize_at_limit(request, error);
  if (result) result->memory_limit = request.memory_limit;
  return result;
}

std::optional<Result> lower(const ComputeOrder& order, const Costs& costs, double weight_memory,
                            std::string& error, const Program* given) {
  error = order_error(order);
  if (!error.empty()) return std::nullopt;
  if (costs_may_overflow(costs, order.config)) {
    error = kCostsOverflow;
    return std::nullopt;
  }
  error = stage_entries_error(costs, order.config);
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
  if (given != nullptr) {
    std::string ignored;
    std::optional<Result> own =
        result_of(order, *given, costs, weight_memory, ignored);
    if (own && own->simulation.timeline.makespan < result->simulation.timeline.makespan - 1e-9) {
      own->order_makespan = result->order_makespan;
      result = std::move(own);
      result->origin = "given order, as the input places its communication";
    }
  }
  result->seed_span = result->longest_span;
  result->seeds = 1;
  result->seeds_within_limit = 1;
  const LowerBound bound = lower_bound(problem);
  result->lower_bound = bound.value;
  result->bound_reason = bound.binding;
  result->evaluations = 1;
  return result;
}

bool is_optimal(const Result& result) {
  return result.longest_span <= result.lower_bound * (1 + 1e-9);
}

}  // namespace pipevm::synthesis
