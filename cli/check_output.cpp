// The four result streams of `pipevm check`.
#include "check_output.hpp"

#include <unistd.h>

#include <iostream>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#ifndef PIPEVM_VERSION
#define PIPEVM_VERSION "unknown"
#endif

namespace pipevm::cli {

namespace {

std::string configuration_text(const Config& c) {
  return "stages=" + std::to_string(c.stages) +
         " micro_batches=" + std::to_string(c.micro_batches) + " dp=" + std::to_string(c.dp) +
         " chunks=" + std::to_string(c.chunks);
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok:
      return "ok";
    case Verdict::error:
      return "error";
    case Verdict::skipped:
      return "skipped";
  }
  return "?";
}

// With several configurations, machine formats say which one a finding is for.
Diagnostic with_configuration(Diagnostic d, const Config& c, bool sweep) {
  if (sweep) d.message += " [" + configuration_text(c) + "]";
  return d;
}

class TextStream final : public ResultStream {
 public:
  TextStream(std::string file, bool sweep) : file_(std::move(file)), sweep_(sweep) {}

  void add(const ConfigurationResult& r) override {
    ++configurations_;
    instructions_ += r.instructions;
    if (r.verdict == Verdict::skipped) {
      ++skipped_;
      if (sweep_) std::cout << "skipped " << configuration_text(r.config) << ": require fails\n";
      std::cout.flush();
      return;
    }
    if (r.verdict == Verdict::error) {
      ++failing_;
      if (sweep_) std::cout << "== " << configuration_text(r.config) << '\n';
    }
    for (const Diagnostic& d : r.diagnostics) {
      print_text(std::cout, d, color_);
      if (d.severity == Severity::error) ++errors_;
    }
    errors_ += r.suppressed;
    if (r.suppressed > 0) {
      std::cout << "(" << r.suppressed << " more diagnostics of the same kinds not shown)\n";
    }
    if (!sweep_) std::cout << memory_to_text(r.memory);
    std::cout.flush();
  }

  void finish() override {
    const std::size_t checked = configurations_ - skipped_;
    const std::string configurations =
        std::to_string(checked) + (checked == 1 ? " configuration" : " configurations");
    std::cout << file_ << ": ";
    if (failing_ == 0) {
      std::cout << "ok for " << configurations;
    } else {
      std::cout << errors_ << (errors_ == 1 ? " error" : " errors");
      if (sweep_) std::cout << " in " << failing_ << " of " << configurations;
    }
    if (skipped_ > 0) std::cout << " (" << skipped_ << " skipped: require fails)";
    std::cout << ", " << instructions_ << (instructions_ == 1 ? " instruction" : " instructions")
              << " checked\n";
  }

 private:
  std::string file_;
  bool sweep_;
  bool color_ = isatty(STDOUT_FILENO) != 0;
  std::size_t configurations_ = 0, skipped_ = 0, failing_ = 0, errors_ = 0;
  std::uint64_t instructions_ = 0;
};

class GccStream final : public ResultStream {
 public:
  explicit GccStream(bool sweep) : sweep_(sweep) {}
  void add(const ConfigurationResult& r) override {
    if (r.verdict == Verdict::skipped) return;
    for (const Diagnostic& d : r.diagnostics)
      print_gcc(std::cout, with_configuration(d, r.config, sweep_));
    std::cout.flush();
  }
  void finish() override {}

 private:
  bool sweep_;
};

class JsonStream final : public ResultStream {
 public:
  JsonStream() { std::cout << "{\"results\": ["; }
  void add(const ConfigurationResult& r) override {
    nlohmann::json diagnostics = nlohmann::json::array();
    for (const Diagnostic& d : r.diagnostics) diagnostics.push_back(to_json(d));
    nlohmann::json entry = {{"configuration",
                             {{"stages", r.config.stages},
                              {"micro_batches", r.config.micro_batches},
                              {"dp", r.config.dp},
                              {"chunks", r.config.chunks}}},
                            {"verdict", verdict_name(r.verdict)},
                            {"diagnostics", std::move(diagnostics)},
                            {"memory", memory_to_json(r.memory)},
                            {"per_rank", bytes_to_json(r.bytes)}};
    if (r.suppressed > 0) entry["suppressed"] = r.suppressed;
    std::cout << (first_ ? "\n" : ",\n") << entry.dump() << std::flush;
    first_ = false;
  }
  void finish() override { std::cout << "\n]}\n"; }

 private:
  bool first_ = true;
};

// SARIF's results come before its tool (keys in alphabetical order, as
// nlohmann writes them): the rules are known when the results are done.
class SarifStream final : public ResultStream {
 public:
  explicit SarifStream(bool sweep) : sweep_(sweep) {
    std::cout << "{\"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\", "
                 "\"runs\": [{\"results\": [";
  }
  void add(const ConfigurationResult& r) override {
    if (r.verdict == Verdict::skipped || r.diagnostics.empty()) return;
    std::vector<Diagnostic> diagnostics;
    for (const Diagnostic& d : r.diagnostics) {
      diagnostics.push_back(with_configuration(d, r.config, sweep_));
    }
    const nlohmann::json log = to_sarif(diagnostics, PIPEVM_VERSION);
    const nlohmann::json& run = log.at("runs").at(0);
    const nlohmann::json& rules = run.at("tool").at("driver").at("rules");
    for (nlohmann::json result : run.at("results")) {
      const std::string id = result.at("ruleId");
      auto [at, added] = rule_index_.emplace(id, rules_.size());
      if (added) {
        for (const nlohmann::json& rule : rules) {
          if (rule.at("id") == id) rules_.push_back(rule);
        }
      }
      result["ruleIndex"] = at->second;
      std::cout << (first_ ? "\n" : ",\n") << result.dump();
      first_ = false;
    }
    std::cout.flush();
  }
  void finish() override {
    const nlohmann::json tool = {
        {"driver", {{"name", "pipevm"}, {"rules", rules_}, {"version", PIPEVM_VERSION}}}};
    std::cout << "\n], \"tool\": " << tool.dump() << "}], \"version\": \"2.1.0\"}\n";
  }

 private:
  bool sweep_;
  bool first_ = true;
  std::map<std::string, std::size_t> rule_index_;
  nlohmann::json rules_ = nlohmann::json::array();
};

}  // namespace

std::unique_ptr<ResultStream> make_result_stream(const std::string& format, const std::string& file,
                                                 bool sweep) {
  if (format == "json") return std::make_unique<JsonStream>();
  if (format == "sarif") return std::make_unique<SarifStream>(sweep);
  if (format == "gcc") return std::make_unique<GccStream>(sweep);
  return std::make_unique<TextStream>(file, sweep);
}

}  // namespace pipevm::cli
