// `pipevm synthesize` as a library call: costs, a configuration and a
// memory limit in; a checked flat program with its predicted figures out.
//
// The objective is the Zero Bubble paper's cost: the longest stage span
// (a stage's first forward's start to its last pass's end), then the
// makespan.
// The search: every seed (seeds.hpp: handcrafted and generated orders,
// the V family's blocks, the shipped schedules, the greedy grid) that fits
// the memory limit is turned into a program (place_comms.hpp, timing form)
// and timed by pipevm::simulate, the one clock; the best is improved by a
// local search that re-simulates (swap two adjacent passes of a stage,
// move a weight pass) until the time limit or the lower bound (bound.hpp).
// A result is never worse than the seed it grew from, so never worse than
// any seed that fits.
// Then communication is placed, the text is compiled back, checked under
// MPI's progress rule and under posted order, and simulated again.
// `lower` runs only the last step on a given order. Nothing is printed: a
// progress callback reports the best so far.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compute_order.hpp"
#include "costs.hpp"
#include "heuristic.hpp"
#include "memory_bytes.hpp"
#include "memory_policy.hpp"
#include "simulate.hpp"

namespace pipevm::synthesis {

struct Progress {
  double best_makespan = 0;
  double elapsed_seconds = 0;
  int evaluations = 0;
};

struct Result;

struct Request {
  Placement placement = Placement::looped;
  Config config;
  Costs costs = default_costs();
  // Per stage, in micro-batch activations M_B (a stage's activations of
  // one micro-batch over all its chunks); 0: no limit.
  double memory_limit = 0;
  double weight_memory = 1;  // R = M_W / M_B
  // A limit in bytes per stage, counted as `check` counts peak_bytes for
  // `memory_shape` (core/memory_bytes.hpp); 0: none. With it, the search
  // runs at limits of whole M_B and keeps the best result whose bytes fit.
  std::uint64_t memory_bytes = 0;
  MemoryShape memory_shape;
  // What a stage may do with a stash besides keeping it (memory_policy.hpp,
  // policy_search.hpp); with a memory limit, `keep` is the search above
  // alone. The model's bytes time Offload and Reload (`memory_shape`).
  MemoryPolicy memory_policy = MemoryPolicy::any;
  // How a byte limit counts a result's peak bytes per stage; unset: as
  // `check` counts peak_bytes for `memory_shape` (the cut search counts
  // the layers' own bytes: cut_search.hpp).
  std::function<std::vector<std::uint64_t>(const Result&)> count_bytes;
  double time_limit_seconds = 5;
  // Local-search moves simulated at most (0: no limit): with it and a time
  // limit that does not end the search first, the result is the same on
  // any machine (the moves are drawn from a fixed seed). A byte limit's
  // searches (one per M_B limit tried) each get this many.
  int move_limit = 0;
  std::function<void(const Progress&)> progress;  // called when the best improves
};

struct Result {
  ComputeOrder order;
  Program program;          // the placed program, compiled from `text`
  std::string text;         // its flat form: placement, check line, stage blocks
  Simulation simulation;    // of `program`
  double order_makespan = 0;  // the compute order's (timing form)
  double bubble_rate_zb = 0;  // the Zero Bubble paper's bubble rate
  double longest_span = 0;    // of `program`: the longest stage span, what the search minimises
  double lower_bound = 0;     // no order of these passes has a shorter longest span
  std::string bound_reason;   // the bound's term that gives it (bound.hpp)
  std::vector<double> peak_memory;  // per stage, in M_B
  std::vector<std::uint64_t> peak_bytes;  // per stage, when the request limits bytes
  double memory_limit = 0;  // the M_B limit the result was searched at (0: none)
  std::string origin;       // the seed the result grew from
  double seed_span = 0;     // that seed's longest span (timing form): the search gained seed_span - longest_span
  int seeds = 0;            // seeds for the problem
  int seeds_within_limit = 0;  // of those, orders within the memory limit (each timed)
  int evaluations = 0;      // simulations run
  int improvements = 0;     // local-search moves kept
  // Set when a memory policy other than keep was searched (a limit and
  // --memory-policy recompute, offload or any): per stage, the units kept,
  // recomputed and offloaded, and the device and host peak bytes for the
  // request's model (check's peak_bytes: total() and host_peak).
  bool policy_searched = false;
  std::vector<PolicyCounts> policy_counts;
  std::vector<std::uint64_t> device_peak_bytes;
  std::vector<std::uint64_t> host_peak_bytes;
};

// Whether the result's longest stage span meets its lower bound (to a
// relative 1e-9): no order of these passes does better under the model.
bool is_optimal(const Result& result);

// The least memory limit (in M_B) any schedule needs: one micro-batch's
// activations per stage.
double least_memory_limit();

// The problem a request poses: its memory limit in chunk activations,
// backwards split when the costs give bwd-input or bwd-weight.
Problem problem_of(const Request& request);

// Nullopt with `error` (one line) on a request no schedule meets.
std::optional<Result> synthesize(const Request& request, std::string& error);

// Places communication around `order` and checks the result; figures as for
// synthesize (memory with `weight_memory`). With `given`, the program the
// order was read from as it is placed (a PyTorch table's own communication,
// or a compute-only table lowered by PyTorch's rule), that program is a
// candidate too: the shorter under `costs` of the two that pass both
// checks is returned, so lowering is never longer than the input's own.
std::optional<Result> lower(const ComputeOrder& order, const Costs& costs, double weight_memory,
                            std::string& error, const Program* given = nullptr);

// The Zero Bubble paper's bubble rate of a timeline: (cost - work) / cost,
// cost the longest stage span (first forward's start to last pass's end),
// work the compute of the busiest stage.
double zero_bubble_rate(const Program& program, const Timeline& timeline);

}  // namespace pipevm::synthesis
