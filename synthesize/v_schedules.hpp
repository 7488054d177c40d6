// V-ZB (Qi, Wan, Amar, Lin, "Pipeline Parallelism with Controllable
// Memory", NeurIPS 2024; ../shared/references/controllable-memory.md) as a
// compute order for placement v with two chunks: zero bubble at 2p chunk
// activations when m >= 2p and F = B = W, the order the authors' greedy
// (zbv.py) produces at those costs, written in closed form (it is
// schedules/zb-v.pipe's; a test compares them). Stage s (d = p - 1 - s),
// in the authors' letters (F, f chunk 0 and 1 forward; B chunk 1's and b
// chunk 0's backward-input; W, w their weight passes):
//   warm-up   F_0 .. F_2d, then (f_i, F_{2d+1+i}) for i < s, then f_s;
//   steady    unit j while j + s + 1 < m: B_j W_j, then when j >= d
//             F_{j+p} (if < m) b_{j-d} w_{j-d}, then f_{j+s+1};
//   cool-down p pairs (X_i, b_{m-p+i}), X_i = B_{m-1-s+i} for i <= s, else
//             the oldest pending weight pass; then the pending weight
//             passes, first in first out.
// Not here: the blocks of V-Half and V-Min (building_blocks.hpp).
#pragma once

#include <optional>

#include "compute_order.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

// Nullopt unless placement v, two chunks and m >= 2p. A fused problem
// merges each weight pass into its backward.
std::optional<ComputeOrder> v_zb_order(const Problem& problem);

}  // namespace pipevm::synthesis
