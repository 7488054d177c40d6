// The improvement step: a local search over compute orders. Random moves
// on one stage's order, each kept when the simulated score (timed_order.hpp)
// does not get worse and the stage's memory stays within the limit:
//  - swap two adjacent passes that do not need each other;
//  - move one pass elsewhere between what it needs and what needs it on its
//    stage (a weight pass later, a forward earlier: a deeper warm-up);
//  - exchange two adjacent blocks of up to 16 passes each (a block of
//    warm-up forwards with the backwards after it, a cool-down's weight
//    passes with the input gradients before them) when no pass of the
//    second needs one of the first.
// The order clock (order_clock.hpp) screens each move first: a move it
// times worse than the current order is dropped without a simulation.
// Moves come from a fixed seed, so a budget of moves gives the same result
// on any machine. Not here: where the search starts (seeds.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <random>

#include "heuristic.hpp"
#include "synthesize.hpp"
#include "timed_order.hpp"

namespace pipevm::synthesis {

// How often each kind of move is drawn (weights; 0 leaves a kind out).
struct MoveMix {
  int swap = 4;
  int relocate = 3;
  int exchange = 3;
};

struct SearchLimits {
  std::chrono::steady_clock::time_point deadline;
  int move_limit = 0;  // simulated moves at most; 0: until the deadline
  double bound = 0;    // stop when the longest span reaches it
  MoveMix moves;
};

class LocalSearch {
 public:
  LocalSearch(const Problem& problem, ComputeOrder order, const Timed& timed, SearchLimits limits);

  // Runs until a limit; the number of improvements of the best order. Calls
  // `progress` with each, and counts every simulation in `evaluations`.
  int run(const std::function<void(const Progress&)>& progress,
          std::chrono::steady_clock::time_point started, int& evaluations);

  const ComputeOrder& best() const { return best_; }

 private:
  bool move(std::vector<Pass>& passes);
  bool swap_neighbours(std::vector<Pass>& passes);
  bool relocate(std::vector<Pass>& passes);
  bool exchange_blocks(std::vector<Pass>& passes);
  bool fits(const std::vector<Pass>& passes) const;

  const Problem& problem_;
  ComputeOrder current_;
  Score current_score_;
  Score current_clock_;  // the order clock's score of current_
  ComputeOrder best_;
  Score best_score_;
  SearchLimits limits_;
  std::mt19937 random_{28};
};

}  // namespace pipevm::synthesis
