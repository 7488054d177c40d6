// Placing sends, receives and waits around a compute order (place_comms.hpp).
#include "place_comms.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <tuple>

namespace pipevm::synthesis {

namespace {

// A message's place in the global order: when its producer ends, then the
// producer's depth in the passes' dependency graph (so that of two passes
// ending at one time, which passes of zero cost do, one that needs the
// other comes later), then its stage and its index there, so that every
// rank agrees.
using MessageOrder = std::tuple<double, int, int, std::size_t>;

// A receive a stage must post: its message's order and its operands.
struct Receive {
  MessageOrder order;
  MessageKind kind = MessageKind::none;
  int micro_batch = 0;
  int chunk = 0;
};

bool is_backward_pass(PassKind kind) {
  return kind == PassKind::backward || kind == PassKind::backward_input;
}

// Where each stage's forwards and backwards are in its pass list, by chunk
// and micro-batch, to find a message's producer.
class PassIndex {
 public:
  explicit PassIndex(const ComputeOrder& order) : micro_batches_(order.config.micro_batches) {
    const int chunks = chunks_per_rank(order.placement, order.config);
    chunks_ = chunks;
    const std::size_t cells = static_cast<std::size_t>(chunks) * static_cast<std::size_t>(micro_batches_);
    forward_.assign(order.stages.size(), std::vector<std::size_t>(cells, 0));
    backward_.assign(order.stages.size(), std::vector<std::size_t>(cells, 0));
    for (std::size_t s = 0; s < order.stages.size(); ++s) {
      const auto& passes = order.stages[s];
      for (std::size_t j = 0; j < passes.size(); ++j) {
        const Pass& p = passes[j];
        if (p.kind == PassKind::forward) forward_[s][cell(p.chunk, p.micro_batch)] = j;
        if (is_backward_pass(p.kind)) backward_[s][cell(p.chunk, p.micro_batch)] = j;
      }
    }
  }
  std::size_t forward(int stage, int chunk, int mb) const {
    return forward_[static_cast<std::size_t>(stage)][cell(chunk, mb)];
  }
  std::size_t backward(int stage, int chunk, int mb) const {
    return backward_[static_cast<std::size_t>(stage)][cell(chunk, mb)];
  }

 private:
  std::size_t cell(int chunk, int mb) const {
    return static_cast<std::size_t>(chunk) * static_cast<std::size_t>(micro_batches_) +
           static_cast<std::size_t>(mb);
  }
  int micro_batches_ = 1;
  int chunks_ = 1;
  std::vector<std::vector<std::size_t>> forward_;
  std::vector<std::vector<std::size_t>> backward_;
};

// Builds every stage's stream; `pass_end` empty means the timing form.
class Builder {
 public:
  Builder(const ComputeOrder& order, const std::vector<std::vector<double>>& pass_end,
          const std::shared_ptr<const SourceFile>& file)
      : order_(order), pass_end_(pass_end), index_(order) {
    lane_end_ = lane_length(order.placement, order.config) - 1;
    if (!pass_end.empty()) depth_ = pass_depths();
    Program& p = built_.program;
    p.file = file;
    p.name = "synthesized";
    p.placement = order.placement;
    p.config = order.config;
    p.config.dp = 1;
    p.sources.push_back({});
    p.rank_begin.assign(1, 0);
  }

  BuiltProgram build() {
    for (int s = 0; s < order_.config.stages; ++s) build_stage(s);
    return std::move(built_);
  }

 private:
  PipelinePosition position(int stage, int chunk) const {
    return position_of(order_.placement, order_.config, stage, chunk);
  }
  // The stage at `offset` positions from (stage, chunk) along its lane, and its chunk.
  std::pair<int, int> neighbour(int stage, int chunk, int offset) const {
    PipelinePosition where = position(stage, chunk);
    where.position += offset;
    const int other = stage_at(order_.placement, order_.config, where);
    for (int c = 0; c < chunks_per_rank(order_.placement, order_.config); ++c) {
      const PipelinePosition at = position(other, c);
      if (at.lane == where.lane && at.position == where.position) return {other, c};
    }
    return {other, 0};
  }

  void emit(int stage, Opcode op, int mb, int chunk, MessageKind kind = MessageKind::none,
            WaitDirection direction = WaitDirection::none) {
    Instruction in =
        cell_instruction(order_.placement, order_.config, stage, op, mb, chunk, kind, direction);
    in.set_source(0, false);
    built_.program.code.push_back(in);
  }

  MessageOrder order_of(int stage, std::size_t pass) const {
    const auto at = static_cast<std::size_t>(stage);
    return {pass_end_[at][pass], depth_[at][pass], stage, pass};
  }

  // The pass (stage, index) whose output `pass` of stage s takes, if any:
  // its neighbour's along the lane (before it for a forward, after it
  // for a backward), on s itself at the turn of a V.
  std::optional<std::pair<int, std::size_t>> producer(int s, const Pass& pass) const {
    const PipelinePosition at = position(s, pass.chunk);
    if (pass.kind == PassKind::forward && at.position > 0) {
      const auto [from, chunk] = neighbour(s, pass.chunk, -1);
      return std::pair{from, index_.forward(from, chunk, pass.micro_batch)};
    }
    if (is_backward_pass(pass.kind) && at.position < lane_end_) {
      const auto [from, chunk] = neighbour(s, pass.chunk, 1);
      return std::pair{from, index_.backward(from, chunk, pass.micro_batch)};
    }
    return std::nullopt;
  }

  // Each pass's depth: one more than the deepest of the pass before it on
  // its stage and the pass whose output it takes. Stages advance while
  // their next pass's producer is known; the order was simulated, so it
  // has no cycle.
  std::vector<std::vector<int>> pass_depths() const {
    const std::size_t stages = order_.stages.size();
    std::vector<std::vector<int>> depth(stages);
    std::vector<std::size_t> next(stages, 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t s = 0; s < stages; ++s) {
        const auto& passes = order_.stages[s];
        for (; next[s] < passes.size(); ++next[s]) {
          const std::size_t j = next[s];
          int deepest = j > 0 ? depth[s][j - 1] : 0;
          if (const auto from = producer(static_cast<int>(s), passes[j])) {
            const auto& theirs = depth[static_cast<std::size_t>(from->first)];
            if (from->second >= theirs.size()) break;
            deepest = std::max(deepest, theirs[from->second]);
          }
          depth[s].push_back(deepest + 1);
          moved = true;
        }
      }
    }
    // Only an order with a cycle stops early; it never gets here, but
    // every pass keeps a depth.
    for (std::size_t s = 0; s < stages; ++s) depth[s].resize(order_.stages[s].size(), 0);
    return depth;
  }

  // The receives stage s posts, in the order the global order puts them
  // (timing form: the order their consumers run).
  std::vector<Receive> receives_of(int s) const {
    std::vector<Receive> receives;
    for (const Pass& pass : order_.stages[static_cast<std::size_t>(s)]) {
      const auto from = producer(s, pass);
      if (!from || from->first == s) continue;
      Receive r;
      r.micro_batch = pass.micro_batch;
      r.chunk = pass.chunk;
      r.kind = pass.kind == PassKind::forward ? MessageKind::act : MessageKind::grad;
      if (!pass_end_.empty()) r.order = order_of(from->first, from->second);
      receives.push_back(r);
    }
    if (!pass_end_.empty()) {
      std::stable_sort(receives.begin(), receives.end(),
                       [](const Receive& a, const Receive& b) { return a.order < b.order; });
    }
    return receives;
  }

  // Posts the receives that come before `limit` in the global order.
  void post_receives(int s, const std::vector<Receive>& receives, std::size_t& next,
                     const MessageOrder& limit) {
    for (; next < receives.size() && receives[next].order < limit; ++next) {
      const Receive& r = receives[next];
      emit(s, Opcode::IRecv, r.micro_batch, r.chunk, r.kind);
    }
  }

  void take_input(int s, const Pass& pass) {
    const PipelinePosition at = position(s, pass.chunk);
    const int mb = pass.micro_batch;
    if (pass.kind == PassKind::forward) {
      if (at.position == 0) {
        emit(s, Opcode::LoadInput, mb, pass.chunk);
        return;
      }
      // At the turn of a V the input is on the stage already: no message.
      if (neighbour(s, pass.chunk, -1).first != s) {
        emit(s, Opcode::Wait, mb, pass.chunk, MessageKind::act, WaitDirection::recv);
      }
      return;
    }
    if (!is_backward_pass(pass.kind) || at.position == lane_end_) return;
    if (neighbour(s, pass.chunk, 1).first != s) {
      emit(s, Opcode::Wait, mb, pass.chunk, MessageKind::grad, WaitDirection::recv);
    }
  }

  // Hands the pass's output on; true when that was a send to another rank.
  bool give_output(int s, const Pass& pass) {
    const PipelinePosition at = position(s, pass.chunk);
    const int mb = pass.micro_batch;
    if (pass.kind == PassKind::forward) {
      if (at.position == lane_end_) {
        emit(s, Opcode::LoadTarget, mb, pass.chunk);
        return false;
      }
      if (neighbour(s, pass.chunk, 1).first == s) return false;
      emit(s, Opcode::ISend, mb, pass.chunk, MessageKind::act);
      return true;
    }
    if (!is_backward_pass(pass.kind) || at.position == 0) return false;
    if (neighbour(s, pass.chunk, -1).first == s) return false;
    emit(s, Opcode::ISend, mb, pass.chunk, MessageKind::grad);
    return true;
  }

  // The order of the first send to another rank at or after pass `from`.
  MessageOrder next_send(int s, std::size_t from) const {
    const auto& passes = order_.stages[static_cast<std::size_t>(s)];
    for (std::size_t j = from; j < passes.size(); ++j) {
      const Pass& pass = passes[j];
      const PipelinePosition at = position(s, pass.chunk);
      const bool sends_on = pass.kind == PassKind::forward
                                ? at.position < lane_end_ && neighbour(s, pass.chunk, 1).first != s
                                : is_backward_pass(pass.kind) && at.position > 0 &&
                                      neighbour(s, pass.chunk, -1).first != s;
      if (sends_on) return order_of(s, j);
    }
    return {std::numeric_limits<double>::infinity(), 0, 0, 0};
  }

  void build_stage(int s) {
    const bool timing = pass_end_.empty();
    const std::vector<Receive> receives = receives_of(s);
    std::size_t next_receive = 0;
    const MessageOrder everything{std::numeric_limits<double>::infinity(), 0, 0, 0};
    emit(s, Opcode::ZeroGrad, 0, 0);
    post_receives(s, receives, next_receive, timing ? everything : next_send(s, 0));
    const auto& passes = order_.stages[static_cast<std::size_t>(s)];
    std::vector<std::size_t>& where = built_.pass_instruction.emplace_back();
    for (std::size_t j = 0; j < passes.size(); ++j) {
      take_input(s, passes[j]);
      where.push_back(built_.program.code.size());
      emit(s, opcode_of(passes[j].kind), passes[j].micro_batch, passes[j].chunk);
      if (give_output(s, passes[j]) && !timing) {
        post_receives(s, receives, next_receive, next_send(s, j + 1));
      }
    }
    emit(s, Opcode::WaitAll, 0, 0);
    emit(s, Opcode::OptimizerStep, 0, 0);
    built_.program.rank_begin.push_back(built_.program.code.size());
  }

  const ComputeOrder& order_;
  const std::vector<std::vector<double>>& pass_end_;
  PassIndex index_;
  std::vector<std::vector<int>> depth_;  // per stage and pass, when placing
  BuiltProgram built_;
  int lane_end_ = 0;
};

}  // namespace

BuiltProgram program_for_timing(const ComputeOrder& order,
                                const std::shared_ptr<const SourceFile>& file) {
  const std::vector<std::vector<double>> none;
  return Builder(order, none, file).build();
}

BuiltProgram program_with_placed_comms(const ComputeOrder& order,
                                       const std::vector<std::vector<double>>& pass_end,
                                       const std::shared_ptr<const SourceFile>& file) {
  return Builder(order, pass_end, file).build();
}

std::vector<std::vector<double>> pass_end_times(const BuiltProgram& built,
                                                const Timeline& timeline) {
  std::vector<std::vector<double>> ends;
  for (const auto& stage : built.pass_instruction) {
    auto& out = ends.emplace_back();
    out.reserve(stage.size());
    for (const std::size_t i : stage) out.push_back(timeline.times[i].ended);
  }
  return ends;
}

}  // namespace pipevm::synthesis
