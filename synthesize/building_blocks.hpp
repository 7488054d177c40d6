// Building blocks (Qi, Wan, Amar, Lin, "Pipeline Parallelism with
// Controllable Memory", NeurIPS 2024; ../shared/references/
// controllable-memory.md) for placement v with two chunks: the layout of
// one micro-batch's four passes on every stage, repeated every six slots,
// made into a compute order.
//
// A block gives, per stage, the slot of chunk 0's forward (F), chunk 1's
// forward (f), chunk 1's backward (B, the first after the loss, flowing
// from stage 0 down) and chunk 0's backward (b, flowing back up) of
// micro-batch 0; micro-batch k's sit 6k slots later. Weight passes (W of
// B, w of b) take the free slots after their backward, first in first
// out. The paper's framework then squeezes (drops idle slots without
// changing the order) and reorders the warm-up and cool-down: each of
// their passes moves to its earliest free slot when the stage's peak
// memory does not rise. Memory is counted as the paper counts it there,
// +1 a forward, -1 a weight pass.
//
// V-Min and V-Half are two such blocks (memory 1/3 and 1/2 of 1F1B's);
// the adaptive scheduler searches blocks built from a first stage's
// pattern and uniform offsets between neighbouring stages, ranking them
// by the user's costs. Not here: V-ZB (v_schedules.hpp), timing by the
// simulator (synthesize.cpp).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "compute_order.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

struct BuildingBlock {
  std::string name;
  // Per stage: the slots of F, f, B and b of micro-batch 0.
  std::vector<std::array<int, 4>> slots;
};

// The paper's V-Min block: F = i, f = 2p - i - 1, B = 2p + g + i,
// b = 4p + g - i - 1 on stage i, g = 2 when p % 3 == 0, else 0.
BuildingBlock v_min_block(int stages);
// V-Half: F = 2i, f = 3p - i - 2, B = 3p + g + 2i - 1, b = 6p + g - i - 2,
// g = 3 when p is even, else 0.
BuildingBlock v_half_block(int stages);

// The block repeated for the problem's micro-batches, weight passes
// placed, optionally reordered as the paper does (warm-up, then
// cool-down); nullopt when the block's slots collide or the order is not
// one. Backwards split; a fused problem merges each weight pass into its
// backward.
std::optional<ComputeOrder> block_order(const Problem& problem, const BuildingBlock& block,
                                        bool reorder);

// The adaptive scheduler's search space for `stages`: a first stage's
// pattern (F at 0; f, B and b at distinct slots 1..5) and offsets between
// neighbouring stages (F and B k slots later, f and b one slot earlier,
// k in 1..5), one pair of offsets up to a stage and another after it.
// Blocks whose passes would share a slot on some stage are left out.
std::vector<BuildingBlock> adaptive_blocks(int stages);

}  // namespace pipevm::synthesis
