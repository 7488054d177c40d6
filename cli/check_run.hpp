// Checking one schedule the way `pipevm check` and `pipevm lsp` do: read it
// (a path, or `-` for standard input), parse it, decide which configurations
// to check (the command line's ranges, else the schedule's `check` header
// lines, a flat program's own stage count), expand and check each, and fold
// the diagnostics into a FileReport (check_findings.hpp). Printing is
// check_output.hpp's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "check_findings.hpp"
#include "compile.hpp"
#include "run_config.hpp"

namespace pipevm::cli {

// The configuration ranges given on the command line; an absent one comes
// from the schedule's `check` lines.
struct SweepRequest {
  std::optional<ValueRange> stages, micro_batches, dp, chunks;
  bool skip_unsupported = false;
  bool p2p_posted_order = false;
  RunConfig model;
  ExpandOptions expand;  // a topology given on the command line (--topology)  // whose bytes per rank are counted (--config; memory_bytes.hpp)  // check_options.hpp's NCCL order (--p2p-order posted)
  std::uint64_t max_configurations = 100'000;
};

// Which configurations to check, or why none can be.
struct SweepPlan {
  std::vector<Config> configurations;  // in order, without repeats
  bool skip_unsupported = false;       // a failing `require` skips (declared ranges do)
  std::string usage_error;             // non-empty: nothing to check (exit 2)
};

SweepPlan plan_sweep(const Schedule& schedule, const SweepRequest& request);

// Reads `path` (`-`: standard input, named `stdin_name`); null with
// `error` set when it cannot be read.
std::shared_ptr<const SourceFile> read_check_input(const std::string& path,
                                                   const std::string& stdin_name,
                                                   std::string& error);

// Parses and checks `file` for the planned configurations; a PyTorch table
// (.csv, pytorch/torch_csv.hpp) for its own configuration only.
FileReport check_file(std::shared_ptr<const SourceFile> file, const SweepRequest& request);

}  // namespace pipevm::cli
