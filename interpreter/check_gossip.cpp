// Gossip: what the checker proves about exchanges that follow a topology
// and cross the step boundary. The topology's rules (every round a
// partition of the data-parallel ranks, the rounds of one period
// connected), at most one exchange in flight per rank, and the laying out
// of consecutive steps (unroll_steps) on which the other passes then prove
// pairing, completion and progress for the first step, steady steps and
// the last step. Not here: pairing and deadlock themselves (link.cpp,
// check_progress.cpp), which read the unrolled program like any other.
#include "check_internal.hpp"
#include "topology.hpp"

namespace pipevm {

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
  const int rounds = program.topology ? program.topology->round_count() : 1;
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
        // An exchange started in step k is waited for in step k + 1.
        if (group_of(in) == Group::gossip && is_collective(in.op)) in.micro_batch = round_at(k + 1);
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
  (void)rounds;
  return out;
}

int steps_to_unroll(const Program& program) {
  if (program.carried.empty()) return 1;
  const int rounds = program.topology ? program.topology->round_count() : 1;
  // Every round follows every other once, and the first and last step.
  return std::max(2, rounds + 1);
}

namespace check_detail {

bool check_topology(const Program& program, Reporter& reporter) {
  if (!program.topology) return true;
  bool partition = true;
  for (const TopologyFinding& f : topology_findings(*program.topology, program.config.dp)) {
    const bool disconnected = f.kind == TopologyFinding::Kind::disconnected;
    partition = partition && disconnected;
    reporter.report(
        disconnected ? DiagnosticKind::TopologyDisconnected : DiagnosticKind::TopologyNotPartition,
        f.message, Location{program.file, {}, -1, -1});
  }
  return partition;
}

void check_gossip_flight(const Program& program, Reporter& reporter) {
  for (int r = 0; r < program.ranks(); ++r) {
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    std::size_t pending = 0;
    std::size_t first = 0;
    const auto stream = program.rank(r);
    for (std::size_t local = 0; local < stream.size(); ++local) {
      const Instruction& in = stream[local];
      if (group_of(in) != Group::gossip) continue;
      if (info(in.op).cls == OpClass::wait) {
        if (pending > 0) --pending;
        continue;
      }
      if (!posts_request(in.op)) continue;
      if (pending == 0) first = begin + local;
      if (++pending == 2) {
        Diagnostic* d = reporter.report(
            DiagnosticKind::GossipInFlight,
            reporter.describe(begin + local) +
                " starts an exchange while another one of the same parameters is in flight "
                "(at most one per bucket: GossipWait first)",
            reporter.at(begin + local));
        reporter.note(d, "the exchange in flight: " + reporter.describe(first), reporter.at(first));
        break;
      }
    }
  }
}

}  // namespace check_detail

}  // namespace pipevm
