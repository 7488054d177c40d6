// Hosts that are one machine: network namespaces (tests/cluster/cluster.sh)
// or containers on one computer, each with a host name of its own. Each
// host's Open MPI takes the machine's CPUs for its own and, when it binds,
// binds from CPU 0 up on every host, so ranks of different hosts can end up
// taking turns on one CPU while the others idle: dp.pipe --dp 2, one rank
// on each of two such hosts, ran 9.6 s per epoch against 1.0 s unbound
// (bench/RESULTS.md, "multihost"). A host cannot see that from its own
// name; the machine's kernel boot id tells it. Here: what each rank
// reports about itself (this_rank_cpus), its text form for the gather, and
// the check rank 0 runs on all of them (a pure function).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipevm::runtime {

struct RankCpus {
  std::string machine;    // the kernel's boot id; empty where unknown
  int machine_cpus = 0;   // the CPUs the machine has online
  std::vector<int> cpus;  // those this rank may run on, in increasing order
};

// This process's: /proc/sys/kernel/random/boot_id, the online CPU count and
// sched_getaffinity. Where one cannot be read, `machine` is empty.
RankCpus this_rank_cpus();

// One line of text and back ("BOOT_ID CPUS 0-3,6"); nullopt for text that
// is not such a line.
std::string encode(const RankCpus& cpus);
std::optional<RankCpus> decode(std::string_view text);

// Ranks of different hosts on one machine, both bound to fewer CPUs than it
// has, that share a CPU: one sentence per pair of hosts (its first such pair
// of MPI ranks), empty when there is none. Indexed by MPI rank, both.
std::vector<std::string> shared_cpu_warnings(const std::vector<std::string>& host_of_mpi_rank,
                                             const std::vector<RankCpus>& cpus_of_mpi_rank);

}  // namespace pipevm::runtime
