// What a check reports for one input file, after folding: a finding
// that recurs is kept once. Within one configuration, the diagnostics of one
// kind at one statement (the same mistake on several ranks or micro-batches)
// become one finding listing the ranks; across a sweep, the same finding in
// several configurations is kept once with the number of configurations and
// the smallest failing configuration's diagnostic in full. Every folded
// diagnostic is counted, so that no format drops one silently. Printing the
// report is cli/'s business (check_output.hpp, check_sarif.hpp), converting
// it to Python objects python/'s; running the checker is check_run.hpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "diagnostics.hpp"
#include "memory_bytes.hpp"
#include "program.hpp"

namespace pipevm::api {

struct Finding {
  Diagnostic diagnostic;           // as raised in `config`, the smallest failing one
  std::optional<Config> config;    // absent for what precedes expansion (parse errors)
  std::vector<int> ranks;          // the ranks of `config` where it was raised, ascending
  std::size_t configurations = 1;  // how many configurations raised it
  std::size_t folded = 0;          // diagnostics folded into this one (all configurations)
};

struct FileReport {
  std::string name;                        // as given (a path, or the name given to a text)
  std::shared_ptr<const SourceFile> file;  // null when unreadable
  std::string usage_error;                 // non-empty: the file could not be checked (exit 2)
  std::vector<Finding> findings;           // in source order
  std::size_t configurations = 0;          // planned
  std::size_t checked = 0, failing = 0, skipped = 0;
  std::size_t suppressed = 0;  // dropped past the checker's cap, never seen
  std::uint64_t instructions = 0;
  std::vector<StageMemory> memory;  // kept when exactly one configuration was checked
  std::vector<RankBytes> bytes;     // the same: each rank's bytes at its peak
  bool sweep = false;               // more than one configuration planned

  std::size_t folded() const;
  std::size_t errors() const;  // findings of severity error
};

// "3 configurations", "1 configuration"
std::string plural(std::size_t n, const std::string& word);
// "stages=4 micro_batches=8 dp=1 chunks=1"
std::string configuration_text(const Config& c);
// "0-3, 5" for ranks 0, 1, 2, 3, 5
std::string ranks_text(const std::vector<int>& ranks);
// What a finding's message adds when it stands for others: "on ranks 0-3;
// in 12 of 40 configurations, shown for stages=2 ...; 30 more folded". Empty
// when it stands for itself alone.
std::string folding_text(const Finding& finding, const FileReport& report);
// The finding's diagnostic with folding_text appended to its message in brackets.
Diagnostic annotated(const Finding& finding, const FileReport& report);

// Collects one file's diagnostics configuration by configuration.
class FindingFolder {
 public:
  // Diagnostics raised before any configuration (parse errors): kept as they are.
  void add_unconfigured(std::vector<Diagnostic> diagnostics);
  // One configuration's diagnostics (expansion's and the checker's).
  void add(const Config& config, const std::vector<Diagnostic>& diagnostics);
  // The findings in source order.
  std::vector<Finding> take();

 private:
  // kind, file position begin and end, severity
  using Key = std::tuple<int, std::uint32_t, std::uint32_t, int>;
  std::vector<Finding> unconfigured_;
  std::map<Key, Finding> findings_;
};

}  // namespace pipevm::api
