// Simulating one Program the way `pipevm simulate` and Python's
// `pipevm.simulate` do: unrolled to two steps when requests carry over the
// step boundary, linked with the model's piece widths, simulated under the
// costs and the ranks' hosts, and measured (bytes per rank at their peak,
// what crosses hosts). Returns values; the grid, JSON and the host lines are
// cli/'s, the SVG and trace files are written only when asked for.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costs.hpp"
#include "layer_cut_costs.hpp"
#include "links.hpp"
#include "memory_bytes.hpp"
#include "model_bytes.hpp"
#include "program.hpp"
#include "simulate.hpp"

namespace pipevm::api {

struct SimulateRequest {
  Costs costs = default_costs();
  config::ModelBytes model;       // the layer widths and the bytes per rank
  int message_batch_size = 0;     // the batch the messages carry (--batch-size); 0: model's
  std::vector<int> host_of_rank;  // empty: every rank on one host
  SimulateOptions options;        // posted order (--p2p-order posted)
};

struct SimulateRun {
  Program program;  // as simulated: two steps when requests carry over
  Simulation simulation;
  std::vector<RankBytes> bytes;  // each rank's bytes at its peak (one step's model)
  LinkTraffic traffic;           // what one run of `program` sends, per link class
  bool on_hosts = false;         // host_of_rank was given
  // With per-layer costs: the cut that timed the pieces, and each rank's
  // activation bytes at their peak by the layers' activation-bytes.
  std::optional<LayerCutCosts> by_layers;
};

struct SimulateOutcome {
  std::optional<SimulateRun> run;
  int status = 0;           // without a run: 1 the program cannot run (diagnostics), 2 bad input
  std::string usage_error;  // status 2: why
};

SimulateOutcome simulate_program(const Program& program, const SimulateRequest& request,
                                 Diagnostics& diagnostics);

// "1f1b: 4 stages, 8 micro-batches; makespan 30, bubble 20%": the SVG's title.
std::string timeline_title(const Program& program, const Simulation& simulation);

// The timeline as an SVG picture or a Chrome/Perfetto trace; false with
// `error` when the file cannot be written.
bool write_timeline_svg(const std::string& path, const SimulateRun& run, std::string& error);
bool write_timeline_trace(const std::string& path, const SimulateRun& run, std::string& error);

}  // namespace pipevm::api
