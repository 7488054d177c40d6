// A synthesis problem, and compute orders for it from a greedy list
// scheduler after the Zero Bubble paper's heuristic (Qi
// et al., ICLR 2024, sec. 3.1): forwards as memory allows, backwards first
// whenever one is ready, weight passes into gaps at least T_W long, where
// they lower the largest cumulative bubble, or where memory is full, the
// rest at the end.
// The scheduler keeps a clock only to decide; every order it returns is
// timed by the simulator (synthesize.cpp).
// Not here: the handcrafted orders (handcrafted.hpp), timing, improving,
// placing communication.
#pragma once

#include <limits>
#include <optional>
#include <vector>

#include "compute_order.hpp"
#include "costs.hpp"

namespace pipevm::synthesis {

struct Problem {
  Placement placement = Placement::looped;
  Config config;
  Costs costs;
  // Backwards split into backward-input and weight passes (the costs give
  // bwd-input or bwd-weight), else fused.
  bool split_backward = true;
  // Per stage, in chunk activations; infinity: no limit.
  double memory_limit = std::numeric_limits<double>::infinity();
  double weight_memory = 1;  // R: what a backward-input leaves, of its forward's 1
};

// The greedy scheduler's on/off choices (the grid the search runs).
struct GreedyChoices {
  bool forward_may_delay_backward = false;  // warm-up: a forward even when a backward arrives meanwhile
  bool weight_lowers_largest_bubble = false;  // a weight pass in a gap shorter than T_W
  bool weight_before_forward = false;       // a pending weight pass before a ready forward
  bool deeper_forward_first = true;         // of two ready forwards, the one nearer the loss
  // How far (in T_F) a warm-up forward may run past the first backward's
  // earliest possible arrival, when forwards may not delay it.
  double warmup_overrun = 0;
  // Weight passes a stage keeps for its tail, as a fraction of what it
  // needs to stay busy there: stage s's last backward-input comes s round
  // trips (T_F + T_B + 2 T_comm) after the last stage's.
  double weight_reserve = 0;
};

// Every combination of the four on/off choices, then the warm-up overrun
// and the weight reserve varied at the default choices.
std::vector<GreedyChoices> greedy_grid();

// The greedy order; empty when it cannot finish within the memory limit.
std::optional<ComputeOrder> greedy_order(const Problem& problem, const GreedyChoices& choices);

}  // namespace pipevm::synthesis
