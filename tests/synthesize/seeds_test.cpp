// Seeds: synthesis is never worse than a shipped schedule or a generator
// that fits the request's memory limit (a randomized grid; the larger
// sweep is bench/synthesize/seeds_grid.sh), the shipped files are the ones
// built in, and the V family's figures are the controllable-memory
// paper's (references/controllable-memory.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "building_blocks.hpp"
#include "compile.hpp"
#include "handcrafted.hpp"
#include "library.hpp"
#include "local_search.hpp"
#include "seeds.hpp"
#include "synthesize.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {
namespace {

namespace fs = std::filesystem;

constexpr double kSlack = 1e-9;

struct Ratio {
  double fwd, input, weight;
};

Request request_of(Placement placement, Config config, Ratio ratio, double limit) {
  Request request;
  request.placement = placement;
  request.config = config;
  request.costs = Costs{};
  request.costs.fwd = ratio.fwd;
  request.costs.bwd_input = ratio.input;
  request.costs.bwd_weight = ratio.weight;
  request.memory_limit = limit;
  request.memory_policy = MemoryPolicy::keep;  // the keep-only search
  request.time_limit_seconds = 0;
  return request;
}

bool fits(const Problem& problem, const ComputeOrder& order) {
  const auto peaks = peak_memory(order, problem.weight_memory);
  return std::all_of(peaks.begin(), peaks.end(),
                     [&](double peak) { return peak <= problem.memory_limit + kSlack; });
}

std::string describe(const Request& r) {
  std::ostringstream text;
  text << "p " << r.config.stages << " m " << r.config.micro_batches << " chunks " << r.config.chunks
       << " " << name(r.placement) << " costs " << r.costs.fwd << ":" << r.costs.bwd_input << ":"
       << r.costs.bwd_weight << " limit " << r.memory_limit;
  return text.str();
}

// Every shipped schedule of the request's placement that expands for its
// configuration and fits its limit, simulated as shipped (its own
// communication): the result's longest span is never above one.
int expect_never_above_shipped(const Request& request, const Result& result) {
  const Problem problem = problem_of(request);
  int compared = 0;
  for (const ShippedSchedule& shipped : shipped_schedules()) {
    Diagnostics diagnostics;
    const auto program =
        compile(read_source(std::string(PIPEVM_SOURCE_DIR) + "/schedules/" + std::string(shipped.name) + ".pipe",
                            diagnostics),
                request.config, diagnostics);
    if (!program || program->placement != request.placement) continue;
    std::string error;
    const auto order = compute_order_of(*program, error);
    if (!order || !fits(problem, with_backwards(*order, true))) continue;
    const auto simulation = simulate(*program, request.costs, diagnostics);
    EXPECT_TRUE(simulation) << shipped.name;
    if (!simulation) continue;
    EXPECT_LE(result.longest_span, longest_span(*program, simulation->timeline) + kSlack)
        << describe(request) << " against schedules/" << shipped.name << ".pipe";
    ++compared;
  }
  return compared;
}

// Every generated order that fits, timed by the simulator as the search
// times seeds: never shorter than the result.
int expect_never_above_generators(const Request& request, const Result& result) {
  const Problem problem = problem_of(request);
  int compared = 0;
  std::vector<NamedOrder> orders = handcrafted_orders(problem);
  for (NamedOrder& named : interleaved_family(problem)) orders.push_back(std::move(named));
  if (request.placement == Placement::v) {
    for (const BuildingBlock& block : {v_half_block(request.config.stages), v_min_block(request.config.stages)}) {
      if (auto order = block_order(problem, block, true)) orders.push_back({block.name, std::move(*order)});
    }
  }
  for (const NamedOrder& named : orders) {
    if (!order_error(named.order).empty() || !fits(problem, named.order)) continue;
    const auto timed = time_order(named.order, request.costs);
    EXPECT_TRUE(timed) << named.name;
    if (!timed) continue;
    EXPECT_LE(result.longest_span, std::get<0>(timed->score) + kSlack)
        << describe(request) << " against " << named.name;
    ++compared;
  }
  return compared;
}

// The grid, drawn at random from a fixed seed and sized for CI:
// p 2-8, m p..8p (at most 16 here), chunks 1 and 2, looped and V, F:B:W
// 1:1:1, 3:4:2, 2:2:1 and 1:2:1, limits 1/3 .. 1 of 1F1B's p M_B.
TEST(seeds, never_above_a_shipped_schedule_or_generator_on_a_random_grid) {
  std::mt19937 random(35);
  const Ratio ratios[] = {{1, 1, 1}, {3, 4, 2}, {2, 2, 1}, {1, 2, 1}};
  const double fractions[] = {1.0 / 3, 0.5, 2.0 / 3, 1.0};
  int shipped = 0;
  int generated = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int p = std::uniform_int_distribution<int>(2, 8)(random);
    const int m = std::uniform_int_distribution<int>(p, std::min(8 * p, 16))(random);
    const int kind = trial % 3;  // looped one chunk, looped two, v
    const Placement placement = kind == 2 ? Placement::v : Placement::looped;
    const Config config{p, m, kind == 0 ? 1 : 2, 1};
    const Ratio ratio = ratios[std::uniform_int_distribution<int>(0, 3)(random)];
    const double limit = std::max(1.0, p * fractions[std::uniform_int_distribution<int>(0, 3)(random)]);
    const Request request = request_of(placement, config, ratio, limit);
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << describe(request) << ": " << error;
    shipped += expect_never_above_shipped(request, *result);
    generated += expect_never_above_generators(request, *result);
  }
  // Enough of both fit for the grid to say something.
  EXPECT_GT(shipped, 4);
  EXPECT_GT(generated, 50);
}

// The motivating cases of issue 35: looped, p 4, m 16, two chunks, F = I =
// W, at the shipped interleaved-zb's peak (5.5 M_B) synthesis spanned 123
// against its 99; V, p 8, m 16 at 1F1B's memory, 110 against the authors'
// V-ZB at 96. Both now meet their bound (optimal under the model), and at
// 5 M_B the looped case meets it too.
TEST(seeds, motivating_cases_are_optimal) {
  const struct {
    Placement placement;
    Config config;
    double limit;
    double span;
  } cases[] = {{Placement::looped, {4, 16, 2, 1}, 5.5, 96},
               {Placement::looped, {4, 16, 2, 1}, 5, 97},
               {Placement::v, {8, 16, 2, 1}, 8, 96}};
  for (const auto& c : cases) {
    const Request request = request_of(c.placement, c.config, {1, 1, 1}, c.limit);
    std::string error;
    const auto result = synthesize(request, error);
    ASSERT_TRUE(result) << describe(request) << ": " << error;
    EXPECT_EQ(result->longest_span, c.span) << describe(request);
    EXPECT_TRUE(is_optimal(*result)) << describe(request) << ": bound " << result->lower_bound;
  }
}

// The authors' generators' figures (references/controllable-memory.md):
// p 4, m 8, F = B = W: V-Half bubble 0.0943 at peak 6 chunk activations,
// V-Min 0.1864 at 4; and over a sweep, peaks of (p+2)//2 and (p+4)//3
// micro-batches (two chunk activations each).
TEST(seeds, v_half_and_v_min_as_the_authors_generate_them) {
  Request request = request_of(Placement::v, {4, 8, 2, 1}, {1, 1, 1}, 0);
  const Problem problem = problem_of(request);
  const struct {
    BuildingBlock block;
    double bubble;
    double peak;
  } published[] = {{v_half_block(4), 0.0943, 6}, {v_min_block(4), 0.1864, 4}};
  for (const auto& row : published) {
    const auto order = block_order(problem, row.block, true);
    ASSERT_TRUE(order) << row.block.name;
    std::string error;
    const auto lowered = lower(*order, request.costs, 1, error);
    ASSERT_TRUE(lowered) << error;
    EXPECT_NEAR(lowered->bubble_rate_zb, row.bubble, 5e-5) << row.block.name;
    for (const double peak : peak_memory(*order, 1)) EXPECT_EQ(peak, row.peak) << row.block.name;
  }
  for (int p = 2; p <= 8; ++p) {
    Request sweep = request_of(Placement::v, {p, 3 * p, 2, 1}, {1, 1, 1}, 0);
    const Problem each = problem_of(sweep);
    const auto half = block_order(each, v_half_block(p), true);
    const auto least = block_order(each, v_min_block(p), true);
    ASSERT_TRUE(half && least) << "p " << p;
    const auto most = [](const std::vector<double>& peaks) { return *std::max_element(peaks.begin(), peaks.end()); };
    EXPECT_EQ(most(peak_memory(*half, 1)), 2 * ((p + 2) / 2)) << "V-Half p " << p;
    EXPECT_EQ(most(peak_memory(*least, 1)), 2 * ((p + 4) / 3)) << "V-Min p " << p;
  }
}

// The texts built into the library are the files under schedules/, all of
// them: an installed pipevm seeds from what the build saw.
TEST(seeds, shipped_schedules_are_the_files_built_in) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(PIPEVM_SOURCE_DIR) / "schedules")) {
    if (entry.path().extension() == ".pipe") files.insert(entry.path().stem().string());
  }
  std::set<std::string> built_in;
  for (const ShippedSchedule& shipped : shipped_schedules()) {
    built_in.insert(std::string(shipped.name));
    std::ifstream file(fs::path(PIPEVM_SOURCE_DIR) / "schedules" / (std::string(shipped.name) + ".pipe"));
    std::ostringstream text;
    text << file.rdbuf();
    EXPECT_EQ(text.str(), shipped.text) << shipped.name;
  }
  EXPECT_EQ(built_in, files);
}

// Where no shipped file fits, the seeds still hold the shipped ones that
// do: at 1F1B's memory with one chunk, 1f1b.pipe and zb-h1.pipe are seeds.
TEST(seeds, shipped_files_that_fit_are_seeds) {
  const Problem problem = problem_of(request_of(Placement::looped, {4, 8, 1, 1}, {1, 1, 1}, 4));
  std::set<std::string> origins;
  for (const Seed& seed : seeds(problem)) origins.insert(seed.origin);
  for (const char* name : {"schedules/1f1b.pipe", "schedules/zb-h1.pipe", "schedules/zb-h2.pipe",
                           "schedules/interleaved-zb.pipe", "ZB-H1", "greedy #0"}) {
    EXPECT_EQ(origins.count(name), 1u) << name;
  }
  EXPECT_EQ(origins.count("schedules/zb-v.pipe"), 0u) << "a V schedule for a looped problem";
}

// Each kind of move alone, from a greedy order under a binding limit: what
// the search keeps is an order, within the limit, never longer than where
// it started, and the relocations and block exchanges find something.
TEST(search, each_kind_of_move_keeps_orders_within_the_limit) {
  const Request request = request_of(Placement::looped, {4, 12, 2, 1}, {2, 2, 1}, 2);
  const Problem problem = problem_of(request);
  const auto start = greedy_order(problem, {});
  ASSERT_TRUE(start);
  const auto timed = time_order(*start, problem.costs);
  ASSERT_TRUE(timed);
  const MoveMix mixes[] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  int improved = 0;
  for (const MoveMix& mix : mixes) {
    const auto now = std::chrono::steady_clock::now();
    LocalSearch search(problem, *start, *timed, {now + std::chrono::hours(1), 400, 0, mix});
    int evaluations = 0;
    const int kept = search.run({}, now, evaluations);
    EXPECT_EQ(order_error(search.best()), "");
    EXPECT_TRUE(fits(problem, search.best()));
    const auto after = time_order(search.best(), problem.costs);
    ASSERT_TRUE(after);
    EXPECT_LE(after->score, timed->score);
    if (mix.swap == 0 && kept > 0) ++improved;
  }
  EXPECT_EQ(improved, 2);
}

}  // namespace
}  // namespace pipevm::synthesis
