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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "compile.hpp"
#include "cost_inputs.hpp"
#include "cost_options.hpp"
#include "costs.hpp"
#include "hosts_options.hpp"
#include "layer_costs.hpp"
#include "model_bytes.hpp"
#include "number_checks.hpp"
#include "options.hpp"
#include "run_config.hpp"
#include "schedule_input.hpp"
#include "simulate_compare.hpp"
#include "simulate_costs.hpp"
#include "simulate_run.hpp"
#include "topology_file.hpp"

namespace pipevm::cli {

namespace {

struct SimulateArguments {
  std::vector<std::string> files;
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

// A synthesized program is timed with the costs its header records when
// none are given; said on stderr, since the figures depend on it.
config::CostInputs costs_or_recorded(const SimulateArguments& args, const std::string& path,
                                     bool configured) {
  const config::CostInputs& given = args.costs;
  if (configured || !given.file.empty() || !given.flags.empty() || given.values ||
      !given.transfer.empty()) {
    return given;
  }
  Diagnostics ignored;
  const auto file = read_source(path, ignored);
  config::CostInputs recorded = given;
  if (file) recorded.flags = api::recorded_cost_flags(*file);
  if (!recorded.flags.empty()) {
    std::cerr << "pipevm simulate: timing with the costs " << path
              << "'s header records (--cost or --costs overrides them)\n";
  } else if (file && api::synthesized_header(*file)) {
    std::cerr << "pipevm simulate: note: " << path
              << " was synthesized with per-stage or per-layer costs, which its header does not "
                 "record: timing with the defaults; give the same --costs FILE for its figures\n";
  }
  return recorded;
}

// What every file of one `simulate` is timed with: the model whose bytes
// count, the costs as the user gave them, the expansion options.
struct Setting {
  config::RunConfig model;
  ExpandOptions expand_options;
};

// One file simulated with the flags; nullopt after saying why, with the
// exit status in `status`.
std::optional<api::SimulateRun> simulate_file(const CLI::App& app, const SimulateArguments& args,
                                              const std::string& file, const Setting& setting,
                                              config::HostPlacement& placement, Costs& used,
                                              int& status) {
  const config::CostInputs costs = costs_or_recorded(args, file, !setting.model.costs.empty());
  api::SimulateRequest request;
  request.model = config::model_bytes(setting.model);
  request.message_batch_size = args.batch_size;
  status = 2;
  if (std::string error; !config::compose_costs(costs, setting.model.costs, request.costs, error)) {
    std::cerr << "pipevm simulate: " << error << '\n';
    return std::nullopt;
  }
  request.options.p2p_posted_order = *config::posted_order(args.p2p_order);
  Diagnostics diagnostics;
  ProgramInput input = load_program(app, file, args.config, diagnostics, setting.expand_options);
  if (!input.program) {
    print_diagnostics(diagnostics);
    status = input.status;
    return std::nullopt;
  }
  const std::vector<std::string> given = config::given_cost_keys(costs, setting.model.costs);
  request.costs = api::fitted_costs(*input.program, request.costs, given);
  for (const std::string& warning : api::unset_cost_warnings(*input.program, given)) {
    std::cerr << "pipevm simulate: warning: " << warning << '\n';
  }
  if (const std::string note = api::chunk_cost_note(*input.program, given); !note.empty()) {
    std::cerr << "pipevm simulate: note: " << file << ": " << note << '\n';
  }
  if (!hosts_of(args, input.program->config, placement)) return std::nullopt;
  request.host_of_rank = placement.host_of_rank;
  api::SimulateOutcome outcome = api::simulate_program(*input.program, request, diagnostics);
  print_diagnostics(diagnostics);
  if (!outcome.run) {
    if (!outcome.usage_error.empty()) {
      std::cerr << "pipevm simulate: " << outcome.usage_error << '\n';
    }
    status = outcome.status;
    return std::nullopt;
  }
  used = request.costs;
  status = 0;
  return std::move(outcome.run);
}

// Several files: one row each, the figures side by side.
int compare_files(const CLI::App& app, const SimulateArguments& args, const Setting& setting) {
  std::vector<api::ComparedRun> rows;
  for (const std::string& file : args.files) {
    config::HostPlacement placement;
    Costs used;
    int status = 0;
    const std::optional<api::SimulateRun> run =
        simulate_file(app, args, file, setting, placement, used, status);
    if (!run) return status;
    rows.push_back({file, *run});
  }
  if (args.format == "json") {
    std::cout << api::comparison_json(rows).dump(2) << '\n';
  } else {
    std::cout << api::comparison_text(rows);
  }
  return 0;
}

int run_simulate(const CLI::App& app, const SimulateArguments& args) {
  if (args.files.size() > 1 && (!args.svg.empty() || !args.trace.empty())) {
    std::cerr << "pipevm simulate: --svg and --trace draw one schedule; give one file\n";
    return 2;
  }
  for (const std::string& output : {args.svg, args.trace}) {
    if (std::string error; !output.empty() && !can_write(output, error)) {
      std::cerr << "pipevm simulate: " << error << "\n";
      return 2;
    }
  }
  Setting setting;
  if (std::string error; !config::topology_option(args.topology, setting.expand_options, error)) {
    std::cerr << "pipevm simulate: " << error << "\n";
    return 2;
  }
  try {
    setting.model = config::read_run_config(args.config_file, config::ConfigUse::figures);
  } catch (const config::ConfigError& error) {
    std::cerr << "pipevm simulate: " << error.what() << '\n';
    return 2;
  }
  config::expand_for_model(setting.model, setting.expand_options);
  if (args.files.size() > 1) return compare_files(app, args, setting);
  config::HostPlacement placement;
  Costs costs;
  int status = 0;
  const std::optional<api::SimulateRun> simulated =
      simulate_file(app, args, args.files.front(), setting, placement, costs, status);
  if (!simulated) return status;
  const api::SimulateRun& run = *simulated;
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
    std::cout << render_text(run.program, run.simulation, costs, args.width);
    // With per-layer costs the bytes are the layers' (print_layer_cut), not
    // the configured model's.
    if (run.by_layers) {
      print_layer_cut(run.program, *run.by_layers);
    } else {
      std::cout << api::peak_bytes_line(run.bytes);
    }
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
      "  pipevm simulate schedules/1f1b.pipe schedules/zb-h1.pipe -p 4 -m 8   (one table)\n"
      "Without --cost or --costs: a stage's forward takes 1 and its backward 2 (bwd-input=1,\n"
      "bwd-weight=1), split evenly over its chunks (so --chunks 2: fwd=0.5 per chunk), free\n"
      "messages; a synthesized program's header costs when it records them. Given costs are\n"
      "per chunk.\n" +
      cost_keys_help() +
      "Exit status: 0 ok, 1 program errors or a deadlock (run `pipevm check`), 2 unreadable\n"
      "file, usage, or costs whose sum overflows.");
  app.add_option("files", args->files,
                 "The schedule (.pipe, or a PyTorch table .csv); several: one table comparing "
                 "their makespan, bubble and peak bytes under the same flags")
      ->required();
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
      ->check(in_range(10, 100000))
      ->capture_default_str();
  add_host_options(app, args->hosts);
  app.add_option("--batch-size", args->batch_size,
                 "Global batch size (default: the configuration's, 128): micro-batch rows = "
                 "batch / (dp x micro-batches)")
      ->check(above(0));
  command.run = [args, sub = command.app] { return run_simulate(*sub, *args); };
  return command;
}

}  // namespace pipevm::cli
