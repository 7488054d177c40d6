// `pipevm costs`: a cost file (the keys `simulate --costs` and `synthesize
// --costs` read) made from measurements taken elsewhere. Today one source:
// a torch.profiler Chrome trace of a PyTorch pipeline (--from-torch-trace;
// api/trace_costs.hpp). `pipevm run --profile` writes pipevm's own.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "cost_files.hpp"
#include "number_checks.hpp"
#include "read_file.hpp"
#include "trace_costs.hpp"

namespace pipevm::cli {

namespace {

// Chrome traces of long profiles run to hundreds of megabytes.
constexpr std::uint64_t kMaxTraceBytes = 2048 * kMiB;

struct CostsArguments {
  std::string trace;
  std::string output;
  std::string label = std::string(pytorch::kPipelineLabel);
  int skip_steps = 1;
  int chunks = 1;
  std::string placement = "looped";
};

int run_costs(const CostsArguments& args) {
  std::string text;
  std::string error;
  if (!read_input_file(args.trace, kMaxTraceBytes, "traces", text, error)) {
    std::cerr << "pipevm costs: cannot read " << args.trace << ": " << error << '\n';
    return 2;
  }
  api::TraceCostRequest request;
  request.trace.label = args.label;
  request.trace.skip_steps = args.skip_steps;
  request.chunks = args.chunks;
  request.placement = args.placement == "v" ? Placement::v : Placement::looped;
  const auto costs = api::costs_from_torch_trace(text, args.trace, request, error);
  if (!costs) {
    std::cerr << "pipevm costs: " << error << '\n';
    return 2;
  }
  std::ostringstream yaml;
  config::write_costs_yaml(yaml, costs->costs, costs->comment);
  if (args.output.empty()) {
    std::cout << yaml.str();
    return 0;
  }
  std::ofstream file(args.output);
  file << yaml.str();
  file.close();
  if (!file) {
    std::cerr << "pipevm costs: cannot write " << args.output << ": " << std::strerror(errno) << '\n';
    return 2;
  }
  std::cerr << "pipevm costs: wrote " << args.output << " (" << costs->comment << ")\n";
  return 0;
}

}  // namespace

Command add_costs_command(CLI::App& root) {
  auto args = std::make_shared<CostsArguments>();
  Command command;
  command.app = root.add_subcommand(
      "costs", "Write a cost file (for simulate and synthesize --costs) from a PyTorch profile");
  CLI::App& app = *command.app;
  app.footer(
      "Example:\n"
      "  pipevm costs --from-torch-trace trace.json -o costs.yaml\n"
      "  pipevm synthesize --costs costs.yaml -p 4 -m 8 -o best.pipe\n"
      "The trace is torch.profiler's Chrome trace (prof.export_chrome_trace) of a\n"
      "pipeline run by torch.distributed.pipelining, whose runtime names every pass\n"
      "`PP:<stage><F|B|I|W><mb>`; label your own passes the same way with\n"
      "torch.profiler.record_function, or give --label. The file holds, per stage\n"
      "(and per chunk), the median microseconds of each pass kind.\n"
      "Exit status: 0 written, 2 unreadable trace or usage.");
  app.add_option("--from-torch-trace", args->trace, "The torch.profiler Chrome trace (JSON) to read")
      ->required();
  app.add_option("--output,-o", args->output, "Where to write the cost file (default: stdout)");
  app.add_option("--label", args->label,
                 "Regular expression for event names, with named groups stage, kind (F, B, I, "
                 "W) and mb")
      ->capture_default_str();
  app.add_option("--skip-steps", args->skip_steps,
                 "Steps left out at the start (warm-up); a label's k-th occurrence is step k")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--chunks", args->chunks,
                 "Model chunks per rank: PyTorch's stages are ranks x chunks")
      ->check(above(0))
      ->capture_default_str();
  app.add_option("--placement", args->placement, "How PyTorch's stages sit on ranks with chunks")
      ->check(CLI::IsMember({"looped", "v"}))
      ->capture_default_str();
  command.run = [args] { return run_costs(*args); };
  return command;
}

}  // namespace pipevm::cli
