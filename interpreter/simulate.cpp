// The simulator's engine: a worklist over ranks, each running its stream in
// order until it waits for a partner that has not arrived yet; the partner's
// arrival puts it back on the list. Every instruction is visited a bounded
// number of times, so a simulation is linear in the program's length.
// Messages and collectives are paired before the run, statically (the pairing
// under rendezvous does not depend on timing; simulate_pairing.cpp), which
// also finds unmatched messages and collectives that do not line up before
// any clock ticks. Figures from the timeline: simulate_figures.cpp.
#include <algorithm>
#include <cstdint>
#include <string>

#include "simulate.hpp"
#include "simulate_pairing.hpp"

namespace pipevm {

namespace {

using simulate_detail::IndexQueues;
using simulate_detail::is_point_to_point;
using simulate_detail::kNone;
using simulate_detail::owners;
using simulate_detail::pair_partners;
using simulate_detail::peer_is_valid;
using simulate_detail::RequestKey;
using simulate_detail::RequestKeyHash;
using simulate_detail::requests;

constexpr double kUnknown = -1;

// One collective as the members of its data-parallel group issue it.
struct CollectiveSlot {
  std::vector<std::size_t> members;  // one instruction per member rank
  std::size_t arrived = 0;
  double last_arrival = 0;
  double last_compute_end = 0;  // BwdAllReduce: when the last member's backward is done
};

// Appended piece by piece: GCC 12's -Wrestrict misfires on "`" + std::string.
std::string quoted(const Instruction& in) {
  std::string text(1, '`');
  text += disassemble(in);
  text += '`';
  return text;
}

class Simulator {
 public:
  Simulator(const Program& program, const Costs& costs, Diagnostics& diagnostics)
      : program_(program),
        config_(program.config),
        costs_(costs),
        diagnostics_(diagnostics),
        owner_(owners(program)) {}

  std::optional<Timeline> run() {
    if (!check_peers() || !pair_points() || !pair_collectives()) return std::nullopt;
    const std::size_t n = program_.code.size();
    timeline_.times.assign(n, {});
    posted_.assign(n, kUnknown);
    transfer_begin_.assign(n, kUnknown);
    completion_.assign(n, kUnknown);
    waiter_.assign(n, -1);
    wait_all_took_.assign(n, false);
    ranks_.assign(static_cast<std::size_t>(program_.ranks()), {});
    for (int r = program_.ranks() - 1; r >= 0; --r) {
      ranks_[static_cast<std::size_t>(r)].pc = program_.rank_begin[static_cast<std::size_t>(r)];
      ranks_[static_cast<std::size_t>(r)].end =
          program_.rank_begin[static_cast<std::size_t>(r) + 1];
      worklist_.push_back(r);
    }
    while (!worklist_.empty()) {
      const int r = worklist_.back();
      worklist_.pop_back();
      advance(r);
    }
    if (!report_stuck_ranks()) return std::nullopt;
    for (const RankState& s : ranks_) timeline_.makespan = std::max(timeline_.makespan, s.clock);
    for (std::size_t i = 0; i < n; ++i) {
      if (is_send(program_.code[i].op)) timeline_.flows.push_back({i, partner_[i]});
    }
    return std::move(timeline_);
  }

 private:
  struct RankState {
    std::size_t pc = 0;
    std::size_t end = 0;
    double clock = 0;
    bool entered = false;             // times[pc].issued is set
    std::size_t waiting_for = kNone;  // the request a Wait took, or WaitAll's progress
    std::size_t wait_all_cursor = 0;
    double wait_all_end = 0;
    std::size_t wait_all_latest = kNone;  // the request WaitAll found to finish last
    // Requests posted since the last WaitAll. One a Wait completed stays here:
    // WaitAll finds it complete already, which costs nothing.
    std::vector<std::size_t> pending;
  };

  Location location_of(std::size_t i) const {
    const int r = owner_[i];
    return {program_.file, program_.source_of(program_.code[i]), r, stage_of(config_, r)};
  }

  bool check_peers() {
    bool ok = true;
    for (std::size_t i = 0; i < program_.code.size(); ++i) {
      const Instruction& in = program_.code[i];
      if (!is_point_to_point(in.op) || peer_is_valid(program_, owner_[i], in)) continue;
      diagnostics_.report(DiagnosticKind::WrongPeer,
                          quoted(in) + " names stage " + std::to_string(in.peer) +
                              ", which is outside the pipeline or the rank itself; run `pipevm "
                              "check` for the full analysis",
                          location_of(i));
      ok = false;
    }
    return ok;
  }

  bool pair_points() {
    partner_ = pair_partners(program_);
    bool ok = true;
    for (std::size_t i = 0; i < program_.code.size(); ++i) {
      const Instruction& in = program_.code[i];
      if (!is_point_to_point(in.op) || partner_[i] != kNone) continue;
      const bool sending = is_send(in.op);
      diagnostics_.report(
          sending ? DiagnosticKind::UnmatchedSend : DiagnosticKind::UnmatchedRecv,
          quoted(in) + (sending ? " is never received by stage " : " is never sent by stage ") +
              std::to_string(in.peer) + "; run `pipevm check` for the full analysis",
          location_of(i));
      ok = false;
    }
    return ok;
  }

  bool pair_collectives() {
    slot_of_.assign(program_.code.size(), kNone);
    bool ok = true;
    for (int stage = 0; stage < config_.stages; ++stage) {
      std::vector<std::vector<std::size_t>> issued(static_cast<std::size_t>(config_.dp));
      for (int d = 0; d < config_.dp; ++d) {
        const int r = rank_of(config_, d, stage);
        for (std::size_t i = program_.rank_begin[static_cast<std::size_t>(r)];
             i < program_.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
          if (is_collective(program_.code[i].op)) issued[static_cast<std::size_t>(d)].push_back(i);
        }
      }
      const std::vector<std::size_t>& first = issued.front();
      for (std::size_t d = 1; d < issued.size() && ok; ++d) {
        const std::size_t common = std::min(first.size(), issued[d].size());
        for (std::size_t k = 0; k < common; ++k) {
          if (program_.code[first[k]].op == program_.code[issued[d][k]].op) continue;
          diagnostics_
              .report(DiagnosticKind::CollectiveOrder,
                      "collective " + quoted(program_.code[issued[d][k]]) + " meets " +
                          quoted(program_.code[first[k]]) +
                          " of its data-parallel group; run `pipevm check` for the "
                          "full analysis",
                      location_of(issued[d][k]))
              .notes.push_back({"the group's first member issues this", location_of(first[k])});
          ok = false;
          break;
        }
        if (ok && first.size() != issued[d].size()) {
          const bool longer = issued[d].size() > first.size();
          const std::size_t extra = longer ? issued[d][common] : first[common];
          diagnostics_.report(DiagnosticKind::CollectiveMissing,
                              quoted(program_.code[extra]) +
                                  " is not issued by every member of its data-parallel group; "
                                  "run `pipevm check` for the full analysis",
                              location_of(extra));
          ok = false;
        }
      }
      if (!ok) continue;
      for (std::size_t k = 0; k < first.size(); ++k) {
        CollectiveSlot slot;
        for (const auto& member : issued) {
          slot.members.push_back(member[k]);
          slot_of_[member[k]] = slots_.size();
        }
        slots_.push_back(std::move(slot));
      }
    }
    return ok;
  }

  void complete(std::size_t i, double begin, double end) {
    transfer_begin_[i] = begin;
    completion_[i] = end;
    if (waiter_[i] >= 0) {
      worklist_.push_back(waiter_[i]);
      waiter_[i] = -1;
    }
  }

  void post_message(std::size_t i, double now) {
    posted_[i] = now;
    const std::size_t j = partner_[i];
    if (posted_[j] == kUnknown) return;
    const double begin = std::max(posted_[i], posted_[j]);
    const double end = begin + costs_.message_time(program_.code[i].kind);
    complete(i, begin, end);
    complete(j, begin, end);
  }

  void arrive(std::size_t i, double now) {
    posted_[i] = now;
    CollectiveSlot& slot = slots_[slot_of_[i]];
    const double compute = costs_.duration(info(program_.code[i].op).cost);
    slot.last_arrival = slot.arrived == 0 ? now : std::max(slot.last_arrival, now);
    slot.last_compute_end =
        slot.arrived == 0 ? now + compute : std::max(slot.last_compute_end, now + compute);
    if (++slot.arrived < slot.members.size()) return;
    // A group of one has nothing to exchange. The reduction of a BwdAllReduce
    // overlaps the backward: it ends when the slower of the two does.
    const double reduction = costs_.reduction(info(program_.code[i].op).cost,
                                              static_cast<int>(slot.members.size()));
    const double end = std::max(slot.last_compute_end, slot.last_arrival + reduction);
    for (std::size_t member : slot.members) complete(member, slot.last_arrival, end);
  }

  // Runs rank r until it ends or waits for a partner.
  void advance(int r) {
    RankState& s = ranks_[static_cast<std::size_t>(r)];
    while (s.pc < s.end) {
      const std::size_t i = s.pc;
      if (!s.entered) {
        timeline_.times[i].issued = s.clock;
        s.entered = true;
      }
      if (!step(r, s, i)) return;
      s.clock = timeline_.times[i].ended;
      ++s.pc;
      s.entered = false;
      s.waiting_for = kNone;
    }
  }

  // Blocks (false) until request `q` completes, with r woken when it does.
  bool await(int r, std::size_t q) {
    if (completion_[q] != kUnknown) return true;
    waiter_[q] = r;
    return false;
  }

  // Executes instruction i of rank r, or finds it must wait (false; it will
  // be stepped again when woken). Sets times[i] when it completes.
  bool step(int r, RankState& s, std::size_t i) {
    const Instruction& in = program_.code[i];
    InstructionTime& t = timeline_.times[i];
    const double now = t.issued;
    if (is_point_to_point(in.op)) {
      if (posted_[i] == kUnknown) post_message(i, now);
      if (posts_request(in.op)) {
        s.pending.push_back(i);
        const auto direction = is_send(in.op) ? WaitDirection::send : WaitDirection::recv;
        pending_by_key_.push({r, request_key(direction, in)}, i);
        t.started = t.ended = now;
        return true;
      }
      if (!await(r, i)) return false;
      t.started = transfer_begin_[i];
      t.ended = completion_[i];
      return true;
    }
    const bool wait_by_key = info(in.op).cls == OpClass::wait && operand_parts(in.op).micro_batch;
    if (wait_by_key) {
      if (s.waiting_for == kNone) {
        const std::size_t request =
            pending_by_key_.pop({r, request_key(in.direction, in)},
                                [this](std::size_t q) { return wait_all_took_[q]; });
        if (request == kNone) {
          diagnostics_.report(DiagnosticKind::WaitWithoutRequest,
                              quoted(in) +
                                  " has no pending request to complete; run `pipevm "
                                  "check` for the full analysis",
                              location_of(i));
          failed_ = true;
          return false;
        }
        s.waiting_for = request;
      }
      if (!await(r, s.waiting_for)) return false;
      t.ended = std::max(now, completion_[s.waiting_for]);
      t.started = std::clamp(transfer_begin_[s.waiting_for], now, t.ended);
      return true;
    }
    if (info(in.op).cls == OpClass::wait) {
      if (s.wait_all_cursor == 0) {
        s.wait_all_end = now;
        s.wait_all_latest = kNone;
      }
      for (; s.wait_all_cursor < s.pending.size(); ++s.wait_all_cursor) {
        const std::size_t q = s.pending[s.wait_all_cursor];
        if (!await(r, q)) return false;
        if (completion_[q] > s.wait_all_end) {
          s.wait_all_end = completion_[q];
          s.wait_all_latest = q;
        }
      }
      t.ended = s.wait_all_end;
      t.started = s.wait_all_latest == kNone
                      ? now
                      : std::clamp(transfer_begin_[s.wait_all_latest], now, t.ended);
      for (std::size_t q : s.pending) wait_all_took_[q] = true;
      s.pending.clear();
      s.wait_all_cursor = 0;
      return true;
    }
    if (is_collective(in.op)) {
      if (posted_[i] == kUnknown) arrive(i, now);
      if (!await(r, i)) return false;
      // A collective that computes first (BwdAllReduce) is busy from its start.
      t.busy = costs_.duration(info(in.op).cost);
      t.started = is_backward(in.op) ? now : transfer_begin_[i];
      t.ended = completion_[i];
      return true;
    }
    t.busy = costs_.duration(info(in.op).cost);
    t.started = now;
    t.ended = now + t.busy;
    return true;
  }

  // True when every rank reached its end; otherwise reports who waits for whom.
  bool report_stuck_ranks() {
    if (failed_) return false;
    std::vector<int> stuck;
    for (int r = 0; r < program_.ranks(); ++r) {
      const RankState& s = ranks_[static_cast<std::size_t>(r)];
      if (s.pc < s.end) stuck.push_back(r);
    }
    if (stuck.empty()) return true;
    const std::size_t first = ranks_[static_cast<std::size_t>(stuck.front())].pc;
    Diagnostic& d = diagnostics_.report(
        DiagnosticKind::Deadlock,
        "the simulation is stuck: " + std::to_string(stuck.size()) +
            (stuck.size() == 1 ? " rank waits" : " ranks wait") +
            " forever (a blocking send returns only when its receive is posted); run "
            "`pipevm check` for the full analysis",
        location_of(first));
    for (int r : stuck) {
      const std::size_t i = ranks_[static_cast<std::size_t>(r)].pc;
      d.notes.push_back({"rank " + std::to_string(r) + " waits at " + quoted(program_.code[i]) +
                             waits_for(ranks_[static_cast<std::size_t>(r)], i),
                         location_of(i)});
    }
    return false;
  }

  std::string waits_for(const RankState& s, std::size_t i) const {
    const Instruction& in = program_.code[i];
    std::size_t request = i;
    const bool wait_by_key = info(in.op).cls == OpClass::wait && operand_parts(in.op).micro_batch;
    if (wait_by_key) request = s.waiting_for;
    if (info(in.op).cls == OpClass::wait && !wait_by_key && s.wait_all_cursor < s.pending.size()) {
      request = s.pending[s.wait_all_cursor];
    }
    if (request != kNone && is_point_to_point(program_.code[request].op)) {
      const std::size_t j = partner_[request];
      return " for rank " + std::to_string(owner_[j]) + " to reach " + quoted(program_.code[j]);
    }
    if (slot_of_[i] != kNone) {
      std::string missing;
      for (std::size_t member : slots_[slot_of_[i]].members) {
        if (posted_[member] == kUnknown) {
          missing += ' ';
          missing += std::to_string(owner_[member]);
        }
      }
      return " for data-parallel ranks" + missing;
    }
    return {};
  }

  const Program& program_;
  const Config& config_;
  const Costs& costs_;
  Diagnostics& diagnostics_;
  std::vector<int> owner_;
  std::vector<std::size_t> partner_;
  std::vector<std::size_t> slot_of_;
  std::vector<CollectiveSlot> slots_;
  std::vector<double> posted_;
  std::vector<double> transfer_begin_;
  std::vector<double> completion_;
  std::vector<int> waiter_;
  IndexQueues<RequestKey, RequestKeyHash> pending_by_key_{program_.code.size(), requests(program_)};
  std::vector<bool> wait_all_took_;  // requests a WaitAll completed: no Wait may take them again
  std::vector<RankState> ranks_;
  std::vector<int> worklist_;
  Timeline timeline_;
  bool failed_ = false;
};

}  // namespace

std::optional<Simulation> simulate(const Program& program, const Costs& costs,
                                   Diagnostics& diagnostics) {
  Simulator simulator(program, costs, diagnostics);
  std::optional<Timeline> timeline = simulator.run();
  if (!timeline) return std::nullopt;
  Simulation simulation;
  simulation.timeline = std::move(*timeline);
  summarize(program, simulation);
  return simulation;
}

}  // namespace pipevm
