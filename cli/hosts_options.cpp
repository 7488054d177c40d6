// The host options (hosts_options.hpp).
#include "hosts_options.hpp"

#include "number_checks.hpp"

namespace pipevm::cli {

void add_host_options(CLI::App& app, config::HostRequest& request) {
  auto* hosts = app.add_option("--hosts", request.hosts,
                               "Place the ranks on N hosts of equal size (h1..hN), filled in "
                               "order; shows what crosses hosts")
                    ->check(in_range(1, 1 << 20));
  app.add_option("--hostfile", request.hostfile,
                 "Place the ranks on the hosts of an Open MPI hostfile (`name slots=K`), "
                 "filled slot by slot in order")
      ->excludes(hosts);
  app.add_option("--layout", request.layout,
                 "Which parallel dimension stays inside a host, as for run: pp-inner, dp-inner "
                 "or mpi (default: program rank = MPI rank)")
      ->check(CLI::IsMember({"mpi", "pp-inner", "dp-inner"}))
      ->capture_default_str();
}

}  // namespace pipevm::cli
