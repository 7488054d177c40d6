// `pipevm simulate`: a schedule's timeline under a cost model, as a terminal
// grid with makespan, bubble and memory per stage, or as JSON; optionally an
// SVG picture and a Chrome/Perfetto trace; with --hosts or --hostfile, the
// ranks' hosts (--layout) and what crosses them. Proving the schedule
// correct is `pipevm check`'s job: the simulator only stops where it cannot
// go on.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "cost_options.hpp"
#include "compile.hpp"
#include "costs.hpp"
#include "hosts_options.hpp"
#include "links.hpp"
#include "model_shape.hpp"
#include "memory_config.hpp"
#include "options.hpp"
#include "run_config.hpp"
#include "schedule_input.hpp"
#include "simulate.hpp"
#include "svg.hpp"
#include "trace.hpp"

namespace pipevm::cli {

namespace {

struct SimulateArguments {
  std::string file;
  Config config;
  std::string cost_flags;
  std::string cost_file;
  std::string config_file;  // --config: the model whose bytes are counted
  std::string format = "text";
  std::string svg;
  std::string trace;
  int width = 100;
  HostArguments hosts;
  int batch_size = 0;      // 0: the run configuration's (128 by default)
  std::string topology;
};

void print_diagnostics(const Diagnostics& diagnostics) {
  const bool color = isatty(STDERR_FILENO) != 0;
  for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, color);
}

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

std::string title_of(const Program& program, const Simulation& simulation) {
  const Config& c = program.config;
  std::string title = program.name + ": " + std::to_string(c.stages) + " stages, " +
                      std::to_string(c.micro_batches) + " micro-batches";
  if (c.chunks > 1) title += ", " + std::to_string(c.chunks) + " chunks";
  if (c.dp > 1) title += ", dp " + std::to_string(c.dp);
  return title + "; makespan " + format_time(simulation.timeline.makespan) + ", bubble " +
         format_time(simulation.bubble_fraction * 100) + "%";
}

// The hosts and the model's sizes; false (after saying why) on bad input.
bool network_of(const SimulateArguments& args, const RunConfig& run, const Config& c,
                Network& network, HostPlacement& placement) {
  network.layer_widths = run.model.sizes;
  network.micro_batch_rows =
      static_cast<double>(args.batch_size > 0 ? args.batch_size : run.batch_size) /
      (static_cast<double>(c.dp) * c.micro_batches);
  std::string error;
  if (!place_on_hosts(args.hosts, c, placement, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return false;
  }
  network.host_of_rank = placement.host_of_rank;
  return true;
}

// The placement and, per link class, what one step sends over it.
void print_traffic(const HostPlacement& placement, const LinkTraffic& traffic) {
  std::cout << '\n';
  for (const std::string& line : placement.lines) std::cout << line << '\n';
  for (const LinkClass c : {LinkClass::same_host, LinkClass::across_hosts}) {
    const auto i = static_cast<std::size_t>(c);
    std::cout << name(c) << ": " << traffic.messages[i] << " messages ("
              << format_time(traffic.message_bytes[i]) << " bytes), " << traffic.collectives[i]
              << " all-reduces (" << format_time(traffic.collective_bytes[i])
              << " bytes per member)\n";
  }
}

nlohmann::json traffic_json(const LinkTraffic& traffic) {
  nlohmann::json j;
  for (const LinkClass c : {LinkClass::same_host, LinkClass::across_hosts}) {
    const auto i = static_cast<std::size_t>(c);
    j[c == LinkClass::same_host ? "same_host" : "across_hosts"] = {
        {"messages", traffic.messages[i]},
        {"message_bytes", traffic.message_bytes[i]},
        {"all_reduces", traffic.collectives[i]},
        {"all_reduce_bytes", traffic.collective_bytes[i]}};
  }
  return j;
}

int run_simulate(const CLI::App& app, const SimulateArguments& args) {
  ExpandOptions expand_options;
  if (std::string error; !topology_option(args.topology, expand_options, error)) {
    std::cerr << "pipevm simulate: " << error << "\n";
    return 2;
  }
  Network network;
  HostPlacement placement;
  RunConfig model;
  try {
    model = read_memory_config(args.config_file);
  } catch (const ConfigError& error) {
    std::cerr << "pipevm simulate: " << error.what() << '\n';
    return 2;
  }
  expand_for_model(model, expand_options);
  Costs costs;
  if (!costs_of("simulate", args.cost_file, args.cost_flags, model, costs)) return 2;
  Diagnostics diagnostics;
  ProgramInput input = load_program(app, args.file, args.config, diagnostics, expand_options);
  if (!input.program) {
    print_diagnostics(diagnostics);
    return input.status;
  }
  std::optional<Program> program = std::move(input.program);
  // Requests carried over the step boundary: two steps, so that the
  // exchange one step starts is seen overlapping the next.
  if (!program->carried.empty()) program = unroll_steps(*program, 2);
  if (!network_of(args, model, program->config, network, placement)) return 2;
  const Link linked =
      link(*program, {program->layer_split.empty()
                          ? std::vector<int>{}
                          : piece_boundary_widths(network.layer_widths, program->layer_split)});
  const auto simulation = simulate(*program, linked, costs, diagnostics, network);
  print_diagnostics(diagnostics);
  if (!simulation) return 1;
  if (!finite(*program, simulation->timeline)) {
    std::cerr << "pipevm simulate: the costs overflow: a time of the timeline exceeds the "
                 "largest number (about 1.8e308); give the costs in a larger unit\n";
    return 2;
  }

  const bool on_hosts = !network.host_of_rank.empty();
  const LinkTraffic traffic =
      link_traffic(*program, linked, LinkCosts(*program, linked, costs, network));
  if (args.format == "json") {
    nlohmann::json j = to_json(*simulation);
    j["per_rank"] = bytes_to_json(peak_bytes(*program, memory_shape(model, program->config)));
    if (on_hosts) j["traffic"] = traffic_json(traffic);
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << render_text(*program, *simulation, costs, args.width);
    if (on_hosts) print_traffic(placement, traffic);
  }
  std::string error;
  if (!args.svg.empty() && !write_svg(args.svg, *program, simulation->timeline,
                                      title_of(*program, *simulation), error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return 2;
  }
  if (!args.trace.empty() &&
      !write_chrome_trace(args.trace, *program, simulation->timeline, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return 2;
  }
  return 0;
}

}  // namespace

Command add_simulate_command(CLI::App& root) {
  auto args = std::make_shared<SimulateArguments>();
  Command command;
  command.app = root.add_subcommand(
      "simulate", "Simulate a schedule: timeline, makespan, bubble and memory per stage");
  CLI::App& app = *command.app;
  app.footer(
      "Example:\n"
      "  pipevm simulate schedules/1f1b.pipe --stages 4 --micro-batches 8 --cost fwd=1,bwd=2\n"
      "Without --cost or --costs: fwd=1, bwd-input=1, bwd-weight=1 (so bwd=2), free messages.\n" +
      cost_keys_help() +
      "Exit status: 0 ok, 1 program errors or a deadlock (run `pipevm check`), 2 unreadable\n"
      "file, usage, or costs whose sum overflows.");
  app.add_option("file", args->file, "The schedule (.pipe, or a PyTorch table .csv)")->required();
  add_config_options(app, args->config, false);
  add_memory_config_option(app, args->config_file);
  app.add_option("--cost", args->cost_flags, "Costs as key=value pairs, e.g. fwd=1,bwd=2,send=0.1");
  app.add_option(
      "--costs", args->cost_file,
      "A YAML file of costs (key: value; compute per stage under stages:, as run --profile "
      "writes it); --cost overrides it");
  app.add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--svg", args->svg, "Also write the timeline as an SVG picture to this file");
  app.add_option("--trace", args->trace,
                 "Also write a Chrome/Perfetto trace (JSON; costs read as microseconds)");
  app.add_option("--topology", args->topology, kTopologyHelp);
  app.add_option("--width", args->width, "Columns of the terminal grid")
      ->check(CLI::Range(10, 100000))
      ->capture_default_str();
  add_host_options(app, args->hosts);
  app.add_option("--batch-size", args->batch_size,
                 "Global batch size (default: the configuration's, 128): micro-batch rows = "
                 "batch / (dp x micro-batches)")
      ->check(CLI::PositiveNumber);
  command.run = [args, sub = command.app] { return run_simulate(*sub, *args); };
  return command;
}

}  // namespace pipevm::cli
