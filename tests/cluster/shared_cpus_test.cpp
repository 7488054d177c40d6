// Hosts that are one machine with ranks bound to one CPU (runtime/shared_cpus.hpp):
// the text each rank sends, and the warning rank 0 prints, in-process. The
// run across the test cluster's hosts is multihost.shared_cpus.* beside.
#include <gtest/gtest.h>

#include "shared_cpus.hpp"

namespace pipevm::runtime {
namespace {

RankCpus on(const std::string& machine, int machine_cpus, std::vector<int> cpus) {
  return {machine, machine_cpus, std::move(cpus)};
}

TEST(shared_cpus, text_round_trips) {
  for (const RankCpus& cpus :
       {on("5a1f-boot", 8, {0, 1, 2, 3, 6}), on("", 2, {1}), on("b", 4, {0, 2}), on("c", 1, {0})}) {
    const std::optional<RankCpus> back = decode(encode(cpus));
    ASSERT_TRUE(back) << encode(cpus);
    EXPECT_EQ(back->machine, cpus.machine);
    EXPECT_EQ(back->machine_cpus, cpus.machine_cpus);
    EXPECT_EQ(back->cpus, cpus.cpus);
  }
  EXPECT_EQ(encode(on("b", 8, {0, 1, 2, 3, 6})), "b 8 0-3,6");
}

TEST(shared_cpus, bad_text_is_refused) {
  for (const char* text : {"", "b", "b 8", "b x 0", "b 8 3-1", "b 8 1,0", "b 8 0,,1", "b 8 -1"}) {
    EXPECT_FALSE(decode(text)) << text;
  }
}

TEST(shared_cpus, this_rank_knows_its_machine) {
  const RankCpus mine = this_rank_cpus();
  EXPECT_FALSE(mine.machine.empty());
  EXPECT_GE(mine.machine_cpus, 1);
  EXPECT_FALSE(mine.cpus.empty());
}

TEST(shared_cpus, two_hosts_of_one_machine_bound_to_cpu_0_are_named) {
  const std::vector<std::string> warnings =
      shared_cpu_warnings({"h1", "h2"}, {on("m", 2, {0}), on("m", 2, {0})});
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0],
            "hosts h1 and h2 are one machine (the same kernel boot id), and MPI ranks 0 (h1) and "
            "1 (h2) are both bound to CPU 0 of its 2: they take turns there; start mpirun with "
            "--bind-to none, or give each host CPUs of its own (docs/multihost.md, \"Hosts that "
            "share a machine\")");
}

TEST(shared_cpus, no_warning_when_the_cpus_are_not_shared) {
  // Unbound ranks (all of the machine's CPUs), CPUs of their own, real
  // hosts (other boot ids), one host, an unknown machine.
  EXPECT_TRUE(shared_cpu_warnings({"h1", "h2"}, {on("m", 2, {0, 1}), on("m", 2, {0, 1})}).empty());
  EXPECT_TRUE(shared_cpu_warnings({"h1", "h2"}, {on("m", 2, {0}), on("m", 2, {1})}).empty());
  EXPECT_TRUE(shared_cpu_warnings({"h1", "h2"}, {on("m", 2, {0}), on("n", 2, {0})}).empty());
  EXPECT_TRUE(shared_cpu_warnings({"h1", "h1"}, {on("m", 2, {0}), on("m", 2, {0})}).empty());
  EXPECT_TRUE(shared_cpu_warnings({"h1", "h2"}, {on("", 2, {0}), on("", 2, {0})}).empty());
}

TEST(shared_cpus, one_warning_per_pair_of_hosts) {
  // 4 hosts of 2 ranks, each host's ranks bound to CPUs 0 and 1 of a
  // 4-CPU machine: 6 pairs of hosts, each named once, by its first ranks.
  std::vector<std::string> hosts;
  std::vector<RankCpus> cpus;
  for (int host = 1; host <= 4; ++host) {
    for (int cpu = 0; cpu < 2; ++cpu) {
      hosts.push_back("h" + std::to_string(host));
      cpus.push_back(on("m", 4, {cpu}));
    }
  }
  const std::vector<std::string> warnings = shared_cpu_warnings(hosts, cpus);
  ASSERT_EQ(warnings.size(), 6U);
  EXPECT_NE(warnings[0].find("MPI ranks 0 (h1) and 2 (h2) are both bound to CPU 0 of its 4"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[5].find("hosts h3 and h4"), std::string::npos) << warnings[5];
}

}  // namespace
}  // namespace pipevm::runtime
