// Folding diagnostics into findings (check_findings.hpp).
#include "check_findings.hpp"

#include <algorithm>
#include <utility>

namespace pipevm::api {

namespace {

bool smaller(const Config& a, const Config& b) {
  return std::tuple(a.stages * a.dp, a.micro_batches, a.chunks, a.stages) <
         std::tuple(b.stages * b.dp, b.micro_batches, b.chunks, b.stages);
}

}  // namespace

std::size_t FileReport::folded() const {
  std::size_t n = 0;
  for (const Finding& f : findings) n += f.folded;
  return n;
}

std::size_t FileReport::errors() const {
  return static_cast<std::size_t>(
      std::count_if(findings.begin(), findings.end(),
                    [](const Finding& f) { return f.diagnostic.severity == Severity::error; }));
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string configuration_text(const Config& c) {
  return "stages=" + std::to_string(c.stages) +
         " micro_batches=" + std::to_string(c.micro_batches) + " dp=" + std::to_string(c.dp) +
         " chunks=" + std::to_string(c.chunks);
}

std::string folding_text(const Finding& f, const FileReport& report) {
  std::string out;
  if (f.ranks.size() > 1) out += "on ranks " + ranks_text(f.ranks);
  if (f.config && report.sweep) {
    if (!out.empty()) out += "; ";
    out += "in " + std::to_string(f.configurations) + " of " +
           plural(report.checked, "configuration") + ", shown for " + configuration_text(*f.config);
  }
  if (f.folded > 0) {
    if (!out.empty()) out += "; ";
    out += std::to_string(f.folded) + " more folded into this one";
  }
  return out;
}

Diagnostic annotated(const Finding& f, const FileReport& report) {
  Diagnostic d = f.diagnostic;
  const std::string folding = folding_text(f, report);
  if (!folding.empty()) d.message += " [" + folding + "]";
  return d;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

void FindingFolder::add_unconfigured(std::vector<Diagnostic> diagnostics) {
  for (Diagnostic& d : diagnostics) {
    Finding f;
    f.diagnostic = std::move(d);
    f.configurations = 0;
    unconfigured_.push_back(std::move(f));
  }
}

void FindingFolder::add(const Config& config, const std::vector<Diagnostic>& diagnostics) {
  // First fold within the configuration: one statement, one kind, many ranks.
  std::map<Key, Finding> here;
  std::vector<Key> order;
  for (const Diagnostic& d : diagnostics) {
    const Key key{code_number(d.kind), d.location.range.begin, d.location.range.end,
                  static_cast<int>(d.severity)};
    auto [at, added] = here.try_emplace(key);
    Finding& f = at->second;
    if (added) {
      f.diagnostic = d;
      f.config = config;
      order.push_back(key);
    } else {
      ++f.folded;
    }
    if (d.location.rank >= 0 &&
        std::find(f.ranks.begin(), f.ranks.end(), d.location.rank) == f.ranks.end()) {
      f.ranks.push_back(d.location.rank);
    }
  }
  // Then across configurations.
  for (const Key& key : order) {
    Finding& f = here.at(key);
    std::sort(f.ranks.begin(), f.ranks.end());
    auto [at, added] = findings_.try_emplace(key);
    Finding& kept = at->second;
    if (added) {
      kept = std::move(f);
      continue;
    }
    kept.configurations += 1;
    // Everything the configuration raised here is folded into the kept finding.
    kept.folded += f.folded + 1;
    // The smallest failing configuration is the one shown; the counts stay.
    if (smaller(config, *kept.config)) {
      kept.diagnostic = std::move(f.diagnostic);
      kept.config = config;
      kept.ranks = std::move(f.ranks);
    }
  }
}

std::vector<Finding> FindingFolder::take() {
  std::vector<Finding> out = std::move(unconfigured_);
  for (auto& [key, f] : findings_) out.push_back(std::move(f));
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.diagnostic.location.range.begin < b.diagnostic.location.range.begin;
  });
  findings_.clear();
  unconfigured_.clear();
  return out;
}

}  // namespace pipevm::api
