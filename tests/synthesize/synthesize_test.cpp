// The synthesis library on small problems: memory as the checker counts it,
// emitted programs clean under both progress models and timed as their
// compute order, the handcrafted orders never beaten by what is returned,
// the Zero Bubble paper's rows (references/zero-bubble.md, Tables 5 and 9)
// and requests no schedule meets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "check.hpp"
#include "compile.hpp"
#include "handcrafted.hpp"
#include "heuristic.hpp"
#include "place_comms.hpp"
#include "synthesize.hpp"
#include "table.hpp"
#include "torch_csv.hpp"

namespace pipevm::synthesis {
namespace {

Request small_request(int stages, int micro_batches, double memory_limit) {
  Request request;
  request.config.stages = stages;
  request.config.micro_batches = micro_batches;
  request.memory_limit = memory_limit;
  request.memory_policy = MemoryPolicy::keep;  // the keep-only search
  request.time_limit_seconds = 0.2;
  return request;
}

// Whether the program passes `check` under MPI's progress rule and in posted order.
void expect_clean_both_ways(const Result& result) {
  CheckOptions posted;
  posted.p2p_posted_order = true;
  EXPECT_TRUE(check(result.program).ok()) << result.text;
  EXPECT_TRUE(check(result.program, posted).ok()) << result.text;
}

// A shipped schedule compiled for `config`.
Program shipped(const std::string& name, const Config& config) {
  Diagnostics diagnostics;
  const auto file =
      read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + name + ".pipe", diagnostics);
  EXPECT_TRUE(file) << name;
  auto program = compile(file, config, diagnostics);
  EXPECT_TRUE(program) << name;
  return program ? std::move(*program) : Program{};
}

TEST(memory, peak_equals_the_checkers_peak_activations) {
  const Request request = small_request(4, 8, 0);
  for (const GreedyChoices& choices : greedy_grid()) {
    const auto order = greedy_order(problem_of(request), choices);
    ASSERT_TRUE(order);
    const auto built =
        program_for_timing(*order, std::make_shared<const SourceFile>("t.pipe", ""));
    const CheckResult checked = check(built.program);
    const auto peaks = peak_memory(*order, 1.0);
    ASSERT_EQ(checked.memory.size(), peaks.size());
    for (std::size_t s = 0; s < peaks.size(); ++s) {
      EXPECT_EQ(checked.memory[s].peak_activations, static_cast<int>(peaks[s])) << "stage " << s;
    }
  }
}

TEST(memory, weight_memory_counts_what_a_backward_input_leaves) {
  ComputeOrder order;
  order.config.stages = 1;
  order.config.micro_batches = 2;
  order.stages = {{{PassKind::forward, 0, 0},
                   {PassKind::backward_input, 0, 0},
                   {PassKind::forward, 1, 0},
                   {PassKind::backward_input, 1, 0},
                   {PassKind::backward_weight, 0, 0},
                   {PassKind::backward_weight, 1, 0}}};
  EXPECT_DOUBLE_EQ(peak_memory(order, 0.25)[0], 1.25);
  EXPECT_DOUBLE_EQ(peak_memory(order, 1.0)[0], 2.0);
}

TEST(emit, program_passes_both_checks_and_keeps_the_orders_makespan) {
  for (const double limit : {1.0, 4.0, 8.0}) {
    Request request = small_request(4, 8, limit);
    request.costs.send = 0.1;
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << error;
    expect_clean_both_ways(*result);
    const double makespan = result->simulation.timeline.makespan;
    EXPECT_NEAR(makespan, result->order_makespan, 0.01 * result->order_makespan);
    EXPECT_LE(result->lower_bound, makespan + 1e-9);
    for (const double peak : result->peak_memory) EXPECT_LE(peak, limit + 1e-9);
  }
}

// Passes of zero cost end when they start, so a message and the next send
// of the stage that needs it end at one time: the global order must still
// put the message first (`--cost bwd-weight=1` leaves fwd and bwd-input at
// 0; its V programs once failed `check`).
TEST(emit, passes_of_zero_cost_pass_both_checks) {
  for (const Placement placement : {Placement::looped, Placement::v}) {
    for (const int stages : {2, 3, 4}) {
      Request request = small_request(stages, 2 * stages + 1, 0);
      request.placement = placement;
      request.config.chunks = 2;
      request.costs = Costs{};
      request.costs.bwd_weight = 1;
      request.time_limit_seconds = 0;
      std::string error;
      const auto result = synthesize(request, error);
      ASSERT_TRUE(result) << name(placement) << " p " << stages << ": " << error;
      expect_clean_both_ways(*result);
    }
  }
}

TEST(emit, chunked_placements_pass_both_checks) {
  for (const Placement placement : {Placement::v, Placement::looped}) {
    Request request = small_request(3, 6, 0);
    request.placement = placement;
    request.config.chunks = 2;
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << error;
    expect_clean_both_ways(*result);
  }
}

// On small instances the bound meets the result: the schedule is optimal
// under the model (docs/synthesize.md measured these and the remaining
// gaps); and the bound never exceeds the longest span found.
TEST(bound, proves_small_instances_optimal) {
  struct Case {
    int stages, micro_batches;
    double limit, fwd, bwd_input, bwd_weight, send;
  };
  const Case cases[] = {{2, 4, 2, 1, 1, 1, 0}, {4, 8, 4, 1, 1, 1, 0},     {4, 8, 8, 1, 1, 1, 0},
                        {3, 12, 3, 1, 1, 1, 0}, {4, 12, 8, 1, 2, 1, 0.2}, {4, 8, 8, 1, 1, 0.5, 0.05}};
  for (const Case& c : cases) {
    Request request = small_request(c.stages, c.micro_batches, c.limit);
    request.costs.fwd = c.fwd;
    request.costs.bwd_input = c.bwd_input;
    request.costs.bwd_weight = c.bwd_weight;
    request.costs.send = c.send;
    request.weight_memory = 0.4;
    request.time_limit_seconds = 1;
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << error;
    EXPECT_NEAR(result->longest_span, result->lower_bound, 1e-9)
        << "p " << c.stages << " m " << c.micro_batches << " limit " << c.limit;
  }
}

TEST(bound, never_above_the_longest_span) {
  for (const int stages : {2, 3, 4}) {
    for (const double limit : {1.0, 2.5, 0.0}) {
      for (const bool fused : {false, true}) {
        Request request = small_request(stages, 7, limit);
        request.costs.send = 0.3;
        if (fused) {
          request.costs.bwd = 2.5;
          request.costs.bwd_input = 0;
          request.costs.bwd_weight = 0;
        }
        request.weight_memory = 0.5;
        request.time_limit_seconds = 0;
        std::string error;
        const auto result = synthesize(request, error);
        ASSERT_TRUE(result) << error;
        EXPECT_LE(result->lower_bound, result->longest_span * (1 + 1e-12))
            << "p " << stages << " limit " << limit << (fused ? " fused" : "");
      }
    }
  }
}

// Per-stage costs as `run --profile` writes them, loads included: loads are
// data instructions a stage may run before its first pass, outside the
// span, so the bound may not count them (it did: "lower bound 1694:
// optimal" beside a span of 1685, bench/RESULTS.md "The closed loop").
TEST(bound, never_above_the_span_with_profiled_per_stage_costs) {
  Request request = small_request(2, 8, 2);
  request.costs.send = 0.38;
  request.costs.bandwidth = 2024;
  Costs first;
  first.fwd = 79.05;
  first.bwd_input = 1.41;
  first.bwd_weight = 63.52;
  first.load = 8.39;
  Costs last;
  last.fwd = 75.26;
  last.bwd_input = 66.70;
  last.bwd_weight = 66.63;
  last.load = 0.65;
  request.costs.stages = {first, last};
  request.weight_memory = 1;
  for (const double load : {0.0, 8.39, 40.0}) {
    request.costs.stages[0].load = load;
    request.costs.stages[1].load = load;
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << error;
    EXPECT_LE(result->lower_bound, result->longest_span * (1 + 1e-12)) << "load " << load;
  }
}

// The same over stages whose costs differ at random (a fixed seed), with
// and without a split backward, one and two chunks (those at costs per chunk).
TEST(bound, never_above_the_span_with_random_per_stage_costs) {
  std::mt19937 random(20261128);
  std::uniform_real_distribution<double> cost(0.2, 3.0);
  for (int trial = 0; trial < 48; ++trial) {
    const int stages = 2 + trial % 3;
    const bool chunked = trial % 4 == 3;
    Request request = small_request(stages, 3 + trial % 6, trial % 2 == 0 ? stages : 1.5 * stages);
    request.time_limit_seconds = 0;
    request.weight_memory = 0.5;
    request.costs.send = 0.1 * (trial % 3);
    if (chunked) {
      request.config.chunks = 2;
      request.placement = trial % 8 == 3 ? Placement::v : Placement::looped;
    }
    for (int s = 0; s < stages; ++s) {
      Costs stage;
      stage.fwd = cost(random);
      stage.bwd_input = cost(random);
      stage.bwd_weight = cost(random);
      if (trial % 5 == 4) stage.bwd = stage.bwd_input + stage.bwd_weight;
      stage.load = cost(random);
      // A rank's chunks at costs of their own, as a profile of a chunked run
      // writes them (the simulator times each pass by its chunk's).
      for (int k = 0; chunked && k < 2; ++k) {
        Costs chunk = stage;
        chunk.fwd = cost(random);
        chunk.bwd_input = cost(random);
        chunk.bwd_weight = cost(random);
        if (stage.bwd) chunk.bwd = chunk.bwd_input + chunk.bwd_weight;
        stage.chunks.push_back(chunk);
      }
      request.costs.stages.push_back(stage);
    }
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << "trial " << trial << ": " << error;
    EXPECT_LE(result->lower_bound, result->longest_span * (1 + 1e-12)) << "trial " << trial;
  }
}

TEST(search, never_worse_than_the_handcrafted_orders_that_fit) {
  const Request request = small_request(4, 12, 4);
  std::string error;
  const auto result = synthesize(request, error);
  ASSERT_TRUE(result) << error;
  // ZB-H1 fits p activations; with F = I = W = 1 its makespan is 3m + p - 1.
  EXPECT_LE(result->simulation.timeline.makespan, 3 * 12 + 4 - 1 + 1e-9);
}

TEST(search, fused_backward_when_the_costs_give_no_split) {
  Request request = small_request(3, 6, 3);
  request.costs = Costs{};
  request.costs.fwd = 1;
  request.costs.bwd = 2;
  std::string error;
  const auto result = synthesize(request, error);
  ASSERT_TRUE(result) << error;
  for (const auto& stage : result->order.stages) {
    for (const Pass& pass : stage) {
      EXPECT_TRUE(pass.kind == PassKind::forward || pass.kind == PassKind::backward);
    }
  }
  // 1F1B's makespan, (m + p - 1)(F + B), is the least at p activations.
  EXPECT_LE(result->simulation.timeline.makespan, (6 + 3 - 1) * 3 + 1e-9);
}

TEST(request, memory_below_one_micro_batch_says_the_least_that_works) {
  std::string error;
  EXPECT_FALSE(synthesize(small_request(4, 8, 0.5), error));
  EXPECT_NE(error.find("the least that works is 1"), std::string::npos) << error;
}

TEST(request, placement_v_needs_two_chunks) {
  Request request = small_request(4, 8, 0);
  request.placement = Placement::v;
  std::string error;
  EXPECT_FALSE(synthesize(request, error));
  EXPECT_NE(error.find("--chunks 2"), std::string::npos) << error;
}

TEST(lower, keeps_the_order_and_places_communication) {
  const Request request = small_request(4, 8, 0);
  const auto order = greedy_order(problem_of(request), {});
  ASSERT_TRUE(order);
  std::string error;
  const auto result = lower(*order, request.costs, 1.0, error);
  ASSERT_TRUE(result) << error;
  std::string read_error;
  const auto back = compute_order_of(result->program, read_error);
  ASSERT_TRUE(back) << read_error;
  EXPECT_EQ(back->stages, order->stages);
}

// V-ZB's order (v_schedules.cpp) is schedules/zb-v.pipe's; at its memory
// (2p chunk activations, p M_B) with F = I = W synthesis meets the
// controllable-memory paper's zero bubble (references/controllable-
// memory.md: p 4, m 8, bubble 0 at peak 8) and so its lower bound, and
// with a cheaper weight pass it is better than ZB-V's order.
TEST(v, zb_v_is_the_shipped_file_and_meets_zero_bubble) {
  for (const Config config : {Config{1, 2, 2, 1}, Config{2, 4, 2, 1}, Config{3, 7, 2, 1},
                              Config{4, 8, 2, 1}, Config{4, 13, 2, 1}, Config{6, 12, 2, 1}}) {
    const std::string what =
        "p " + std::to_string(config.stages) + " m " + std::to_string(config.micro_batches);
    std::string error;
    const auto shipped_order = compute_order_of(shipped("zb-v", config), error);
    ASSERT_TRUE(shipped_order) << error;
    Request request = small_request(config.stages, config.micro_batches, config.stages);
    request.placement = Placement::v;
    request.config.chunks = 2;
    request.time_limit_seconds = 0;
    const Problem problem = problem_of(request);
    const auto handcrafted = handcrafted_orders(problem);
    ASSERT_FALSE(handcrafted.empty());
    EXPECT_EQ(handcrafted.front().name, "V-ZB");
    EXPECT_EQ(handcrafted.front().order.stages, shipped_order->stages) << what;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << error;
    EXPECT_EQ(result->bubble_rate_zb, 0) << what;
    EXPECT_TRUE(is_optimal(*result)) << what;
    for (const double peak : result->peak_memory) EXPECT_LE(peak, config.stages + 1e-9) << what;
  }
}

// PyTorch's ZB-V (the shipped zb-v.pipe before V-ZB) at its memory, 2p + 1
// chunk activations: synthesis is better with a cheaper weight pass.
TEST(v, with_a_cheaper_weight_pass_better_than_pytorchs_zb_v) {
  Request request = small_request(3, 9, 3.5);
  request.placement = Placement::v;
  request.config.chunks = 2;
  request.costs.bwd_weight = 0.5;
  // A budget of moves, not of seconds: the same result on a slow machine
  // or under the sanitizers.
  request.time_limit_seconds = 60;
  request.move_limit = 2000;
  const Problem problem = problem_of(request);
  const auto handcrafted = handcrafted_orders(problem);
  const auto zb_v = std::find_if(handcrafted.begin(), handcrafted.end(),
                                 [](const NamedOrder& o) { return o.name == "ZB-V (PyTorch)"; });
  ASSERT_NE(zb_v, handcrafted.end());
  std::string error;
  const auto pytorch = lower(zb_v->order, request.costs, 1.0, error);
  ASSERT_TRUE(pytorch) << error;
  const auto result = synthesize(request, error);
  ASSERT_TRUE(result) << error;
  for (const double peak : result->peak_memory) EXPECT_LE(peak, 3.5 + 1e-9);
  EXPECT_LT(result->longest_span, pytorch->longest_span - 0.5);
}

// The shipped schedules that hang under posted order (NCCL's one stream):
// lowered, each passes both checks at the same simulated makespan (within
// 1%); DualPipeV's overlapped pairs, issued apart, wait for one input less
// and finish earlier.
TEST(lower, shipped_schedules_that_hang_in_posted_order) {
  struct Shipped {
    const char* name;
    Config config;
  };
  const Shipped cases[] = {{"1f1b", {4, 8, 1, 1}},           {"1f1b-nonblocking", {4, 8, 1, 1}},
                           {"interleaved-1f1b", {4, 8, 2, 1}}, {"zb-h1", {4, 8, 1, 1}},
                           {"zb-v", {4, 8, 2, 1}},             {"dualpipev", {4, 8, 2, 1}},
                           {"interleaved-zb", {4, 8, 2, 1}},   {"looped-bfs", {4, 8, 2, 1}}};
  CheckOptions posted;
  posted.p2p_posted_order = true;
  for (const Shipped& c : cases) {
    const Program program = shipped(c.name, c.config);
    EXPECT_FALSE(check(program, posted).ok()) << c.name << " no longer hangs in posted order";
    Diagnostics diagnostics;
    const auto original = simulate(program, default_costs(), diagnostics);
    ASSERT_TRUE(original) << c.name;
    std::string error;
    const auto order = compute_order_of(program, error);
    ASSERT_TRUE(order) << c.name << ": " << error;
    const auto lowered = lower(*order, default_costs(), 1.0, error);
    ASSERT_TRUE(lowered) << c.name << ": " << error;
    expect_clean_both_ways(*lowered);
    const double before = original->timeline.makespan;
    const double after = lowered->simulation.timeline.makespan;
    EXPECT_LE(after, 1.01 * before) << c.name;
    if (std::string(c.name) != "dualpipev") {
      EXPECT_GE(after, 0.99 * before) << c.name;
    }
  }
}

// A limit in bytes (the model's, as `check` counts peak_bytes): the result
// fits it, its bytes are the checker's, a limit just below the unlimited
// result's peak searches fewer M_B, and below one micro-batch's the error
// says the least that works.
TEST(bytes, the_result_fits_and_below_the_least_says_it) {
  Request request = small_request(4, 8, 0);
  request.time_limit_seconds = 0;
  request.memory_bytes = std::uint64_t{1} << 40;
  std::string error;
  const auto roomy = synthesize(request, error);
  ASSERT_TRUE(roomy) << error;
  EXPECT_EQ(roomy->memory_limit, 8);
  std::vector<std::uint64_t> checked;
  for (const RankBytes& rank : peak_bytes(roomy->program, request.memory_shape)) {
    checked.push_back(rank.total());
  }
  EXPECT_EQ(roomy->peak_bytes, checked);
  const std::uint64_t most = *std::max_element(checked.begin(), checked.end());
  request.memory_bytes = most - 1;
  const auto tight = synthesize(request, error);
  ASSERT_TRUE(tight) << error;
  EXPECT_LT(tight->memory_limit, 8);
  for (const std::uint64_t bytes : tight->peak_bytes) EXPECT_LE(bytes, most - 1);
  request.memory_bytes = 1;
  EXPECT_FALSE(synthesize(request, error));
  EXPECT_NE(error.find("the least that works is"), std::string::npos) << error;
}

// A Program's makespan under posted order (NCCL's rule: each rank's
// point-to-point operations one at a time, in the order posted), as the
// comparison with PyTorch's lowering needs it; infinity when it hangs there.
double posted_order_makespan(const Program& program) {
  Diagnostics diagnostics;
  const auto simulation = simulate(program, default_costs(), diagnostics, {}, SimulateOptions{true});
  return simulation ? simulation->timeline.makespan : std::numeric_limits<double>::infinity();
}

// PyTorch's compute-only tables of four schedule families (written from
// the shipped schedules, as `pipevm expand --format torch-csv` does),
// lowered by PyTorch's own rule (pytorch/lower.hpp) and by synthesis: ours
// passes both checks and, in posted order, is never slower, and shorter
// where PyTorch's lowering puts a receive before compute it does not need.
TEST(lower, pytorch_compute_tables_never_slower_than_pytorchs_lowering) {
  struct Table {
    const char* schedule;
    Config config;
  };
  const Table cases[] = {{"interleaved-1f1b", {2, 4, 2, 1}}, {"interleaved-1f1b", {4, 8, 2, 1}},
                         {"looped-bfs", {2, 4, 2, 1}},       {"looped-bfs", {4, 8, 3, 1}},
                         {"interleaved-zb", {2, 4, 2, 1}},   {"interleaved-zb", {4, 8, 2, 1}},
                         {"zb-v", {2, 4, 2, 1}},             {"zb-v", {4, 8, 2, 1}}};
  int shorter = 0;
  for (const Table& c : cases) {
    std::string error;
    const auto table = pytorch::to_table(shipped(c.schedule, c.config), false, error);
    ASSERT_TRUE(table) << c.schedule << ": " << error;
    Diagnostics diagnostics;
    const auto pytorchs = pytorch::load_csv(
        std::make_shared<const SourceFile>("table.csv", pytorch::write_table(*table)), diagnostics);
    ASSERT_TRUE(pytorchs) << c.schedule;
    const auto order = compute_order_of(*pytorchs, error);
    ASSERT_TRUE(order) << c.schedule << ": " << error;
    const auto ours = lower(*order, default_costs(), 1.0, error);
    ASSERT_TRUE(ours) << c.schedule << ": " << error;
    expect_clean_both_ways(*ours);
    const double mine = posted_order_makespan(ours->program);
    const double theirs = posted_order_makespan(*pytorchs);
    EXPECT_TRUE(std::isfinite(mine)) << c.schedule;
    EXPECT_LE(mine, theirs + 1e-9) << c.schedule << " p " << c.config.stages << " m "
                                   << c.config.micro_batches;
    std::printf("%-16s p %d m %d v %d: posted-order makespan %g, PyTorch's lowering %g\n",
                c.schedule, c.config.stages, c.config.micro_batches, c.config.chunks, mine, theirs);
    if (mine < theirs - 1e-9) ++shorter;
  }
  EXPECT_GT(shorter, 0);
}

// Three of the paper's rows (references/zero-bubble.md: Table 9 inputs,
// eager transfers, send = T_comm, M_W/M_B as --weight-memory) with the
// candidates only (no local search): at limit p at most ZB-1p's published
// rate, at 2p at most ZB-2p's (the paper prints four digits, hence the
// half-unit). bench/synthesize/paper_table.sh runs all twelve.
struct PaperRow {
  int stages, micro_batches;
  double fwd, bwd_input, bwd_weight, comm, weight_memory, zb_1p, zb_2p;
};

TEST(paper, rows_at_p_and_2p_meet_zb_1p_and_zb_2p) {
  const PaperRow rows[] = {
      {8, 24, 18.522, 18.086, 9.337, 0.601, 0.3664, 0.1585, 0.0433},
      {8, 24, 29.718, 29.444, 19.927, 0.527, 0.4324, 0.1323, 0.0029},
      {16, 48, 11.347, 11.248, 8.132, 0.377, 0.4324, 0.1397, 0.0066},
  };
  for (const PaperRow& row : rows) {
    for (const int factor : {1, 2}) {
      Request request = small_request(row.stages, row.micro_batches, factor * row.stages);
      request.costs = Costs{};
      request.costs.fwd = row.fwd;
      request.costs.bwd_input = row.bwd_input;
      request.costs.bwd_weight = row.bwd_weight;
      request.costs.send = row.comm;
      request.weight_memory = row.weight_memory;
      request.time_limit_seconds = 0;
      std::string error;
      const auto result = synthesize(request, error);
      ASSERT_TRUE(result) << error;
      const double published = factor == 1 ? row.zb_1p : row.zb_2p;
      EXPECT_LE(result->bubble_rate_zb, published + 5e-5)
          << "p " << row.stages << " m " << row.micro_batches << " limit " << factor << "p";
      for (const double peak : result->peak_memory) EXPECT_LE(peak, factor * row.stages + 1e-9);
    }
  }
}

}  // namespace
}  // namespace pipevm::synthesis
