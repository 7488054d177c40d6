// Static pairing of point-to-point messages. With no wildcard receives, MPI's
// non-overtaking rule decides which receive takes which send before anything
// runs: the i-th send from rank A to rank B with message key K pairs with
// B's i-th receive from A with key K. So pairing needs no simulation: this
// pass links each send to its receive once, and the simulation only asks
// whether the partner has been posted yet.
//
// Here too: peers that are not the neighbour along the lane (wrong-peer),
// sends and receives that pair only when the producer position is ignored
// and then disagree on the width (size-mismatch), and what is left over
// (unmatched), counted per channel. Deadlock is left to check_progress.cpp.
#include <algorithm>
#include <map>
#include <tuple>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

bool is_message(Opcode op) { return info(op).cls == OpClass::p2p; }

std::string kind_word(MessageKind kind) {
  return kind == MessageKind::act ? "activation" : "gradient";
}

// Reports a peer that is not the neighbouring position along the lane.
// Returns false when the peer is not a stage at all (nothing can pair).
bool check_peer(const Program& program, std::size_t index, int stage, Reporter& reporter,
                std::vector<bool>& explained) {
  const Instruction& in = program.code[index];
  const Config& c = program.config;
  const bool sending = is_send(in.op);
  const int expected = default_peer(program.placement, c, stage, in.kind, in.chunk, sending);
  const int peer = in.peer;
  if (peer >= 0 && peer < c.stages && peer == expected) return true;
  explained[index] = true;
  const std::string what = "`" + disassemble(in) + "`";
  std::string message;
  if (peer < 0 || peer >= c.stages) {
    if (!in.explicit_peer && expected < 0) {
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
  return peer >= 0 && peer < c.stages;
}

// A small open-addressing table from (source rank, message key) to the
// FIFO of one destination rank's receives with that key.
class ReceiveTable {
 public:
  void reset(std::size_t entries) {
    std::size_t capacity = 16;
    while (capacity < 2 * entries) capacity *= 2;
    slots_.assign(capacity, Slot{});
  }
  // The FIFO for (a, b), created empty when absent.
  std::pair<std::uint32_t, std::uint32_t>& insert(std::uint64_t a, std::uint64_t b) {
    Slot& slot = slots_[probe(a, b)];
    if (!slot.used) {
      slot.used = true;
      slot.a = a;
      slot.b = b;
    }
    return slot.fifo;
  }
  // The FIFO for (a, b); null when no receive has that key.
  std::pair<std::uint32_t, std::uint32_t>* find(std::uint64_t a, std::uint64_t b) {
    Slot& slot = slots_[probe(a, b)];
    return slot.used ? &slot.fifo : nullptr;
  }

 private:
  static std::size_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<std::size_t>(x);
  }
  std::size_t probe(std::uint64_t a, std::uint64_t b) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t at = mix(a ^ mix(b)) & mask;
    while (slots_[at].used && (slots_[at].a != a || slots_[at].b != b)) at = (at + 1) & mask;
    return at;
  }
  struct Slot {
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::pair<std::uint32_t, std::uint32_t> fifo{kNone, kNone};  // head, tail
    bool used = false;
  };
  std::vector<Slot> slots_;
};

struct KeyWords {
  std::uint64_t a;
  std::uint64_t b;
};

KeyWords pack(int other_rank, const MessageKey& key) {
  const auto a = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(other_rank)) << 32) |
                 static_cast<std::uint32_t>(key.producer);
  const auto b = (static_cast<std::uint64_t>(key.micro_batch) << 32) |
                 (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key.lane)) << 8) |
                 static_cast<std::uint64_t>(key.kind);
  return {a, b};
}

struct SendRef {
  std::uint32_t index;
  int rank;
};

// The width of a message as its side sees it, or -1 when unknown.
int message_width(const Program& program, const std::vector<int>& widths, int stage,
                  const Instruction& in) {
  const int position = position_of(program.placement, program.config, stage, in.chunk).position;
  const bool sending = is_send(in.op);
  const bool act = in.kind == MessageKind::act;
  // Activations leave a piece at its output and enter at its input;
  // gradients go the other way.
  const int boundary = (sending == act) ? position + 1 : position;
  if (boundary < 0 || static_cast<std::size_t>(boundary) >= widths.size()) return -1;
  return widths[static_cast<std::size_t>(boundary)];
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

// Sends and receives of one destination that found no partner with the full
// key but share (source, kind, micro-batch): the producer positions differ.
void pair_loosely(const Program& program, const std::vector<int>& widths,
                  const std::vector<SendRef>& sends, const std::vector<std::uint32_t>& receives,
                  int destination, Reporter& reporter, std::vector<bool>& explained) {
  using Loose = std::tuple<int, int, std::uint32_t>;
  std::map<Loose, std::vector<std::uint32_t>> waiting;  // FIFO, front first
  for (const std::uint32_t r : receives) {
    const Instruction& in = program.code[r];
    const int source = rank_of(program.config, dp_rank_of(program.config, destination), in.peer);
    waiting[{source, static_cast<int>(in.kind), in.micro_batch}].push_back(r);
  }
  std::map<Loose, std::size_t> taken;
  const int to_stage = stage_of(program.config, destination);
  for (const SendRef& s : sends) {
    const Instruction& send = program.code[s.index];
    const Loose key{s.rank, static_cast<int>(send.kind), send.micro_batch};
    const auto it = waiting.find(key);
    if (it == waiting.end()) continue;
    std::size_t& next = taken[key];
    if (next >= it->second.size()) continue;
    const std::uint32_t r = it->second[next++];
    const Instruction& receive = program.code[r];
    const int from_stage = stage_of(program.config, s.rank);
    const int sent = message_width(program, widths, from_stage, send);
    const int expected = message_width(program, widths, to_stage, receive);
    if (sent < 0 || expected < 0 || sent == expected) continue;
    explained[r] = true;
    explained[s.index] = true;
    Diagnostic* d = reporter.report(
        DiagnosticKind::SizeMismatch,
        "`" + disassemble(receive) + "` receives " + piece_role(program, to_stage, receive) +
            " (" + std::to_string(expected) + " values per sample), but " +
            reporter.rank_name(s.rank) + " sends " + piece_role(program, from_stage, send) +
            " (" + std::to_string(sent) + " values per sample)",
        reporter.at(r));
    reporter.note(d, "the send: " + reporter.describe(s.index), reporter.at(s.index));
  }
}

void report_unmatched(const Program& program, const Links& links,
                      const std::vector<bool>& explained, Reporter& reporter) {
  struct Channel {
    std::size_t first = 0;
    std::size_t count = 0;
  };
  using ChannelKey = std::tuple<int, int, int, bool>;  // rank, peer stage, kind, sending
  std::map<ChannelKey, Channel> channels;
  std::vector<ChannelKey> order;
  for (int r = 0; r < program.ranks(); ++r) {
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
    for (std::size_t i = begin; i < end; ++i) {
      const Instruction& in = program.code[i];
      if (!is_message(in.op) || links.link[i] != kNone || explained[i]) continue;
      const ChannelKey key{r, in.peer, static_cast<int>(in.kind), is_send(in.op)};
      auto [it, fresh] = channels.try_emplace(key, Channel{i, 0});
      if (fresh) order.push_back(key);
      ++it->second.count;
    }
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

void match_messages(const Program& program, const std::vector<int>& widths, Links& links,
                    Reporter& reporter) {
  const Config& c = program.config;
  const int ranks = program.ranks();
  std::vector<bool> explained(program.code.size(), false);

  // Wrong peers, and the sends each rank receives, by destination (a
  // counting sort that keeps every source's program order).
  std::vector<std::size_t> sends_into(static_cast<std::size_t>(ranks) + 1, 0);
  std::vector<std::size_t> receive_count(static_cast<std::size_t>(ranks), 0);
  std::vector<bool> peer_valid(program.code.size(), false);
  for (int r = 0; r < ranks; ++r) {
    const int stage = stage_of(c, r);
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
    for (std::size_t i = begin; i < end; ++i) {
      const Instruction& in = program.code[i];
      if (!is_message(in.op)) continue;
      if (!check_peer(program, i, stage, reporter, explained)) continue;
      peer_valid[i] = true;
      if (is_send(in.op)) {
        ++sends_into[static_cast<std::size_t>(rank_of(c, dp_rank_of(c, r), in.peer)) + 1];
      } else {
        ++receive_count[static_cast<std::size_t>(r)];
      }
    }
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) sends_into[r + 1] += sends_into[r];
  std::vector<SendRef> sends(sends_into.back());
  {
    std::vector<std::size_t> fill(sends_into.begin(), sends_into.end() - 1);
    for (int r = 0; r < ranks; ++r) {
      const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
      const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
      for (std::size_t i = begin; i < end; ++i) {
        const Instruction& in = program.code[i];
        if (!peer_valid[i] || !is_send(in.op)) continue;
        const auto to = static_cast<std::size_t>(rank_of(c, dp_rank_of(c, r), in.peer));
        sends[fill[to]++] = SendRef{static_cast<std::uint32_t>(i), r};
      }
    }
  }

  // Per destination: its receives in a table, FIFO per key; then its
  // incoming sends in order, each taking the oldest receive of its key.
  ReceiveTable table;
  std::vector<std::uint32_t> next_receive;
  std::vector<SendRef> left_sends;
  std::vector<std::uint32_t> left_receives;
  for (int b = 0; b < ranks; ++b) {
    const int stage = stage_of(c, b);
    const int dp_rank = dp_rank_of(c, b);
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(b)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(b) + 1];
    table.reset(receive_count[static_cast<std::size_t>(b)]);
    next_receive.assign(end - begin, kNone);
    for (std::size_t i = begin; i < end; ++i) {
      const Instruction& in = program.code[i];
      if (!peer_valid[i] || !is_recv(in.op)) continue;
      const KeyWords k =
          pack(rank_of(c, dp_rank, in.peer), message_key(program.placement, c, stage, in));
      auto& fifo = table.insert(k.a, k.b);
      const auto index = static_cast<std::uint32_t>(i);
      if (fifo.first == kNone) {
        fifo.first = index;
      } else {
        next_receive[fifo.second - begin] = index;
      }
      fifo.second = index;
    }
    left_sends.clear();
    for (std::size_t s = sends_into[static_cast<std::size_t>(b)];
         s < sends_into[static_cast<std::size_t>(b) + 1]; ++s) {
      const SendRef send = sends[s];
      const Instruction& in = program.code[send.index];
      const KeyWords k =
          pack(send.rank, message_key(program.placement, c, stage_of(c, send.rank), in));
      auto* fifo = table.find(k.a, k.b);
      if (fifo == nullptr || fifo->first == kNone) {
        left_sends.push_back(send);
        continue;
      }
      const std::uint32_t receive = fifo->first;
      fifo->first = next_receive[receive - begin];
      links.link[send.index] = receive;
      links.link[receive] = send.index;
    }
    left_receives.clear();
    for (std::size_t i = begin; i < end; ++i) {
      if (peer_valid[i] && is_recv(program.code[i].op) && links.link[i] == kNone) {
        left_receives.push_back(static_cast<std::uint32_t>(i));
      }
    }
    if (!left_sends.empty() && !left_receives.empty()) {
      pair_loosely(program, widths, left_sends, left_receives, b, reporter, explained);
    }
  }
  report_unmatched(program, links, explained, reporter);
}

}  // namespace pipevm::check_detail
