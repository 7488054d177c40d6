// The local search (local_search.hpp).
#include "local_search.hpp"

#include <algorithm>

#include "order_clock.hpp"

namespace pipevm::synthesis {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kLongestBlock = 16;

// Whether b needs a (both of one chunk and micro-batch, a earlier in its
// forward, input, weight sequence).
bool same_cell(const Pass& a, const Pass& b) {
  return a.micro_batch == b.micro_batch && a.chunk == b.chunk;
}

std::optional<Score> clock_score(const ComputeOrder& order, const Costs& costs) {
  const auto times = time_compute_order(order, costs);
  if (!times) return std::nullopt;
  return Score{times->longest_span, times->makespan};
}

}  // namespace

LocalSearch::LocalSearch(const Problem& problem, ComputeOrder order, const Timed& timed,
                         SearchLimits limits)
    : problem_(problem),
      current_(std::move(order)),
      current_score_(timed.score),
      current_clock_(clock_score(current_, problem.costs).value_or(timed.score)),
      best_(current_),
      best_score_(timed.score),
      limits_(limits) {}

int LocalSearch::run(const std::function<void(const Progress&)>& progress, Clock::time_point started,
                     int& evaluations) {
  int kept = 0;
  int moves = 0;
  const int stages = problem_.config.stages;
  while (Clock::now() < limits_.deadline && (limits_.move_limit == 0 || moves < limits_.move_limit) &&
         std::get<0>(best_score_) > limits_.bound * (1 + 1e-12)) {
    const int s = std::uniform_int_distribution<int>(0, stages - 1)(random_);
    auto& passes = current_.stages[static_cast<std::size_t>(s)];
    if (passes.size() < 2) continue;
    const std::vector<Pass> before = passes;
    if (!move(passes) || !fits(passes)) {
      passes = before;
      continue;
    }
    const auto clock = clock_score(current_, problem_.costs);
    if (!clock || *clock > current_clock_) {
      passes = before;
      continue;
    }
    ++evaluations;
    ++moves;
    const auto timed = time_order(current_, problem_.costs);
    if (!timed || timed->score > current_score_) {
      passes = before;
      continue;
    }
    current_score_ = timed->score;
    current_clock_ = *clock;
    if (current_score_ < best_score_) {
      best_ = current_;
      best_score_ = current_score_;
      ++kept;
      if (progress) {
        progress({std::get<1>(best_score_), std::chrono::duration<double>(Clock::now() - started).count(),
                  evaluations});
      }
    }
  }
  return kept;
}

bool LocalSearch::move(std::vector<Pass>& passes) {
  const MoveMix& mix = limits_.moves;
  const int total = mix.swap + mix.relocate + mix.exchange;
  if (total <= 0) return false;
  const int kind = std::uniform_int_distribution<int>(0, total - 1)(random_);
  if (kind < mix.swap) return swap_neighbours(passes);
  if (kind < mix.swap + mix.relocate) return relocate(passes);
  return exchange_blocks(passes);
}

bool LocalSearch::swap_neighbours(std::vector<Pass>& passes) {
  const auto n = static_cast<int>(passes.size());
  const auto j = static_cast<std::size_t>(std::uniform_int_distribution<int>(0, n - 2)(random_));
  if (same_cell(passes[j], passes[j + 1])) return false;
  std::swap(passes[j], passes[j + 1]);
  return true;
}

bool LocalSearch::relocate(std::vector<Pass>& passes) {
  const auto n = static_cast<int>(passes.size());
  const int j = std::uniform_int_distribution<int>(0, n - 1)(random_);
  const Pass pass = passes[static_cast<std::size_t>(j)];
  // Between the last pass of its cell before it and the first after it.
  int earliest = 0;
  int latest = n - 1;
  for (int k = j - 1; k >= 0; --k) {
    if (same_cell(passes[static_cast<std::size_t>(k)], pass)) {
      earliest = k + 1;
      break;
    }
  }
  for (int k = j + 1; k < n; ++k) {
    if (same_cell(passes[static_cast<std::size_t>(k)], pass)) {
      latest = k - 1;
      break;
    }
  }
  if (latest <= earliest) return false;
  int to = std::uniform_int_distribution<int>(earliest, latest - 1)(random_);
  if (to >= j) ++to;
  passes.erase(passes.begin() + j);
  passes.insert(passes.begin() + to, pass);
  return true;
}

bool LocalSearch::exchange_blocks(std::vector<Pass>& passes) {
  const auto n = static_cast<int>(passes.size());
  const int first = std::uniform_int_distribution<int>(1, kLongestBlock)(random_);
  const int second = std::uniform_int_distribution<int>(1, kLongestBlock)(random_);
  if (first + second > n) return false;
  const int begin = std::uniform_int_distribution<int>(0, n - first - second)(random_);
  const auto a = passes.begin() + begin;
  const auto b = a + first;
  const auto c = b + second;
  for (auto x = a; x != b; ++x) {
    for (auto y = b; y != c; ++y) {
      if (same_cell(*x, *y)) return false;
    }
  }
  std::rotate(a, b, c);
  return true;
}

bool LocalSearch::fits(const std::vector<Pass>& passes) const {
  ComputeOrder one;
  one.stages.push_back(passes);
  return peak_memory(one, problem_.weight_memory)[0] <= problem_.memory_limit + 1e-9;
}

}  // namespace pipevm::synthesis
