// The seeds of a synthesis: every known compute order that fits a
// problem's configuration, each with where it came from. The search times
// them all by the user's costs, keeps those within the memory limit, and
// starts from the best, so its result is never worse than any of them.
// Sources, in order:
//  - handcrafted orders (handcrafted.hpp: 1F1B, ZB-H1, ZB-H2, interleaved
//    1F1B and zero bubble, V-ZB, PyTorch's ZB-V, shallower warm-ups where
//    the limit binds), and the interleaved family's three best orders by
//    the order clock (order_clock.hpp) among those within the limit;
//  - with placement v, the V family's building blocks (V-Half, V-Min, as
//    the paper reorders them and as repeated) and the adaptive scheduler's
//    best blocks for these costs (building_blocks.hpp);
//  - the shipped schedules (library.hpp);
//  - the greedy scheduler's grid (heuristic.hpp).
// A later source (a memory policy, say) adds a function here that returns
// more seeds. Not here: memory checks, timing, the search.
#pragma once

#include <string>
#include <vector>

#include "compute_order.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

struct Seed {
  std::string origin;  // "ZB-H1", "schedules/zb-v.pipe", "greedy #3", ...
  ComputeOrder order;
};

std::vector<Seed> seeds(const Problem& problem);

// The adaptive scheduler's best blocks for the problem (costs and memory
// limit): every block of adaptive_blocks() repeated, ranked by its longest
// stage span (order_clock.hpp) among those within the limit, the best
// `keep` as repeated and as reordered.
std::vector<Seed> adaptive_block_seeds(const Problem& problem, std::size_t keep);

}  // namespace pipevm::synthesis
