// `pipevm check`: the linter. Reads every file named (`-`: standard input),
// checks each for the configurations the command line gives or the file
// declares (api/check_run.hpp), and prints one document for the whole run as
// text, gcc-style lines, JSON or SARIF (check_output.hpp, check_sarif.hpp).
// One exit status for all: 0 clean, 1 findings, 2 usage or unreadable input.
#include <unistd.h>

#include <charconv>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "check_output.hpp"
#include "check_run.hpp"
#include "check_sarif.hpp"
#include "commands.hpp"
#include "cost_options.hpp"
#include "model_bytes.hpp"
#include "number_checks.hpp"
#include "options.hpp"
#include "read_file.hpp"
#include "topology_file.hpp"

namespace pipevm::cli {

namespace {

std::optional<ValueRange> parse_range(const std::string& text) {
  const auto number = [](std::string_view s) -> std::optional<int> {
    int value = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (error != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return value;
  };
  const std::string_view all(text);
  const auto dots = all.find("..");
  if (dots == std::string_view::npos) {
    const auto v = number(all);
    if (!v) return std::nullopt;
    return ValueRange{*v, *v};
  }
  const auto a = number(all.substr(0, dots));
  const auto b = number(all.substr(dots + 2));
  if (!a || !b || *a > *b) return std::nullopt;
  return ValueRange{*a, *b};
}

CLI::Validator range_validator(int low, int high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        const auto r = parse_range(text);
        if (!r) return "expected N or A..B (inclusive, A <= B), got '" + text + "'";
        if (r->first < low || r->last > high) {
          return "values must lie in " + std::to_string(low) + ".." + std::to_string(high);
        }
        return "";
      },
      "N|A..B");
}

struct CheckArguments {
  std::vector<std::string> files;
  std::string stages, micro_batches, dp, chunks;
  std::string format = "text";
  std::string stdin_name = "<stdin>";
  bool skip_unsupported = false;
  std::string config_file;  // --config: the run YAML whose model the bytes count
  std::string p2p_order = "independent";
  std::uint64_t max_configurations = 100'000;
  std::string topology;     // --topology: gossip's, over the schedule's own
};

// Reads `path` (`-`: standard input, named `stdin_name`); null with
// `error` set when it cannot be read.
std::shared_ptr<const SourceFile> read_check_input(const std::string& path,
                                                   const std::string& stdin_name,
                                                   std::string& error) {
  if (path != "-") return api::read_schedule_file(path, error);
  std::ostringstream text;
  text << std::cin.rdbuf();
  if (text.str().size() > kMaxScheduleBytes) {
    error = "standard input is over the " + std::to_string(kMaxScheduleBytes / kMiB) +
            " MiB limit for schedules";
    return nullptr;
  }
  return std::make_shared<const SourceFile>(stdin_name, text.str());
}

std::optional<ValueRange> given(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return parse_range(text);  // the validator accepted it
}

int run_check(const CheckArguments& args) {
  api::SweepRequest request;
  request.stages = given(args.stages);
  request.micro_batches = given(args.micro_batches);
  request.dp = given(args.dp);
  request.chunks = given(args.chunks);
  request.skip_unsupported = args.skip_unsupported;
  request.p2p_posted_order = *config::posted_order(args.p2p_order);
  if (std::string error; !config::topology_option(args.topology, request.expand, error)) {
    std::cerr << "pipevm check: " << error << "\n";
    return 2;
  }
  try {
    const config::RunConfig run =
        config::read_run_config(args.config_file, config::ConfigUse::figures);
    request.model = config::model_bytes(run);
    config::expand_for_model(run, request.expand);
  } catch (const config::ConfigError& error) {
    std::cerr << "pipevm check: " << error.what() << '\n';
    return 2;
  }
  request.max_configurations = args.max_configurations;

  // The ranges given already count too many: refused before any file is read.
  std::uint64_t least = 1;
  std::string given_ranges;
  const std::pair<const char*, const std::string*> flags[] = {
      {"--stages", &args.stages},
      {"--micro-batches", &args.micro_batches},
      {"--dp", &args.dp},
      {"--chunks", &args.chunks}};
  for (const auto& [flag, text] : flags) {
    if (text->empty()) continue;
    const ValueRange range = *parse_range(*text);
    const auto n = static_cast<std::uint64_t>(range.last - range.first) + 1;
    least = least > std::numeric_limits<std::uint64_t>::max() / n
                ? std::numeric_limits<std::uint64_t>::max()
                : least * n;
    given_ranges += std::string(" ") + flag + " " + *text;
  }
  if (least > request.max_configurations) {
    std::cerr << "pipevm check: the sweep" << given_ranges << " has "
              << (least == std::numeric_limits<std::uint64_t>::max() ? "more than 2^64 - 1"
                                                                     : std::to_string(least))
              << " configurations, over the limit of " << request.max_configurations
              << ": narrow the ranges or raise the limit with --max-configurations\n";
    return 2;
  }

  const bool color = isatty(STDOUT_FILENO) != 0;
  std::vector<FileReport> reports;
  bool stdin_read = false;
  for (const std::string& path : args.files) {
    std::string error;
    std::shared_ptr<const SourceFile> file;
    if (path == "-" && stdin_read) {
      error = "standard input ('-') is named more than once";
    } else {
      stdin_read = stdin_read || path == "-";
      file = read_check_input(path, args.stdin_name, error);
    }
    FileReport report;
    if (file) {
      report = api::check_file(file, request);
    } else {
      report.name = path == "-" ? args.stdin_name : path;
      report.usage_error = error;
    }
    // Text and gcc lines go out file by file; JSON and SARIF are one document.
    if (args.format == "text") print_text_report(std::cout, std::cerr, report, color);
    if (args.format == "gcc") print_gcc_report(std::cout, std::cerr, report);
    std::cout.flush();
    if (args.format == "json" || args.format == "sarif") {
      reports.push_back(std::move(report));
    } else {
      // Keep only what the exit status needs.
      FileReport summary;
      summary.usage_error = report.usage_error;
      summary.failing = report.failing + report.errors();
      reports.push_back(std::move(summary));
    }
  }
  if (args.format == "json") std::cout << reports_to_json(reports).dump(1) << '\n';
  if (args.format == "sarif") std::cout << reports_to_sarif(reports).dump(1) << '\n';

  bool unusable = false, findings = false;
  for (const FileReport& r : reports) {
    unusable = unusable || !r.usage_error.empty();
    findings = findings || r.failing > 0 || r.errors() > 0;
  }
  return unusable ? 2 : findings ? 1 : 0;
}

}  // namespace

bool print_check_usage_error(const std::vector<std::string>& arguments,
                             const std::string& message) {
  // CLI11 stopped before the format was known: look for it among the words.
  std::string format;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == "--format" && i + 1 < arguments.size()) format = arguments[i + 1];
    if (arguments[i].rfind("--format=", 0) == 0) format = arguments[i].substr(9);
  }
  if (format == "json") {
    std::cout << usage_error_json(message).dump(1) << '\n';
  } else if (format == "sarif") {
    std::cout << reports_to_sarif({}, {message}).dump(1) << '\n';
  } else {
    return false;
  }
  return true;
}

Command add_check_command(CLI::App& root) {
  auto args = std::make_shared<CheckArguments>();
  Command command;
  command.app = root.add_subcommand(
      "check", "Prove schedules free of deadlock and of mismatched communication");
  CLI::App& app = *command.app;
  app.footer(
      "Examples:\n"
      "  pipevm check schedules/*.pipe            (each for the configurations it declares)\n"
      "  pipevm check schedules/1f1b.pipe --stages 8 --micro-batches 16\n"
      "  pipevm check schedules/1f1b.pipe --stages 2..8 --micro-batches 1..16 --skip-unsupported\n"
      "  cat x.pipe | pipevm check - --format sarif\n"
      "  pipevm check table.csv                    (a PyTorch table: its own configuration)\n"
      "A schedule declares its configurations with `check stages 2..8 micro_batches 4..16`\n"
      "header lines; a range given here replaces the declared one. Ranges A..B are\n"
      "inclusive; every combination is checked (at most --max-configurations). A finding\n"
      "that recurs is printed once, with its ranks and configurations counted.\n"
      "Exit status: 0 clean, 1 findings, 2 unreadable file or usage.");
  app.add_option("files", args->files,
                 "The schedules (.pipe, or PyTorch tables .csv); - reads standard input")
      ->required();
  app.add_option("--stages,-p", args->stages, "Pipeline stages P, or a range A..B")
      ->check(range_validator(1, kMaxStages));
  app.add_option("--micro-batches,-m", args->micro_batches, "Micro-batches M, or a range A..B")
      ->check(range_validator(1, kMaxMicroBatches));
  app.add_option("--dp", args->dp, "Data-parallel replicas D, or a range A..B (default 1)")
      ->check(range_validator(1, kMaxDp));
  app.add_option("--chunks,-v", args->chunks,
                 "Model chunks per rank V, or a range A..B (default 1)")
      ->check(range_validator(1, kMaxChunks));
  app.add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "gcc", "json", "sarif"}))
      ->capture_default_str();
  add_memory_config_option(app, args->config_file);
  add_p2p_order_option(app, args->p2p_order);
  app.add_option("--stdin-filename", args->stdin_name, "The name standard input's findings carry")
      ->capture_default_str();
  app.add_option("--topology", args->topology, kTopologyHelp);
  app.add_flag("--skip-unsupported", args->skip_unsupported,
               "List configurations whose `require` fails as skipped instead of errors "
               "(always so for declared configurations)");
  app.add_option("--max-configurations", args->max_configurations,
                 "Refuse a sweep of more configurations than this (per file)")
      ->check(above(0))
      ->capture_default_str();
  command.run = [args] { return run_check(*args); };
  return command;
}

}  // namespace pipevm::cli
