// The configuration options every subcommand that expands a schedule shares:
// --stages P --micro-batches M [--dp D] [--chunks V]. Values out of range are
// usage errors (CLI11 reports them; the process exits with 2).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
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

// api::load_program for the subcommand `app`: a usage error is printed to
// stderr prefixed with "pipevm COMMAND: "; diagnostics go to `diagnostics`.
api::ProgramInput load_program(const CLI::App& app, const std::string& path, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options = {});

// --topology NAME|FILE.yaml (topology_option.cpp): a built-in name goes to
// options.topology_name, a file's rounds to options.topology; false with
// `error` when the file cannot be read or is not rounds of groups.
bool topology_option(const std::string& value, ExpandOptions& options, std::string& error);
// The rounds of a topology file's text; `name` (the file) names it in
// `error` and in the Topology. Only the shape is checked here.
std::optional<Topology> read_topology_yaml(const std::string& text, const std::string& name,
                                           std::string& error);
inline constexpr const char* kTopologyHelp =
    "Gossip topology: complete, ring, one-peer-exp, alternating-exp-ring:L or FILE.yaml "
    "(overrides the schedule's `topology`)";

}  // namespace pipevm::cli
