// Gossip topologies (decentralized data parallelism, after Decent-DP's
// topo.py): a list of rounds, each splitting the data-parallel ranks into
// disjoint groups; step k averages parameters within the groups of round
// k mod (number of rounds). The built-ins, the rules a topology must obey
// (every round a partition of the ranks; the rounds of one period connect
// them), and the gossip group's membership for a configuration.
// Not here: reading a topology file (cli/), what an exchange does (the VM).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "program.hpp"

namespace pipevm {

struct Topology {
  std::string name;  // "ring", "alternating-exp-ring:2", or the file it was read from
  // rounds[r][g]: the data-parallel ranks of group g of round r, in order.
  std::vector<std::vector<std::vector<int>>> rounds;
  int round_count() const { return static_cast<int>(rounds.size()); }
};

// The built-in topology `spec` names for `dp` ranks: complete, ring (dp
// even), one-peer-exp (dp a power of two), alternating-exp-ring:L (dp =
// 2^k nodes of L ranks). Empty with `error` set when the name is unknown or
// dp does not fit it.
std::optional<Topology> builtin_topology(std::string_view spec, int dp, std::string& error);
// "complete, ring, one-peer-exp, alternating-exp-ring:L"
std::string_view builtin_topology_names();

// What is wrong with a topology for `dp` ranks, one finding each.
struct TopologyFinding {
  enum class Kind { rank_missing, rank_doubled, rank_outside, empty, disconnected } kind;
  int round = -1;  // -1: the topology as a whole
  int rank = -1;   // the data-parallel rank left out, doubled or outside
  std::string message;
};
std::vector<TopologyFinding> topology_findings(const Topology& topology, int dp);

// The round step `step` uses.
inline int round_of_step(const Topology& topology, long step) {
  const long n = topology.round_count();
  return n == 0 ? 0 : static_cast<int>(((step % n) + n) % n);
}

// The gossip group instances of a configuration: one per (stage, round,
// group). The instance `rank` belongs to in `round`, -1 when its round
// leaves it out; how many instances there are; the world ranks of one.
int gossip_instance(const Topology& topology, const Config& config, int rank, int round);
int gossip_instance_count(const Topology& topology, const Config& config);
void gossip_members(const Topology& topology, const Config& config, int instance,
                    std::vector<int>& members);
// The round of instance `instance`.
int gossip_round_of_instance(const Topology& topology, const Config& config, int instance);

// Programs whose requests cross the step boundary (`carry`) laid out over
// `steps` consecutive steps, for the checker and the simulator: before the
// first, the exchanges the first step waits for (round 0); after the last,
// the waits that complete its exchanges; in between, step k's gossip
// exchanges use round k + 1 (they are waited for in step k + 1), or round
// k when nothing is carried, kept in their micro-batch field.
// steps_to_unroll: carried, enough steps that every round follows every
// other, and at least two; else one per round when the program gossips.
Program unroll_steps(const Program& program, int steps);
int steps_to_unroll(const Program& program);

}  // namespace pipevm
