// The simulator's figures: what a rank does in each instruction (activities),
// peak activations from the order of a stream, busy, idle and bubble of a
// timeline, and the timeline of a measured run.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "simulate.hpp"

namespace pipevm {

Activity activity_of(Opcode op) {
  // A copy to or from host memory, and its wait: the rank only waits for it.
  if (is_host_copy(op)) return Activity::host_copy;
  switch (info(op).cost) {
    case CostKind::fwd: return Activity::forward;
    case CostKind::bwd:
    case CostKind::bwd_allreduce:
    case CostKind::bwd_reduce_scatter: return Activity::backward;
    case CostKind::bwd_input: return Activity::backward_input;
    case CostKind::bwd_weight: return Activity::backward_weight;
    case CostKind::fwd_bwd: return Activity::overlapped;
    case CostKind::recompute: return Activity::recompute;
    case CostKind::load: return Activity::data;
    case CostKind::zero_grad:
    case CostKind::optimizer: return Activity::optimizer;
    case CostKind::none:
    case CostKind::allreduce:
    case CostKind::allgather:
    case CostKind::reduce_scatter:
    case CostKind::host_copy:
    case CostKind::message: return Activity::communication;
  }
  return Activity::idle;
}

char letter_of(Activity activity) {
  switch (activity) {
    case Activity::idle:
      return '.';
    case Activity::forward:
      return 'F';
    case Activity::backward:
      return 'B';
    case Activity::backward_input:
      return 'I';
    case Activity::backward_weight:
      return 'W';
    case Activity::overlapped:
      return 'X';
    case Activity::recompute:
      return 'R';
    case Activity::data:
      return 'L';
    case Activity::optimizer:
      return 'O';
    case Activity::communication:
      return '-';
    case Activity::host_copy:
      return 'H';
    case Activity::held:
      return '#';
  }
  return '?';
}

std::string_view name(Activity activity) {
  switch (activity) {
    case Activity::idle:
      return "idle";
    case Activity::forward:
      return "forward";
    case Activity::backward:
      return "backward";
    case Activity::backward_input:
      return "backward-input";
    case Activity::backward_weight:
      return "backward-weight";
    case Activity::overlapped:
      return "forward-backward";
    case Activity::recompute:
      return "recompute";
    case Activity::data:
      return "load";
    case Activity::optimizer:
      return "optimizer";
    case Activity::communication:
      return "communication";
    case Activity::host_copy:
      return "host-copy";
    case Activity::held:
      return "held in posted order";
  }
  return "?";
}

std::vector<int> peak_activations(const Program& program) {
  std::vector<int> peaks(static_cast<std::size_t>(program.ranks()), 0);
  // Per instruction, the Offloads it completes (a wait): each takes a stash
  // off the device. The link is needed only when there are Offloads.
  std::vector<int> offloads_completed;
  if (std::any_of(program.code.begin(), program.code.end(),
                  [](const Instruction& in) { return in.op == Opcode::Offload; })) {
    offloads_completed.assign(program.code.size(), 0);
    const std::vector<std::size_t> completer = completing_instructions(program);
    for (std::size_t i = 0; i < program.code.size(); ++i) {
      if (program.code[i].op == Opcode::Offload && completer[i] < program.code.size()) {
        ++offloads_completed[completer[i]];
      }
    }
  }
  std::unordered_map<std::uint64_t, int> held;  // (chunk, micro-batch) -> activations
  for (int r = 0; r < program.ranks(); ++r) {
    held.clear();
    int now = 0;
    int peak = 0;
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    for (std::size_t i = begin; i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      const Instruction& whole = program.code[i];
      if (!offloads_completed.empty()) now -= offloads_completed[i];
      // A Reload brings a stash back to the device from its start.
      if (posts_request(whole.op) && info(whole.op).direction == Direction::from_host) {
        peak = std::max(peak, ++now);
      }
      // An overlapped pair holds its forward's activation before its
      // backward frees the other's: its halves in order.
      for (int h = 0; h < half_count(whole); ++h) {
        const Instruction in = half(whole, h);
        const std::uint64_t key = (static_cast<std::uint64_t>(in.chunk) << 32) | in.micro_batch;
        const OpcodeInfo& row = info(in.op);
        if (row.produces.contains(Value::stash)) {
          ++held[key];
          peak = std::max(peak, ++now);
        } else if (row.produces.contains(Value::weight_gradient)) {
          auto found = held.find(key);
          if (found != held.end() && found->second > 0) {
            --found->second;
            --now;
          }
        }
      }
    }
    peaks[static_cast<std::size_t>(r)] = peak;
  }
  return peaks;
}

void summarize(const Program& program, Simulation& simulation) {
  const Config& config = program.config;
  const Timeline& timeline = simulation.timeline;
  const std::vector<int> peaks = peak_activations(program);
  simulation.ranks.assign(static_cast<std::size_t>(program.ranks()), {});
  double idle = 0;
  for (int r = 0; r < program.ranks(); ++r) {
    RankFigures& figures = simulation.ranks[static_cast<std::size_t>(r)];
    bool any_pass = false;
    for (std::size_t i = program.rank_begin[static_cast<std::size_t>(r)];
         i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      const InstructionTime& t = timeline.times[i];
      figures.busy += t.busy;
      if (is_pass(activity_of(program.code[i].op))) {
        figures.first_start = any_pass ? std::min(figures.first_start, t.started) : t.started;
        figures.last_end = std::max(figures.last_end, t.started + t.busy);
        figures.pass_busy += t.busy;
        any_pass = true;
      }
      // Collectives with a compute part (BwdAllReduce) communicate too.
      if (activity_of(program.code[i].op) == Activity::communication ||
          is_collective(program.code[i].op)) {
        figures.communication += t.ended - t.started - t.busy;
      }
    }
    figures.idle = timeline.makespan - figures.busy;
    figures.peak_activations = peaks[static_cast<std::size_t>(r)];
    idle += figures.idle;
  }
  simulation.stages.assign(static_cast<std::size_t>(std::max(config.stages, 0)), {});
  for (int stage = 0; stage < config.stages; ++stage) {
    StageFigures& figures = simulation.stages[static_cast<std::size_t>(stage)];
    figures.stage = stage;
    for (int d = 0; d < config.dp; ++d) {
      const int r = rank_of(config, d, stage);
      if (r >= program.ranks()) continue;
      const RankFigures& rank = simulation.ranks[static_cast<std::size_t>(r)];
      figures.busy += rank.busy / config.dp;
      figures.peak_activations = std::max(figures.peak_activations, rank.peak_activations);
      figures.first_start =
          d == 0 ? rank.first_start : std::min(figures.first_start, rank.first_start);
      figures.last_end = std::max(figures.last_end, rank.last_end);
    }
    figures.idle = timeline.makespan - figures.busy;
  }
  const double total = timeline.makespan * program.ranks();
  simulation.bubble_fraction = total > 0 ? idle / total : 0;
  // The paper's cost is the longest stage's span; its bubble, that span
  // less the stage's own passes (m(T_F + T_B + T_W) when stages are equal).
  const RankFigures* longest = nullptr;
  for (const RankFigures& rank : simulation.ranks) {
    if (longest == nullptr ||
        rank.last_end - rank.first_start > longest->last_end - longest->first_start) {
      longest = &rank;
    }
  }
  const double span = longest != nullptr ? longest->last_end - longest->first_start : 0;
  simulation.bubble_rate_zb = span > 0 ? (span - longest->pass_busy) / span : 0;
}

Timeline timeline_from_measurements(const Program& program,
                                    const std::vector<MeasuredInstruction>& measured) {
  Timeline timeline;
  timeline.times.assign(program.code.size(), {});
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const MeasuredInstruction& m : measured) origin = std::min(origin, m.start_ns);
  for (const MeasuredInstruction& m : measured) {
    if (m.rank < 0 || m.rank >= program.ranks()) continue;
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(m.rank)];
    if (m.index >= program.rank_begin[static_cast<std::size_t>(m.rank) + 1] - begin) continue;
    InstructionTime& t = timeline.times[begin + m.index];
    t.issued = t.started = static_cast<double>(m.start_ns - origin) / 1000.0;
    t.ended = static_cast<double>(m.end_ns - origin) / 1000.0;
    if (is_busy(activity_of(program.code[begin + m.index].op))) t.busy = t.ended - t.started;
    timeline.makespan = std::max(timeline.makespan, t.ended);
  }
  timeline.flows = pair_messages(program);
  return timeline;
}

}  // namespace pipevm
