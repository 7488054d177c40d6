// Progress: can every rank run to the end of its stream? A worklist runs all
// ranks together under rendezvous semantics (a blocking send completes only
// once its receive is posted; MPI promises no more), each rank as far as it
// can, and wakes a blocked rank when what it waits for happens. Sends and
// receives are paired, waits resolved to their requests and collectives to
// their slots by the link pass (link.hpp), so each step is O(1) and the
// whole run is linear. With no wildcards the stuck state does not depend on the order the
// worklist picks ranks: one run covers every interleaving.
//
// When the run gets stuck, the wait-for graph of the stuck ranks gives the
// shortest cycle (breadth-first). A second run with eager buffering (every
// send completes at once) tells a buffering hazard (that run finishes, or
// sticks only where nothing waits in a cycle) from a deadlock. Ranks that
// wait for a message nobody sends, or for a collective a finished rank never
// issues, are reported by the static passes instead.
//
// In posted order (CheckOptions::p2p_posted_order, NCCL's semantics) a rank's
// point-to-point operations run one after another in the order they were
// posted: only the oldest unmatched one of a rank can meet its partner, and
// the next starts when it has. Messages a rank sends itself are not queued.
#include <algorithm>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

enum class RankState : std::uint8_t { running, on_request, on_collective, finished };

bool blocking_send(Opcode op) {
  return is_send(op) && info(op).completion == Completion::blocking;
}

class Engine {
 public:
  Engine(const Program& program, const Link& link, const Reporter& reporter, bool eager,
         bool posted_order)
      : program_(program),
        link_(link),
        reporter_(reporter),
        eager_(eager),
        posted_order_(posted_order),
        stream_(posted_order ? static_cast<std::size_t>(program.ranks()) : 0),
        stream_head_(stream_.size(), 0),
        ranks_(static_cast<std::size_t>(program.ranks())),
        posted_(program.code.size(), 0),
        pc_(ranks_),
        state_(ranks_, RankState::running),
        blocked_on_(ranks_, kNone),
        wait_cursor_(ranks_, kNone),
        arrivals_(link.slot_begin.size() - 1, 0) {
    for (std::size_t r = 0; r < ranks_; ++r) pc_[r] = program.rank_begin[r];
  }

  // True when every rank reached the end of its stream.
  bool run();

  struct Edge {
    int from = 0;
    int to = 0;
  };
  // The shortest cycle of the wait-for graph of the stuck state, starting at
  // its lowest rank; empty when there is none.
  std::vector<Edge> shortest_cycle() const;
  std::vector<int> stuck_ranks() const;
  std::size_t pc(int rank) const { return pc_[static_cast<std::size_t>(rank)]; }
  bool on_collective(int rank) const {
    return state_[static_cast<std::size_t>(rank)] == RankState::on_collective;
  }

 private:
  // kWaitedOn: a rank blocked on this request at some point, so its
  // partner's posting must look the rank up and wake it. kActive: it can
  // meet its partner (at once when posted; in posted order, once every
  // older operation of its rank has met its own).
  enum : std::uint8_t { kPosted = 1, kMatched = 2, kWaitedOn = 4, kActive = 8 };

  bool satisfied(std::uint32_t request) const {
    // Only messages are ever matched: the common case reads no instruction.
    if (posted_[request] & kMatched) return true;
    const Opcode op = program_.code[request].op;
    // A host copy (Offload, Reload) needs no other rank: it completes.
    if (is_host_copy(op)) return true;
    if (is_collective(op)) {
      // A collective's request (GossipStart): done when its slot is full.
      const std::uint32_t slot = link_.to[request];
      return slot != kNone && arrivals_[slot] == link_.slot_size(slot);
    }
    return eager_ && is_send(op);
  }
  // `rank` is the one that posted `index`: the callers know it, and the
  // partner's rank follows from the peer (the link pairs within a replica),
  // so the run never searches for whose instruction an index is.
  void post(std::size_t rank, std::size_t index);
  void activate(std::size_t rank, std::size_t index);
  std::size_t peer_rank(std::size_t rank, std::size_t index) const {
    const Config& c = program_.config;
    return static_cast<std::size_t>(
        rank_of(c, dp_rank_of(c, static_cast<int>(rank)), program_.code[index].peer));
  }
  void wake_if_blocked_on(std::size_t rank, std::uint32_t request) {
    if (state_[rank] == RankState::on_request && blocked_on_[rank] == request) wake(rank);
  }
  // Posted order: drop the rank's finished operations from the front of its
  // stream and activate the next one.
  void advance(std::size_t rank);
  // The operation a request really waits for: in posted order, the oldest
  // unfinished one of its rank while the request itself is not active.
  std::uint32_t waits_for(std::uint32_t request) const;
  void wake(std::size_t rank) {
    state_[rank] = RankState::running;
    worklist_.push_back(static_cast<int>(rank));
  }
  void block(std::size_t rank, std::uint32_t request) {
    state_[rank] = RankState::on_request;
    blocked_on_[rank] = request;
    posted_[request] |= kWaitedOn;
  }
  void run_rank(std::size_t rank);
  // False when the rank must wait for the rest of its group.
  bool collective(std::size_t rank, std::size_t index);
  void successors(int rank, std::vector<int>& out) const;

  const Program& program_;
  const Link& link_;
  const Reporter& reporter_;
  const bool eager_;
  const bool posted_order_;
  std::vector<std::vector<std::uint32_t>> stream_;  // posted order: each rank's operations
  std::vector<std::size_t> stream_head_;            // the oldest unfinished one
  const std::size_t ranks_;
  std::vector<std::uint8_t> posted_;
  std::vector<std::size_t> pc_;
  std::vector<RankState> state_;
  std::vector<std::uint32_t> blocked_on_;
  std::vector<std::uint32_t> wait_cursor_;  // into link_.completed, while a wait blocks
  std::vector<std::uint32_t> arrivals_;     // per collective slot
  std::vector<int> worklist_;
};

void Engine::post(std::size_t rank, std::size_t index) {
  posted_[index] |= kPosted;
  // A message a rank sends itself (the turn of a V) is a copy, not a
  // network operation: it queues behind nothing.
  if (!posted_order_ || (link_.to[index] != kNone && peer_rank(rank, index) == rank)) {
    activate(rank, index);
    return;
  }
  stream_[rank].push_back(static_cast<std::uint32_t>(index));
  if (stream_[rank].size() - stream_head_[rank] == 1) {
    activate(rank, index);
    advance(rank);
  }
}

void Engine::activate(std::size_t rank, std::size_t index) {
  posted_[index] |= kActive;
  const std::uint32_t partner = link_.to[index];
  if (partner == kNone || !(posted_[partner] & kActive)) return;
  posted_[index] |= kMatched;
  posted_[partner] |= kMatched;
  const std::size_t partner_rank = peer_rank(rank, index);
  if (posted_[partner] & kWaitedOn) wake_if_blocked_on(partner_rank, partner);
  if (posted_[index] & kWaitedOn) wake_if_blocked_on(rank, static_cast<std::uint32_t>(index));
  if (posted_order_) advance(partner_rank);
}

void Engine::advance(std::size_t rank) {
  auto& stream = stream_[rank];
  std::size_t& head = stream_head_[rank];
  while (head < stream.size()) {
    const std::uint32_t op = stream[head];
    if (!(posted_[op] & kActive)) {
      activate(rank, op);  // may advance this very stream: read it afresh
      continue;
    }
    if (!satisfied(op)) return;
    ++head;
  }
}

std::uint32_t Engine::waits_for(std::uint32_t request) const {
  if (!posted_order_ || (posted_[request] & kActive)) return request;
  const auto rank = static_cast<std::size_t>(reporter_.rank_of_index(request));
  return stream_head_[rank] < stream_[rank].size() ? stream_[rank][stream_head_[rank]] : request;
}

bool Engine::collective(std::size_t rank, std::size_t index) {
  const std::uint32_t slot = link_.to[index];
  if (!(posted_[index] & kPosted)) {
    posted_[index] |= kPosted;
    if (++arrivals_[slot] == link_.slot_size(slot)) {
      for (std::uint32_t m = link_.slot_begin[slot]; m < link_.slot_begin[slot + 1]; ++m) {
        const auto member = static_cast<std::size_t>(link_.slot_ranks[m]);
        // Blocked in the collective itself, or in a wait for its request.
        const bool blocked =
            state_[member] == RankState::on_collective || state_[member] == RankState::on_request;
        if (blocked && blocked_on_[member] == link_.slot_members[m]) wake(member);
      }
    }
  }
  if (posts_request(program_.code[index].op)) return true;  // its wait blocks instead
  if (arrivals_[slot] < link_.slot_size(slot)) {
    state_[rank] = RankState::on_collective;
    blocked_on_[rank] = static_cast<std::uint32_t>(index);
    return false;
  }
  return true;
}

void Engine::run_rank(std::size_t rank) {
  const std::size_t end = program_.rank_begin[rank + 1];
  std::size_t& pc = pc_[rank];
  for (; pc < end; ++pc) {
    const Instruction& in = program_.code[pc];
    const OpcodeInfo& row = info(in.op);
    switch (row.cls) {
      case OpClass::p2p:
        if (!(posted_[pc] & kPosted)) post(rank, pc);
        if (row.completion == Completion::blocking && !satisfied(static_cast<std::uint32_t>(pc))) {
          block(rank, static_cast<std::uint32_t>(pc));
          return;
        }
        break;
      case OpClass::wait: {
        const std::uint32_t w = link_.to[pc];
        std::uint32_t& cursor = wait_cursor_[rank];
        if (cursor == kNone) cursor = link_.completes_begin[w];
        for (; cursor < link_.completes_begin[w + 1]; ++cursor) {
          const std::uint32_t request = link_.completed[cursor];
          if (!satisfied(request)) {
            block(rank, request);
            return;
          }
        }
        cursor = kNone;
        break;
      }
      case OpClass::collective:
        if (!collective(rank, pc)) return;
        break;
      case OpClass::data:
      case OpClass::compute:
      case OpClass::optimizer:
        break;
    }
  }
  state_[rank] = RankState::finished;
}

bool Engine::run() {
  for (std::size_t r = ranks_; r-- > 0;) worklist_.push_back(static_cast<int>(r));
  while (!worklist_.empty()) {
    const auto rank = static_cast<std::size_t>(worklist_.back());
    worklist_.pop_back();
    run_rank(rank);
  }
  return std::all_of(state_.begin(), state_.end(),
                     [](RankState s) { return s == RankState::finished; });
}

std::vector<int> Engine::stuck_ranks() const {
  std::vector<int> out;
  for (std::size_t r = 0; r < ranks_; ++r) {
    if (state_[r] != RankState::finished) out.push_back(static_cast<int>(r));
  }
  return out;
}

void Engine::successors(int rank, std::vector<int>& out) const {
  out.clear();
  const auto r = static_cast<std::size_t>(rank);
  const bool on_collective_request =
      state_[r] == RankState::on_request && is_collective(program_.code[blocked_on_[r]].op);
  if (state_[r] == RankState::on_request && !on_collective_request) {
    const std::uint32_t partner = link_.to[waits_for(blocked_on_[r])];
    if (partner != kNone) out.push_back(reporter_.rank_of_index(partner));
  } else if (state_[r] == RankState::on_collective || on_collective_request) {
    // The members that have not arrived at its slot and can still come.
    const std::uint32_t slot = link_.to[blocked_on_[r]];
    for (std::uint32_t m = link_.slot_begin[slot]; m < link_.slot_begin[slot + 1]; ++m) {
      const std::uint32_t index = link_.slot_members[m];
      const auto member = static_cast<std::size_t>(link_.slot_ranks[m]);
      const bool arrived = index != kNone && (posted_[index] & kPosted);
      if (!arrived && state_[member] != RankState::finished)
        out.push_back(static_cast<int>(member));
    }
  }
}

std::vector<Engine::Edge> Engine::shortest_cycle() const {
  std::vector<Edge> best;
  std::vector<int> distance(ranks_, -1);
  std::vector<int> parent(ranks_, -1);
  std::vector<int> touched, frontier, next, out;
  for (const int start : stuck_ranks()) {
    // Nothing shorter than a rank waiting for itself.
    if (best.size() == 1) break;
    const int limit = best.empty() ? static_cast<int>(ranks_) : static_cast<int>(best.size()) - 1;
    for (const int t : touched) distance[static_cast<std::size_t>(t)] = -1;
    touched.assign({start});
    distance[static_cast<std::size_t>(start)] = 0;
    frontier.assign({start});
    int closing = -1;
    for (int depth = 0; depth < limit && closing < 0 && !frontier.empty(); ++depth) {
      next.clear();
      for (const int u : frontier) {
        successors(u, out);
        for (const int v : out) {
          if (v == start) {
            closing = u;
            break;
          }
          if (distance[static_cast<std::size_t>(v)] >= 0) continue;
          distance[static_cast<std::size_t>(v)] = depth + 1;
          parent[static_cast<std::size_t>(v)] = u;
          touched.push_back(v);
          next.push_back(v);
        }
        if (closing >= 0) break;
      }
      frontier.swap(next);
    }
    if (closing < 0) continue;
    std::vector<int> path;
    for (int v = closing; v != start; v = parent[static_cast<std::size_t>(v)]) path.push_back(v);
    path.push_back(start);
    std::reverse(path.begin(), path.end());
    best.clear();
    for (std::size_t i = 0; i < path.size(); ++i) {
      best.push_back(Edge{path[i], path[(i + 1) % path.size()]});
    }
  }
  return best;
}

std::string edge_text(const Engine& engine, const Reporter& reporter, const Engine::Edge& e) {
  return reporter.describe(engine.pc(e.from)) + " waits for " + reporter.describe(engine.pc(e.to));
}

// Notes for the stuck ranks outside the cycle, a few of them.
void note_other_stuck(const Engine& engine, const std::vector<Engine::Edge>& cycle,
                      Reporter& reporter, Diagnostic* d) {
  constexpr std::size_t kShown = 8;
  std::vector<int> others;
  for (const int r : engine.stuck_ranks()) {
    const bool in_cycle =
        std::any_of(cycle.begin(), cycle.end(), [r](const Engine::Edge& e) { return e.from == r; });
    if (!in_cycle) others.push_back(r);
  }
  for (std::size_t i = 0; i < others.size() && i < kShown; ++i) {
    std::string message = reporter.describe(engine.pc(others[i])) + " is stuck too";
    if (i + 1 == kShown && others.size() > kShown) {
      message += " (and " + std::to_string(others.size() - kShown) + " more ranks)";
    }
    reporter.note(d, std::move(message), reporter.at(engine.pc(others[i])));
  }
}

void report_cycle(DiagnosticKind kind, const std::string& headline, const Engine& engine,
                  const std::vector<Engine::Edge>& cycle, Reporter& reporter) {
  Diagnostic* d = reporter.report(kind, headline + edge_text(engine, reporter, cycle.front()),
                                  reporter.at(engine.pc(cycle.front().from)));
  for (std::size_t i = 1; i < cycle.size(); ++i) {
    reporter.note(d, "then " + edge_text(engine, reporter, cycle[i]),
                  reporter.at(engine.pc(cycle[i].from)));
  }
  note_other_stuck(engine, cycle, reporter, d);
}

}  // namespace

void check_progress(const Program& program, const Link& link, Reporter& reporter,
                    bool posted_order) {
  std::vector<Engine::Edge> hazard;
  {
    Engine rendezvous(program, link, reporter, false, posted_order);
    if (rendezvous.run()) return;
    hazard = rendezvous.shortest_cycle();
    if (hazard.empty()) {
      // Every chain of waits ends at a message or collective that never
      // comes, which the static passes reported; say so if they did not.
      if (reporter.total() == 0) {
        const int first = rendezvous.stuck_ranks().front();
        Diagnostic* d = reporter.report(
            DiagnosticKind::Deadlock,
            reporter.describe(rendezvous.pc(first)) + " waits for something that never happens",
            reporter.at(rendezvous.pc(first)));
        note_other_stuck(rendezvous, {Engine::Edge{first, first}}, reporter, d);
      }
      return;
    }
    Engine eager(program, link, reporter, true, posted_order);
    const bool finishes = eager.run();
    const std::vector<Engine::Edge> cycle =
        finishes ? std::vector<Engine::Edge>{} : eager.shortest_cycle();
    if (!cycle.empty()) {
      const bool collective = std::any_of(cycle.begin(), cycle.end(), [&](const Engine::Edge& e) {
        return eager.on_collective(e.from);
      });
      if (collective) {
        report_cycle(DiagnosticKind::CollectiveOrder,
                     "a collective and other operations wait for each other in a cycle: ", eager,
                     cycle, reporter);
      } else {
        report_cycle(DiagnosticKind::Deadlock,
                     posted_order ? "deadlock when each rank's point-to-point operations run in "
                                    "the order they were posted (NCCL): "
                                  : "deadlock under any buffering: ",
                     eager, cycle, reporter);
      }
      return;
    }
    // Lead with a blocking send: that is what needed the buffer.
    const auto send_first = std::find_if(hazard.begin(), hazard.end(), [&](const Engine::Edge& e) {
      return blocking_send(program.code[rendezvous.pc(e.from)].op);
    });
    if (send_first != hazard.end()) std::rotate(hazard.begin(), send_first, hazard.end());
    std::string sends;
    for (const Engine::Edge& e : hazard) {
      const Instruction& in = program.code[rendezvous.pc(e.from)];
      if (blocking_send(in.op)) {
        sends += (sends.empty() ? "`" : ", `") + disassemble(in) + "`";
      }
    }
    // A cycle made only of waits: the sends that need a buffer are the
    // pending ISends those waits complete.
    const std::string what = sends.empty()
                                 ? "the non-blocking sends these waits complete (without "
                                   "buffering, their receives are never posted): "
                                 : sends + " (without buffering, a cycle of blocking sends): ";
    // In posted order the buffer would be NCCL's (small messages), not MPI's.
    report_cycle(DiagnosticKind::BufferingHazard,
                 (posted_order ? "finishes only if the sends are buffered (NCCL runs each rank's "
                                 "point-to-point operations in posted order): "
                               : "finishes only if MPI buffers ") +
                     what,
                 rendezvous, hazard, reporter);
  }
}

}  // namespace pipevm::check_detail
