// Checking one schedule the way `pipevm check`, `pipevm lsp` and Python's
// `pipevm.check` do: parse it, decide which configurations to check (the
// ranges asked for, else the schedule's `check` header lines, a flat
// program's own stage count), expand and check each, and fold the
// diagnostics into a FileReport (check_findings.hpp). Reading standard
// input and printing are cli/'s.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "check_findings.hpp"
#include "compile.hpp"
#include "model_bytes.hpp"

namespace pipevm::api {

// The configuration ranges asked for; an absent one comes from the
// schedule's `check` lines.
struct SweepRequest {
  std::optional<ValueRange> stages, micro_batches, dp, chunks;
  bool skip_unsupported = false;
  bool p2p_posted_order = false;
  config::ModelBytes model;  // whose bytes per rank are counted (--config; memory_bytes.hpp)
  ExpandOptions expand;  // a topology given on the command line (--topology)
  bool table = false;    // the file is a PyTorch table whatever its name
  std::uint64_t max_configurations = 100'000;
};

// Which configurations to check, or why none can be.
struct SweepPlan {
  std::vector<Config> configurations;  // in order, without repeats
  bool skip_unsupported = false;       // a failing `require` skips (declared ranges do)
  std::string usage_error;             // non-empty: nothing to check (exit 2)
};

SweepPlan plan_sweep(const Schedule& schedule, const SweepRequest& request);

// Reads the schedule at `path`; null with `error` set when it cannot be read.
std::shared_ptr<const SourceFile> read_schedule_file(const std::string& path, std::string& error);

// Parses and checks `file` for the planned configurations; a PyTorch table
// (.csv, pytorch/torch_csv.hpp, or request.table) for its own
// configuration only.
FileReport check_file(std::shared_ptr<const SourceFile> file, const SweepRequest& request);

}  // namespace pipevm::api
