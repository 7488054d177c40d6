// A clock for compute orders without building a program: each pass starts
// when its stage is free and its input has arrived, the rule the simulator
// applies to an order in its timing form (place_comms.hpp: every receive
// posted at the start, each output sent right after its pass). It charges
// what that form charges: ZeroGrad first, a LoadInput before a forward at
// the lane's first position and a LoadTarget after one at its end (each
// at the chunk's `load`), each pass at its chunk's cost, and every message
// Costs::message_time; a value a V's turn keeps on its stage arrives when
// its pass ends.
//
// It ranks many candidates cheaply (building blocks, the exact search);
// the simulator stays the judge of what is returned. The two agree where
// a message's time does not depend on the model's shapes (bandwidth 0, or
// act-bytes and grad-bytes given); a test holds them together.
// Not here: communication placed for running (place_comms.hpp), checks.
#pragma once

#include <optional>
#include <vector>

#include "compute_order.hpp"
#include "costs.hpp"

namespace pipevm::synthesis {

struct OrderTimes {
  // start[s][j], end[s][j]: stage s's pass j.
  std::vector<std::vector<double>> start;
  std::vector<std::vector<double>> end;
  double longest_span = 0;  // a stage's first pass start to its last pass end, the largest
  double makespan = 0;      // the last pass end
};

// Nullopt when the order deadlocks (a stage waits for a pass that another
// stage runs only after something of its own that comes later). The order
// must be one (order_error empty): a stage's own passes are not checked.
std::optional<OrderTimes> time_compute_order(const ComputeOrder& order, const Costs& costs);

// How long a pass of `kind` takes on (stage, chunk): its cost key.
double pass_cost(const Costs& costs, PassKind kind, int stage, int chunk);

}  // namespace pipevm::synthesis
