// Lower bounds on the longest stage span (a stage's first pass start to
// its last pass end, each pass at its chunk's cost as the simulator times
// it): no compute order of the problem's passes does better, within its
// memory limit. The bound is the largest of named terms, so a header can
// say which one binds and a later memory policy (recomputation, offload)
// can add terms of its own:
//  - stage work: every stage computes all its passes within its span;
//  - the first stage's forwards, then the last one's round trip;
//  - head and tail idle: from a stage's first pass, its first backward
//    waits for a round trip to the lane's end and back, and meanwhile only
//    forwards run, as many as the memory limit holds; after its last
//    forward, that micro-batch's backward waits again, and meanwhile only
//    the backward and weight passes of what the stage holds run;
//  - activation lifespans (the controllable-memory paper's argument): an
//    activation is held from its forward's start to its backward's end
//    (R of it until its weight pass ends), at least a round trip, and a
//    stage holds at most the limit at any time (rounded down to whole
//    activations when R is 0 or 1), so the limit times the span covers
//    every activation's lifespan;
//  - with one chunk per stage, the last backward's chain: a stage's last
//    backward-input follows every later stage's, and each of those first
//    computes all its passes but the weight passes it may still hold.
// Loads are data instructions a stage may run before its first pass, so no
// term counts them. Not here: the exact search on small problems
// (exact.hpp), which proves more where it finishes.
#pragma once

#include <string>
#include <vector>

#include "heuristic.hpp"

namespace pipevm::synthesis {

struct BoundTerm {
  std::string name;  // "stage work", "activation lifespans", ...
  double value = 0;
};

struct LowerBound {
  double value = 0;
  std::string binding;  // the name of the largest term
  std::vector<BoundTerm> terms;
};

LowerBound lower_bound(const Problem& problem);

// The bound when units may also be recomputed or offloaded (policy_search.hpp):
// a schedule either keeps every stash, and then lower_bound holds, or sheds
// one, and then only the terms that do not read the memory limit hold (a
// recomputation adds work and an offload host-link time, never less; with
// free copies nothing more is certain). So: lower_bound without the
// limit, named with "memory limit relaxed" when the limit's terms bound
// the keep-only schedules higher.
LowerBound lower_bound_with_policies(const Problem& problem);

}  // namespace pipevm::synthesis
