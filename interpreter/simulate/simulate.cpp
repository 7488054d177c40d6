// The simulator's engine: a worklist over ranks, each running its stream in
// order until it waits for a partner that has not arrived yet; the partner's
// arrival puts it back on the list. Every instruction is visited a bounded
// number of times, so a simulation is linear in the program's length. A
// point-to-point operation is posted when its rank reaches it and starts
// (is active) then, or in posted order when the one before it in its rank's
// stream is done; activations that follow from a completion go through a
// stack, not recursion, so a chain across a thousand ranks stays shallow. Who
// waits for whom comes from the link pass (link.hpp): a program that does
// not link (an unmatched message, a wait without a request, collectives
// that do not line up, a peer outside the pipeline) is refused before any
// clock ticks, pointing at `pipevm check`. Figures from the timeline:
// simulate_figures.cpp.
#include <algorithm>
#include <cstdint>
#include <string>

#include "link.hpp"
#include "links.hpp"
#include "model_shape.hpp"
#include "simulate.hpp"

namespace pipevm {

namespace {

constexpr double kUnknown = -1;
constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// One collective slot as its members arrive.
struct SlotState {
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
  Simulator(const Program& program, const Link& link, const Costs& costs, const LinkCosts& links,
            Diagnostics& diagnostics, const SimulateOptions& options)
      : program_(program),
        config_(program.config),
        link_(link),
        costs_(costs),
        links_(links),
        diagnostics_(diagnostics),
        options_(options),
        owner_(program.code.size(), 0) {
    for (int r = 0; r < program.ranks(); ++r) {
      std::fill(owner_.begin() + static_cast<std::ptrdiff_t>(
                                     program.rank_begin[static_cast<std::size_t>(r)]),
                owner_.begin() + static_cast<std::ptrdiff_t>(
                                     program.rank_begin[static_cast<std::size_t>(r) + 1]),
                r);
    }
    if (costs.compute_rows > 0) count_stepped_layers();
  }

  std::optional<Timeline> run() {
    if (!links()) return std::nullopt;
    const std::size_t n = program_.code.size();
    timeline_.times.assign(n, {});
    posted_.assign(n, kUnknown);
    active_.assign(n, kUnknown);
    transfer_begin_.assign(n, kUnknown);
    completion_.assign(n, kUnknown);
    waiter_.assign(n, -1);
    slots_.assign(link_.slot_begin.size() - 1, {});
    ranks_.assign(static_cast<std::size_t>(program_.ranks()), {});
    host_link_free_.assign(static_cast<std::size_t>(program_.ranks()), 0);
    if (options_.p2p_posted_order) build_streams();
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
      if (is_send(program_.code[i].op)) timeline_.flows.push_back({i, link_.to[i]});
    }
    return std::move(timeline_);
  }

 private:
  struct RankState {
    std::size_t pc = 0;
    std::size_t end = 0;
    double clock = 0;
    bool entered = false;       // times[pc].issued is set
    std::size_t wait_next = 0;  // a blocked wait's next request, in link_.completed
    double wait_end = 0;
    std::size_t wait_latest = kNone;  // the request the wait found to finish last
  };

  // Posted order: a rank's point-to-point operations to other ranks, in
  // program order (the order it posts them), and the oldest not done.
  struct Stream {
    std::vector<std::size_t> operations;
    std::size_t head = 0;
    double free_at = 0;        // when the operation before the head was done
    std::size_t last = kNone;  // that operation
  };

  void build_streams() {
    streams_.assign(static_cast<std::size_t>(program_.ranks()), {});
    for (std::size_t i = 0; i < program_.code.size(); ++i) {
      if (queued(i)) streams_[static_cast<std::size_t>(owner_[i])].operations.push_back(i);
    }
  }

  // Whether operation i waits its turn in its rank's stream: in posted
  // order, unless it is a message to the rank itself (a copy, as the
  // checker has it).
  bool queued(std::size_t i) const {
    if (!options_.p2p_posted_order || info(program_.code[i].op).cls != OpClass::p2p) return false;
    const std::uint32_t partner = link_.to[i];
    return partner == kNoLink || owner_[partner] != owner_[i];
  }

  // The time instruction i keeps its rank busy: its chunk's cost, per layer
  // and row when the costs say so (compute-rows).
  double busy(std::size_t i) const {
    const Instruction& in = program_.code[i];
    const int r = owner_[i];
    const double base = costs_.duration(in, stage_of(config_, r));
    if (costs_.compute_rows <= 0 || base == 0) return base;
    if (info(in.op).cls == OpClass::optimizer) {
      return base * stepped_layers_[static_cast<std::size_t>(r)];
    }
    if (info(in.op).cls != OpClass::compute && !is_backward(in.op)) return base;
    const LayerRange layers = instruction_layers(program_, stage_of(config_, r), half(in, 0));
    return base * std::max(1, layers.size()) * links_.micro_batch_rows() / costs_.compute_rows;
  }

  // Per rank: the layers its step updates (its chunks', and those it holds
  // a shard of).
  void count_stepped_layers() {
    stepped_layers_.assign(static_cast<std::size_t>(program_.ranks()), 1);
    if (program_.layer_split.empty()) return;
    const auto layers = static_cast<std::size_t>(layer_count(program_.layer_widths));
    for (int r = 0; r < program_.ranks(); ++r) {
      std::vector<bool> stepped(layers, false);
      const int stage = stage_of(config_, r);
      const auto mark = [&](LayerRange range) {
        for (int l = range.begin; l < range.end; ++l) {
          if (static_cast<std::size_t>(l) < layers) stepped[static_cast<std::size_t>(l)] = true;
        }
      };
      for (int c = 0; c < chunks_per_rank(program_.placement, config_); ++c) {
        mark(chunk_layers(program_, stage, c));
      }
      for (const Instruction& in : program_.rank(r)) {
        if (in.op == Opcode::AllGather) mark(instruction_layers(program_, stage, in));
      }
      stepped_layers_[static_cast<std::size_t>(r)] =
          static_cast<double>(std::count(stepped.begin(), stepped.end(), true));
    }
  }

  Location location_of(std::size_t i) const {
    const int r = owner_[i];
    return {program_.file, program_.source_of(program_.code[i]), r, stage_of(config_, r)};
  }

  // False, with a diagnostic per failure, when the program does not link in
  // a way that leaves its timeline undefined. A peer that is a stage but not
  // the lane's neighbour, or a request never completed, still has a time.
  bool links() {
    bool ok = true;
    for (const LinkFailure& failure : link_.failures) {
      const Instruction& in = program_.code[failure.index];
      std::string what;
      DiagnosticKind kind = DiagnosticKind::Deadlock;
      switch (failure.kind) {
        case LinkFailureKind::never_completed: continue;
        case LinkFailureKind::peer_not_neighbour:
          if (link_.to[failure.index] != kNoLink) continue;
          kind = DiagnosticKind::WrongPeer;
          what = " names stage " + std::to_string(in.peer) +
                 ", not the neighbouring stage along the lane, and nothing pairs with it";
          break;
        case LinkFailureKind::peer_outside:
          kind = DiagnosticKind::WrongPeer;
          what = " names stage " + std::to_string(in.peer) +
                 ", which is outside the pipeline or the rank itself";
          break;
        case LinkFailureKind::size_mismatch:
          kind = DiagnosticKind::SizeMismatch;
          what = " would take " + quoted(program_.code[failure.other]) +
                 ", whose message has another size";
          break;
        case LinkFailureKind::unmatched:
          kind = is_send(in.op) ? DiagnosticKind::UnmatchedSend : DiagnosticKind::UnmatchedRecv;
          what = (is_send(in.op) ? " is never received by stage " : " is never sent by stage ") +
                 std::to_string(in.peer);
          break;
        case LinkFailureKind::wait_without_request:
          // One step of a program that carries its exchanges: the one the
          // step waits for was started, and is taken as done, before it.
          if (!program_.carried.empty() && info(in.op).group != Group::none) continue;
          kind = DiagnosticKind::WaitWithoutRequest;
          what = " has no pending request to complete";
          break;
        case LinkFailureKind::collective_order:
          kind = DiagnosticKind::CollectiveOrder;
          what = " meets " + quoted(program_.code[failure.other]) + " of its group";
          break;
        case LinkFailureKind::collective_missing:
          kind = DiagnosticKind::CollectiveMissing;
          what = " is never issued by rank " + std::to_string(failure.other) +
                 ", a member of its group";
          break;
      }
      diagnostics_.report(kind, quoted(in) + what + "; run `pipevm check` for the full analysis",
                          location_of(failure.index));
      ok = false;
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
    const std::size_t send = is_send(program_.code[i].op) ? i : link_.to[i];
    // An eager send's request is done once posted, wherever its data is.
    if (i == send && links_.eager(send)) complete(i, now, now);
    if (!queued(i)) {
      activations_.push_back({i, now});
    } else {
      Stream& stream = streams_[static_cast<std::size_t>(owner_[i])];
      if (stream.operations[stream.head] == i) start_in_turn(stream, i);
    }
    run_activations();
  }

  // The head of a stream, posted: it starts when posted or when the one
  // before it was done, whichever is later.
  void start_in_turn(Stream& stream, std::size_t i) {
    const double at = std::max(posted_[i], stream.free_at);
    if (at > posted_[i]) timeline_.holds.push_back({stream.last, i, posted_[i], at});
    activations_.push_back({i, at});
  }

  // Operation i has done its part at `end`: the next in its stream may go.
  void done_in_stream(std::size_t i, double end) {
    if (!queued(i)) return;
    Stream& stream = streams_[static_cast<std::size_t>(owner_[i])];
    ++stream.head;
    stream.free_at = end;
    stream.last = i;
    if (stream.head == stream.operations.size()) return;
    const std::size_t next = stream.operations[stream.head];
    if (posted_[next] != kUnknown) start_in_turn(stream, next);
  }

  void run_activations() {
    while (!activations_.empty()) {
      const auto [i, at] = activations_.back();
      activations_.pop_back();
      activate(i, at);
    }
  }

  // Operation i starts its part of the transfer at `at`. Eager: the send's
  // data leaves then and arrives message_time later; the receive is done at
  // the later of its start and the arrival. Rendezvous: the transfer starts
  // when both have started, and both are done at its end.
  void activate(std::size_t i, double at) {
    active_[i] = at;
    const std::size_t j = link_.to[i];
    const std::size_t send = is_send(program_.code[i].op) ? i : j;
    const std::size_t recv = send == i ? j : i;
    if (links_.eager(send)) {
      if (i == send) done_in_stream(send, at);
      if (active_[send] == kUnknown || active_[recv] == kUnknown) return;
      const double end = std::max(active_[recv], active_[send] + links_.message_time(send));
      complete(recv, std::min(std::max(active_[recv], active_[send]), end), end);
      done_in_stream(recv, end);
      return;
    }
    if (active_[j] == kUnknown) return;
    const double begin = std::max(at, active_[j]);
    const double end = begin + links_.message_time(i);
    complete(i, begin, end);
    complete(j, begin, end);
    done_in_stream(i, end);
    done_in_stream(j, end);
  }

  void arrive(std::size_t i, double now) {
    posted_[i] = now;
    const std::uint32_t s = link_.to[i];
    SlotState& slot = slots_[s];
    const double compute = busy(i);
    slot.last_arrival = slot.arrived == 0 ? now : std::max(slot.last_arrival, now);
    slot.last_compute_end =
        slot.arrived == 0 ? now + compute : std::max(slot.last_compute_end, now + compute);
    if (++slot.arrived < link_.slot_size(s)) return;
    // The reduction of a BwdAllReduce overlaps the backward: it ends when
    // the slower of the two does.
    const double reduction = links_.reduction(s);
    const double end = std::max(slot.last_compute_end, slot.last_arrival + reduction);
    for (std::uint32_t m = link_.slot_begin[s]; m < link_.slot_begin[s + 1]; ++m) {
      complete(link_.slot_members[m], slot.last_arrival, end);
    }
  }

  // Runs rank r until it ends or waits for a partner.
  void advance(int r) {
    RankState& s = ranks_[static_cast<std::size_t>(r)];
    while (s.pc < s.end) {
      const std::size_t i = s.pc;
      if (!s.entered) {
        timeline_.times[i].issued = s.clock;
        s.entered = true;
        s.wait_next = kNone;
      }
      if (!step(r, s, i)) return;
      s.clock = timeline_.times[i].ended;
      ++s.pc;
      s.entered = false;
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
    const OpcodeInfo& row = info(in.op);
    InstructionTime& t = timeline_.times[i];
    const double now = t.issued;
    switch (row.cls) {
      case OpClass::p2p:
        if (posted_[i] == kUnknown) post_message(i, now);
        if (row.completion == Completion::request) {
          t.started = t.ended = now;
          return true;
        }
        if (!await(r, i)) return false;
        t.started = transfer_begin_[i];
        t.ended = completion_[i];
        return true;
      case OpClass::wait: {
        // Done when the last of its requests is; the transfer it waited
        // for longest is its communication.
        const std::uint32_t w = link_.to[i];
        if (s.wait_next == kNone) {
          s.wait_next = link_.completes_begin[w];
          s.wait_end = now;
          s.wait_latest = kNone;
        }
        for (; s.wait_next < link_.completes_begin[w + 1]; ++s.wait_next) {
          const std::size_t q = link_.completed[s.wait_next];
          if (!await(r, q)) return false;
          if (completion_[q] > s.wait_end) {
            s.wait_end = completion_[q];
            s.wait_latest = q;
          }
        }
        t.ended = s.wait_end;
        t.started = s.wait_latest == kNone
                        ? now
                        : std::clamp(transfer_begin_[s.wait_latest], now, t.ended);
        return true;
      }
      case OpClass::collective:
        if (posted_[i] == kUnknown) arrive(i, now);
        if (row.completion == Completion::request) {  // GossipStart: its wait waits
          t.started = t.ended = now;
          return true;
        }
        if (!await(r, i)) return false;
        // A collective that computes first (BwdAllReduce) is busy from its start.
        t.busy = busy(i);
        t.started = is_backward(in.op) ? now : transfer_begin_[i];
        t.ended = completion_[i];
        return true;
      case OpClass::data:
        if (row.completion == Completion::request) {
          start_host_copy(r, i, now);
          t.started = t.ended = now;
          return true;
        }
        [[fallthrough]];
      case OpClass::compute:
      case OpClass::optimizer:
        t.busy = busy(i);
        t.started = now;
        t.ended = now + t.busy;
        return true;
    }
    return true;
  }

  // An Offload or Reload posted at `now`: its rank's host link moves one
  // copy at a time, in posted order, beside the rank's compute.
  void start_host_copy(int r, std::size_t i, double now) {
    double& free_at = host_link_free_[static_cast<std::size_t>(r)];
    const double begin = std::max(now, free_at);
    free_at = begin + links_.host_copy_time(i);
    complete(i, begin, free_at);
    timeline_.copies.push_back({i, begin, free_at});
  }

  // True when every rank reached its end; otherwise reports who waits for whom.
  bool report_stuck_ranks() {
    std::vector<int> stuck;
    for (int r = 0; r < program_.ranks(); ++r) {
      const RankState& s = ranks_[static_cast<std::size_t>(r)];
      if (s.pc < s.end) stuck.push_back(r);
    }
    if (stuck.empty()) return true;
    const std::size_t first = ranks_[static_cast<std::size_t>(stuck.front())].pc;
    const std::string why =
        options_.p2p_posted_order
            ? "each rank's point-to-point operations run one at a time in the order posted, as "
              "with `pipevm check --p2p-order posted`"
            : "a rendezvous send returns only when its receive is posted";
    Diagnostic& d =
        diagnostics_.report(DiagnosticKind::Deadlock,
                            "the simulation is stuck: " + std::to_string(stuck.size()) +
                                (stuck.size() == 1 ? " rank waits" : " ranks wait") + " forever (" +
                                why + "; transfers " + std::string(name(costs_.transfer)) +
                                "); run `pipevm check` for the full analysis",
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
    const OpcodeInfo& row = info(program_.code[i].op);
    std::size_t request = i;
    if (row.cls == OpClass::wait) {
      request = s.wait_next == kNone ? kNone : link_.completed[s.wait_next];
    }
    if (request != kNone && info(program_.code[request].op).cls == OpClass::p2p) {
      std::string behind;
      if (queued(request) && active_[request] == kUnknown) {
        // Posted order: what it really waits for is the head of its stream.
        const Stream& stream = streams_[static_cast<std::size_t>(owner_[request])];
        request = stream.operations[stream.head];
        behind = ", behind " + quoted(program_.code[request]) + ",";
      }
      const std::size_t j = link_.to[request];
      return behind + " for rank " + std::to_string(owner_[j]) + " to reach " +
             quoted(program_.code[j]);
    }
    if (row.cls == OpClass::collective) {
      const std::uint32_t slot = link_.to[i];
      std::string missing;
      for (std::uint32_t m = link_.slot_begin[slot]; m < link_.slot_begin[slot + 1]; ++m) {
        if (posted_[link_.slot_members[m]] == kUnknown) {
          missing += ' ';
          missing += std::to_string(link_.slot_ranks[m]);
        }
      }
      return " for the ranks of its group:" + missing;
    }
    return {};
  }

  const Program& program_;
  const Config& config_;
  const Link& link_;
  const Costs& costs_;
  const LinkCosts& links_;
  Diagnostics& diagnostics_;
  const SimulateOptions& options_;
  std::vector<int> owner_;
  std::vector<double> stepped_layers_;  // per rank, with compute-rows
  std::vector<SlotState> slots_;
  std::vector<double> posted_;
  std::vector<double> active_;  // when a point-to-point operation started its part
  std::vector<double> transfer_begin_;
  std::vector<double> completion_;
  std::vector<int> waiter_;
  std::vector<RankState> ranks_;
  std::vector<double> host_link_free_;  // per rank: when its host link's last copy ends
  std::vector<Stream> streams_;  // posted order only
  struct Activation {
    std::size_t instruction;
    double at;
  };
  std::vector<Activation> activations_;
  std::vector<int> worklist_;
  Timeline timeline_;
};

}  // namespace

std::optional<Simulation> simulate(const Program& program, const Costs& costs,
                                   Diagnostics& diagnostics, const Network& network,
                                   const SimulateOptions& options) {
  // The model's sizes (by default the default model's, as `pipevm check`
  // assumes them): a send and a receive that pair but for their producing
  // positions are a size mismatch where the sizes differ.
  const LinkOptions link_options{piece_boundary_widths(
      network.layer_widths.empty() ? default_layer_widths() : network.layer_widths,
      model_pieces(program.placement, program.config))};
  return simulate(program, link(program, link_options), costs, diagnostics, network, options);
}

std::optional<Simulation> simulate(const Program& program, const Link& link, const Costs& costs,
                                   Diagnostics& diagnostics, const Network& network,
                                   const SimulateOptions& options) {
  const LinkCosts links(program, link, costs, network);
  Simulator simulator(program, link, costs, links, diagnostics, options);
  std::optional<Timeline> timeline = simulator.run();
  if (!timeline) return std::nullopt;
  Simulation simulation;
  simulation.timeline = std::move(*timeline);
  summarize(program, simulation);
  return simulation;
}

}  // namespace pipevm
