// A compute order timed by the simulator, the one clock: its program in
// the timing form (place_comms.hpp) and its score, what the search
// minimises: the Zero Bubble paper's cost, the longest stage span (a
// stage's first pass start to its last pass end: what a step costs when
// steps follow each other), then the makespan. Not here: the search.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "compute_order.hpp"
#include "costs.hpp"
#include "place_comms.hpp"
#include "simulate.hpp"

namespace pipevm::synthesis {

using Score = std::tuple<double, double>;  // longest span, makespan

struct Timed {
  Score score;
  Simulation simulation;
  BuiltProgram built;
};

// The source file programs built from orders point at.
std::shared_ptr<const SourceFile> builder_file();

// Nullopt when the order deadlocks.
std::optional<Timed> time_order(const ComputeOrder& order, const Costs& costs);

// Each stage's first compute start and last compute end, and its compute.
struct StageSpan {
  double first = std::numeric_limits<double>::infinity();
  double last = 0;
  double work = 0;
};
std::vector<StageSpan> stage_spans(const Program& program, const Timeline& timeline);

double longest_span(const Program& program, const Timeline& timeline);

}  // namespace pipevm::synthesis
