// Gossip: what the checker proves about exchanges that follow a topology
// and cross the step boundary. The topology's rules (every round a
// partition of the data-parallel ranks, the rounds of one period
// connected) and at most one exchange in flight per rank. The other passes
// prove pairing, completion and progress on consecutive steps laid out by
// unroll_steps (topology.hpp). Not here: pairing and deadlock themselves
// (link.cpp, check_progress.cpp), which read the unrolled program like any
// other.
#include <algorithm>

#include "check_internal.hpp"
#include "topology.hpp"

namespace pipevm {

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

void check_gossip_flight(const Program& program, const Link& link, Reporter& reporter) {
  // An exchange is a collective, so it has a slot in the link: a program
  // none of whose slots holds one has nothing in flight to walk for.
  const bool exchanges = std::any_of(
      link.slot_members.begin(), link.slot_members.end(), [&](std::uint32_t member) {
        return member != kNoLink && group_of(program.code[member]) == Group::gossip;
      });
  if (!exchanges) return;
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
