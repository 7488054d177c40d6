// Where the search starts (seeds.hpp).
#include "seeds.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "building_blocks.hpp"
#include "handcrafted.hpp"
#include "library.hpp"
#include "order_clock.hpp"

namespace pipevm::synthesis {

namespace {

constexpr double kSlack = 1e-9;

bool fits(const Problem& problem, const ComputeOrder& order) {
  const auto peaks = peak_memory(order, problem.weight_memory);
  return std::all_of(peaks.begin(), peaks.end(),
                     [&](double peak) { return peak <= problem.memory_limit + kSlack; });
}

void add(std::vector<Seed>& seeds, std::vector<NamedOrder> orders) {
  for (NamedOrder& named : orders) seeds.push_back({std::move(named.name), std::move(named.order)});
}

// The `keep` orders within the limit that the order clock times best.
std::vector<NamedOrder> best_by_clock(const Problem& problem, std::vector<NamedOrder> orders,
                                      std::size_t keep) {
  std::vector<std::pair<std::tuple<double, double>, std::size_t>> ranked;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    if (!order_error(orders[i].order).empty() || !fits(problem, orders[i].order)) continue;
    if (const auto times = time_compute_order(orders[i].order, problem.costs)) {
      ranked.push_back({{times->longest_span, times->makespan}, i});
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<NamedOrder> best;
  for (std::size_t i = 0; i < std::min(keep, ranked.size()); ++i) best.push_back(std::move(orders[ranked[i].second]));
  return best;
}

}  // namespace

std::vector<Seed> adaptive_block_seeds(const Problem& problem, std::size_t keep) {
  const Config& c = problem.config;
  if (problem.placement != Placement::v || c.chunks != 2) return {};
  // Blocks are ranked on at most 2p micro-batches: past that a block's
  // steady state is full and adds the same work to every stage.
  Problem ranking = problem;
  ranking.config.micro_batches = std::min(c.micro_batches, 2 * c.stages);
  std::vector<std::pair<double, const BuildingBlock*>> ranked;
  const std::vector<BuildingBlock> blocks = adaptive_blocks(c.stages);
  for (const BuildingBlock& block : blocks) {
    const auto order = block_order(ranking, block, false);
    if (!order || !order_error(*order).empty() || !fits(ranking, *order)) continue;
    const auto times = time_compute_order(*order, problem.costs);
    if (times) ranked.emplace_back(times->longest_span, &block);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Seed> seeds;
  for (std::size_t i = 0; i < std::min(keep, ranked.size()); ++i) {
    const BuildingBlock& block = *ranked[i].second;
    for (const bool reorder : {false, true}) {
      if (auto order = block_order(problem, block, reorder)) {
        seeds.push_back({block.name + (reorder ? ", reordered" : ""), std::move(*order)});
      }
    }
  }
  return seeds;
}

std::vector<Seed> seeds(const Problem& problem) {
  std::vector<Seed> seeds;
  add(seeds, handcrafted_orders(problem));
  add(seeds, best_by_clock(problem, interleaved_family(problem), 3));
  if (problem.placement == Placement::v && problem.config.chunks == 2) {
    for (const BuildingBlock& block : {v_half_block(problem.config.stages), v_min_block(problem.config.stages)}) {
      for (const bool reorder : {true, false}) {
        if (auto order = block_order(problem, block, reorder)) {
          seeds.push_back({block.name + (reorder ? "" : " (repeated, not reordered)"), std::move(*order)});
        }
      }
    }
    for (Seed& seed : adaptive_block_seeds(problem, 3)) seeds.push_back(std::move(seed));
  }
  add(seeds, shipped_orders(problem));
  int grid_point = 0;
  for (const GreedyChoices& choices : greedy_grid()) {
    if (auto order = greedy_order(problem, choices)) {
      seeds.push_back({"greedy #" + std::to_string(grid_point), std::move(*order)});
    }
    ++grid_point;
  }
  return seeds;
}

}  // namespace pipevm::synthesis
