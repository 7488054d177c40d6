// The compute-order problem of pipevm synthesize as a time-indexed integer
// program, solved by CBC (coinor-libcbc-dev) through its C interface: a
// benchmark to measure an ILP against the library's local search, not part
// of the product.
//
// The problem is the library's for one chunk per stage: passes F, B (the
// backward-input, or the fused backward) and W per stage and micro-batch;
// F(s,k) -> F(s+1,k) and B(s+1,k) -> B(s,k) with a message's latency,
// F(last,k) -> B(last,k), B(s,k) -> W(s,k); one pass at a time per stage;
// memory counted as synthesis::peak_memory counts it (a forward holds 1, a
// backward-input leaves R until the weight pass); objective the longest
// stage span (first pass's start to last pass's end).
// Time-indexed: z(j,t) = 1 when pass j has started by time step t. Its LP
// relaxation bounds far better than big-M disjunctions (whose relaxation
// drops the one-pass-at-a-time rule), but it needs every cost to be a whole
// multiple of one time unit: the unit is the coarsest that makes them so.
// Unlike the simulator, the program may leave a stage idle before a pass
// it could start, so its optimum is a lower bound on the library's
// objective; the order it finds is timed by the library to compare.
// Left out: chunks > 1, per-stage costs, bandwidth-priced messages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compute_order.hpp"
#include "costs.hpp"

namespace pipevm::bench {

struct IlpRequest {
  Config config;  // chunks 1, dp 1
  Costs costs;    // uniform over stages; messages cost `send`
  bool split_backward = true;
  double weight_memory = 1;  // R
  double memory_limit = 0;   // in M_B per stage; 0: none
  // The longest span of a known schedule: the program looks only for
  // schedules at least as good, which bounds its time horizon.
  double span_upper_bound = 0;
  // Only schedules strictly shorter than `span_upper_bound` (by one time
  // step): an infeasible program then proves that span optimal.
  bool strictly_shorter = false;
  double seconds = 60;  // CBC's time limit
  // A schedule to start from (CBC's MIP start), its passes' start times
  // per stage in the order's positions.
  std::optional<synthesis::ComputeOrder> start_order;
  std::vector<std::vector<double>> start_times;
  bool log = false;  // CBC's own log on stdout
};

struct IlpOutcome {
  double time_unit = 1;  // what one time step is worth
  int horizon = 0;       // time steps
  int columns = 0;
  int rows = 0;
  long nonzeros = 0;
  bool start_accepted = false;  // the start schedule fit the horizon
  bool has_incumbent = false;
  double incumbent = 0;   // its longest span (in cost units)
  double best_bound = 0;  // CBC's bound on the optimum
  bool proven_optimal = false;
  bool proven_infeasible = false;
  double seconds = 0;             // wall time of the solve
  synthesis::ComputeOrder order;  // the incumbent's passes by start time
};

// Empty with `error` when the costs have no common time unit (up to 1/1000)
// or the instance is out of the model's reach.
std::optional<IlpOutcome> solve_time_indexed(const IlpRequest& request, std::string& error);

}  // namespace pipevm::bench
