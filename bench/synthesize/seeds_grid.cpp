// Issue 35's grid, larger than the test's (tests/synthesize/seeds_test.cpp):
// random requests (a fixed seed) over p 2-8, m p..8p, one chunk looped,
// two chunks looped and V, F:B:W 1:1:1, 3:4:2, 2:2:1, 1:2:1 and memory
// limits 1/3 .. 1 of 1F1B's p M_B. For each, in one markdown row:
//  - the best shipped schedule that fits, simulated as shipped, and the
//    best generator that fits (handcrafted, the interleaved family, V-Half
//    and V-Min), each lowered: their longest spans;
//  - the best seed (what `synthesize --time-limit 0` returns) and where it
//    came from;
//  - the local search from it for --search-seconds, with swaps only, with
//    swaps and relocations, and with every move (local_search.hpp);
//  - on problems of at most 48 passes the exact step (exact.hpp) after the
//    full search: proved, and whether it found a shorter order;
//  - the lower bound and its term.
// Then a summary: how often the result is above a shipped schedule or a
// generator (never, by construction), and what each search gained.
//
//   pipevm_seeds_grid [--trials 60] [--seed 35] [--search-seconds 1]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bound.hpp"
#include "building_blocks.hpp"
#include "compile.hpp"
#include "exact.hpp"
#include "handcrafted.hpp"
#include "library.hpp"
#include "local_search.hpp"
#include "order_clock.hpp"
#include "seeds.hpp"
#include "synthesize.hpp"
#include "timed_order.hpp"

namespace {

using namespace pipevm;
using namespace pipevm::synthesis;
using Clock = std::chrono::steady_clock;
constexpr double kNone = std::numeric_limits<double>::infinity();

struct Options {
  int trials = 60;
  unsigned seed = 35;
  double search_seconds = 1;
};

bool fits(const Problem& problem, const ComputeOrder& order) {
  const auto peaks = peak_memory(order, problem.weight_memory);
  return std::all_of(peaks.begin(), peaks.end(),
                     [&](double peak) { return peak <= problem.memory_limit + 1e-9; });
}

double best_shipped(const Request& request, const Problem& problem) {
  double best = kNone;
  for (const ShippedSchedule& shipped : shipped_schedules()) {
    Diagnostics diagnostics;
    const auto program = compile(std::make_shared<const SourceFile>(std::string(shipped.name), std::string(shipped.text)),
                                 request.config, diagnostics);
    if (!program || program->placement != request.placement) continue;
    std::string error;
    const auto order = compute_order_of(*program, error);
    if (!order || !fits(problem, with_backwards(*order, problem.split_backward))) continue;
    if (const auto simulation = simulate(*program, request.costs, diagnostics)) {
      best = std::min(best, longest_span(*program, simulation->timeline));
    }
  }
  return best;
}

double best_generator(const Request& request, const Problem& problem) {
  std::vector<NamedOrder> orders = handcrafted_orders(problem);
  for (NamedOrder& named : interleaved_family(problem)) orders.push_back(std::move(named));
  if (request.placement == Placement::v) {
    for (const BuildingBlock& block : {v_half_block(request.config.stages), v_min_block(request.config.stages)}) {
      if (auto order = block_order(problem, block, true)) orders.push_back({block.name, std::move(*order)});
    }
  }
  double best = kNone;
  for (const NamedOrder& named : orders) {
    if (!order_error(named.order).empty() || !fits(problem, named.order)) continue;
    if (const auto timed = time_order(named.order, request.costs)) best = std::min(best, std::get<0>(timed->score));
  }
  return best;
}

// The local search from `start` with one mix of moves; its best span.
double search_from(const Problem& problem, const ComputeOrder& start, const Timed& timed, MoveMix mix,
                   double seconds, double bound, ComputeOrder* best) {
  const auto started = Clock::now();
  SearchLimits limits{started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
                      0, bound, mix};
  LocalSearch search(problem, start, timed, limits);
  int evaluations = 0;
  search.run({}, started, evaluations);
  const auto result = time_order(search.best(), problem.costs);
  if (best) *best = search.best();
  return std::get<0>(result->score);
}

std::string figure(double value) {
  if (value == kNone) return "—";
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("issue 35's grid: synthesis against every shipped schedule and generator that fits");
  app.add_option("--trials", options.trials);
  app.add_option("--seed", options.seed);
  app.add_option("--search-seconds", options.search_seconds);
  CLI11_PARSE(app, argc, argv);

  std::mt19937 random(options.seed);
  struct Ratio {
    double fwd, input, weight;
    const char* name;
  };
  const Ratio ratios[] = {{1, 1, 1, "1:1:1"}, {3, 4, 2, "3:4:2"}, {2, 2, 1, "2:2:1"}, {1, 2, 1, "1:2:1"}};
  const double fractions[] = {1.0 / 3, 0.5, 2.0 / 3, 1.0};
  std::printf("| p | m | v | placement | F:B:W | limit | shipped | generator | seed (from) | swaps | +relocate | all moves | exact | bound (term) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int above_shipped = 0, above_generator = 0, compared = 0, optimal = 0;
  double gain_swaps = 0, gain_relocate = 0, gain_all = 0, gain_exact = 0;
  int proved = 0, exact_runs = 0;
  for (int trial = 0; trial < options.trials; ++trial) {
    const int p = std::uniform_int_distribution<int>(2, 8)(random);
    const int m = std::uniform_int_distribution<int>(p, 8 * p)(random);
    const int kind = trial % 3;
    Request request;
    request.placement = kind == 2 ? Placement::v : Placement::looped;
    request.config = {p, m, kind == 0 ? 1 : 2, 1};
    const Ratio& ratio = ratios[std::uniform_int_distribution<int>(0, 3)(random)];
    request.costs = Costs{};
    request.costs.fwd = ratio.fwd;
    request.costs.bwd_input = ratio.input;
    request.costs.bwd_weight = ratio.weight;
    request.memory_limit = std::max(1.0, p * fractions[std::uniform_int_distribution<int>(0, 3)(random)]);
    request.time_limit_seconds = 0;
    const Problem problem = problem_of(request);
    std::string error;
    const auto seeded = synthesize(request, error);
    if (!seeded) {
      std::printf("| %d | %d | %d | %s | %s | %g | %s |\n", p, m, request.config.chunks, name(request.placement).data(),
                  ratio.name, request.memory_limit, error.c_str());
      continue;
    }
    const double shipped = best_shipped(request, problem);
    const double generator = best_generator(request, problem);
    ++compared;
    if (seeded->longest_span > shipped + 1e-9) ++above_shipped;
    if (seeded->longest_span > generator + 1e-9) ++above_generator;
    // The seed the result grew from, timed, is where each search starts.
    std::optional<ComputeOrder> start;
    for (const Seed& seed : seeds(problem)) {
      if (seed.origin == seeded->origin) start = seed.order;
    }
    const auto timed = time_order(*start, problem.costs);
    const LowerBound bound = lower_bound(problem);
    const double seed_span = std::get<0>(timed->score);
    const double swaps = search_from(problem, *start, *timed, {1, 0, 0}, options.search_seconds, bound.value, nullptr);
    const double relocate = search_from(problem, *start, *timed, {4, 3, 0}, options.search_seconds, bound.value, nullptr);
    ComputeOrder searched;
    const double all = search_from(problem, *start, *timed, {}, options.search_seconds, bound.value, &searched);
    gain_swaps += (seed_span - swaps) / seed_span;
    gain_relocate += (seed_span - relocate) / seed_span;
    gain_all += (seed_span - all) / seed_span;
    std::string exact = "—";
    double best = all;
    double lower = bound.value;
    const std::size_t passes = static_cast<std::size_t>(p) * static_cast<std::size_t>(request.config.chunks) *
                               static_cast<std::size_t>(m) * 3;
    if (passes <= 48 && exact_search_applies(problem) && all > bound.value * (1 + 1e-9)) {
      ++exact_runs;
      const auto clock = time_compute_order(searched, problem.costs);
      const ExactSearch found = exact_search(problem, clock->longest_span, 20'000'000,
                                             Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                std::chrono::duration<double>(options.search_seconds)));
      if (found.order) best = found.longest_span;
      if (found.proved) {
        ++proved;
        lower = std::max(lower, best);
      }
      gain_exact += (all - best) / all;
      exact = std::string(found.proved ? "proved " : "open ") + figure(best);
    }
    if (best <= lower * (1 + 1e-9)) ++optimal;
    std::printf("| %d | %d | %d | %s | %s | %g | %s | %s | %s (%s) | %s | %s | %s | %s | %s (%s) |\n", p, m,
                request.config.chunks, name(request.placement).data(), ratio.name, request.memory_limit,
                figure(shipped).c_str(), figure(generator).c_str(), figure(seed_span).c_str(), seeded->origin.c_str(),
                figure(swaps).c_str(), figure(relocate).c_str(), figure(all).c_str(), exact.c_str(),
                figure(bound.value).c_str(), bound.binding.c_str());
    std::fflush(stdout);
  }
  const double n = std::max(1, compared);
  std::printf("\n%d requests: seeds above a shipped schedule that fits %d times, above a generator %d times; "
              "optimal under the model %d.\n",
              compared, above_shipped, above_generator, optimal);
  std::printf("Mean gain over the seed in %g s: swaps %.4f, + relocations %.4f, every move %.4f; "
              "the exact step after it %.4f over %d small problems (%d proved).\n",
              options.search_seconds, gain_swaps / n, gain_relocate / n, gain_all / n,
              exact_runs > 0 ? gain_exact / exact_runs : 0.0, exact_runs, proved);
  return above_shipped == 0 && above_generator == 0 ? 0 : 1;
}
