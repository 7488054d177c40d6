// Simulating a Program and measuring its timeline (simulate_run.hpp).
#include "simulate_run.hpp"

#include <algorithm>
#include <cmath>

#include "link.hpp"
#include "model_shape.hpp"
#include "simulate_compare.hpp"
#include "svg.hpp"
#include "topology.hpp"
#include "trace.hpp"

namespace pipevm::api {

namespace {

// Whether every time of the timeline, and the sums of them the figures take
// (up to makespan x ranks), are finite numbers: costs near the largest double
// add up to infinity, which has no grid, no SVG and no JSON number.
bool finite(const Program& program, const Timeline& timeline) {
  const auto all_finite = [](const InstructionTime& t) {
    return std::isfinite(t.issued) && std::isfinite(t.started) && std::isfinite(t.ended) &&
           std::isfinite(t.busy);
  };
  return std::all_of(timeline.times.begin(), timeline.times.end(), all_finite) &&
         std::isfinite(timeline.makespan * program.ranks());
}

}  // namespace

SimulateOutcome simulate_program(const Program& given, const SimulateRequest& request,
                                 Diagnostics& diagnostics) {
  SimulateOutcome outcome;
  if (std::string error = stage_entries_error(request.costs, given.config); !error.empty()) {
    outcome.status = 2;
    outcome.usage_error = std::move(error);
    return outcome;
  }
  // Requests carried over the step boundary: two steps, so that the
  // exchange one step starts is seen overlapping the next.
  Program program = given.carried.empty() ? given : unroll_steps(given, 2);
  const Config& c = program.config;
  Network network;
  network.layer_widths = request.model.layer_widths;
  const int batch =
      request.message_batch_size > 0 ? request.message_batch_size : request.model.batch_size;
  network.micro_batch_rows =
      static_cast<double>(batch) / (static_cast<double>(c.dp) * c.micro_batches);
  network.host_of_rank = request.host_of_rank;
  const MemoryShape shape = memory_shape(request.model, c);
  network.host_copy_bytes = host_copy_bytes(program, shape);
  std::optional<LayerCutCosts> by_layers;
  if (!request.costs.layers.empty()) {
    by_layers = layer_cut_costs(request.costs, program, outcome.usage_error);
    if (!by_layers) {
      outcome.status = 2;
      return outcome;
    }
    network.boundary_bytes = by_layers->boundary_bytes;
  }
  const Costs& costs = by_layers ? by_layers->costs : request.costs;
  const Link linked =
      link(program, {program.layer_split.empty()
                         ? std::vector<int>{}
                         : piece_boundary_widths(network.layer_widths, program.layer_split)});
  std::optional<Simulation> simulation =
      simulate(program, linked, costs, diagnostics, network, request.options);
  if (!simulation) {
    outcome.status = 1;
    return outcome;
  }
  if (!finite(program, simulation->timeline)) {
    outcome.status = 2;
    outcome.usage_error = kCostsOverflow;
    return outcome;
  }
  SimulateRun run{
      .program = program,
      .simulation = std::move(*simulation),
      .bytes = peak_bytes(program, shape),
      .traffic = link_traffic(program, linked, LinkCosts(program, linked, costs, network)),
      .on_hosts = !network.host_of_rank.empty(),
      .by_layers = std::move(by_layers)};
  outcome.run = std::move(run);
  return outcome;
}

std::string timeline_title(const Program& program, const Simulation& simulation) {
  const Config& c = program.config;
  std::string title = program.name + ": " + std::to_string(c.stages) + " stages, " +
                      std::to_string(c.micro_batches) + " micro-batches";
  if (c.chunks > 1) title += ", " + std::to_string(c.chunks) + " chunks";
  if (c.dp > 1) title += ", dp " + std::to_string(c.dp);
  return title + "; makespan " + format_time(simulation.timeline.makespan) + ", bubble " +
         format_time(simulation.bubble_fraction * 100) + "%";
}

bool write_timeline_svg(const std::string& path, const SimulateRun& run, std::string& error) {
  std::string title = timeline_title(run.program, run.simulation);
  const auto peak = std::max_element(
      run.bytes.begin(), run.bytes.end(),
      [](const RankBytes& a, const RankBytes& b) { return a.total() < b.total(); });
  if (peak != run.bytes.end()) {
    title += "; peak " + bytes_text(peak->total()) + " on rank " + std::to_string(peak->rank);
  }
  return write_svg(path, run.program, run.simulation.timeline, title, error);
}

bool write_timeline_trace(const std::string& path, const SimulateRun& run, std::string& error) {
  return write_chrome_trace(path, run.program, run.simulation.timeline, error);
}

}  // namespace pipevm::api
