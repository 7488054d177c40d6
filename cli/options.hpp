// The options every subcommand that expands a schedule shares: --stages P
// --micro-batches M [--dp D] [--chunks V], --config FILE and --topology.
// Values out of range are usage errors (CLI11 reports them; the process
// exits with 2). What the values mean is pipevm::config's and api's.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "compile.hpp"
#include "program.hpp"
#include "schedule_input.hpp"

namespace pipevm::cli {

using api::ProgramInput;

using api::kMaxChunks;
using api::kMaxDp;
using api::kMaxMicroBatches;
using api::kMaxStages;

// Adds the four options to `app`, writing into `config`; --stages and
// --micro-batches are required when `required` is true.
void add_config_options(CLI::App& app, Config& config, bool required = true);

// The configuration options of `app` that were given, with their values in `config`.
api::ConfigRequest config_request(const CLI::App& app, const Config& config);

// Adds `--config FILE` (a `pipevm run` YAML file: its model, batch and
// optimizer for the figures, its costs) to `app`, writing the path into `path`.
void add_memory_config_option(CLI::App& app, std::string& path);

// api::load_program for the subcommand `app`: a usage error is printed to
// stderr prefixed with "pipevm COMMAND: "; diagnostics go to `diagnostics`.
api::ProgramInput load_program(const CLI::App& app, const std::string& path, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options = {});

// Whether `path` can be written (created, or appended to: nothing is
// truncated); else the OS's reason in `error`, e.g. "cannot write x.svg: No
// such file or directory". For outputs checked before anything is printed.
bool can_write(const std::string& path, std::string& error);

inline constexpr const char* kTopologyHelp =
    "Gossip topology: complete, ring, one-peer-exp, alternating-exp-ring:L or FILE.yaml "
    "(overrides the schedule's `topology`)";

}  // namespace pipevm::cli
