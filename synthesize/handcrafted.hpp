// Handcrafted compute orders for a synthesis problem, each the order its
// paper or system publishes, and where a memory limit binds the same
// order with a shallower warm-up: with one chunk per stage 1F1B, ZB-H1
// and ZB-H2; with looped chunks interleaved 1F1B and interleaved zero
// bubble (m a multiple of p); with placement v, V-ZB (v_schedules.hpp) and
// PyTorch's ZB-V. Not here: memory checks and timing (the caller's), the
// V-Half and V-Min blocks (building_blocks.hpp), the shipped files
// (library.hpp).
#pragma once

#include <string>
#include <vector>

#include "compute_order.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

struct NamedOrder {
  std::string name;
  ComputeOrder order;
};

// The orders that fit the problem's configuration and backward kind;
// memory is not filtered here.
std::vector<NamedOrder> handcrafted_orders(const Problem& problem);

// Looped placement (m a multiple of p with chunks): the interleaved order (one chunk
// per stage: 1F1B's) with stage s warming up slope(p - s - 1) + extra
// forward units (slope 1 or 2, extra 0 .. (v - 1)p + 2; at least (v - 1)p,
// which its first backward needs, and at most what the limit holds) and
// its weight passes lateness * s units late (0 .. 3; at most as many as
// the limit leaves room for), every one of them.
// With p 4, m 16, two chunks and F = I = W, Megatron's warm-up with
// lateness 2 has no bubble at 11 chunk activations, where interleaved
// zero bubble (lateness 1) idles p - 1. The caller ranks them (seeds.hpp).
std::vector<NamedOrder> interleaved_family(const Problem& problem);

}  // namespace pipevm::synthesis
