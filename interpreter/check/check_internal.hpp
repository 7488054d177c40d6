// What the checker's passes share: the reporter that turns findings into
// capped, located diagnostics, and the passes' entry points. Every pass
// reads the program's Link (link.hpp). Not part of the public interface
// (check.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "link.hpp"

namespace pipevm::check_detail {

inline constexpr std::uint32_t kNone = kNoLink;

class Reporter {
 public:
  Reporter(const Program& program, std::size_t max_per_kind);

  // Null when the cap for this kind is reached (the diagnostic is counted).
  Diagnostic* report(DiagnosticKind kind, std::string message, Location location);
  void note(Diagnostic* diagnostic, std::string message, Location location);

  Location at(std::size_t index) const;
  // The last instruction of the rank's stream (or the file's start if empty).
  Location end_of(int rank) const;
  int rank_of_index(std::size_t index) const;
  // "rank 1 (stage 1) x.pipe:11:9 `Recv grad 2`"
  std::string describe(std::size_t index) const;
  std::string rank_name(int rank) const;  // "rank 1 (stage 1)"

  const Program& program() const { return program_; }
  std::vector<Diagnostic> take_diagnostics() { return std::move(diagnostics_); }
  std::size_t suppressed() const { return suppressed_; }
  bool reported(DiagnosticKind kind) const;
  std::size_t total() const { return diagnostics_.size() + suppressed_; }

 private:
  const Program& program_;
  std::size_t max_per_kind_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<std::size_t> per_kind_;
  std::size_t suppressed_ = 0;
};

// Chunks a rank holds: `chunks` for looped placement, two for v and mirror.
int chunks_per_rank(const Program& program);

// Reports what fails to link among messages: wrong peers, size mismatches
// and unmatched messages.
void report_messages(const Program& program, const Link& link, const std::vector<int>& widths,
                     Reporter& reporter);
// Compares the data-parallel replicas of every stage: same work, same
// collectives in the same order. Returns, per rank, whether its stream is
// identical to its stage's dp rank 0 (whose findings then stand for both).
std::vector<bool> check_replicas(const Program& program, const Link& link, Reporter& reporter);
// Reports collectives that do not line up in groups other than the
// data-parallel one (check_replicas reports those).
void report_collectives(const Program& program, const Link& link, Reporter& reporter);
// Walks each rank's stream alone: reports non-blocking misuse and dataflow
// errors (not for `quiet` ranks), measures memory.
void check_ranks(const Program& program, const Link& link, Reporter& reporter,
                 const std::vector<bool>& quiet, std::vector<StageMemory>& memory);
// Sharded weights (AllGather, Release, ReduceScatter, ShardStep): compute
// only on gathered chunks, every copy released, the right kind of step.
void check_shards(const Program& program, Reporter& reporter, const std::vector<bool>& quiet);
// One layer at a time (`layer L` on a forward or backward): each
// micro-batch's layers in order, once each.
void check_layers(const Program& program, Reporter& reporter, const std::vector<bool>& quiet);
// Memory policies (FwdCheckpoint, Recompute, Offload, Reload): where each
// micro-batch's stash is when something reads it (check_memory_policy.cpp).
void check_memory_policy(const Program& program, const Link& link, Reporter& reporter,
                         const std::vector<bool>& quiet);
// Hold and Drop (core/memory_bytes.hpp's walk): each in its place, and
// every weight gradient held apart added into its layer's sum in time.
void check_holds(const Program& program, Reporter& reporter, const std::vector<bool>& quiet);
// Runs all ranks together under rendezvous semantics; reports deadlocks,
// buffering hazards and collective cycles.
void check_progress(const Program& program, const Link& link, Reporter& reporter,
                    bool posted_order);

// Gossip (check_gossip.cpp): reports what breaks the program's topology;
// false when a round is not a partition of the data-parallel ranks (the
// exchanges then cannot be linked).
bool check_topology(const Program& program, Reporter& reporter);
// Reports a rank that starts a gossip exchange while one is in flight.
void check_gossip_flight(const Program& program, const Link& link, Reporter& reporter);

}  // namespace pipevm::check_detail
