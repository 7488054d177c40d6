// The link pass: who talks to whom in an expanded Program, computed once
// and read by every interpreter. For each point-to-point message, its
// partner; for each wait, the requests it completes; for each collective,
// its slot (the instructions of its group's members that run it together).
// What fails to link is recorded as data (LinkFailure), not reported: the
// checker turns failures into diagnostics, the simulator refuses a program
// with failures that leave its time undefined, and the VM completes its
// requests by the same rule (wait_requests).
//
// The rules, all decided by the program's text before anything runs:
//  - Messages pair on (source rank, destination rank, message key), first
//    in first out per key (MPI's non-overtaking order with no wildcards).
//    A peer must be a stage of the sender's pipeline to pair at all.
//  - A Wait completes the oldest pending request of its direction, kind,
//    micro-batch and chunk; WaitOffload and WaitReload the oldest pending
//    Offload or Reload of their micro-batch and chunk; WaitAll every pending
//    point-to-point request and host copy, oldest first; GossipWait (a wait
//    whose row names a group) the oldest pending collective request
//    (GossipStart).
//  - The k-th collective a rank issues over a group instance meets the k-th
//    collective of every other member of that instance (group_members in
//    program.hpp); the first member's are the reference. A gossip exchange
//    meets the members of its round's group (topology.hpp): its round is
//    kept in its micro-batch field.
// Linear in the number of instructions. Not here: timing, deadlock, dataflow.
#pragma once

#include <cstdint>
#include <vector>

#include "program.hpp"

namespace pipevm {

inline constexpr std::uint32_t kNoLink = 0xFFFF'FFFFu;

enum class LinkFailureKind : std::uint8_t {
  // `index`: a message whose peer is not a stage it can reach (outside the
  // pipeline, or its own stage where the lane does not turn back on it).
  peer_outside,
  // `index`: a message whose peer is a stage, but not the one holding the
  // neighbouring position along its chunk's lane. It still pairs.
  peer_not_neighbour,
  // `index`: a receive; `other`: a send from the same rank with the same
  // kind and micro-batch that it would take, were their producing
  // positions the same; the two sides' widths (LinkOptions) differ.
  size_mismatch,
  // `index`: a message that pairs with nothing.
  unmatched,
  // `index`: a wait with no pending request of its key.
  wait_without_request,
  // `index`: a request no wait completes.
  never_completed,
  // `index`: a member's collective; `other`: the group's first member's
  // collective of the same slot, which differs from it.
  collective_order,
  // `index`: a collective; `other`: the world rank of a member of its group
  // instance that never issues the collective of that slot.
  collective_missing,
};

struct LinkFailure {
  LinkFailureKind kind = LinkFailureKind::unmatched;
  std::uint32_t index = kNoLink;  // into Program::code
  std::uint32_t other = kNoLink;
};

struct LinkOptions {
  // The message width at each model piece boundary (model_pieces + 1
  // numbers; see model_shape.hpp). Empty: widths unknown, and sends and
  // receives whose producing positions differ are simply unmatched.
  std::vector<int> piece_widths;
};

struct Link {
  // Per instruction of Program::code:
  //   p2p         the instruction it pairs with, kNoLink if none
  //   wait        its index w into completes_begin
  //   collective  its slot
  //   otherwise   kNoLink
  std::vector<std::uint32_t> to;
  // The requests wait w completes, oldest first:
  // completed[completes_begin[w], completes_begin[w + 1]).
  std::vector<std::uint32_t> completes_begin;
  std::vector<std::uint32_t> completed;
  // The members of slot s, in their group instance's member order:
  // slot_members[slot_begin[s], slot_begin[s + 1]) are their instructions
  // (kNoLink where a member never issues this slot's collective) and
  // slot_ranks[...] their world ranks.
  std::vector<std::uint32_t> slot_begin;
  std::vector<std::uint32_t> slot_members;
  std::vector<int> slot_ranks;
  // In a fixed order: message failures (peers in program order, then size
  // mismatches by destination rank, then unmatched in program order), then
  // request failures rank by rank, then collective failures by group,
  // group instance and member.
  std::vector<LinkFailure> failures;

  std::uint32_t slot_size(std::uint32_t slot) const { return slot_begin[slot + 1] - slot_begin[slot]; }
};

Link link(const Program& program, const LinkOptions& options = {});

// The completion rule on one rank's stream alone, for the VM: per
// instruction of program.rank(rank), the request (an index into the same
// stream) that the Wait there completes; kNoLink for every other
// instruction and for a Wait with nothing to complete.
std::vector<std::uint32_t> wait_requests(const Program& program, int rank);

// The piece boundary the message `in` of `stage` leaves or enters its piece
// by: boundary b lies between model pieces b - 1 and b (0: the model's input).
int message_boundary(const Program& program, int stage, const Instruction& in);
// The width of the message `in` of `stage` as its own side sees it (the
// boundary it leaves or enters its piece by), -1 when unknown.
int message_width(const Program& program, const std::vector<int>& piece_widths, int stage,
                  const Instruction& in);

}  // namespace pipevm
