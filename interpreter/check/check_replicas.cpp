// Groups: the ranks that must do things together. The data-parallel
// replicas of a stage (same stage, different dp_rank) train the same pieces
// on different data, so they must do the same work: each is compared with
// dp rank 0 of its stage, and the first difference is reported (dataflow:
// replicas differ). Collectives that do not line up within any group
// (collective-order, collective-missing) are what the link pass found; they
// are reported here, those of the data-parallel group next to its
// replicas' work.
#include <algorithm>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

// "the data-parallel group of stage 3"
std::string instance_phrase(const Program& program, Group group, int rank) {
  const Config& c = program.config;
  switch (group) {
    case Group::none:
    case Group::pipeline:
      return "the pipeline of dp rank " + std::to_string(dp_rank_of(c, rank));
    case Group::dp: return "the data-parallel group of stage " + std::to_string(stage_of(c, rank));
    case Group::gossip:
      return "the gossip groups of stage " + std::to_string(stage_of(c, rank));
    case Group::mirror: {
      const int stage = stage_of(c, rank);
      const int low = std::min(stage, c.stages - 1 - stage);
      return "the mirror pair of stages " + std::to_string(low) + " and " +
             std::to_string(c.stages - 1 - low);
    }
    case Group::world: return "the world (every rank)";
  }
  return {};
}

// "data-parallel group"
std::string group_noun(Group group) {
  switch (group) {
    case Group::none:
    case Group::pipeline: return "pipeline";
    case Group::dp: return "data-parallel group";
    case Group::gossip:
      return "gossip group";
    case Group::mirror: return "mirror pair";
    case Group::world: return "world";
  }
  return {};
}

void report_collective(const Program& program, const LinkFailure& failure, Reporter& reporter) {
  const Instruction& in = program.code[failure.index];
  const Group group = group_of(in);
  const int rank = reporter.rank_of_index(failure.index);
  if (failure.kind == LinkFailureKind::collective_order) {
    const int base = reporter.rank_of_index(failure.other);
    Diagnostic* d = reporter.report(
        DiagnosticKind::CollectiveOrder,
        "collectives out of order in " + instance_phrase(program, group, rank) + ": " +
            reporter.rank_name(rank) + " issues `" + disassemble(in) + "` where " +
            reporter.rank_name(base) + " issues `" + disassemble(program.code[failure.other]) +
            "`",
        reporter.at(failure.index));
    reporter.note(d, "the collective of " + reporter.rank_name(base), reporter.at(failure.other));
    return;
  }
  const auto missing = static_cast<int>(failure.other);
  Diagnostic* d = reporter.report(
      DiagnosticKind::CollectiveMissing,
      "`" + disassemble(in) + "` of " + reporter.rank_name(rank) + " is never issued by " +
          reporter.rank_name(missing) + ", a member of the same " + group_noun(group),
      reporter.at(failure.index));
  reporter.note(d, reporter.rank_name(missing) + " ends here", reporter.end_of(missing));
}

bool is_collective_failure(const LinkFailure& failure) {
  return failure.kind == LinkFailureKind::collective_order ||
         failure.kind == LinkFailureKind::collective_missing;
}

// The member a collective failure is about: the one that differs from the
// group's first member, or lacks a collective it issues.
int member_of(const LinkFailure& failure, const Reporter& reporter) {
  const int rank = reporter.rank_of_index(failure.index);
  if (failure.kind == LinkFailureKind::collective_missing) {
    const auto missing = static_cast<int>(failure.other);
    return missing > rank ? missing : rank;
  }
  return rank;
}

std::pair<std::size_t, std::size_t> span_of(const Program& program, int rank) {
  return {program.rank_begin[static_cast<std::size_t>(rank)],
          program.rank_begin[static_cast<std::size_t>(rank) + 1]};
}

// The next instruction at or after `i` that is no collective.
std::size_t next_work(const Program& program, std::size_t i, std::size_t end) {
  while (i < end && is_collective(program.code[i].op)) ++i;
  return i;
}

// Compares what two replicas do besides collectives; true when equal.
bool same_work(const Program& program, int base, int other, Reporter& reporter) {
  const auto [base_begin, base_end] = span_of(program, base);
  const auto [other_begin, other_end] = span_of(program, other);
  std::size_t a = next_work(program, base_begin, base_end);
  std::size_t b = next_work(program, other_begin, other_end);
  while (a < base_end && b < other_end && same_operands(program.code[a], program.code[b])) {
    a = next_work(program, a + 1, base_end);
    b = next_work(program, b + 1, other_end);
  }
  if (a == base_end && b == other_end) return true;
  const std::string theirs =
      b < other_end ? "`" + disassemble(program.code[b]) + "`" : "the end of its stream";
  const std::string ours =
      a < base_end ? "`" + disassemble(program.code[a]) + "`" : "the end of its stream";
  Diagnostic* d = reporter.report(
      DiagnosticKind::DataflowReplicasDiffer,
      "data-parallel replicas differ: " + reporter.rank_name(other) + " has " + theirs +
          " where " + reporter.rank_name(base) + " has " + ours,
      b < other_end ? reporter.at(b) : reporter.end_of(other));
  reporter.note(d, "the first difference in " + reporter.rank_name(base),
                a < base_end ? reporter.at(a) : reporter.end_of(base));
  return false;
}

// Whether two ranks' streams are the same steps in the same order.
bool same_stream(const Program& program, int base, int other) {
  const auto a = program.rank(base);
  const auto b = program.rank(other);
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_operands(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

std::vector<bool> check_replicas(const Program& program, const Link& link, Reporter& reporter) {
  const Config& c = program.config;
  // The data-parallel group's collective failures, by the member they are about.
  std::vector<const LinkFailure*> collective_failure(static_cast<std::size_t>(program.ranks()),
                                                     nullptr);
  for (const LinkFailure& failure : link.failures) {
    if (!is_collective_failure(failure) || group_of(program.code[failure.index]) != Group::dp) {
      continue;
    }
    collective_failure[static_cast<std::size_t>(member_of(failure, reporter))] = &failure;
  }
  std::vector<bool> quiet(static_cast<std::size_t>(program.ranks()), false);
  for (int stage = 0; stage < c.stages; ++stage) {
    const int base = rank_of(c, 0, stage);
    for (int d = 1; d < c.dp; ++d) {
      const int other = rank_of(c, d, stage);
      if (other >= program.ranks()) break;
      if (const LinkFailure* failure = collective_failure[static_cast<std::size_t>(other)]) {
        report_collective(program, *failure, reporter);
      }
      same_work(program, base, other, reporter);
      quiet[static_cast<std::size_t>(other)] = same_stream(program, base, other);
    }
  }
  return quiet;
}

void report_collectives(const Program& program, const Link& link, Reporter& reporter) {
  for (const LinkFailure& failure : link.failures) {
    if (is_collective_failure(failure) && group_of(program.code[failure.index]) != Group::dp) {
      report_collective(program, failure, reporter);
    }
  }
}

}  // namespace pipevm::check_detail
