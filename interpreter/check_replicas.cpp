// Data-parallel replicas: the ranks of one stage (same stage, different
// dp_rank) train the same pieces on different data, so they must do the
// same work and issue the same collectives in the same order. Each replica
// is compared with dp rank 0 of its stage, in two projections: the
// collectives alone (collective-order, collective-missing) and everything
// else (dataflow: replicas differ). The first difference of each is reported.
#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

bool same_instruction(const Instruction& a, const Instruction& b) {
  return a.op == b.op && a.kind == b.kind && a.direction == b.direction &&
         group_of(a) == group_of(b) && a.micro_batch == b.micro_batch && a.peer == b.peer &&
         a.chunk == b.chunk;
}

// The next instruction at or after `i` whose collective-ness is `collective`.
std::size_t next_of(const Program& program, std::size_t i, std::size_t end, bool collective) {
  while (i < end && is_collective(program.code[i].op) != collective) ++i;
  return i;
}

// Compares one projection of two replicas; true when equal.
bool compare(const Program& program, int base, int other, bool collectives, Reporter& reporter) {
  const auto span = [&](int r) {
    return std::pair{program.rank_begin[static_cast<std::size_t>(r)],
                     program.rank_begin[static_cast<std::size_t>(r) + 1]};
  };
  const auto [base_begin, base_end] = span(base);
  const auto [other_begin, other_end] = span(other);
  std::size_t a = next_of(program, base_begin, base_end, collectives);
  std::size_t b = next_of(program, other_begin, other_end, collectives);
  while (a < base_end && b < other_end && same_instruction(program.code[a], program.code[b])) {
    a = next_of(program, a + 1, base_end, collectives);
    b = next_of(program, b + 1, other_end, collectives);
  }
  if (a == base_end && b == other_end) return true;

  if (!collectives) {
    const std::string theirs = b < other_end ? "`" + disassemble(program.code[b]) + "`"
                                             : "the end of its stream";
    const std::string ours = a < base_end ? "`" + disassemble(program.code[a]) + "`"
                                          : "the end of its stream";
    Diagnostic* d = reporter.report(
        DiagnosticKind::DataflowReplicasDiffer,
        "data-parallel replicas differ: " + reporter.rank_name(other) + " has " + theirs +
            " where " + reporter.rank_name(base) + " has " + ours,
        b < other_end ? reporter.at(b) : reporter.end_of(other));
    reporter.note(d, "the first difference in " + reporter.rank_name(base),
                  a < base_end ? reporter.at(a) : reporter.end_of(base));
    return false;
  }
  if (a < base_end && b < other_end) {
    Diagnostic* d = reporter.report(
        DiagnosticKind::CollectiveOrder,
        "collectives out of order in the data-parallel group of stage " +
            std::to_string(stage_of(program.config, other)) + ": " + reporter.rank_name(other) +
            " issues `" + disassemble(program.code[b]) + "` where " + reporter.rank_name(base) +
            " issues `" + disassemble(program.code[a]) + "`",
        reporter.at(b));
    reporter.note(d, "the collective of " + reporter.rank_name(base), reporter.at(a));
    return false;
  }
  // One replica stops issuing collectives while the other goes on.
  const bool base_longer = a < base_end;
  const std::size_t extra = base_longer ? a : b;
  const int missing = base_longer ? other : base;
  Diagnostic* d = reporter.report(
      DiagnosticKind::CollectiveMissing,
      "`" + disassemble(program.code[extra]) + "` of " +
          reporter.rank_name(base_longer ? base : other) + " is never issued by " +
          reporter.rank_name(missing) + ", a member of the same data-parallel group",
      reporter.at(extra));
  reporter.note(d, reporter.rank_name(missing) + " ends here", reporter.end_of(missing));
  return false;
}

}  // namespace

std::vector<bool> check_replicas(const Program& program, Reporter& reporter) {
  const Config& c = program.config;
  std::vector<bool> quiet(static_cast<std::size_t>(program.ranks()), false);
  for (int stage = 0; stage < c.stages; ++stage) {
    const int base = rank_of(c, 0, stage);
    for (int d = 1; d < c.dp; ++d) {
      const int other = rank_of(c, d, stage);
      if (other >= program.ranks()) break;
      const bool same_collectives = compare(program, base, other, true, reporter);
      const bool same_work = compare(program, base, other, false, reporter);
      quiet[static_cast<std::size_t>(other)] = same_collectives && same_work;
    }
  }
  return quiet;
}

}  // namespace pipevm::check_detail
