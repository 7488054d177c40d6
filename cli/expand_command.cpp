// `pipevm expand`: a schedule's per-rank instruction streams, as text in the
// language's own syntax (each rank a `stage S { ... }` block that parses back
// to the same stream) or as JSON; with --hosts or --hostfile, each rank's host
// (--layout) and which messages and all-reduces cross hosts, as comments or
// JSON fields. Checking and running are other commands.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "compile.hpp"
#include "expand_text.hpp"
#include "hosts_options.hpp"
#include "layer_costs.hpp"
#include "model_bytes.hpp"
#include "options.hpp"
#include "torch_csv.hpp"

namespace pipevm::cli {

namespace {

struct ExpandArguments {
  std::string file;
  Config config;
  int rank = -1;
  std::string format = "text";
  bool with_comms = false;
  std::uint64_t max_instructions = ExpandOptions{}.max_instructions;
  config::HostRequest hosts;
  std::string config_file;  // --config: the model `layer` operands name
};

void print_diagnostics(const Diagnostics& diagnostics) {
  const bool color = isatty(STDERR_FILENO) != 0;
  for (const Diagnostic& d : diagnostics.all()) print_text(std::cerr, d, color);
}

// The PyTorch table of the program (pytorch/torch_csv.hpp), for _load_csv.
int print_torch_csv(const Program& program, bool with_comms) {
  std::string error;
  const auto table = pytorch::to_table(program, with_comms, error);
  if (!table) {
    std::cerr << "pipevm expand: " << error << '\n';
    return 2;
  }
  std::cout << pytorch::write_table(*table);
  return 0;
}

nlohmann::json instruction_json(const Program& program, const Instruction& in) {
  nlohmann::json j;
  j["op"] = name(in.op);
  const OperandParts parts = operand_parts(in.op);
  if (parts.direction) j["direction"] = name(in.direction);
  if (parts.kind) j["kind"] = name(in.kind);
  if (parts.micro_batch) j["mb"] = in.micro_batch;
  if (parts.chunk) j["chunk"] = in.chunk;
  if (parts.layer && layer_of(in) != kNoLayer) j["layer"] = layer_of(in);
  if (parts.second_cell) {
    j["second_mb"] = second_cell(in).micro_batch;
    j["second_chunk"] = second_cell(in).chunk;
  }
  if (parts.peer) {
    j["peer"] = in.peer;
    j["explicit_peer"] = in.explicit_peer();
  }
  if (parts.group) j["group"] = name(group_of(in));
  const LineColumn at = program.file->position(program.source_of(in).begin);
  j["line"] = at.line;
  j["column"] = at.column;
  return j;
}

// Streams one instruction object per line: a whole Program can hold tens of
// millions of instructions, too many to build as one JSON value first.
void print_json_program(const Program& program, int only_rank, const api::HostView* hosts) {
  const Config& c = program.config;
  nlohmann::json head;
  head["schedule"] = program.name;
  head["placement"] = name(program.placement);
  if (!program.cut.empty()) head["cut"] = cut_text(program.cut);
  head["configuration"] = {
      {"stages", c.stages}, {"micro_batches", c.micro_batches}, {"dp", c.dp}, {"chunks", c.chunks}};
  std::string text = head.dump();
  text.pop_back();  // reopen the object to append "ranks"
  std::cout << text << ",\n\"ranks\": [";
  bool first_rank = true;
  for (int r = 0; r < program.ranks(); ++r) {
    if (only_rank >= 0 && r != only_rank) continue;
    std::cout << (first_rank ? "\n" : ",\n") << "{\"rank\": " << r
              << ", \"stage\": " << stage_of(c, r) << ", \"dp_rank\": " << dp_rank_of(c, r);
    if (hosts != nullptr) std::cout << ", \"host\": " << nlohmann::json(hosts->host(r)).dump();
    std::cout << ", \"instructions\": [";
    first_rank = false;
    bool first = true;
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    for (std::size_t i = begin; i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      nlohmann::json j = instruction_json(program, program.code[i]);
      if (hosts != nullptr) {
        const std::string crossing = hosts->crossing(program, i);
        if (!crossing.empty()) j["across_hosts"] = crossing;
      }
      std::cout << (first ? "\n  " : ",\n  ") << j.dump();
      first = false;
    }
    std::cout << "]}";
  }
  std::cout << "]}\n";
}

int run_expand(const CLI::App& app, const ExpandArguments& args) {
  if (args.rank >= 0 && args.format == "torch-csv") {
    std::cerr << "pipevm expand: --format torch-csv writes every rank: drop --rank\n";
    return 2;
  }
  if (!pytorch::is_csv_path(args.file) && app.count("--stages") > 0 &&
      args.rank >= args.config.ranks()) {
    std::cerr << "pipevm expand: --rank " << args.rank << " is not a rank: there are "
              << args.config.ranks() << " (dp * stages)\n";
    return 2;
  }
  Diagnostics diagnostics;
  ExpandOptions options;
  options.only_rank = args.rank;
  options.max_instructions = args.max_instructions;
  try {
    config::expand_for_model(
        config::read_run_config(args.config_file, config::ConfigUse::figures), options);
  } catch (const config::ConfigError& error) {
    std::cerr << "pipevm expand: " << error.what() << '\n';
    return 2;
  }
  const ProgramInput input = load_program(app, args.file, args.config, diagnostics, options);
  print_diagnostics(diagnostics);
  if (!input.program) return input.status;
  const Program& program = *input.program;
  if (args.rank >= program.ranks()) {
    std::cerr << "pipevm expand: --rank " << args.rank << " is not a rank: the table has "
              << program.ranks() << "\n";
    return 2;
  }
  config::HostPlacement placement;
  std::string error;
  if (!config::place_on_hosts(args.hosts, program.config, placement, error)) {
    std::cerr << "pipevm expand: " << error << '\n';
    return 2;
  }
  std::unique_ptr<api::HostView> hosts;
  if (!placement.host_of_rank.empty() && args.rank < 0) {
    hosts = std::make_unique<api::HostView>(program, placement);
  }
  if (args.format == "json") {
    print_json_program(program, args.rank, hosts.get());
  } else if (args.format == "torch-csv") {
    return print_torch_csv(program, args.with_comms);
  } else {
    std::cout << api::expanded_text(program, args.rank, pytorch::is_csv_path(args.file),
                                    hosts.get());
  }
  return 0;
}

}  // namespace

Command add_expand_command(CLI::App& root) {
  auto args = std::make_shared<ExpandArguments>();
  Command command;
  command.app = root.add_subcommand(
      "expand", "Print each rank's instruction stream, in the schedule language or as JSON");
  CLI::App& app = *command.app;
  app.footer(
      "Example:\n"
      "  pipevm expand schedules/1f1b.pipe --stages 4 --micro-batches 8 --rank 3\n"
      "  pipevm expand schedules/zb-h1.pipe -p 4 -m 8 --format torch-csv > zb.csv\n"
      "  pipevm expand zb.csv > zb.pipe    (a PyTorch table as a flat pipevm program)\n"
      "Each rank prints as a `stage S { ... }` block: the output is itself a\n"
      "schedule. Exit status: 0 ok, 1 errors in the program, 2 unreadable file or usage.");
  app.add_option("file", args->file, "The schedule (.pipe, or a PyTorch table .csv)")->required();
  add_config_options(app, args->config, false);
  add_memory_config_option(app, args->config_file);
  app.add_option("--rank,-r", args->rank, "Expand only this world rank (dp_rank * stages + stage)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json", "torch-csv"}))
      ->capture_default_str();
  app.add_flag("--with-comms", args->with_comms,
               "torch-csv: also write the sends and receives between ranks (PyTorch's "
               "compute_comms format); without it the table is compute only");
  app.add_option("--max-instructions", args->max_instructions,
                 "Stop with PV1010 past this many instructions (all ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_host_options(app, args->hosts);
  command.run = [args, sub = command.app] { return run_expand(*sub, *args); };
  return command;
}

}  // namespace pipevm::cli
