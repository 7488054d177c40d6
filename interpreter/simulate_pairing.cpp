// The simulator's static pairing of messages (what a receive takes under
// rendezvous does not depend on timing), and what traces need of it: which
// Wait completes which request, and the send-to-receive flows.
#include <algorithm>
#include <string>

#include "simulate.hpp"
#include "simulate_pairing.hpp"

namespace pipevm {

namespace simulate_detail {

namespace {

struct ChannelKey {
  int source = 0;
  int destination = 0;
  MessageKey key;
  friend bool operator==(const ChannelKey&, const ChannelKey&) = default;
};

struct ChannelHash {
  std::size_t operator()(const ChannelKey& c) const {
    std::uint64_t h = 1469598103934665603ULL;
    const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.source)));
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.destination)));
    mix(static_cast<std::uint64_t>(c.key.kind));
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.key.lane)));
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(c.key.producer)));
    mix(c.key.micro_batch);
    return static_cast<std::size_t>(h);
  }
};

int peer_rank(const Config& config, int rank, const Instruction& in) {
  return rank_of(config, dp_rank_of(config, rank), in.peer);
}

}  // namespace

bool peer_is_valid(const Program& program, int rank, const Instruction& in) {
  return peer_in_pipeline(program.placement, program.config, stage_of(program.config, rank), in);
}

std::vector<std::size_t> pair_partners(const Program& program) {
  const Config& config = program.config;
  std::vector<std::size_t> partner(program.code.size(), kNone);
  const auto send_count =
      static_cast<std::size_t>(std::count_if(program.code.begin(), program.code.end(),
                                             [](const Instruction& in) { return is_send(in.op); }));
  IndexQueues<ChannelKey, ChannelHash> sends(program.code.size(), send_count);
  const auto channel_of = [&](int rank, const Instruction& in) {
    const int peer = peer_rank(config, rank, in);
    const MessageKey key = message_key(program.placement, config, stage_of(config, rank), in);
    return is_send(in.op) ? ChannelKey{rank, peer, key} : ChannelKey{peer, rank, key};
  };
  for (int r = 0; r < program.ranks(); ++r) {
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
         i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      const Instruction& in = program.code[i];
      if (is_send(in.op) && peer_is_valid(program, r, in)) sends.push(channel_of(r, in), i);
    }
  }
  for (int r = 0; r < program.ranks(); ++r) {
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
         i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      const Instruction& in = program.code[i];
      if (!is_recv(in.op) || !peer_is_valid(program, r, in)) continue;
      const std::size_t send = sends.pop(channel_of(r, in));
      if (send == kNone) continue;
      partner[i] = send;
      partner[send] = i;
    }
  }
  return partner;
}

std::size_t requests(const Program& program) {
  return static_cast<std::size_t>(
      std::count_if(program.code.begin(), program.code.end(),
                    [](const Instruction& in) { return posts_request(in.op); }));
}

std::vector<int> owners(const Program& program) {
  std::vector<int> owner(program.code.size(), 0);
  for (int r = 0; r < program.ranks(); ++r) {
    std::fill(owner.begin() +
                  static_cast<std::ptrdiff_t>(program.rank_begin[static_cast<std::size_t>(r)]),
              owner.begin() +
                  static_cast<std::ptrdiff_t>(program.rank_begin[static_cast<std::size_t>(r) + 1]),
              r);
  }
  return owner;
}

}  // namespace simulate_detail

using simulate_detail::IndexQueues;
using simulate_detail::is_point_to_point;
using simulate_detail::kNone;
using simulate_detail::pair_partners;
using simulate_detail::RequestKey;
using simulate_detail::RequestKeyHash;
using simulate_detail::requests;

std::uint64_t request_key(WaitDirection direction, const Instruction& in) {
  return (static_cast<std::uint64_t>(direction) << 50) |
         (static_cast<std::uint64_t>(in.kind) << 48) |
         (static_cast<std::uint64_t>(in.chunk) << 32) | in.micro_batch;
}

std::vector<std::size_t> completing_instructions(const Program& program) {
  std::vector<std::size_t> completer(program.code.size(), kNone);
  IndexQueues<RequestKey, RequestKeyHash> pending_by_key(program.code.size(), requests(program));
  for (int r = 0; r < program.ranks(); ++r) {
    std::vector<std::size_t> pending;
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
         i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      const Instruction& in = program.code[i];
      if (posts_request(in.op)) {
        pending.push_back(i);
        const auto direction = is_send(in.op) ? WaitDirection::send : WaitDirection::recv;
        pending_by_key.push({r, request_key(direction, in)}, i);
      } else if (info(in.op).cls == OpClass::wait && operand_parts(in.op).micro_batch) {
        const std::size_t q =
            pending_by_key.pop({r, request_key(in.direction, in)},
                               [&](std::size_t p) { return completer[p] != kNone; });
        if (q != kNone) completer[q] = i;
      } else if (info(in.op).cls == OpClass::wait) {
        for (std::size_t q : pending) {
          if (completer[q] == kNone) completer[q] = i;
        }
        pending.clear();
      }
    }
  }
  return completer;
}

std::vector<MessageFlow> pair_messages(const Program& program,
                                       std::vector<std::size_t>* unmatched) {
  const std::vector<std::size_t> partner = pair_partners(program);
  std::vector<MessageFlow> flows;
  for (std::size_t i = 0; i < program.code.size(); ++i) {
    const Opcode op = program.code[i].op;
    if (is_send(op) && partner[i] != kNone) flows.push_back({i, partner[i]});
    if (unmatched != nullptr && is_point_to_point(op) && partner[i] == kNone)
      unmatched->push_back(i);
  }
  return flows;
}

}  // namespace pipevm
