// `pipevm simulate`: a schedule's timeline under a cost model, as a terminal
// grid with makespan, bubble and memory per stage, or as JSON; optionally an
// SVG picture and a Chrome/Perfetto trace; with --hosts or --hostfile, the
// ranks' hosts (--layout) and what crosses them. Proving the schedule
// correct is `pipevm check`'s job: the simulator only stops where it cannot
// go on.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "compile.hpp"
#include "cost_options.hpp"
#include "costs.hpp"
#include "hosts_options.hpp"
#include "layer_costs.hpp"
#include "model_bytes.hpp"
#include "options.hpp"
#include "run_config.hpp"
#include "simulate_run.hpp"
#include "topology_file.hpp"

namespace pipevm::cli {

namespace {

struct SimulateArguments {
  std::string file;
  Config config;
  config::CostInputs costs;
  std::string config_file;  // --config: the model whose bytes are counted, its costs
  std::string format = "text";
  std::string svg;
  std::string trace;
  int width = 100;
  config::HostRequest hosts;
  int batch_size = 0;  // 0: the run configuration's (128 by default)
  std::string topology;
  std::string p2p_order = "independent";
};

void print_diagnostics(const Diagnostics& diagnostics) {
  const bool color = isatty(STDERR_FILENO) != 0;
  for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, color);
}

// The hosts of the ranks; false (after saying why) on bad input.
bool hosts_of(const SimulateArguments& args, const Config& c, config::HostPlacement& placement) {
  std::string error;
  if (!config::place_on_hosts(args.hosts, c, placement, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return false;
  }
  return true;
}

// The placement and, per link class, what one step sends over it.
// Per-layer costs: which cut timed the pieces, and each stage's activation
// bytes at their peak (the most over its replicas).
void print_layer_cut(const Program& program, const LayerCutCosts& by_layers) {
  std::cout << "\nper-layer costs, each piece timed over " << describe_cut(by_layers) << '\n';
  std::cout << "stage  layers  activation bytes at peak\n";
  const Config& c = program.config;
  for (int s = 0; s < c.stages; ++s) {
    double peak = 0;
    for (int d = 0; d < c.dp; ++d) {
      peak = std::max(peak, by_layers.peak_activation_bytes[static_cast<std::size_t>(rank_of(c, d, s))]);
    }
    std::string layers;
    for (int chunk = 0; chunk < chunks_per_rank(program.placement, c); ++chunk) {
      const LayerRange range =
          by_layers.cut[static_cast<std::size_t>(piece_at(position_of(program.placement, c, s, chunk)))];
      layers += (layers.empty() ? "" : ",") + cut_text({range});
    }
    char line[96];
    std::snprintf(line, sizeof line, "%5d  %6s  %24.0f\n", s, layers.c_str(), peak);
    std::cout << line;
  }
}

void print_traffic(const config::HostPlacement& placement, const LinkTraffic& traffic) {
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
  if (std::string error; !config::topology_option(args.topology, expand_options, error)) {
    std::cerr << "pipevm simulate: " << error << "\n";
    return 2;
  }
  config::HostPlacement placement;
  config::RunConfig model;
  try {
    model = config::read_run_config(args.config_file, config::ConfigUse::figures);
  } catch (const config::ConfigError& error) {
    std::cerr << "pipevm simulate: " << error.what() << '\n';
    return 2;
  }
  config::expand_for_model(model, expand_options);
  api::SimulateRequest request;
  request.model = config::model_bytes(model);
  request.message_batch_size = args.batch_size;
  if (std::string error; !config::compose_costs(args.costs, model.costs, request.costs, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return 2;
  }
  request.options.p2p_posted_order = *config::posted_order(args.p2p_order);
  Diagnostics diagnostics;
  ProgramInput input = load_program(app, args.file, args.config, diagnostics, expand_options);
  if (!input.program) {
    print_diagnostics(diagnostics);
    return input.status;
  }
  if (!hosts_of(args, input.program->config, placement)) return 2;
  request.host_of_rank = placement.host_of_rank;
  const api::SimulateOutcome outcome = api::simulate_program(*input.program, request, diagnostics);
  print_diagnostics(diagnostics);
  if (!outcome.run) {
    if (!outcome.usage_error.empty()) {
      std::cerr << "pipevm simulate: " << outcome.usage_error << '\n';
    }
    return outcome.status;
  }
  const api::SimulateRun& run = *outcome.run;
  if (args.format == "json") {
    nlohmann::json j = to_json(run.simulation);
    j["per_rank"] = bytes_to_json(run.bytes);
    if (run.on_hosts) j["traffic"] = traffic_json(run.traffic);
    if (run.by_layers) {
      j["layer_cut"] = {{"cut", cut_text(run.by_layers->cut)},
                        {"declared", run.by_layers->declared},
                        {"peak_activation_bytes", run.by_layers->peak_activation_bytes}};
    }
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << render_text(run.program, run.simulation, request.costs, args.width);
    if (run.by_layers) print_layer_cut(run.program, *run.by_layers);
    if (run.on_hosts) print_traffic(placement, run.traffic);
  }
  std::string error;
  if (!args.svg.empty() && !api::write_timeline_svg(args.svg, run, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return 2;
  }
  if (!args.trace.empty() && !api::write_timeline_trace(args.trace, run, error)) {
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
  add_cost_options(app, args->costs, args->p2p_order);
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
