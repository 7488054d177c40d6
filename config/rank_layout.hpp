// Rank layout: which MPI process plays which program rank. A Program
// numbers its ranks rank = dp_rank * stages + stage, and that numbering is
// what the checker proved; where the processes run is mpirun's choice. The
// layout (`pipevm run --layout`) says which parallel dimension stays inside
// a host, and program_ranks() deals the program ranks to the MPI ranks so
// that it does, from the host each MPI rank runs on. Pure functions, no MPI:
// the caller gathers the host names (MpiSession::host_names).
// Not here: what crosses hosts message by message (that is the simulator's
// and expand's business), hosts that differ in size beyond what the rule
// below does with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipevm::config {

enum class RankLayout {
  mpi,       // program rank = MPI rank: mpirun's mapping decides (the default)
  pp_inner,  // consecutive stages of a replica share a host: the all-reduce crosses hosts
  dp_inner,  // the replicas of a stage share a host: pipeline messages cross hosts
};

// "mpi", "pp-inner", "dp-inner"; nullopt for anything else.
std::optional<RankLayout> rank_layout_from_name(std::string_view name);
std::string_view name(RankLayout layout);

// The program rank of each MPI rank (index: MPI rank), given the host each
// MPI rank runs on. The rule: hosts are taken in the order of their lowest
// MPI rank, the MPI ranks of a host in increasing order; the i-th MPI rank
// so listed plays the i-th (stage, replica) of the layout's order, which
// runs the inner dimension fastest (pp-inner: stage; dp-inner: replica).
// MPI rank 0 always plays program rank 0. Throws std::invalid_argument when
// the number of ranks is not a multiple of `stages`.
std::vector<int> program_ranks(const std::vector<std::string>& host_of_mpi_rank, RankLayout layout,
                               int stages);

// What rank 0 prints: a headline (the layout, the hosts, how many pipeline
// neighbour pairs and data-parallel groups cross hosts), then one line per
// host with its program ranks, their stage and replica, and the MPI rank
// where it differs. `mpi_rank_of` is indexed by program rank.
std::vector<std::string> describe_placement(const std::vector<std::string>& host_of_rank,
                                            const std::vector<int>& mpi_rank_of, RankLayout layout,
                                            int stages);

}  // namespace pipevm::config
