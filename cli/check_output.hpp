// How `pipevm check` prints its results: one configuration at a time, as
// each is checked, so that a sweep holds no result longer than it takes to
// print it. Text (findings with source excerpts, then a summary line), gcc
// (one line per finding and note), JSON (`{"results": [...]}`, one entry per
// configuration) and SARIF 2.1.0 (one run; its rules, in the order they
// first occur, after the results) all stay one document however the sweep
// ends. Checking is check_command.cpp's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "diagnostics.hpp"
#include "memory_bytes.hpp"
#include "program.hpp"

namespace pipevm::cli {

enum class Verdict { ok, error, skipped };

struct ConfigurationResult {
  Config config;
  Verdict verdict = Verdict::ok;
  std::vector<Diagnostic> diagnostics;  // expansion's, then the checker's
  std::vector<StageMemory> memory;
  std::vector<RankBytes> bytes;  // per rank, at its peak (memory_bytes.hpp)
  std::size_t suppressed = 0;
  std::uint64_t instructions = 0;
};

class ResultStream {
 public:
  virtual ~ResultStream() = default;
  // Prints one configuration's result (and flushes).
  virtual void add(const ConfigurationResult& result) = 0;
  // Closes the document: the text summary, the JSON and SARIF brackets.
  virtual void finish() = 0;
};

// `format` is text, gcc, json or sarif; `sweep` says whether more than one
// configuration will come (findings then name their configuration).
std::unique_ptr<ResultStream> make_result_stream(const std::string& format, const std::string& file,
                                                 bool sweep);

}  // namespace pipevm::cli
