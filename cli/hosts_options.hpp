// The options that place a schedule's ranks on hosts for `expand` and
// `simulate`: --hosts N or --hostfile FILE, and --layout (as `run` takes
// it). MPI ranks fill the hosts slot by slot in order (mpirun's default
// mapping); the layout then deals program ranks to them by
// runtime/rank_layout.hpp's rule, the one `run` applies. Not here: what a
// host's links cost (interpreter/links.hpp).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "expand_text.hpp"
#include "program.hpp"

namespace pipevm::cli {

struct HostArguments {
  int hosts = 0;  // 0: not given
  std::string hostfile;
  std::string layout = "mpi";
};

void add_host_options(CLI::App& app, HostArguments& args);

using api::HostPlacement;

// False with `error` set when the hostfile cannot be read or has too few
// slots for the configuration's ranks.
bool place_on_hosts(const HostArguments& args, const Config& config, HostPlacement& placement,
                    std::string& error);

}  // namespace pipevm::cli
