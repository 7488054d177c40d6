// `pipevm check`: the linter. Parses a schedule once, expands it for one
// configuration or a sweep of them (--stages 2..8 --micro-batches 1..16),
// runs the checker on each, and prints the findings as text with source
// excerpts, gcc-style lines, JSON or SARIF. The checking itself is
// interpreter/check.hpp; this file only drives and prints.
#include <unistd.h>

#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"
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
};

enum class Verdict { ok, error, skipped };

struct ConfigurationResult {
  Config config;
  Verdict verdict = Verdict::ok;
  std::vector<Diagnostic> diagnostics;  // expansion's, then the checker's
  std::vector<StageMemory> memory;
  std::size_t suppressed = 0;
  std::uint64_t instructions = 0;
};

std::string configuration_text(const Config& c) {
  return "stages=" + std::to_string(c.stages) + " micro_batches=" + std::to_string(c.micro_batches) +
         " dp=" + std::to_string(c.dp) + " chunks=" + std::to_string(c.chunks);
}

ConfigurationResult check_one(const Schedule& schedule, const Config& config,
                              bool skip_unsupported) {
  ConfigurationResult out;
  out.config = config;
  Diagnostics diagnostics;
  const std::optional<Program> program = expand(schedule, config, diagnostics);
  out.diagnostics = diagnostics.all();
  if (!program) {
    const bool unsupported =
        !out.diagnostics.empty() &&
        std::all_of(out.diagnostics.begin(), out.diagnostics.end(), [](const Diagnostic& d) {
          return d.kind == DiagnosticKind::RequireFailed;
        });
    out.verdict = unsupported && skip_unsupported ? Verdict::skipped : Verdict::error;
    return out;
  }
  CheckResult result = check(*program);
  for (Diagnostic& d : result.diagnostics) out.diagnostics.push_back(std::move(d));
  out.memory = std::move(result.memory);
  out.suppressed = result.suppressed;
  out.instructions = result.instructions;
  const bool errors = std::any_of(out.diagnostics.begin(), out.diagnostics.end(),
                                  [](const Diagnostic& d) { return d.severity == Severity::error; });
  out.verdict = errors || out.suppressed > 0 ? Verdict::error : Verdict::ok;
  return out;
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::error: return "error";
    case Verdict::skipped: return "skipped";
  }
  return "?";
}

void print_text(const std::string& file, const std::vector<ConfigurationResult>& results) {
  const bool color = isatty(STDOUT_FILENO) != 0;
  const bool sweep = results.size() > 1;
  std::size_t errors = 0, failing = 0, skipped = 0;
  std::uint64_t instructions = 0;
  for (const ConfigurationResult& r : results) {
    instructions += r.instructions;
    if (r.verdict == Verdict::skipped) {
      ++skipped;
      if (sweep) std::cout << "skipped " << configuration_text(r.config) << ": require fails\n";
      continue;
    }
    if (r.verdict == Verdict::error) ++failing;
    if (sweep && r.verdict == Verdict::error) {
      std::cout << "== " << configuration_text(r.config) << '\n';
    }
    for (const Diagnostic& d : r.diagnostics) {
      pipevm::print_text(std::cout, d, color);
      if (d.severity == Severity::error) ++errors;
    }
    errors += r.suppressed;
    if (r.suppressed > 0) {
      std::cout << "(" << r.suppressed << " more diagnostics of the same kinds not shown)\n";
    }
    if (!sweep) std::cout << memory_to_text(r.memory);
  }
  const std::size_t checked = results.size() - skipped;
  const std::string configurations =
      std::to_string(checked) + (checked == 1 ? " configuration" : " configurations");
  std::cout << file << ": ";
  if (failing == 0) {
    std::cout << "ok for " << configurations;
  } else {
    std::cout << errors << (errors == 1 ? " error" : " errors");
    if (sweep) std::cout << " in " << failing << " of " << configurations;
  }
  if (skipped > 0) std::cout << " (" << skipped << " skipped: require fails)";
  std::cout << ", " << instructions << (instructions == 1 ? " instruction" : " instructions")
            << " checked\n";
}

// With several configurations, machine formats say which one a finding is for.
Diagnostic with_configuration(Diagnostic d, const Config& c, bool sweep) {
  if (sweep) d.message += " [" + configuration_text(c) + "]";
  return d;
}

nlohmann::json results_json(const std::vector<ConfigurationResult>& results) {
  nlohmann::json list = nlohmann::json::array();
  for (const ConfigurationResult& r : results) {
    nlohmann::json diagnostics = nlohmann::json::array();
    for (const Diagnostic& d : r.diagnostics) diagnostics.push_back(to_json(d));
    nlohmann::json entry = {{"configuration",
                             {{"stages", r.config.stages},
                              {"micro_batches", r.config.micro_batches},
                              {"dp", r.config.dp},
                              {"chunks", r.config.chunks}}},
                            {"verdict", verdict_name(r.verdict)},
                            {"diagnostics", std::move(diagnostics)},
                            {"memory", memory_to_json(r.memory)}};
    if (r.suppressed > 0) entry["suppressed"] = r.suppressed;
    list.push_back(std::move(entry));
  }
  return {{"results", std::move(list)}};
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
  // The validators accepted these already.
  const ValueRange stages = *parse_range(args.stages);
  const ValueRange micro_batches = *parse_range(args.micro_batches);
  const ValueRange dp = *parse_range(args.dp);
  const ValueRange chunks = *parse_range(args.chunks);

  std::vector<ConfigurationResult> results;
  for (int p = stages.first; p <= stages.last; ++p) {
    for (int m = micro_batches.first; m <= micro_batches.last; ++m) {
      for (int d = dp.first; d <= dp.last; ++d) {
        for (int v = chunks.first; v <= chunks.last; ++v) {
          Config config;
          config.stages = p;
          config.micro_batches = m;
          config.dp = d;
          config.chunks = v;
          results.push_back(check_one(*schedule, config, args.skip_unsupported));
        }
      }
    }
  }

  const bool sweep = results.size() > 1;
  if (args.format == "json") {
    std::cout << results_json(results).dump(1) << '\n';
  } else if (args.format == "sarif" || args.format == "gcc") {
    std::vector<Diagnostic> all;
    for (const ConfigurationResult& r : results) {
      if (r.verdict == Verdict::skipped) continue;
      for (const Diagnostic& d : r.diagnostics) all.push_back(with_configuration(d, r.config, sweep));
    }
    if (args.format == "sarif") {
      std::cout << to_sarif(all, PIPEVM_VERSION).dump(1) << '\n';
    } else {
      for (const Diagnostic& d : all) print_gcc(std::cout, d);
    }
  } else {
    print_text(args.file, results);
  }
  const bool failed = std::any_of(results.begin(), results.end(), [](const ConfigurationResult& r) {
    return r.verdict == Verdict::error;
  });
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
      "Ranges A..B are inclusive; every combination is checked.\n"
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
  app.add_flag("--skip-unsupported", args->skip_unsupported,
               "List configurations whose `require` fails as skipped instead of errors");
  command.run = [args] { return run_check(*args); };
  return command;
}

}  // namespace pipevm::cli
