// The rank layout rule (rank_layout.hpp) and the placement rank 0 prints.
#include "rank_layout.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace pipevm::config {

namespace {

// Host names in the order of their lowest rank, and each rank's index in it.
struct Hosts {
  std::vector<std::string> names;
  std::vector<int> index_of_rank;
};

Hosts hosts_in_order(const std::vector<std::string>& host_of_rank) {
  Hosts hosts;
  for (const std::string& host : host_of_rank) {
    const auto found = std::find(hosts.names.begin(), hosts.names.end(), host);
    hosts.index_of_rank.push_back(static_cast<int>(found - hosts.names.begin()));
    if (found == hosts.names.end()) hosts.names.push_back(host);
  }
  return hosts;
}

}  // namespace

std::optional<RankLayout> rank_layout_from_name(std::string_view name) {
  if (name == "mpi") return RankLayout::mpi;
  if (name == "pp-inner") return RankLayout::pp_inner;
  if (name == "dp-inner") return RankLayout::dp_inner;
  return std::nullopt;
}

std::string_view name(RankLayout layout) {
  switch (layout) {
    case RankLayout::mpi:
      return "mpi";
    case RankLayout::pp_inner:
      return "pp-inner";
    case RankLayout::dp_inner:
      return "dp-inner";
  }
  return "?";
}

std::vector<int> program_ranks(const std::vector<std::string>& host_of_mpi_rank, RankLayout layout,
                               int stages) {
  const int ranks = static_cast<int>(host_of_mpi_rank.size());
  if (stages <= 0 || ranks % stages != 0) {
    throw std::invalid_argument(std::to_string(ranks) + " ranks are not a multiple of " +
                                std::to_string(stages) + " stages");
  }
  const int dp = ranks / stages;
  std::vector<int> program(static_cast<std::size_t>(ranks));
  std::iota(program.begin(), program.end(), 0);
  if (layout == RankLayout::mpi) return program;
  // The MPI ranks host by host: a stable sort keeps each host's in order.
  const Hosts hosts = hosts_in_order(host_of_mpi_rank);
  std::vector<int> listed = program;
  std::stable_sort(listed.begin(), listed.end(), [&](int a, int b) {
    return hosts.index_of_rank[static_cast<std::size_t>(a)] <
           hosts.index_of_rank[static_cast<std::size_t>(b)];
  });
  for (int i = 0; i < ranks; ++i) {
    const auto mpi = static_cast<std::size_t>(listed[static_cast<std::size_t>(i)]);
    // pp-inner: stage fastest, the numbering's own order; dp-inner: replica fastest.
    program[mpi] = layout == RankLayout::pp_inner ? i : (i % dp) * stages + i / dp;
  }
  return program;
}

std::vector<std::string> describe_placement(const std::vector<std::string>& host_of_rank,
                                            const std::vector<int>& mpi_rank_of, RankLayout layout,
                                            int stages) {
  const int ranks = static_cast<int>(host_of_rank.size());
  const int dp = ranks / stages;
  const Hosts hosts = hosts_in_order(host_of_rank);
  const auto host = [&](int rank) { return hosts.index_of_rank[static_cast<std::size_t>(rank)]; };

  int neighbours_across = 0;
  for (int replica = 0; replica < dp; ++replica) {
    for (int stage = 0; stage + 1 < stages; ++stage) {
      const int rank = replica * stages + stage;
      if (host(rank) != host(rank + 1)) ++neighbours_across;
    }
  }
  int groups_across = 0;
  for (int stage = 0; stage < stages; ++stage) {
    for (int replica = 1; replica < dp; ++replica) {
      if (host(replica * stages + stage) != host(stage)) {
        ++groups_across;
        break;
      }
    }
  }
  std::string headline = "placement (--layout " + std::string(name(layout)) + "), " +
                         std::to_string(hosts.names.size()) + " host(s):";
  std::string crossing;
  if (stages > 1) {
    crossing += " " + std::to_string(neighbours_across) + " of " +
                std::to_string((stages - 1) * dp) + " pipeline neighbour pairs";
  }
  if (dp > 1) {
    crossing += std::string(crossing.empty() ? " " : " and ") + std::to_string(groups_across) +
                " of " + std::to_string(stages) + " data-parallel groups";
  }
  headline += crossing.empty() ? " one rank" : crossing + " cross hosts";

  std::vector<std::string> lines{headline};
  for (std::size_t h = 0; h < hosts.names.size(); ++h) {
    std::string line = "  " + hosts.names[h] + ":";
    const char* separator = " ";
    for (int rank = 0; rank < ranks; ++rank) {
      if (host(rank) != static_cast<int>(h)) continue;
      line += separator;
      separator = ", ";
      line += "rank " + std::to_string(rank) + " (stage " + std::to_string(rank % stages) +
              ", replica " + std::to_string(rank / stages);
      const int mpi = mpi_rank_of[static_cast<std::size_t>(rank)];
      if (mpi != rank) line += "; MPI rank " + std::to_string(mpi);
      line += ")";
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace pipevm::config
