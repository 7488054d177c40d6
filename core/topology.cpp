// The built-in gossip topologies, the rules every topology obeys, and the
// gossip group's membership (topology.hpp).
#include "topology.hpp"

#include <algorithm>
#include <numeric>
#include <span>

namespace pipevm {

namespace {

using Round = std::vector<std::vector<int>>;

bool power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

int log2_of(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Round i of one-peer-exp over `count` items: item j with item j xor 2^i.
Round exp_pairs(int count, int i) {
  Round round;
  for (int j = 0; j < count; ++j) {
    const int peer = j ^ (1 << i);
    if (j < peer) round.push_back({j, peer});
  }
  return round;
}

std::optional<int> parse_positive(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value > 0 ? std::optional<int>(value) : std::nullopt;
}

}  // namespace

std::string_view builtin_topology_names() {
  return "complete, ring, one-peer-exp, alternating-exp-ring:L";
}

std::optional<Topology> builtin_topology(std::string_view spec, int dp, std::string& error) {
  Topology t;
  t.name = std::string(spec);
  const std::string n = std::to_string(dp);
  if (spec == "complete") {
    std::vector<int> all(static_cast<std::size_t>(dp));
    std::iota(all.begin(), all.end(), 0);
    t.rounds.push_back({all});
    return t;
  }
  if (spec == "ring") {
    if (dp == 1) {  // a ring of one: the rank alone
      t.rounds.push_back({{0}});
      return t;
    }
    if (dp % 2 != 0) {
      error = "topology ring needs an even number of data-parallel ranks, not " + n;
      return std::nullopt;
    }
    Round even, odd;
    for (int k = 0; k < dp; k += 2) even.push_back({k, k + 1});
    for (int k = 1; k < dp; k += 2) {
      std::vector<int> pair{k, (k + 1) % dp};
      std::sort(pair.begin(), pair.end());
      odd.push_back(pair);
    }
    std::sort(odd.begin(), odd.end());
    t.rounds = {even, odd};
    return t;
  }
  if (spec == "one-peer-exp") {
    if (!power_of_two(dp)) {
      error = "topology one-peer-exp needs a power of two data-parallel ranks, not " + n;
      return std::nullopt;
    }
    if (dp == 1) t.rounds.push_back({{0}});
    for (int i = 0; i < log2_of(dp); ++i) t.rounds.push_back(exp_pairs(dp, i));
    return t;
  }
  constexpr std::string_view kAlternating = "alternating-exp-ring:";
  if (spec.substr(0, kAlternating.size()) == kAlternating) {
    const std::optional<int> local = parse_positive(spec.substr(kAlternating.size()));
    if (!local) {
      error = "topology alternating-exp-ring:L needs L, the ranks per node, a positive number";
      return std::nullopt;
    }
    const int l = *local;
    if (dp % l != 0 || !power_of_two(dp / l)) {
      error = "topology " + std::string(spec) + " needs 2^k nodes of " + std::to_string(l) +
              " ranks, not " + n + " ranks";
      return std::nullopt;
    }
    const int nodes = dp / l;
    // Inside each node, then node a's local rank i with node a xor 2^j's.
    Round intra;
    for (int a = 0; a < nodes; ++a) {
      std::vector<int> node(static_cast<std::size_t>(l));
      std::iota(node.begin(), node.end(), a * l);
      intra.push_back(node);
    }
    if (nodes == 1) t.rounds.push_back(intra);
    for (int j = 0; j < log2_of(nodes); ++j) {
      t.rounds.push_back(intra);
      Round across;
      for (const std::vector<int>& pair : exp_pairs(nodes, j)) {
        for (int i = 0; i < l; ++i) across.push_back({pair[0] * l + i, pair[1] * l + i});
      }
      std::sort(across.begin(), across.end());
      t.rounds.push_back(across);
    }
    return t;
  }
  error = "unknown topology '" + std::string(spec) +
          "' (built-in: " + std::string(builtin_topology_names()) + ", or a .yaml file of rounds)";
  return std::nullopt;
}

std::vector<TopologyFinding> topology_findings(const Topology& topology, int dp) {
  using Kind = TopologyFinding::Kind;
  std::vector<TopologyFinding> out;
  const std::string name = "topology " + topology.name;
  if (topology.rounds.empty()) {
    out.push_back({Kind::empty, -1, -1, name + " has no rounds"});
    return out;
  }
  for (int r = 0; r < topology.round_count(); ++r) {
    std::vector<int> seen(static_cast<std::size_t>(dp), 0);
    const std::string round = name + ", round " + std::to_string(r) + ": ";
    for (const std::vector<int>& group : topology.rounds[static_cast<std::size_t>(r)]) {
      for (const int rank : group) {
        if (rank < 0 || rank >= dp) {
          out.push_back({Kind::rank_outside, r, rank,
                         round + "rank " + std::to_string(rank) + " is not one of the " +
                             std::to_string(dp) + " data-parallel ranks"});
          continue;
        }
        if (++seen[static_cast<std::size_t>(rank)] == 2) {
          out.push_back({Kind::rank_doubled, r, rank,
                         round + "rank " + std::to_string(rank) +
                             " is in more than one group (each round must put every rank in "
                             "exactly one group)"});
        }
      }
    }
    for (int rank = 0; rank < dp; ++rank) {
      if (seen[static_cast<std::size_t>(rank)] != 0) continue;
      out.push_back({Kind::rank_missing, r, rank,
                     round + "rank " + std::to_string(rank) +
                         " is in no group (each round must put every rank in exactly one group)"});
    }
  }
  // Connectivity of the union of the rounds: union-find over the groups.
  std::vector<int> parent(static_cast<std::size_t>(dp));
  std::iota(parent.begin(), parent.end(), 0);
  const auto root = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x) {
      x = parent[static_cast<std::size_t>(x)] =
          parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
    }
    return x;
  };
  for (const Round& round : topology.rounds) {
    for (const std::vector<int>& group : round) {
      for (const int rank : group) {
        if (rank < 0 || rank >= dp || group.front() < 0 || group.front() >= dp) continue;
        parent[static_cast<std::size_t>(root(rank))] = root(group.front());
      }
    }
  }
  for (int rank = 1; rank < dp; ++rank) {
    if (root(rank) == root(0)) continue;
    out.push_back({Kind::disconnected, -1, rank,
                   name + ": rank " + std::to_string(rank) +
                       " never exchanges, even through others, with rank 0 over one period of " +
                       std::to_string(topology.round_count()) +
                       " round(s); the replicas would never agree"});
    break;
  }
  return out;
}

namespace {
// Groups before round r, and in total.
int groups_before(const Topology& t, int round) {
  int count = 0;
  for (int r = 0; r < round; ++r)
    count += static_cast<int>(t.rounds[static_cast<std::size_t>(r)].size());
  return count;
}
}  // namespace

int gossip_instance(const Topology& topology, const Config& config, int rank, int round) {
  if (round < 0 || round >= topology.round_count()) return -1;
  const int d = dp_rank_of(config, rank);
  const Round& groups = topology.rounds[static_cast<std::size_t>(round)];
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (std::find(groups[g].begin(), groups[g].end(), d) == groups[g].end()) continue;
    return stage_of(config, rank) * groups_before(topology, topology.round_count()) +
           groups_before(topology, round) + static_cast<int>(g);
  }
  return -1;
}

int gossip_instance_count(const Topology& topology, const Config& config) {
  return config.stages * groups_before(topology, topology.round_count());
}

int gossip_round_of_instance(const Topology& topology, const Config& config, int instance) {
  (void)config;
  int within = instance % std::max(1, groups_before(topology, topology.round_count()));
  for (int r = 0; r < topology.round_count(); ++r) {
    const int size = static_cast<int>(topology.rounds[static_cast<std::size_t>(r)].size());
    if (within < size) return r;
    within -= size;
  }
  return -1;
}

void gossip_members(const Topology& topology, const Config& config, int instance,
                    std::vector<int>& members) {
  members.clear();
  const int per_stage = groups_before(topology, topology.round_count());
  if (per_stage == 0) return;
  const int stage = instance / per_stage;
  const int round = gossip_round_of_instance(topology, config, instance);
  if (round < 0) return;
  const int g = instance % per_stage - groups_before(topology, round);
  for (const int d :
       topology.rounds[static_cast<std::size_t>(round)][static_cast<std::size_t>(g)]) {
    members.push_back(rank_of(config, d, stage));
  }
}

namespace {

// The wait-class opcode that completes `op`'s requests: the one of the same group.
Opcode wait_for(Opcode op) {
  for (std::size_t i = 0; i < kOpcodeCount; ++i) {
    const OpcodeInfo& row = kOpcodeInfo[i];
    if (row.cls == OpClass::wait && row.group == info(op).group) return static_cast<Opcode>(i);
  }
  return Opcode::WaitAll;
}

// The source of the first instruction of the stream with opcode `op`, else `fallback`.
std::uint32_t source_of_first(std::span<const Instruction> stream, Opcode op,
                              std::uint32_t fallback) {
  for (const Instruction& in : stream) {
    if (in.op == op) return in.source();
  }
  return fallback;
}

}  // namespace

Program unroll_steps(const Program& program, int steps) {
  Program out = program;
  out.steps = steps;
  out.code.clear();
  out.rank_begin.assign(1, 0);
  const auto round_at = [&](long step) {
    return static_cast<std::uint32_t>(program.topology ? round_of_step(*program.topology, step)
                                                       : 0);
  };
  for (int r = 0; r < program.ranks(); ++r) {
    const auto stream = program.rank(r);
    const std::uint32_t fallback = stream.empty() ? 0 : stream.front().source();
    // Before the first step: the exchanges the first step waits for.
    for (const Opcode op : program.carried) {
      Instruction start;
      start.op = op;
      start.micro_batch = round_at(0);
      start.set_source(source_of_first(stream, op, fallback), false);
      out.code.push_back(start);
    }
    for (int k = 0; k < steps; ++k) {
      for (Instruction in : stream) {
        // A carried exchange started in step k is waited for in step k + 1.
        if (group_of(in) == Group::gossip && is_collective(in.op)) {
          in.micro_batch = round_at(program.carried.empty() ? k : k + 1);
        }
        out.code.push_back(in);
      }
    }
    // After the last step: its exchanges are completed.
    for (const Opcode op : program.carried) {
      Instruction wait;
      wait.op = wait_for(op);
      wait.set_source(source_of_first(stream, wait.op, source_of_first(stream, op, fallback)),
                      false);
      out.code.push_back(wait);
    }
    out.rank_begin.push_back(out.code.size());
  }
  return out;
}

int steps_to_unroll(const Program& program) {
  const int rounds = program.topology ? program.topology->round_count() : 1;
  if (program.carried.empty()) {
    // Exchanges within a step: one step per round. With one round there is
    // nothing to look for (a walk of every instruction otherwise).
    if (rounds == 1) return 1;
    const bool gossip =
        std::any_of(program.code.begin(), program.code.end(),
                    [](const Instruction& in) { return group_of(in) == Group::gossip; });
    return gossip ? rounds : 1;
  }
  // Every round follows every other once, and the first and last step.
  return std::max(2, rounds + 1);
}

}  // namespace pipevm
