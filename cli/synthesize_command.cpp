// `pipevm synthesize`: the least-bubble schedule for given costs and a
// memory limit, written as a flat program (or a PyTorch table with comms)
// whose header records the inputs, the command and the predicted figures;
// with --lower, an existing compute order with its communication placed.
// The search and the checks are the library's (synthesize/synthesize.hpp);
// this file reads options and writes.
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "cost_inputs.hpp"
#include "cost_options.hpp"
#include "cut_search.hpp"
#include "header.hpp"
#include "model_bytes.hpp"
#include "number_checks.hpp"
#include "options.hpp"
#include "schedule_input.hpp"
#include "simulate_costs.hpp"
#include "synthesize.hpp"
#include "torch_csv.hpp"

namespace pipevm::cli {

namespace {

struct SynthesizeArguments {
  Config config;
  std::string placement = "looped";
  config::CostInputs costs;
  std::string config_file;
  std::string p2p_order = "any";  // recorded in the header as given
  std::string memory_limit_text;  // a number of M_B, or bytes with a unit (2GiB)
  double memory_limit = 0;         // M_B, when given so
  std::uint64_t memory_bytes = 0;  // bytes, when given so
  double weight_memory = 1;
  std::string memory_policy = "any";
  double time_limit = 5;
  int max_moves = 0;
  std::string output;
  std::string format = "pipe";
  std::string lower;
  std::string cut;  // with per-layer costs: "even", a cut, or "" (chosen with the order)
};

// The command as typed, for the header: every option that was given.
std::string command_of(const CLI::App& app) {
  std::string text = "pipevm synthesize";
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_name() == "--help") continue;
    text += ' ';
    text += option->get_name();
    for (const std::string& value : option->results()) text += ' ' + value;
  }
  return text;
}

bool write_output(const SynthesizeArguments& args, const std::string& text) {
  if (args.output.empty()) {
    std::cout << text;
    return true;
  }
  errno = 0;
  std::ofstream file(args.output);
  file << text;
  file.close();
  if (!file) {
    std::cerr << "pipevm synthesize: cannot write " << args.output
              << (errno != 0 ? ": " + std::string(std::strerror(errno)) : "") << '\n';
    return false;
  }
  return true;
}

// The compute order of --lower's file, or nullopt after saying why; the
// program it was read from in `given`.
std::optional<synthesis::ComputeOrder> order_to_lower(const CLI::App& app,
                                                      const SynthesizeArguments& args,
                                                      std::optional<Program>& given, int& status) {
  Diagnostics diagnostics;
  const ProgramInput input = load_program(app, args.lower, args.config, diagnostics);
  for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, isatty(STDERR_FILENO) != 0);
  if (!input.program) {
    status = input.status;
    return std::nullopt;
  }
  std::string error;
  auto order = synthesis::compute_order_of(*input.program, error);
  if (!order) {
    std::cerr << "pipevm synthesize: " << args.lower << ": " << error << '\n';
    status = 2;
  }
  given = std::move(input.program);
  return order;
}

int run_synthesize(const CLI::App& app, SynthesizeArguments args) {
  if (!args.memory_limit_text.empty() &&
      !config::parse_memory_limit(args.memory_limit_text, args.memory_limit, args.memory_bytes)) {
    std::cerr << "pipevm synthesize: --memory-limit " << args.memory_limit_text
              << ": expected a number of micro-batch activations (4, 2.5) or bytes with a unit "
                 "(2GiB, 500MB)\n";
    return 2;
  }
  config::RunConfig model;
  try {
    model = config::read_run_config(args.config_file, config::ConfigUse::figures);
  } catch (const config::ConfigError& error) {
    std::cerr << "pipevm synthesize: " << error.what() << '\n';
    return 2;
  }
  Costs costs;
  std::string error;
  if (!config::compose_costs(args.costs, model.costs, costs, error)) {
    std::cerr << "pipevm synthesize: " << error << '\n';
    return 2;
  }
  if (!args.cut.empty() && (costs.layers.empty() || !args.lower.empty())) {
    std::cerr << "pipevm synthesize: --cut needs per-layer costs (a cost file with `layers:`, "
                 "docs/simulator.md) and no --lower\n";
    return 2;
  }
  std::optional<synthesis::Result> result;
  std::optional<synthesis::CutResult> cut;
  if (!args.lower.empty()) {
    int status = 0;
    std::optional<Program> given;
    const auto order = order_to_lower(app, args, given, status);
    if (!order) return status;
    result = synthesis::lower(*order, costs, args.weight_memory, error, &*given);
  } else {
    if (app.count("--stages") == 0 || app.count("--micro-batches") == 0) {
      std::cerr << "pipevm synthesize: --stages and --micro-batches are required (or --lower FILE)\n";
      return 2;
    }
    synthesis::Request request;
    request.placement = args.placement == "v" ? Placement::v : Placement::looped;
    request.config = args.config;
    request.costs = costs;
    request.memory_limit = args.memory_limit;
    request.memory_bytes = args.memory_bytes;
    request.memory_shape = config::memory_shape(config::model_bytes(model), args.config);
    request.weight_memory = args.weight_memory;
    request.memory_policy = *synthesis::memory_policy_named(args.memory_policy);
    // PyTorch's table has no recomputation or offload: keep, unless asked.
    if (args.format == "torch-csv" && app.count("--memory-policy") == 0) {
      request.memory_policy = synthesis::MemoryPolicy::keep;
    }
    request.time_limit_seconds = args.time_limit;
    request.move_limit = args.max_moves;
    if (isatty(STDERR_FILENO) != 0) {
      request.progress = [](const synthesis::Progress& p) {
        std::cerr << "\rsynthesize: best makespan " << format_time(p.best_makespan) << " after "
                  << p.evaluations << " simulations, " << format_time(p.elapsed_seconds) << " s   "
                  << std::flush;
      };
    }
    if (costs.layers.empty()) {
      result = synthesis::synthesize(request, error);
    } else if (const auto cut_request = synthesis::cut_request_of(request, args.cut, error)) {
      cut = synthesis::synthesize_cut(*cut_request, error);
      if (cut) result = cut->result;
    }
    if (request.progress) std::cerr << '\n';
  }
  if (!result) {
    std::cerr << "pipevm synthesize: " << error << '\n';
    return 2;
  }
  for (const std::string& warning :
       api::unset_cost_warnings(result->program, config::given_cost_keys(args.costs, model.costs))) {
    std::cerr << "pipevm synthesize: warning: " << warning << '\n';
  }
  if (args.format == "torch-csv") {
    for (const synthesis::PolicyCounts& c : result->policy_counts) {
      if (c.recomputed + c.offloaded > 0) {
        std::cerr << "pipevm synthesize: the result recomputes or offloads, which PyTorch's table "
                     "cannot say: use --memory-policy keep or --format pipe\n";
        return 2;
      }
    }
    const auto table = pytorch::to_table(result->program, true, error);
    if (!table) {
      std::cerr << "pipevm synthesize: " << error << '\n';
      return 2;
    }
    return write_output(args, pytorch::write_table(*table)) ? 0 : 2;
  }
  synthesis::HeaderInputs inputs;
  inputs.command = command_of(app);
  inputs.costs = costs;
  inputs.memory_limit = args.memory_limit;
  inputs.memory_bytes = args.memory_bytes;
  inputs.memory_model =
      args.config_file.empty() ? std::string("pipevm run's defaults") : args.config_file;
  inputs.weight_memory = args.weight_memory;
  inputs.p2p_order = args.p2p_order;
  inputs.memory_policy = *synthesis::memory_policy_named(args.memory_policy);
  if (cut) synthesis::record_cut(*cut, inputs);
  const std::string text = synthesis::header(inputs, *result) + result->text;
  if (!write_output(args, text)) return 2;
  if (!args.output.empty())
    std::cerr << "pipevm synthesize: " << synthesis::summary(args.output, *result) << '\n';
  return 0;
}

}  // namespace

Command add_synthesize_command(CLI::App& root) {
  auto args = std::make_shared<SynthesizeArguments>();
  Command command;
  command.app = root.add_subcommand(
      "synthesize",
      "Search the least-bubble schedule for costs and a memory limit; write it as a checked program");
  CLI::App& app = *command.app;
  app.footer(
      "Example:\n"
      "  pipevm synthesize -p 4 -m 8 --cost fwd=1,bwd-input=1,bwd-weight=1 --memory-limit 4 -o s.pipe\n"
      "  pipevm synthesize --lower zb.csv -o zb.pipe   (keep the compute order, place communication)\n"
      "  pipevm synthesize -p 2 -m 8 --memory-limit 1 --memory-policy any --cost recompute=1,host-latency=0.2\n"
      "The search times candidates under --transfer with receives posted early (a transfer\n"
      "starts when its send does); --p2p-order is recorded in the header, and the program is\n"
      "checked under both progress models.\n" +
      cost_keys_help() +
      "Exit status: 0 written, 1 errors in the --lower file, 2 usage, unreadable input, an\n"
      "unwritable output or a request no schedule meets.");
  add_config_options(app, args->config, false);
  app.add_option("--placement", args->placement, "Chunk placement when --chunks > 1")
      ->check(CLI::IsMember({"looped", "v"}))
      ->capture_default_str();
  add_cost_options(app, args->costs, args->p2p_order);
  add_memory_config_option(app, args->config_file);
  app.add_option("--memory-limit", args->memory_limit_text,
                 "Activations a stage may hold, in micro-batch activations M_B (0: no limit); or "
                 "bytes per stage with a unit (2GiB, 500MB), counted as `check` counts peak_bytes "
                 "for --config's model. With per-layer costs, bytes per stage (with or without a "
                 "unit): the stage's layers' parameter-bytes plus the activation bytes it holds");
  app.add_option("--cut", args->cut,
                 "With per-layer costs (`layers:`): `even`, or the layers of each piece "
                 "(0-2,3-4,5-6, pieces in the order the placement runs them); default: chosen "
                 "with the order");
  app.add_option("--weight-memory", args->weight_memory,
                 "R = M_W / M_B: what a backward-input leaves for its weight pass")
      ->check(in_range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--memory-policy", args->memory_policy,
                 "What a stage may do with a stash under --memory-limit besides keeping it: "
                 "keep (only), recompute (FwdCheckpoint/Recompute), offload (Offload/Reload to "
                 "host memory), any (default; keep with --format torch-csv, whose table has no such "
                 "actions)")
      ->check(CLI::IsMember({"keep", "recompute", "offload", "any"}))
      ->capture_default_str();
  app.add_option("--time-limit", args->time_limit, "Seconds for the improvement step")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--max-moves", args->max_moves,
                 "Local-search moves simulated at most (0: until --time-limit); the same result "
                 "on any machine when the time limit does not end the search first")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("-o,--output", args->output, "Write here (default: stdout)");
  app.add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"pipe", "torch-csv"}))
      ->capture_default_str();
  app.add_option("--lower", args->lower,
                 "Keep this program's compute order (.pipe, or a PyTorch compute-only .csv) and "
                 "only place its communication");
  command.run = [args, sub = command.app] { return run_synthesize(*sub, *args); };
  return command;
}

}  // namespace pipevm::cli
