// Fuzz target `topology`: any bytes as a gossip topology file
// (`--topology FILE.yaml`, read by config/topology_file.cpp), then what the
// checker and the VM do with it for a few data-parallel sizes. Asserts:
//   - only the reader's error refuses a file (no exception escapes), and
//     the refusal names the file;
//   - topology_findings (core/topology.hpp) finds nothing exactly when the
//     topology is valid for dp ranks by a separate reckoning here: every
//     round puts each of the ranks 0..dp-1 in exactly one group, and the
//     groups of all rounds connect them; each finding names a rank and a
//     round that is really outside, doubled or left out;
//   - for a valid topology the gossip groups are a consistent structure for
//     1 and 2 stages: every rank is in one instance per round, that
//     instance's round is the round and its members hold the rank, all on
//     the rank's stage, each member once;
//   - schedules/gossip.pipe over the topology is refused by the checker's
//     topology rules (PV2050/PV2051) exactly when the topology is invalid,
//     and otherwise checks clean and simulates to its end.
// dp: 1, 2 and one more than the largest rank named (at most 16).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "check.hpp"
#include "costs.hpp"
#include "fuzz_support.hpp"
#include "shipped_schedule.hpp"
#include "simulate.hpp"
#include "topology.hpp"
#include "topology_file.hpp"

namespace {

using pipevm::Topology;
using Kind = pipevm::TopologyFinding::Kind;

// How often `rank` appears in round `round`.
int count_in_round(const Topology& topology, int round, int rank) {
  int count = 0;
  for (const auto& group : topology.rounds[static_cast<std::size_t>(round)]) {
    count += static_cast<int>(std::count(group.begin(), group.end(), rank));
  }
  return count;
}

// The oracle: valid when every round is a partition of 0..dp-1 and a
// breadth-first walk over "shares a group" reaches every rank from rank 0.
bool valid_for(const Topology& topology, int dp) {
  if (topology.rounds.empty()) return false;
  for (int r = 0; r < topology.round_count(); ++r) {
    for (const auto& group : topology.rounds[static_cast<std::size_t>(r)]) {
      for (const int rank : group) {
        if (rank < 0 || rank >= dp) return false;
      }
    }
    for (int rank = 0; rank < dp; ++rank) {
      if (count_in_round(topology, r, rank) != 1) return false;
    }
  }
  std::vector<bool> reached(static_cast<std::size_t>(dp), false);
  std::vector<int> frontier{0};
  reached[0] = true;
  while (!frontier.empty()) {
    const int at = frontier.back();
    frontier.pop_back();
    for (const auto& round : topology.rounds) {
      for (const auto& group : round) {
        if (std::find(group.begin(), group.end(), at) == group.end()) continue;
        for (const int peer : group) {
          if (reached[static_cast<std::size_t>(peer)]) continue;
          reached[static_cast<std::size_t>(peer)] = true;
          frontier.push_back(peer);
        }
      }
    }
  }
  return std::all_of(reached.begin(), reached.end(), [](bool r) { return r; });
}

void expect_findings_true(const Topology& topology, int dp) {
  const auto findings = pipevm::topology_findings(topology, dp);
  FUZZ_ASSERT(findings.empty() == valid_for(topology, dp),
              "topology_findings finds nothing exactly when the topology is valid");
  for (const pipevm::TopologyFinding& f : findings) {
    FUZZ_ASSERT(f.message.find(topology.name) != std::string::npos, "a finding names the topology");
    const bool in_round = f.round >= 0 && f.round < topology.round_count();
    switch (f.kind) {
      case Kind::rank_outside:
        FUZZ_ASSERT(in_round && (f.rank < 0 || f.rank >= dp) &&
                        count_in_round(topology, f.round, f.rank) > 0,
                    "a rank named outside is outside and in its round");
        break;
      case Kind::rank_doubled:
        FUZZ_ASSERT(in_round && count_in_round(topology, f.round, f.rank) > 1,
                    "a rank named doubled is in its round more than once");
        break;
      case Kind::rank_missing:
        FUZZ_ASSERT(in_round && f.rank >= 0 && f.rank < dp &&
                        count_in_round(topology, f.round, f.rank) == 0,
                    "a rank named missing is one of the dp ranks and not in its round");
        break;
      case Kind::empty:
        FUZZ_ASSERT(topology.rounds.empty(), "only a topology without rounds is empty");
        break;
      case Kind::disconnected:
        FUZZ_ASSERT(f.rank > 0 && f.rank < dp, "a disconnected rank is one of the dp ranks");
        break;
    }
  }
}

void expect_groups_consistent(const Topology& topology, const pipevm::Config& config) {
  const int instances = pipevm::gossip_instance_count(topology, config);
  std::vector<int> members;
  for (int rank = 0; rank < config.ranks(); ++rank) {
    for (int round = 0; round < topology.round_count(); ++round) {
      const int instance = pipevm::gossip_instance(topology, config, rank, round);
      FUZZ_ASSERT(instance >= 0 && instance < instances, "every rank is in a group every round");
      FUZZ_ASSERT(pipevm::gossip_round_of_instance(topology, config, instance) == round,
                  "a rank's group of a round belongs to that round");
      pipevm::gossip_members(topology, config, instance, members);
      FUZZ_ASSERT(std::count(members.begin(), members.end(), rank) == 1,
                  "a rank's group holds the rank once");
      for (const int member : members) {
        FUZZ_ASSERT(member >= 0 && member < config.ranks() &&
                        pipevm::stage_of(config, member) == pipevm::stage_of(config, rank),
                    "a group's members are ranks of one stage");
        FUZZ_ASSERT(pipevm::gossip_instance(topology, config, member, round) == instance,
                    "every member of a group is in that group");
      }
    }
  }
}

const pipevm::Schedule& gossip_schedule() {
  static const std::shared_ptr<const pipevm::Schedule> schedule = shipped_schedule("gossip.pipe");
  return *schedule;
}

void expect_checker_agrees(const std::shared_ptr<const Topology>& topology, int dp) {
  const pipevm::Config config{.stages = 1, .micro_batches = 2, .chunks = 1, .dp = dp};
  pipevm::ExpandOptions options;
  options.topology = topology;
  pipevm::Diagnostics diagnostics;
  const auto program = pipevm::expand(gossip_schedule(), config, diagnostics, options);
  FUZZ_ASSERT(program.has_value(), "gossip.pipe expands over any topology read");
  const pipevm::CheckResult result = pipevm::check(*program);
  const bool refused_topology =
      std::any_of(result.diagnostics.begin(), result.diagnostics.end(), [](const auto& d) {
        return d.kind == pipevm::DiagnosticKind::TopologyNotPartition ||
               d.kind == pipevm::DiagnosticKind::TopologyDisconnected;
      });
  const bool valid = valid_for(*topology, dp);
  FUZZ_ASSERT(refused_topology == !valid, "the checker refuses exactly the invalid topologies");
  if (!valid) return;
  FUZZ_ASSERT(result.ok(), "gossip.pipe checks clean over a valid topology");
  pipevm::Diagnostics simulated;
  const auto simulation = pipevm::simulate(*program, pipevm::default_costs(), simulated);
  FUZZ_ASSERT(simulation.has_value() && std::isfinite(simulation->timeline.makespan),
              "gossip.pipe simulates to its end over a valid topology");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string name = "fuzz.yaml";
  std::string error;
  auto read = pipevm::config::read_topology_yaml(text, name, error);
  if (!read) {
    FUZZ_ASSERT(error.rfind(name, 0) == 0, "a refusal names the file");
    return 0;
  }
  FUZZ_ASSERT(read->name == name, "the topology is named after its file");
  const auto topology = std::make_shared<const Topology>(std::move(*read));
  int largest = -1;
  for (const auto& round : topology->rounds) {
    for (const auto& group : round) {
      for (const int rank : group) largest = std::max(largest, rank);
    }
  }
  std::set<int> sizes{1, 2};
  if (largest >= 0 && largest < 16) sizes.insert(largest + 1);
  for (const int dp : sizes) {
    expect_findings_true(*topology, dp);
    if (valid_for(*topology, dp)) {
      for (const int stages : {1, 2}) {
        expect_groups_consistent(*topology, {.stages = stages, .micro_batches = 1, .dp = dp});
      }
    }
    expect_checker_agrees(topology, dp);
  }
  return 0;
}
