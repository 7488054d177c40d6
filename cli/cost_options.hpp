// The cost model a subcommand is given: a run configuration's `costs`
// section, then `--costs FILE` (YAML, as `pipevm run --profile` writes it),
// then `--cost k=v,...` on top; the textbook default when none gives any.
// Shared by simulate and synthesize.
#pragma once

#include <string>
#include <string_view>

#include "costs.hpp"
#include "run_config.hpp"

namespace pipevm::cli {

// False after printing "pipevm COMMAND: reason" to stderr.
bool costs_of(std::string_view command, const std::string& cost_file,
              const std::string& cost_flags, const RunConfig& run, Costs& costs);

// The --help text listing every cost key.
std::string cost_keys_help();

}  // namespace pipevm::cli
