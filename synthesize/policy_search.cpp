// Keep, recompute or offload chosen with the order (policy_search.hpp).
#include "policy_search.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "bound.hpp"
#include "checked_program.hpp"
#include "compile.hpp"
#include "handcrafted.hpp"
#include "library.hpp"
#include "memory_policy.hpp"
#include "order_clock.hpp"
#include "place_comms.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {

namespace {

bool allows(MemoryPolicy policy, UnitPolicy unit) {
  switch (policy) {
    case MemoryPolicy::keep: return unit == UnitPolicy::keep;
    case MemoryPolicy::recompute: return unit != UnitPolicy::offload;
    case MemoryPolicy::offload: return unit != UnitPolicy::recompute;
    case MemoryPolicy::any: return true;
  }
  return false;
}

bool better(const Result& a, const Result& b) {
  return std::tuple(a.longest_span, a.simulation.timeline.makespan) <
         std::tuple(b.longest_span, b.simulation.timeline.makespan);
}

// Whether every stage of a simulated program holds at most `limit` chunk
// activations (check's peak_activations).
bool within(const Simulation& simulation, double limit) {
  return std::all_of(simulation.stages.begin(), simulation.stages.end(), [&](const StageFigures& s) {
    return s.peak_activations <= limit + 1e-9;
  });
}

class PolicySearch {
 public:
  PolicySearch(const Request& request, Problem problem)
      : request_(request), problem_(std::move(problem)) {}

  // A candidate program: kept when checked, within the limit and better.
  void offer(const Program& program, const std::string& origin, double order_makespan,
             const ComputeOrder& order) {
    std::string error;
    auto checked = check_and_time(program, problem_.costs, &request_.memory_shape, error);
    if (!checked || !within(checked->simulation, problem_.memory_limit)) return;
    Result result;
    result.order = order;
    result.program = std::move(checked->program);
    result.text = std::move(checked->text);
    result.simulation = std::move(checked->simulation);
    result.order_makespan = order_makespan;
    result.longest_span = longest_span(result.program, result.simulation.timeline);
    result.bubble_rate_zb = zero_bubble_rate(result.program, result.simulation.timeline);
    result.origin = origin;
    result.seed_span = result.longest_span;
    const double per_micro_batch = chunks_per_rank(problem_.placement, problem_.config);
    for (const StageFigures& s : result.simulation.stages) {
      result.peak_memory.push_back(s.peak_activations / per_micro_batch);
    }
    ++evaluations_;
    consider(std::move(result));
  }

  // A result within the M_B limit: the best, and apart the best within
  // the request's byte limit when it has one.
  void consider(Result result) {
    if (request_.memory_bytes > 0) {
      std::uint64_t most = 0;
      for (const RankBytes& rank : peak_bytes(result.program, request_.memory_shape)) {
        most = std::max(most, rank.total());
      }
      if (most <= request_.memory_bytes && (!best_in_bytes_ || better(result, *best_in_bytes_))) {
        best_in_bytes_ = result;
      }
      // None fitting the bytes, the one nearest to them is returned, so that
      // the caller's message names the least bytes found.
      if (!fewest_bytes_ || most < fewest_) {
        fewest_ = most;
        fewest_bytes_ = result;
      }
    }
    if (!best_ || better(result, *best_)) best_ = std::move(result);
  }

  // A shipped schedule expanded for the configuration, when it applies.
  void offer_shipped(std::string_view stem) {
    for (const ShippedSchedule& shipped : shipped_schedules()) {
      if (shipped.name != stem) continue;
      const std::string path = "schedules/" + std::string(stem) + ".pipe";
      Diagnostics diagnostics;
      auto program = compile(std::make_shared<const SourceFile>(path, std::string(shipped.text)),
                             problem_.config, diagnostics);
      if (!program || program->placement != problem_.placement) return;
      if (std::string(stem) == "1f1b-offload") offload_program_ = *program;
      ComputeOrder none;
      none.placement = problem_.placement;
      none.config = problem_.config;
      offer(*program, path, 0, none);
    }
  }

  // The order made to fit by `rule`, lowered with its policies.
  void offer_order(const ComputeOrder& order, const std::string& origin, const PolicyRule& rule,
                   const std::string& rule_name) {
    const auto policies = assign_policies(order, keep_all(order), problem_.memory_limit,
                                          problem_.weight_memory, rule);
    if (!policies || !uses_policies(*policies)) return;
    auto timed = time_order(order, problem_.costs);
    if (!timed) return;
    const BuiltProgram placed = program_with_placed_comms(
        order, pass_end_times(timed->built, timed->simulation.timeline), builder_file());
    const Program program = with_policies(placed, order, *policies);
    if (rule_name == "offload") offload_program_ = program;
    offer(program, origin + " with " + rule_name, std::get<1>(timed->score), order);
  }

  // Per stage and chunk: whether one copy of the unit's stash fits in its
  // forward (PipeOffload's k <= 1), from the bytes an offloading program
  // copies (none known: latency alone).
  std::map<std::pair<int, int>, bool> hidden_copies() const {
    std::map<std::pair<int, int>, bool> hidden;
    std::vector<std::uint64_t> bytes;
    if (offload_program_) bytes = host_copy_bytes(*offload_program_, request_.memory_shape);
    for (int s = 0; s < problem_.config.stages; ++s) {
      for (int c = 0; c < chunks_per_rank(problem_.placement, problem_.config); ++c) {
        std::uint64_t most = 0;
        if (offload_program_ && !bytes.empty()) {
          const std::size_t begin = offload_program_->rank_begin[static_cast<std::size_t>(s)];
          const std::size_t end = offload_program_->rank_begin[static_cast<std::size_t>(s) + 1];
          for (std::size_t i = begin; i < end; ++i) {
            if (offload_program_->code[i].op == Opcode::Offload && offload_program_->code[i].chunk == c) {
              most = std::max(most, bytes[i]);
            }
          }
        }
        hidden[{s, c}] = problem_.costs.host_copy_time(static_cast<double>(most)) <=
                         pass_cost(problem_.costs, PassKind::forward, s, c) + 1e-12;
      }
    }
    return hidden;
  }

  // The best within the byte limit when one was given (nothing fitting it:
  // the candidate with the fewest bytes), else the best within the M_B limit.
  std::optional<Result>& best() {
    if (request_.memory_bytes == 0) return best_;
    return best_in_bytes_ ? best_in_bytes_ : fewest_bytes_;
  }
  int evaluations() const { return evaluations_; }
  const Problem& problem() const { return problem_; }

 private:
  const Request& request_;
  Problem problem_;
  std::optional<Result> best_;
  std::optional<Result> best_in_bytes_;
  std::optional<Result> fewest_bytes_;
  std::uint64_t fewest_ = 0;
  std::optional<Program> offload_program_;
  int evaluations_ = 0;
};

}  // namespace

std::optional<Result> synthesize_with_policies(const Request& request, const KeepSearch& keep_search,
                                               std::string& error) {
  const MemoryPolicy policy = request.memory_policy;
  PolicySearch search(request, problem_of(request));
  const Problem& problem = search.problem();

  // Keep-only synthesis at the limit, and at relaxed limits for orders to
  // make fit: the time shared three ways.
  Request each = request;
  each.memory_policy = MemoryPolicy::keep;
  each.memory_bytes = 0;
  each.time_limit_seconds = request.time_limit_seconds / 3;
  auto kept = keep_search(each, error);
  int seeds = 0;
  int seeds_within_limit = 0;
  int evaluations = 0;
  if (kept) {
    evaluations += kept->evaluations;
    seeds = kept->seeds;
    seeds_within_limit = kept->seeds_within_limit;
    search.consider(std::move(*kept));
  }
  std::vector<NamedOrder> bases;
  for (const double relaxed : {2 * request.memory_limit, 0.0}) {
    each.memory_limit = relaxed;
    std::string ignored;
    if (auto found = keep_search(each, ignored)) {
      evaluations += found->evaluations;
      bases.push_back({"the keep-only search's order at " +
                           (relaxed > 0 ? std::to_string(static_cast<int>(relaxed)) + " M_B" : std::string("no limit")) +
                           " (from " + found->origin + ")",
                       found->order});
    }
  }
  for (NamedOrder& order : handcrafted_orders(problem)) bases.push_back(std::move(order));

  if (allows(policy, UnitPolicy::recompute)) search.offer_shipped("1f1b-recompute");
  if (allows(policy, UnitPolicy::offload)) search.offer_shipped("1f1b-offload");
  const PolicyRule recompute = [](int, int, int, bool) -> std::optional<UnitPolicy> {
    return UnitPolicy::recompute;
  };
  const PolicyRule offload = [](int, int, int, bool helps) -> std::optional<UnitPolicy> {
    if (!helps) return std::nullopt;
    return UnitPolicy::offload;
  };
  for (const NamedOrder& base : bases) {
    if (allows(policy, UnitPolicy::recompute)) search.offer_order(base.order, base.name, recompute, "recompute");
    if (allows(policy, UnitPolicy::offload)) search.offer_order(base.order, base.name, offload, "offload");
  }
  if (policy == MemoryPolicy::any) {
    const auto hidden = search.hidden_copies();
    const PolicyRule mixed = [&](int s, int c, int, bool helps) -> std::optional<UnitPolicy> {
      return helps && hidden.at({s, c}) ? UnitPolicy::offload : UnitPolicy::recompute;
    };
    for (const NamedOrder& base : bases) {
      search.offer_order(base.order, base.name, mixed, "offload where hidden, else recompute");
    }
  }

  std::optional<Result>& best = search.best();
  if (!best) {
    if (error.empty()) error = "no schedule found within the memory limit";
    return std::nullopt;
  }
  error.clear();
  Result result = std::move(*best);
  result.policy_searched = true;
  result.policy_counts = policy_counts(result.program);
  for (const RankBytes& rank : peak_bytes(result.program, request.memory_shape)) {
    result.device_peak_bytes.push_back(rank.total());
    result.host_peak_bytes.push_back(rank.host_peak);
  }
  const LowerBound bound = lower_bound_with_policies(problem);
  result.lower_bound = bound.value;
  result.bound_reason = bound.binding;
  result.seeds = seeds;
  result.seeds_within_limit = seeds_within_limit;
  result.evaluations = evaluations + search.evaluations();
  return result;
}

}  // namespace pipevm::synthesis
