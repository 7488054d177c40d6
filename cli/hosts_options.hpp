// --hosts N or --hostfile FILE, and --layout (as `run` takes it), for
// expand and simulate. What they mean is config/host_placement.hpp's.
#pragma once

#include <CLI/CLI.hpp>

#include "host_placement.hpp"

namespace pipevm::cli {

void add_host_options(CLI::App& app, config::HostRequest& request);

}  // namespace pipevm::cli
