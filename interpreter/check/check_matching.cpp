// What fails to link among point-to-point messages, as diagnostics: peers
// that are not the neighbour along the lane (wrong-peer), sends and
// receives that would pair but for their producing positions and disagree
// on the width (size-mismatch), and what is left over (unmatched), counted
// per channel. The pairing itself is the link pass's (link.cpp); deadlock
// is check_progress.cpp's.
#include <algorithm>
#include <map>
#include <tuple>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

std::string kind_word(MessageKind kind) {
  return kind == MessageKind::act ? "activation" : "gradient";
}

// Says why a message's peer is not the neighbouring position along its lane.
void report_peer(const Program& program, std::size_t index, Reporter& reporter) {
  const Instruction& in = program.code[index];
  const Config& c = program.config;
  const int stage = stage_of(c, reporter.rank_of_index(index));
  const bool sending = is_send(in.op);
  const int expected = default_peer(program.placement, c, stage, in.kind, in.chunk, sending);
  const int peer = in.peer;
  const std::string what = "`" + disassemble(in) + "`";
  std::string message;
  if (peer < 0 || peer >= c.stages) {
    if (!in.explicit_peer() && expected < 0) {
      message = what + " has no peer: no stage " + (sending ? "follows" : "precedes") +
                " this chunk's position along the lane for " + kind_word(in.kind) + "s";
    } else {
      message = what + " names stage " + std::to_string(peer) +
                ", outside the pipeline of " + std::to_string(c.stages) + " stages";
    }
  } else if (peer == stage) {
    message = what + " names its own stage " + std::to_string(stage) + " as the peer";
    if (expected >= 0) message += "; the neighbour along the lane is stage " + std::to_string(expected);
  } else if (expected < 0) {
    message = what + " names stage " + std::to_string(peer) + ", but no stage " +
              (sending ? "follows" : "precedes") + " this chunk's position along the lane";
  } else {
    message = what + " names stage " + std::to_string(peer) +
              ", but the neighbouring position along the lane is held by stage " +
              std::to_string(expected);
  }
  reporter.report(DiagnosticKind::WrongPeer, std::move(message), reporter.at(index));
}

std::string piece_role(const Program& program, int stage, const Instruction& in) {
  const int position = position_of(program.placement, program.config, stage, in.chunk).position;
  const std::string piece = "model piece " + std::to_string(position);
  if (is_send(in.op)) {
    return in.kind == MessageKind::act ? "the output of " + piece
                                       : "the gradient of " + piece + "'s input";
  }
  return in.kind == MessageKind::act ? "the input of " + piece
                                     : "the gradient of " + piece + "'s output";
}

void report_size_mismatch(const Program& program, const std::vector<int>& widths,
                          const LinkFailure& failure, Reporter& reporter) {
  const Instruction& receive = program.code[failure.index];
  const Instruction& send = program.code[failure.other];
  const int to_stage = stage_of(program.config, reporter.rank_of_index(failure.index));
  const int from_rank = reporter.rank_of_index(failure.other);
  const int from_stage = stage_of(program.config, from_rank);
  Diagnostic* d = reporter.report(
      DiagnosticKind::SizeMismatch,
      "`" + disassemble(receive) + "` receives " + piece_role(program, to_stage, receive) + " (" +
          std::to_string(message_width(program, widths, to_stage, receive)) +
          " values per sample), but " + reporter.rank_name(from_rank) + " sends " +
          piece_role(program, from_stage, send) + " (" +
          std::to_string(message_width(program, widths, from_stage, send)) +
          " values per sample)",
      reporter.at(failure.index));
  reporter.note(d, "the send: " + reporter.describe(failure.other), reporter.at(failure.other));
}

void report_unmatched(const Program& program, const Link& link, Reporter& reporter) {
  struct Channel {
    std::size_t first = 0;
    std::size_t count = 0;
  };
  using ChannelKey = std::tuple<int, int, int, bool>;  // rank, peer stage, kind, sending
  std::map<ChannelKey, Channel> channels;
  std::vector<ChannelKey> order;
  for (const LinkFailure& failure : link.failures) {
    if (failure.kind != LinkFailureKind::unmatched) continue;
    const Instruction& in = program.code[failure.index];
    const ChannelKey key{reporter.rank_of_index(failure.index), in.peer, static_cast<int>(in.kind),
                         is_send(in.op)};
    auto [it, fresh] = channels.try_emplace(key, Channel{failure.index, 0});
    if (fresh) order.push_back(key);
    ++it->second.count;
  }
  for (const ChannelKey& key : order) {
    const auto& [rank, peer_stage, kind, sending] = key;
    const Channel& channel = channels[key];
    const Instruction& first = program.code[channel.first];
    const int peer = rank_of(program.config, dp_rank_of(program.config, rank), peer_stage);
    const std::string count = std::to_string(channel.count) + " " +
                              kind_word(static_cast<MessageKind>(kind)) +
                              (channel.count == 1 ? "" : "s");
    std::string message =
        sending ? "`" + disassemble(first) + "` is never received: " + reporter.rank_name(peer) +
                      " posts no matching receive (" + count + " sent to it unmatched)"
                : "`" + disassemble(first) + "` is never sent: " + reporter.rank_name(peer) +
                      " posts no matching send (" + count + " expected from it unmatched)";
    reporter.report(sending ? DiagnosticKind::UnmatchedSend : DiagnosticKind::UnmatchedRecv,
                    std::move(message), reporter.at(channel.first));
  }
}

}  // namespace

void report_messages(const Program& program, const Link& link, const std::vector<int>& widths,
                     Reporter& reporter) {
  for (const LinkFailure& failure : link.failures) {
    switch (failure.kind) {
      case LinkFailureKind::peer_outside:
      case LinkFailureKind::peer_not_neighbour:
        report_peer(program, failure.index, reporter);
        break;
      case LinkFailureKind::size_mismatch:
        report_size_mismatch(program, widths, failure, reporter);
        break;
      case LinkFailureKind::unmatched:
      case LinkFailureKind::wait_without_request:
      case LinkFailureKind::never_completed:
      case LinkFailureKind::collective_order:
      case LinkFailureKind::collective_missing:
        break;
    }
  }
  report_unmatched(program, link, reporter);
}

}  // namespace pipevm::check_detail
