// `pipevm check`: the linter. Parses a schedule once, expands it for one
// configuration or a sweep of them (--stages 2..8 --micro-batches 1..16, at
// most --max-configurations), runs the checker on each, and hands each
// result to check_output.hpp to print as text with source excerpts,
// gcc-style lines, JSON or SARIF. The checking itself is
// interpreter/check.hpp; this file only drives.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "check_output.hpp"
#include "commands.hpp"
#include "compile.hpp"
#include "options.hpp"

#ifndef PIPEVM_VERSION
#define PIPEVM_VERSION "unknown"
#endif

namespace pipevm::cli {

namespace {

// An inclusive range of values, from "A" or "A..B".
struct ValueRange {
  int first = 1;
  int last = 1;
};

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
  std::string file;
  std::string stages;
  std::string micro_batches;
  std::string dp = "1";
  std::string chunks = "1";
  std::string format = "text";
  bool skip_unsupported = false;
  std::uint64_t max_configurations = 100'000;
  std::string topology;
};

std::uint64_t count_of(const ValueRange& range) {
  return static_cast<std::uint64_t>(range.last) - static_cast<std::uint64_t>(range.first) + 1;
}

// The number of configurations, saturating (2^64 - 1 stands for "more").
std::uint64_t sweep_size(std::initializer_list<ValueRange> ranges) {
  std::uint64_t size = 1;
  for (const ValueRange& range : ranges) {
    const std::uint64_t n = count_of(range);
    size = size > std::numeric_limits<std::uint64_t>::max() / n
               ? std::numeric_limits<std::uint64_t>::max()
               : size * n;
  }
  return size;
}

std::string range_text(const ValueRange& range) {
  return range.first == range.last
             ? std::to_string(range.first)
             : std::to_string(range.first) + ".." + std::to_string(range.last);
}

ConfigurationResult check_one(const Schedule& schedule, const Config& config, bool skip_unsupported,
                              const ExpandOptions& options) {
  ConfigurationResult out;
  out.config = config;
  Diagnostics diagnostics;
  const std::optional<Program> program = expand(schedule, config, diagnostics, options);
  out.diagnostics = diagnostics.all();
  if (!program) {
    const bool unsupported =
        !out.diagnostics.empty() &&
        std::all_of(out.diagnostics.begin(), out.diagnostics.end(),
                    [](const Diagnostic& d) { return d.kind == DiagnosticKind::RequireFailed; });
    out.verdict = unsupported && skip_unsupported ? Verdict::skipped : Verdict::error;
    return out;
  }
  CheckResult result = check(*program);
  for (Diagnostic& d : result.diagnostics) out.diagnostics.push_back(std::move(d));
  out.memory = std::move(result.memory);
  out.suppressed = result.suppressed;
  out.instructions = result.instructions;
  const bool errors =
      std::any_of(out.diagnostics.begin(), out.diagnostics.end(),
                  [](const Diagnostic& d) { return d.severity == Severity::error; });
  out.verdict = errors || out.suppressed > 0 ? Verdict::error : Verdict::ok;
  return out;
}

void print_parse_failure(const CheckArguments& args, const Diagnostics& diagnostics) {
  if (args.format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const Diagnostic& d : diagnostics.all()) list.push_back(to_json(d));
    std::cout << nlohmann::json{{"results", nlohmann::json::array()}, {"diagnostics", list}}.dump(1)
              << '\n';
  } else if (args.format == "sarif") {
    std::cout << to_sarif(diagnostics.all(), PIPEVM_VERSION).dump(1) << '\n';
  } else {
    for (const Diagnostic& d : diagnostics.all()) {
      if (args.format == "gcc") {
        print_gcc(std::cout, d);
      } else {
        pipevm::print_text(std::cout, d, isatty(STDOUT_FILENO) != 0);
      }
    }
  }
}

int run_check(const CheckArguments& args) {
  // The validators accepted these already.
  const ValueRange stages = *parse_range(args.stages);
  const ValueRange micro_batches = *parse_range(args.micro_batches);
  const ValueRange dp = *parse_range(args.dp);
  const ValueRange chunks = *parse_range(args.chunks);
  const std::uint64_t size = sweep_size({stages, micro_batches, dp, chunks});
  if (size > args.max_configurations) {
    const std::string count = size == std::numeric_limits<std::uint64_t>::max()
                                  ? "more than 2^64 - 1"
                                  : std::to_string(size);
    std::cerr << "pipevm check: the sweep --stages " << range_text(stages) << " --micro-batches "
              << range_text(micro_batches) << " --dp " << range_text(dp) << " --chunks "
              << range_text(chunks) << " has " << count << " configurations, over the limit of "
              << args.max_configurations
              << ": narrow the ranges or raise the limit with --max-configurations\n";
    return 2;
  }

  ExpandOptions expand_options;
  if (std::string error; !topology_option(args.topology, expand_options, error)) {
    std::cerr << "pipevm check: " << error << "\n";
    return 2;
  }
  Diagnostics diagnostics;
  const auto file = read_source(args.file, diagnostics);
  if (!file) {
    for (const Diagnostic& d : diagnostics.all()) pipevm::print_text(std::cerr, d);
    return 2;
  }
  const auto schedule = parse(file, diagnostics);
  if (!schedule) {
    print_parse_failure(args, diagnostics);
    return 1;
  }

  // Each configuration is printed as soon as it is checked, and forgotten.
  const std::unique_ptr<ResultStream> out = make_result_stream(args.format, args.file, size > 1);
  bool failed = false;
  for (int p = stages.first; p <= stages.last; ++p) {
    for (int m = micro_batches.first; m <= micro_batches.last; ++m) {
      for (int d = dp.first; d <= dp.last; ++d) {
        for (int v = chunks.first; v <= chunks.last; ++v) {
          const Config config{.stages = p, .micro_batches = m, .chunks = v, .dp = d};
          const ConfigurationResult result =
              check_one(*schedule, config, args.skip_unsupported, expand_options);
          failed = failed || result.verdict == Verdict::error;
          out->add(result);
        }
      }
    }
  }
  out->finish();
  return failed ? 1 : 0;
}

}  // namespace

Command add_check_command(CLI::App& root) {
  auto args = std::make_shared<CheckArguments>();
  Command command;
  command.app = root.add_subcommand(
      "check", "Prove a schedule free of deadlock and of mismatched communication");
  CLI::App& app = *command.app;
  app.footer(
      "Examples:\n"
      "  pipevm check schedules/1f1b.pipe --stages 8 --micro-batches 16\n"
      "  pipevm check schedules/1f1b.pipe --stages 2..8 --micro-batches 1..16 --skip-unsupported\n"
      "Ranges A..B are inclusive; every combination is checked (at most\n"
      "--max-configurations), and each one's result printed as soon as it is done.\n"
      "Exit status: 0 clean, 1 findings, 2 unreadable file or usage.");
  app.add_option("file", args->file, "The schedule (.pipe)")->required();
  app.add_option("--stages,-p", args->stages, "Pipeline stages P, or a range A..B")
      ->required()
      ->check(range_validator(1, kMaxStages));
  app.add_option("--micro-batches,-m", args->micro_batches, "Micro-batches M, or a range A..B")
      ->required()
      ->check(range_validator(1, 1 << 30));
  app.add_option("--dp", args->dp, "Data-parallel replicas D, or a range A..B")
      ->check(range_validator(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--chunks,-v", args->chunks, "Model chunks per rank V, or a range A..B")
      ->check(range_validator(1, 65535))
      ->capture_default_str();
  app.add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "gcc", "json", "sarif"}))
      ->capture_default_str();
  app.add_option("--topology", args->topology, kTopologyHelp);
  app.add_flag("--skip-unsupported", args->skip_unsupported,
               "List configurations whose `require` fails as skipped instead of errors");
  app.add_option("--max-configurations", args->max_configurations,
                 "Refuse a sweep of more configurations than this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.run = [args] { return run_check(*args); };
  return command;
}

}  // namespace pipevm::cli
