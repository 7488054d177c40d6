// The link pass (link.hpp): messages, requests and collectives, each in one
// linear pass over the program.
#include "link.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "topology.hpp"

namespace pipevm {

namespace {

constexpr std::uint32_t kNone = kNoLink;

std::uint32_t index32(std::size_t i) { return static_cast<std::uint32_t>(i); }

// --- messages ----------------------------------------------------------------

// A small open-addressing table from (source rank, message key) to the FIFO
// of one destination rank's receives with that key.
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

// Pairs every send with its receive: the sends are bucketed by destination
// (a counting sort that keeps every source's program order); per
// destination, its receives go into a table, FIFO per key, that each
// incoming send probes once. Leftovers that agree on everything but the
// producing position are size mismatches when the widths say so.
class MessageLinker {
 public:
  MessageLinker(const Program& program, const LinkOptions& options, Link& link)
      : program_(program),
        config_(program.config),
        options_(options),
        link_(link),
        explained_(program.code.size(), false),
        pairable_(program.code.size(), false),
        sends_into_(static_cast<std::size_t>(program.ranks()) + 1, 0),
        receive_count_(static_cast<std::size_t>(program.ranks()), 0),
        expected_peers_(
            static_cast<std::size_t>(std::max(program.config.chunks, 2)) * kKinds * 2,
            kUnknownPeer) {}

  // Before the messages of `rank` are scanned.
  void begin_rank() { std::fill(expected_peers_.begin(), expected_peers_.end(), kUnknownPeer); }

  // Called for every message, rank by rank in program order.
  void scan(std::size_t i, int rank, int stage) {
    const Instruction& in = program_.code[i];
    if (!check_peer(i, stage)) return;
    pairable_[i] = true;
    if (is_send(in.op)) {
      ++sends_into_[static_cast<std::size_t>(peer_rank(rank, in)) + 1];
    } else {
      ++receive_count_[static_cast<std::size_t>(rank)];
    }
  }

  // After the scan: pairs, and records what pairs with nothing.
  void pair() {
    const auto ranks = static_cast<std::size_t>(program_.ranks());
    for (std::size_t r = 0; r < ranks; ++r) sends_into_[r + 1] += sends_into_[r];
    sends_.resize(sends_into_.back());
    {
      std::vector<std::size_t> fill(sends_into_.begin(), sends_into_.end() - 1);
      for (std::size_t r = 0; r < ranks; ++r) {
        for (std::size_t i = program_.rank_begin[r]; i < program_.rank_begin[r + 1]; ++i) {
          if (!is_send(program_.code[i].op) || !pairable_[i]) continue;
          const auto to = static_cast<std::size_t>(peer_rank(static_cast<int>(r), program_.code[i]));
          sends_[fill[to]++] = index32(i);
        }
      }
    }
    for (std::size_t b = 0; b < ranks; ++b) {
      link_destination(static_cast<int>(b), sends_into_[b], sends_into_[b + 1], receive_count_[b]);
    }
    // Every pairable message paired: nothing is unmatched, no need to look.
    const std::size_t receives =
        std::accumulate(receive_count_.begin(), receive_count_.end(), std::size_t{0});
    if (2 * pairs_ == sends_.size() + receives) return;
    for (std::size_t i = 0; i < program_.code.size(); ++i) {
      if (pairable_[i] && link_.to[i] == kNone && !explained_[i]) {
        link_.failures.push_back({LinkFailureKind::unmatched, index32(i), kNone});
      }
    }
  }

 private:
  int peer_rank(int rank, const Instruction& in) const {
    return rank_of(config_, dp_rank_of(config_, rank), in.peer);
  }

  // Records a peer that is not the neighbouring position along the lane;
  // true when the message can pair at all (its peer is a stage).
  bool check_peer(std::size_t index, int stage) {
    const Instruction& in = program_.code[index];
    const int expected = expected_peer(stage, in);
    const bool stage_peer = in.peer >= 0 && in.peer < config_.stages;
    if (stage_peer && in.peer == expected) return true;
    explained_[index] = true;
    const bool reachable = peer_in_pipeline(program_.placement, config_, stage, in);
    link_.failures.push_back(
        {reachable ? LinkFailureKind::peer_not_neighbour : LinkFailureKind::peer_outside,
         index32(index), kNone});
    return stage_peer;
  }

  // default_peer of the rank being scanned, remembered by (chunk, kind,
  // direction): a rank's messages ask for a few, most of them many times.
  int expected_peer(int stage, const Instruction& in) {
    const std::size_t at =
        (static_cast<std::size_t>(in.chunk) * kKinds + static_cast<std::size_t>(in.kind)) * 2 +
        (is_send(in.op) ? 1 : 0);
    if (at >= expected_peers_.size()) {
      return default_peer(program_.placement, config_, stage, in.kind, in.chunk, is_send(in.op));
    }
    int& expected = expected_peers_[at];
    if (expected == kUnknownPeer) {
      expected = default_peer(program_.placement, config_, stage, in.kind, in.chunk, is_send(in.op));
    }
    return expected;
  }

  void link_destination(int b, std::size_t first_send, std::size_t end_send,
                        std::size_t receives) {
    const int stage = stage_of(config_, b);
    const int dp_rank = dp_rank_of(config_, b);
    const std::size_t begin = program_.rank_begin[static_cast<std::size_t>(b)];
    const std::size_t end = program_.rank_begin[static_cast<std::size_t>(b) + 1];
    table_.reset(receives);
    next_receive_.assign(end - begin, kNone);
    for (std::size_t i = begin; i < end; ++i) {
      const Instruction& in = program_.code[i];
      if (!is_recv(in.op) || !pairable_[i]) continue;
      const KeyWords k = pack(rank_of(config_, dp_rank, in.peer),
                              message_key(program_.placement, config_, stage, in));
      auto& fifo = table_.insert(k.a, k.b);
      if (fifo.first == kNone) {
        fifo.first = index32(i);
      } else {
        next_receive_[fifo.second - begin] = index32(i);
      }
      fifo.second = index32(i);
    }
    left_sends_.clear();
    int source = 0;
    for (std::size_t s = first_send; s < end_send; ++s) {
      while (program_.rank_begin[static_cast<std::size_t>(source) + 1] <= sends_[s]) ++source;
      const SendRef send{sends_[s], source};
      const Instruction& in = program_.code[send.index];
      const KeyWords k = pack(
          send.rank, message_key(program_.placement, config_, stage_of(config_, send.rank), in));
      auto* fifo = table_.find(k.a, k.b);
      if (fifo == nullptr || fifo->first == kNone) {
        left_sends_.push_back(send);
        continue;
      }
      const std::uint32_t receive = fifo->first;
      fifo->first = next_receive_[receive - begin];
      link_.to[send.index] = receive;
      link_.to[receive] = send.index;
      ++pairs_;
    }
    if (left_sends_.empty() || options_.piece_widths.empty()) return;
    left_receives_.clear();
    for (std::size_t i = begin; i < end; ++i) {
      if (pairable_[i] && is_recv(program_.code[i].op) && link_.to[i] == kNone) {
        left_receives_.push_back(index32(i));
      }
    }
    if (!left_receives_.empty()) pair_loosely(b);
  }

  // Sends and receives of one destination that found no partner with the
  // full key but share (source, kind, micro-batch): the producing positions
  // differ, and so, when the widths say so, do their sizes.
  void pair_loosely(int destination) {
    using Loose = std::tuple<int, int, std::uint32_t>;
    std::map<Loose, std::vector<std::uint32_t>> waiting;  // FIFO, front first
    for (const std::uint32_t r : left_receives_) {
      const Instruction& in = program_.code[r];
      waiting[{peer_rank(destination, in), static_cast<int>(in.kind), in.micro_batch}].push_back(r);
    }
    std::map<Loose, std::size_t> taken;
    const int to_stage = stage_of(config_, destination);
    for (const SendRef& s : left_sends_) {
      const Instruction& send = program_.code[s.index];
      const Loose key{s.rank, static_cast<int>(send.kind), send.micro_batch};
      const auto it = waiting.find(key);
      if (it == waiting.end()) continue;
      std::size_t& next = taken[key];
      if (next >= it->second.size()) continue;
      const std::uint32_t r = it->second[next++];
      const int sent =
          message_width(program_, options_.piece_widths, stage_of(config_, s.rank), send);
      const int expected =
          message_width(program_, options_.piece_widths, to_stage, program_.code[r]);
      if (sent < 0 || expected < 0 || sent == expected) continue;
      explained_[r] = true;
      explained_[s.index] = true;
      link_.failures.push_back({LinkFailureKind::size_mismatch, r, s.index});
    }
  }

  const Program& program_;
  const Config& config_;
  const LinkOptions& options_;
  Link& link_;
  std::vector<bool> explained_;  // a failure already says why it does not pair
  std::vector<bool> pairable_;   // a message whose peer is a stage
  std::vector<std::size_t> sends_into_;     // counts, then offsets into sends_, by destination
  std::vector<std::size_t> receive_count_;  // per rank
  std::size_t pairs_ = 0;                   // sends linked to a receive
  // Sends by destination rank, each destination's in program order, so in
  // the order of their source ranks (which link_destination recovers).
  std::vector<std::uint32_t> sends_;
  ReceiveTable table_;
  std::vector<std::uint32_t> next_receive_;
  std::vector<SendRef> left_sends_;
  std::vector<std::uint32_t> left_receives_;
  static constexpr std::size_t kKinds = 4;  // MessageKind's values
  static constexpr int kUnknownPeer = std::numeric_limits<int>::min();
  std::vector<int> expected_peers_;  // expected_peer's memory: (chunk, kind, direction)
};

// --- requests ----------------------------------------------------------------

// The completion rule, one rank at a time. Pending requests are kept in
// posting order and, per (family, chunk, micro-batch), in FIFOs linked
// through per-instruction arrays, so each step is O(1). A family is a
// message's direction and kind, or a host copy's direction (Offload, Reload).
// A request whose chunk or micro-batch is out of the configuration's range
// has no FIFO: only WaitAll completes it.
class RequestLinker {
 public:
  explicit RequestLinker(const Program& program)
      : program_(program),
        chunks_(std::max(program.config.chunks, program.placement == Placement::looped ? 1 : 2)),
        micro_batches_(std::max(0, program.config.micro_batches)),
        cells_(static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(micro_batches_)),
        fifo_(kFamilies * cells_, {kNone, kNone}) {}

  // One rank at a time, in program order (local indices into its stream).
  void begin_rank(int rank) {
    begin_ = program_.rank_begin[static_cast<std::size_t>(rank)];
    posted_.clear();
    oldest_ = 0;
    collective_.clear();
    collective_head_ = 0;
  }

  // A request-posting instruction.
  void post(std::uint32_t local) {
    const auto p = index32(posted_.size());
    const Instruction& in = program_.code[begin_ + local];
    posted_.push_back({local, kNone, false, is_collective(in.op)});
    if (is_collective(in.op)) {
      collective_.push_back(p);
      return;
    }
    const std::size_t c = cell(in);
    if (c == cells_) return;
    Fifo& fifo = fifo_[slot(request_family(in), c)];
    (fifo.first == kNone ? fifo.first : posted_[fifo.second].fifo_next) = p;
    fifo.second = p;
  }

  // A wait-class instruction: complete(request) for every request it
  // completes, in completion order; false for a Wait with nothing to complete.
  template <class Complete>
  bool wait(std::size_t local, Complete complete) {
    const Instruction& in = program_.code[begin_ + local];
    if (info(in.op).group != Group::none) {
      // A collective's wait (GossipWait): the oldest pending collective request.
      while (collective_head_ < collective_.size() && posted_[collective_[collective_head_]].done) {
        ++collective_head_;
      }
      if (collective_head_ == collective_.size()) return false;
      const std::uint32_t p = collective_[collective_head_++];
      take(p);
      complete(posted_[p].local);
      return true;
    }
    if (!operand_parts(in.op).micro_batch) {
      // WaitAll: every pending point-to-point request and host copy, oldest first.
      for (std::size_t p = oldest_; p < posted_.size(); ++p) {
        if (posted_[p].done || posted_[p].collective) continue;
        take(index32(p));
        complete(posted_[p].local);
      }
      while (oldest_ < posted_.size() && posted_[oldest_].done) ++oldest_;
      return true;
    }
    const std::size_t c = cell(in);
    const std::uint32_t p = c == cells_ ? kNone : fifo_[slot(wait_family(in), c)].first;
    if (p == kNone) return false;
    take(p);
    complete(posted_[p].local);
    return true;
  }

  // At the end of the rank: never(request) for each request left pending,
  // oldest first.
  template <class Never>
  void end_rank(Never never) {
    for (std::size_t p = oldest_; p < posted_.size(); ++p) {
      if (posted_[p].done) continue;
      never(posted_[p].local);
      if (posted_[p].collective) continue;
      // Leave every FIFO empty for the next rank.
      const Instruction& in = program_.code[begin_ + posted_[p].local];
      if (const std::size_t c = cell(in); c != cells_) {
        fifo_[slot(request_family(in), c)] = {kNone, kNone};
      }
    }
  }

 private:
  using Fifo = std::pair<std::uint32_t, std::uint32_t>;  // head, tail: indices into posted_

  std::size_t cell(const Instruction& in) const {
    if (in.chunk >= chunks_ || in.micro_batch >= static_cast<std::uint32_t>(micro_batches_)) {
      return cells_;
    }
    return static_cast<std::size_t>(in.chunk) * static_cast<std::size_t>(micro_batches_) +
           in.micro_batch;
  }
  // Sends and receives of activations and gradients, offloads, reloads.
  static constexpr std::size_t kFamilies = 6;
  static std::size_t family(bool receive, MessageKind kind, Direction copy) {
    if (copy == Direction::to_host) return 4;
    if (copy == Direction::from_host) return 5;
    return (receive ? 2U : 0U) + (kind == MessageKind::grad ? 1U : 0U);
  }
  // The family of the request an instruction posts, and of those a wait of
  // one cell completes (Wait by its operands, the host copies' waits by their row).
  static std::size_t request_family(const Instruction& in) {
    return family(is_recv(in.op), in.kind, info(in.op).direction);
  }
  static std::size_t wait_family(const Instruction& in) {
    return family(in.direction == WaitDirection::recv, in.kind, info(in.op).direction);
  }
  std::size_t slot(std::size_t request_family, std::size_t c) const {
    return request_family * cells_ + c;
  }

  // Marks a pending request done and takes it off its key's FIFO, whose
  // head it is: requests of one key complete oldest first, under Wait by
  // the rule and under WaitAll because it goes in posting order.
  void take(std::uint32_t p) {
    posted_[p].done = true;
    if (posted_[p].collective) return;
    const Instruction& in = program_.code[begin_ + posted_[p].local];
    const std::size_t c = cell(in);
    if (c == cells_) return;
    Fifo& fifo = fifo_[slot(request_family(in), c)];
    fifo.first = posted_[p].fifo_next;
    if (fifo.first == kNone) fifo.second = kNone;
  }

  const Program& program_;
  const int chunks_;
  const int micro_batches_;
  const std::size_t cells_;
  std::vector<Fifo> fifo_;
  // The rank's requests in posting order; every one before oldest_ is done.
  struct Posted {
    std::uint32_t local;      // index in the rank's stream
    std::uint32_t fifo_next;  // the next request of its key, into posted_
    bool done;                // a wait completed it
    bool collective;          // a collective's request (GossipStart): no FIFO of cells
  };
  std::vector<Posted> posted_;
  // The rank's collective requests in posting order, into posted_; every
  // one before collective_head_ is done.
  std::vector<std::uint32_t> collective_;
  std::size_t collective_head_ = 0;
  std::size_t oldest_ = 0;
  std::size_t begin_ = 0;
};

// --- collectives -------------------------------------------------------------

// Per group instance: each member's collectives over it, in order; slot k is
// everyone's k-th. Members are compared with the first member: the first
// difference, or the first collective one of them lacks, is a failure.
class CollectiveLinker {
 public:
  CollectiveLinker(const Program& program, Link& link) : program_(program), link_(link) {}

  // Called for every collective, rank by rank in program order.
  void add(int rank, std::size_t i) {
    by_group_[static_cast<std::size_t>(group_of(program_.code[i]))].emplace_back(rank, index32(i));
  }

  // After the scan: the slots of every group instance, and what differs.
  void run() {
    const Config& config = program_.config;
    for (std::size_t g = 0; g < kGroupCount; ++g) {
      if (by_group_[g].empty()) continue;
      const auto group = static_cast<Group>(g);
      if (group == Group::gossip) {
        run_gossip();
        link_alone();
        continue;
      }
      issued_.clear();
      for (const auto& [rank, index] : by_group_[g]) issued_[rank].push_back(index);
      const int instances = group_instance_count(group, program_.placement, config);
      for (int instance = 0; instance < instances; ++instance) {
        group_members(group, program_.placement, config, instance, members_);
        link_instance();
      }
    }
  }

 private:
  // The gossip group's instances depend on the round each exchange uses
  // (an exchange keeps it in its micro-batch field): round by round, the
  // exchanges of that round meet within that round's groups.
  void run_gossip() {
    if (!program_.topology) return;
    const Topology& topology = *program_.topology;
    const Config& config = program_.config;
    const auto& all = by_group_[static_cast<std::size_t>(Group::gossip)];
    const int instances = gossip_instance_count(topology, config);
    for (int round = 0; round < topology.round_count(); ++round) {
      issued_.clear();
      for (const auto& [rank, index] : all) {
        if (program_.code[index].micro_batch == static_cast<std::uint32_t>(round)) {
          issued_[rank].push_back(index);
        }
      }
      if (issued_.empty()) continue;
      for (int instance = 0; instance < instances; ++instance) {
        if (gossip_round_of_instance(topology, config, instance) != round) continue;
        gossip_members(topology, config, instance, members_);
        if (!members_.empty()) link_instance();
      }
    }
  }

  // A gossip exchange no group holds (no topology, or a round that leaves
  // its rank out, which the checker reports) exchanges with itself alone.
  void link_alone() {
    for (const auto& [rank, index] : by_group_[static_cast<std::size_t>(Group::gossip)]) {
      if (link_.to[index] != kNone) continue;
      link_.to[index] = index32(link_.slot_begin.size() - 1);
      link_.slot_members.push_back(index);
      link_.slot_ranks.push_back(rank);
      link_.slot_begin.push_back(index32(link_.slot_members.size()));
    }
  }

  const std::vector<std::uint32_t>& of(int rank) {
    static const std::vector<std::uint32_t> none;
    const auto found = issued_.find(rank);
    return found == issued_.end() ? none : found->second;
  }

  void link_instance() {
    std::size_t slots = 0;
    bool any = false;
    for (const int m : members_) {
      if (m >= program_.ranks()) continue;
      slots = std::max(slots, of(m).size());
      any = any || !of(m).empty();
    }
    if (!any) return;
    for (std::size_t k = 0; k < slots; ++k) {
      const auto slot = index32(link_.slot_begin.size() - 1);
      for (const int m : members_) {
        const std::uint32_t i = m < program_.ranks() && k < of(m).size() ? of(m)[k] : kNone;
        link_.slot_members.push_back(i);
        link_.slot_ranks.push_back(m);
        if (i != kNone) link_.to[i] = slot;
      }
      link_.slot_begin.push_back(index32(link_.slot_members.size()));
    }
    const int base = members_.front();
    for (std::size_t m = 1; m < members_.size(); ++m) {
      if (members_[m] >= program_.ranks()) break;
      compare(base, members_[m]);
    }
  }

  void compare(int base, int other) {
    const std::vector<std::uint32_t>& a = of(base);
    const std::vector<std::uint32_t>& b = of(other);
    const std::size_t common = std::min(a.size(), b.size());
    for (std::size_t k = 0; k < common; ++k) {
      if (same_operands(program_.code[a[k]], program_.code[b[k]])) continue;
      link_.failures.push_back({LinkFailureKind::collective_order, b[k], a[k]});
      return;
    }
    if (a.size() == b.size()) return;
    const bool base_longer = a.size() > b.size();
    link_.failures.push_back({LinkFailureKind::collective_missing,
                              base_longer ? a[common] : b[common],
                              static_cast<std::uint32_t>(base_longer ? other : base)});
  }

  const Program& program_;
  Link& link_;
  // Every collective, by group, in rank and program order.
  std::array<std::vector<std::pair<int, std::uint32_t>>, kGroupCount> by_group_;
  std::map<int, std::vector<std::uint32_t>> issued_;  // rank -> its collectives over the group
  std::vector<int> members_;
};

}  // namespace

Link link(const Program& program, const LinkOptions& options) {
  Link out;
  out.to.assign(program.code.size(), kNone);
  out.completes_begin.push_back(0);
  out.slot_begin.push_back(0);
  MessageLinker messages(program, options, out);
  RequestLinker requests(program);
  CollectiveLinker collectives(program, out);
  std::vector<LinkFailure> request_failures;
  // One pass over every instruction, rank by rank, in program order.
  for (int r = 0; r < program.ranks(); ++r) {
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    const std::size_t end = program.rank_begin[static_cast<std::size_t>(r) + 1];
    const int stage = stage_of(program.config, r);
    requests.begin_rank(r);
    messages.begin_rank();
    for (std::size_t i = begin; i < end; ++i) {
      const OpcodeInfo& row = info(program.code[i].op);
      switch (row.cls) {
        case OpClass::p2p: messages.scan(i, r, stage); break;
        case OpClass::wait: {
          const bool found = requests.wait(i - begin, [&](std::uint32_t request) {
            out.completed.push_back(index32(begin + request));
          });
          if (!found) {
            request_failures.push_back({LinkFailureKind::wait_without_request, index32(i), kNone});
          }
          out.to[i] = index32(out.completes_begin.size() - 1);
          out.completes_begin.push_back(index32(out.completed.size()));
          break;
        }
        case OpClass::collective: collectives.add(r, i); break;
        case OpClass::data:
        case OpClass::compute:
        case OpClass::optimizer: break;
      }
      if (row.completion == Completion::request) requests.post(index32(i - begin));
    }
    requests.end_rank([&](std::uint32_t request) {
      request_failures.push_back({LinkFailureKind::never_completed, index32(begin + request), kNone});
    });
  }
  messages.pair();
  out.failures.insert(out.failures.end(), request_failures.begin(), request_failures.end());
  collectives.run();
  return out;
}

std::vector<std::uint32_t> wait_requests(const Program& program, int rank) {
  const auto stream = program.rank(rank);
  std::vector<std::uint32_t> request_of(stream.size(), kNone);
  RequestLinker requests(program);
  requests.begin_rank(rank);
  for (std::size_t local = 0; local < stream.size(); ++local) {
    const Instruction& in = stream[local];
    if (info(in.op).cls == OpClass::wait) {
      requests.wait(local, [&](std::uint32_t request) {
        if (operand_parts(in.op).micro_batch) request_of[local] = request;
      });
    }
    if (posts_request(in.op)) requests.post(index32(local));
  }
  return request_of;
}

int message_boundary(const Program& program, int stage, const Instruction& in) {
  const int position = position_of(program.placement, program.config, stage, in.chunk).position;
  // Activations leave a piece at its output and enter at its input;
  // gradients go the other way.
  return (is_send(in.op) == (in.kind == MessageKind::act)) ? position + 1 : position;
}

int message_width(const Program& program, const std::vector<int>& piece_widths, int stage,
                  const Instruction& in) {
  const int boundary = message_boundary(program, stage, in);
  if (boundary < 0 || static_cast<std::size_t>(boundary) >= piece_widths.size()) return -1;
  return piece_widths[static_cast<std::size_t>(boundary)];
}

}  // namespace pipevm
