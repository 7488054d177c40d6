// The lower bound and the exact search on problems small enough to solve
// by enumeration: the order clock times orders as the simulator does; the
// branch and bound finds the optimum an enumeration of every order finds;
// the bound never exceeds that optimum, with memory binding or not, and
// meets it on the published zero-bubble rows.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "bound.hpp"
#include "exact.hpp"
#include "order_clock.hpp"
#include "seeds.hpp"
#include "synthesize.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Case {
  Placement placement;
  Config config;
  double fwd, input, weight;  // weight < 0: a fused backward of cost input
  double limit;               // chunk activations per stage; 0: none
  double send = 0;
};

Problem problem_of(const Case& c) {
  Problem problem;
  problem.placement = c.placement;
  problem.config = c.config;
  problem.costs = Costs{};
  problem.costs.fwd = c.fwd;
  problem.costs.send = c.send;
  if (c.weight < 0) {
    problem.costs.bwd = c.input;
    problem.split_backward = false;
  } else {
    problem.costs.bwd_input = c.input;
    problem.costs.bwd_weight = c.weight;
  }
  if (c.limit > 0) problem.memory_limit = c.limit;
  return problem;
}

std::string describe(const Case& c) {
  std::ostringstream text;
  text << name(c.placement) << " p " << c.config.stages << " m " << c.config.micro_batches << " chunks "
       << c.config.chunks << " costs " << c.fwd << ":" << c.input << ":" << c.weight << " limit " << c.limit
       << " send " << c.send;
  return text.str();
}

// Every order of every stage, each stage's passes in every sequence its
// own cells allow within the limit, timed: the least longest span.
double enumerate_optimum(const Problem& problem) {
  const Config& c = problem.config;
  const int chunks = chunks_per_rank(problem.placement, c);
  std::vector<Pass> cells;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    for (int mb = 0; mb < c.micro_batches; ++mb) cells.push_back({PassKind::forward, mb, chunk});
  }
  // The sequences of one stage.
  std::vector<std::vector<Pass>> sequences;
  std::vector<int> done(cells.size(), 0);
  std::vector<Pass> sequence;
  const int steps = problem.split_backward ? 3 : 2;
  const std::function<void(double)> extend = [&](double held) {
    if (sequence.size() == cells.size() * static_cast<std::size_t>(steps)) {
      sequences.push_back(sequence);
      return;
    }
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (done[i] == steps) continue;
      Pass pass = cells[i];
      double next = held;
      if (done[i] == 0) {
        next += 1;
        if (next > problem.memory_limit + 1e-9) continue;
      } else if (done[i] == 1) {
        pass.kind = problem.split_backward ? PassKind::backward_input : PassKind::backward;
        next -= problem.split_backward ? 1 - problem.weight_memory : 1;
      } else {
        pass.kind = PassKind::backward_weight;
        next -= problem.weight_memory;
      }
      ++done[i];
      sequence.push_back(pass);
      extend(next);
      sequence.pop_back();
      --done[i];
    }
  };
  extend(0);
  ComputeOrder order;
  order.placement = problem.placement;
  order.config = c;
  order.stages.resize(static_cast<std::size_t>(c.stages));
  double best = kInfinity;
  std::vector<std::size_t> pick(static_cast<std::size_t>(c.stages), 0);
  for (;;) {
    for (std::size_t s = 0; s < pick.size(); ++s) order.stages[s] = sequences[pick[s]];
    if (const auto times = time_compute_order(order, problem.costs)) best = std::min(best, times->longest_span);
    std::size_t s = 0;
    while (s < pick.size() && ++pick[s] == sequences.size()) pick[s++] = 0;
    if (s == pick.size()) return best;
  }
}

ExactSearch solve(const Problem& problem, double incumbent = kInfinity) {
  return exact_search(problem, incumbent, 50'000'000,
                      std::chrono::steady_clock::now() + std::chrono::seconds(120));
}

// The orders the seeds give: the order clock's longest span is the
// simulator's for the timing form (loads and ZeroGrad charged, messages
// with a latency).
TEST(clock, times_orders_as_the_simulator_does) {
  const Case cases[] = {{Placement::looped, {3, 6, 1, 1}, 1, 2, 1, 3, 0.25},
                        {Placement::looped, {2, 4, 2, 1}, 1.5, 1, 0.5, 0, 0.1},
                        {Placement::v, {2, 4, 2, 1}, 1, 1, 1, 4, 0.3},
                        {Placement::looped, {3, 5, 1, 1}, 1, 2, -1, 0, 0.2}};
  int compared = 0;
  for (const Case& c : cases) {
    Problem problem = problem_of(c);
    problem.costs.load = 0.4;
    problem.costs.zero_grad = 0.3;
    for (const Seed& seed : seeds(problem)) {
      if (!order_error(seed.order).empty()) continue;
      const auto clock = time_compute_order(seed.order, problem.costs);
      const auto simulated = time_order(seed.order, problem.costs);
      ASSERT_EQ(clock.has_value(), simulated.has_value()) << describe(c) << " " << seed.origin;
      if (!clock) continue;
      EXPECT_NEAR(clock->longest_span, std::get<0>(simulated->score), 1e-9) << describe(c) << " " << seed.origin;
      ++compared;
    }
  }
  EXPECT_GT(compared, 60);
}

// Problems whose every order can be listed: the branch and bound proves the
// optimum the enumeration finds, and the bound does not exceed it.
TEST(exact, finds_the_optimum_an_enumeration_of_every_order_finds) {
  const Case cases[] = {
      {Placement::looped, {2, 2, 1, 1}, 1, 1, 1, 1},    {Placement::looped, {2, 2, 1, 1}, 1, 1, 1, 2},
      {Placement::looped, {2, 2, 1, 1}, 2, 1, 1, 1, 0.5}, {Placement::looped, {3, 2, 1, 1}, 1, 1, 1, 1},
      {Placement::looped, {3, 2, 1, 1}, 1, 2, 1, 2},    {Placement::looped, {2, 3, 1, 1}, 1, 2, -1, 1},
      {Placement::looped, {2, 3, 1, 1}, 1, 2, -1, 2},   {Placement::looped, {2, 1, 2, 1}, 1, 1, 1, 2},
      {Placement::looped, {2, 1, 2, 1}, 1, 2, 1, 2, 0.2}, {Placement::v, {1, 2, 2, 1}, 1, 1, 1, 2},
      {Placement::v, {1, 1, 2, 1}, 1, 1, 1, 2},         {Placement::v, {2, 1, 2, 1}, 1, 1, 1, 2}};
  for (const Case& c : cases) {
    const Problem problem = problem_of(c);
    ASSERT_TRUE(exact_search_applies(problem)) << describe(c);
    const double optimum = enumerate_optimum(problem);
    ASSERT_LT(optimum, kInfinity) << describe(c);
    const ExactSearch found = solve(problem);
    EXPECT_TRUE(found.proved) << describe(c);
    EXPECT_NEAR(found.longest_span, optimum, 1e-9) << describe(c);
    ASSERT_TRUE(found.order) << describe(c);
    EXPECT_EQ(order_error(*found.order), "") << describe(c);
    EXPECT_LE(lower_bound(problem).value, optimum + 1e-9) << describe(c);
  }
}

// Larger problems, solved by the branch and bound alone from synthesis's
// result: memory binding (a limit of one or two micro-batches) or not,
// split and fused, looped and V. The bound is at most the optimum, and
// the exact step never returns a worse order than the search did.
TEST(bound, never_above_the_exact_optimum) {
  const Case cases[] = {
      {Placement::looped, {3, 3, 1, 1}, 1, 1, 1, 1},     {Placement::looped, {3, 4, 1, 1}, 1, 1, 1, 2},
      {Placement::looped, {3, 4, 1, 1}, 2, 1, 1, 2},     {Placement::looped, {4, 3, 1, 1}, 1, 2, 1, 2, 0.3},
      {Placement::looped, {3, 4, 1, 1}, 1, 2, -1, 2},    {Placement::looped, {2, 4, 1, 1}, 3, 4, 2, 1},
      {Placement::looped, {2, 2, 2, 1}, 1, 1, 1, 2},     {Placement::looped, {2, 2, 2, 1}, 1, 1, 1, 3},
      {Placement::looped, {2, 2, 2, 1}, 2, 2, 1, 2},     {Placement::v, {2, 2, 2, 1}, 1, 1, 1, 2},
      {Placement::v, {2, 2, 2, 1}, 1, 2, 1, 3},          {Placement::v, {2, 3, 2, 1}, 1, 1, 1, 2},
      {Placement::v, {2, 3, 2, 1}, 3, 4, 2, 3},          {Placement::v, {1, 4, 2, 1}, 1, 1, 1, 2},
      // Messages with a latency, none at the V's turn.
      {Placement::v, {1, 2, 2, 1}, 1, 1, 1, 2, 1},       {Placement::v, {2, 2, 2, 1}, 1, 1, 1, 2, 0.5}};
  for (const Case& c : cases) {
    const Problem problem = problem_of(c);
    Request request;
    request.placement = c.placement;
    request.config = c.config;
    request.costs = problem.costs;
    request.memory_limit = c.limit / chunks_per_rank(c.placement, c.config);
    request.memory_policy = MemoryPolicy::keep;  // the keep-only search
    request.time_limit_seconds = 0;
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << describe(c) << ": " << error;
    const ExactSearch found = solve(problem, result->longest_span + 1e-6);
    ASSERT_TRUE(found.proved) << describe(c) << " after " << found.nodes << " nodes";
    const double optimum = found.order ? found.longest_span : result->longest_span;
    EXPECT_LE(optimum, result->longest_span + 1e-9) << describe(c);
    const LowerBound bound = lower_bound(problem);
    EXPECT_LE(bound.value, optimum + 1e-9) << describe(c) << ": " << bound.binding;
  }
}

// V-ZB's rows (zero bubble at 2p chunk activations, m >= 2p, equal costs):
// the bound is the stage's work, which the result meets.
TEST(bound, meets_the_optimum_on_the_published_zero_bubble_rows) {
  for (const int p : {2, 3, 4, 8}) {
    for (const int m : {2 * p, 3 * p}) {
      if (p == 8 && m > 2 * p) continue;  // sized for the sanitizer build
      Request request;
      request.placement = Placement::v;
      request.config = {p, m, 2, 1};
      request.memory_limit = p;
      request.memory_policy = MemoryPolicy::keep;  // the keep-only search
      request.time_limit_seconds = 0;
      std::string error;
      const auto result = synthesize(request, error);
      ASSERT_TRUE(result) << error;
      EXPECT_EQ(result->lower_bound, 6.0 * m) << "p " << p << " m " << m;
      EXPECT_EQ(result->longest_span, result->lower_bound) << "p " << p << " m " << m;
    }
  }
}

}  // namespace
}  // namespace pipevm::synthesis
