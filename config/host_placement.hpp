// Where a schedule's ranks run, for expand and simulate (--hosts N or
// --hostfile FILE, and --layout as `run` takes it): MPI ranks fill the
// hosts slot by slot in order (mpirun's default mapping); the layout then
// deals program ranks to them by rank_layout.hpp's rule, the one `run`
// applies. Returns errors, never prints. Not here: what a host's links
// cost (interpreter/simulate/links.hpp), the command line's options
// (cli/hosts_options.hpp).
#pragma once

#include <string>
#include <vector>

#include "program.hpp"

namespace pipevm::config {

struct HostRequest {
  int hosts = 0;         // N hosts of equal size (h1..hN); 0: not given
  std::string hostfile;  // an Open MPI hostfile (`name slots=K` per line); empty: not given
  std::string layout = "mpi";
};

// Where the ranks run.
struct HostPlacement {
  std::vector<std::string> names;  // host names in order of first use
  std::vector<int> host_of_rank;   // by program rank, into names; empty: no hosts given
  std::vector<std::string> lines;  // the placement as `run` prints it
};

// The placement `request` asks for (none when it names no hosts); false
// with `error` set when the hostfile cannot be read or has too few slots
// for the configuration's ranks.
bool place_on_hosts(const HostRequest& request, const Config& config, HostPlacement& placement,
                    std::string& error);

}  // namespace pipevm::config
