// The exact step for small problems: a branch and bound over every compute
// order within the memory limit, timed by the order clock (order_clock.hpp,
// the simulator's rule for the timing form). It proves an order optimal
// under the model when it finishes, or improves on an incumbent when it
// finds a shorter longest span before its budget ends.
//
// Orders are built pass by pass in the order their passes start (ties by
// stage), so each order is met once: a pass may follow the last one placed
// only if it starts no earlier, and every pass's input comes from a pass
// that started before it (costs are positive). Micro-batches are
// interchangeable, so the first stage's forwards at lane position 0 go in
// micro-batch order. A partial order is cut when a stage's span can no
// longer beat the incumbent: its first start, the time it is free, and the
// work it has left. Not here: which problems are small enough
// (synthesize.cpp), the closed-form bound (bound.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "compute_order.hpp"
#include "heuristic.hpp"

namespace pipevm::synthesis {

struct ExactSearch {
  std::optional<ComputeOrder> order;  // a shorter order than the incumbent, if one was found
  double longest_span = 0;            // its span, else the incumbent's
  bool proved = false;                // the search finished: longest_span is the optimum
  std::uint64_t nodes = 0;            // partial orders visited
};

// Whether the exact search applies: every pass costs more than nothing and
// the order clock times orders as the simulator does (message times that do
// not depend on the model's shapes, no per-layer compute).
bool exact_search_applies(const Problem& problem);

// Searches for an order shorter than `incumbent` (a longest span) until it
// has visited `node_limit` partial orders or `deadline` passes.
ExactSearch exact_search(const Problem& problem, double incumbent, std::uint64_t node_limit,
                         std::chrono::steady_clock::time_point deadline);

}  // namespace pipevm::synthesis
