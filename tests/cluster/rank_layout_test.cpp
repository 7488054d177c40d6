// The rank layout rule (config/rank_layout.hpp), in-process: which MPI rank
// plays which program rank for each layout and each way mpirun may have
// dealt the processes to hosts, what must hold whatever the hosts (a
// permutation, MPI rank 0 plays rank 0, whole pipelines or whole
// data-parallel groups on hosts that can hold them), and the placement rank
// 0 prints. The runs across hosts that use it are the *_test.sh beside.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>

#include "rank_layout.hpp"

namespace pipevm::config {
namespace {

using Hosts = std::vector<std::string>;

// Hosts of `per_host` ranks each, filled one after another (mpirun's
// default with slots = per_host, or --map-by ppr:N:node).
Hosts by_slot(int hosts, int per_host) {
  Hosts names;
  for (int h = 0; h < hosts; ++h) {
    for (int i = 0; i < per_host; ++i) names.push_back("h" + std::to_string(h + 1));
  }
  return names;
}

// Ranks dealt to the hosts in turn (--map-by node).
Hosts round_robin(int hosts, int ranks) {
  Hosts names;
  for (int r = 0; r < ranks; ++r) names.push_back("h" + std::to_string(r % hosts + 1));
  return names;
}

// The host of each program rank under `program` (indexed by MPI rank).
Hosts host_of_program_rank(const Hosts& by_mpi_rank, const std::vector<int>& program) {
  Hosts hosts(by_mpi_rank.size());
  for (std::size_t mpi = 0; mpi < program.size(); ++mpi) {
    hosts[static_cast<std::size_t>(program[mpi])] = by_mpi_rank[mpi];
  }
  return hosts;
}

TEST(layout, names_round_trip) {
  for (const RankLayout layout : {RankLayout::mpi, RankLayout::pp_inner, RankLayout::dp_inner}) {
    EXPECT_EQ(rank_layout_from_name(name(layout)), layout);
  }
  EXPECT_FALSE(rank_layout_from_name("pp_inner"));
  EXPECT_FALSE(rank_layout_from_name("tp-dp-pp"));
  EXPECT_FALSE(rank_layout_from_name(""));
}

TEST(layout, mpi_keeps_the_mpi_ranks) {
  EXPECT_EQ(program_ranks(round_robin(2, 4), RankLayout::mpi, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(program_ranks(by_slot(2, 2), RankLayout::mpi, 2), (std::vector<int>{0, 1, 2, 3}));
}

// 2 stages x 2 replicas on 2 hosts, both ways mpirun may deal them: the
// result depends on the layout only, never on mpirun's mapping.
TEST(layout, two_by_two_on_two_hosts) {
  const Hosts filled = by_slot(2, 2);     // MPI ranks 0, 1 on h1; 2, 3 on h2
  const Hosts dealt = round_robin(2, 4);  // MPI ranks 0, 2 on h1; 1, 3 on h2
  // pp-inner: replica 0 (ranks 0, 1) on h1, replica 1 (ranks 2, 3) on h2.
  EXPECT_EQ(program_ranks(filled, RankLayout::pp_inner, 2), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(program_ranks(dealt, RankLayout::pp_inner, 2), (std::vector<int>{0, 2, 1, 3}));
  const Hosts pp_on = {"h1", "h1", "h2", "h2"};
  EXPECT_EQ(host_of_program_rank(filled, program_ranks(filled, RankLayout::pp_inner, 2)), pp_on);
  EXPECT_EQ(host_of_program_rank(dealt, program_ranks(dealt, RankLayout::pp_inner, 2)), pp_on);
  // dp-inner: stage 0 (ranks 0, 2) on h1, stage 1 (ranks 1, 3) on h2.
  EXPECT_EQ(program_ranks(filled, RankLayout::dp_inner, 2), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(program_ranks(dealt, RankLayout::dp_inner, 2), (std::vector<int>{0, 1, 2, 3}));
  const Hosts dp_on = {"h1", "h2", "h1", "h2"};
  EXPECT_EQ(host_of_program_rank(filled, program_ranks(filled, RankLayout::dp_inner, 2)), dp_on);
  EXPECT_EQ(host_of_program_rank(dealt, program_ranks(dealt, RankLayout::dp_inner, 2)), dp_on);
}

// Hosts are taken in the order of their lowest MPI rank, not by name.
TEST(layout, orders_hosts_by_their_lowest_mpi_rank) {
  const Hosts hosts = {"node9", "node2", "node9", "node2"};
  EXPECT_EQ(host_of_program_rank(hosts, program_ranks(hosts, RankLayout::pp_inner, 2)),
            (Hosts{"node9", "node9", "node2", "node2"}));
  EXPECT_EQ(host_of_program_rank(hosts, program_ranks(hosts, RankLayout::dp_inner, 2)),
            (Hosts{"node9", "node2", "node9", "node2"}));
}

// Whatever the hosts: a permutation of the program ranks, and MPI rank 0
// plays rank 0 (it prints, saves and evaluates).
TEST(layout, is_a_permutation_keeping_rank_zero) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int stages = 1 + static_cast<int>(random() % 4);
    const int dp = 1 + static_cast<int>(random() % 4);
    const int hosts = 1 + static_cast<int>(random() % 5);
    Hosts names;
    for (int r = 0; r < stages * dp; ++r) {
      names.push_back("n" + std::to_string(random() % static_cast<unsigned>(hosts)));
    }
    for (const RankLayout layout : {RankLayout::mpi, RankLayout::pp_inner, RankLayout::dp_inner}) {
      std::vector<int> program = program_ranks(names, layout, stages);
      EXPECT_EQ(program[0], 0);
      std::sort(program.begin(), program.end());
      for (int r = 0; r < stages * dp; ++r) EXPECT_EQ(program[static_cast<std::size_t>(r)], r);
    }
  }
}

// A host with room for whole pipelines (pp-inner) or whole data-parallel
// groups (dp-inner) gets them, however mpirun dealt the ranks.
TEST(layout, keeps_the_inner_dimension_on_a_host) {
  const int stages = 4;
  const int dp = 2;
  for (const Hosts& hosts : {by_slot(2, 4), round_robin(2, 8), by_slot(4, 2), round_robin(4, 8)}) {
    const Hosts pp =
        host_of_program_rank(hosts, program_ranks(hosts, RankLayout::pp_inner, stages));
    const Hosts dpi =
        host_of_program_rank(hosts, program_ranks(hosts, RankLayout::dp_inner, stages));
    const bool four_per_host = std::count(hosts.begin(), hosts.end(), "h1") == 4;
    for (int replica = 0; replica < dp; ++replica) {
      for (int stage = 1; stage < stages; ++stage) {
        const auto rank = static_cast<std::size_t>(replica * stages + stage);
        // Four ranks per host hold a whole pipeline; two hold half of one.
        const bool same = pp[rank] == pp[rank - 1];
        EXPECT_TRUE(four_per_host ? same : (same == (stage % 2 == 1)))
            << "pp-inner, replica " << replica << " stage " << stage;
      }
    }
    for (int stage = 0; stage < stages; ++stage) {
      EXPECT_EQ(dpi[static_cast<std::size_t>(stage)], dpi[static_cast<std::size_t>(stages + stage)])
          << "dp-inner, stage " << stage;
    }
  }
}

TEST(layout, refuses_a_world_not_divisible_by_the_stages) {
  EXPECT_THROW(program_ranks(by_slot(1, 3), RankLayout::pp_inner, 2), std::invalid_argument);
  EXPECT_THROW(program_ranks(by_slot(1, 2), RankLayout::dp_inner, 0), std::invalid_argument);
}

TEST(layout, placement_says_what_crosses_hosts) {
  const Hosts hosts = by_slot(2, 2);
  const std::vector<int> program = program_ranks(hosts, RankLayout::dp_inner, 2);
  std::vector<int> mpi_rank_of(program.size());
  for (std::size_t mpi = 0; mpi < program.size(); ++mpi) {
    mpi_rank_of[static_cast<std::size_t>(program[mpi])] = static_cast<int>(mpi);
  }
  EXPECT_EQ(describe_placement(host_of_program_rank(hosts, program), mpi_rank_of,
                               RankLayout::dp_inner, 2),
            (std::vector<std::string>{
                "placement (--layout dp-inner), 2 host(s): 2 of 2 pipeline neighbour pairs and 0 "
                "of 2 data-parallel groups cross hosts",
                "  h1: rank 0 (stage 0, replica 0), rank 2 (stage 0, replica 1; MPI rank 1)",
                "  h2: rank 1 (stage 1, replica 0; MPI rank 2), rank 3 (stage 1, replica 1)"}));
  EXPECT_EQ(describe_placement({"a", "b"}, {0, 1}, RankLayout::mpi, 1).front(),
            "placement (--layout mpi), 2 host(s): 1 of 1 data-parallel groups cross hosts");
  EXPECT_EQ(describe_placement({"a", "b", "b"}, {0, 1, 2}, RankLayout::mpi, 3).front(),
            "placement (--layout mpi), 2 host(s): 1 of 2 pipeline neighbour pairs cross hosts");
}

}  // namespace
}  // namespace pipevm::config
