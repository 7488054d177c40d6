// The byte count of one rank's stream, walked in program order. Each
// category changes only at the rank's own instructions:
//  - weights: a chunk that the stream gathers (AllGather) is held as its own
//    shard (ceil(P / group)) except between an AllGather and its Release,
//    when it is whole; other chunks are whole throughout;
//  - gradients: whole per chunk, the own shard from a reduce-scatter to the
//    next ZeroGrad;
//  - optimizer state: states x the parameters the step updates (the own
//    shard under ShardStep);
//  - activations: from a forward to its weight gradient (or the step's end),
//    rows x the widths of every layer boundary of the chunk;
//  - activation gradients: the output gradient from its arrival to the
//    backward, the input gradient from the backward to its send;
//  - messages: the buffer of a non-blocking request until a wait completes it.
#include "memory_bytes.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace pipevm {

namespace {

struct ChunkShape {
  std::uint64_t parameters = 0;
  std::uint64_t boundaries = 0;  // floats per row of every layer boundary
  std::uint64_t input = 0;       // floats per row entering the chunk
  std::uint64_t output = 0;      // floats per row leaving it
};

int chunk_count(const Program& program) {
  return program.placement == Placement::looped ? program.config.chunks : 2;
}

std::uint64_t shard(std::uint64_t whole, int members) {
  const auto m = static_cast<std::uint64_t>(std::max(1, members));
  return (whole + m - 1) / m;
}

class RankBytesWalk {
 public:
  RankBytesWalk(const Program& program, const MemoryShape& shape,
                const std::vector<LayerRange>& split)
      : program_(program), shape_(shape) {
    const int chunks = chunk_count(program);
    chunks_.resize(static_cast<std::size_t>(chunks));
    split_ = split;
  }

  RankBytes walk(int rank);

 private:
  struct Pending {
    Instruction in;
    std::uint64_t bytes;
  };
  std::uint64_t weights() const;
  std::uint64_t gradient_bytes() const;
  void update_peak(RankBytes& peak) const;
  std::size_t cell(const Instruction& in) const {
    return static_cast<std::size_t>(in.chunk) * micro_batches_ + in.micro_batch;
  }
  bool in_range(const Instruction& in) const {
    return in.chunk < chunks_.size() && in.micro_batch < micro_batches_;
  }

  const Program& program_;
  const MemoryShape& shape_;
  std::vector<LayerRange> split_;
  std::vector<ChunkShape> chunks_;
  std::size_t micro_batches_ = 0;
  std::uint64_t rows_ = 1;
  int rank_ = 0;

  std::vector<int> members_;  // per chunk: the group it is sharded over (0: not sharded)
  std::vector<bool> gathered_;
  bool scattered_ = false;
  bool shard_step_ = false;
  std::vector<std::uint8_t> stashed_, waiting_grad_, unsent_grad_;
  std::uint64_t activations_ = 0, activation_gradients_ = 0, messages_ = 0;
  std::vector<Pending> pending_;
};

std::uint64_t RankBytesWalk::weights() const {
  std::uint64_t floats = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::uint64_t p = chunks_[c].parameters;
    floats += members_[c] == 0 || gathered_[c] ? p : shard(p, members_[c]);
  }
  return floats;
}

std::uint64_t RankBytesWalk::gradient_bytes() const {
  std::uint64_t floats = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::uint64_t p = chunks_[c].parameters;
    floats += scattered_ && members_[c] != 0 ? shard(p, members_[c]) : p;
  }
  return floats;
}

void RankBytesWalk::update_peak(RankBytes& peak) const {
  const auto e = static_cast<std::uint64_t>(shape_.element_bytes);
  RankBytes now = peak;
  now.weights = weights() * e;
  now.gradients = gradient_bytes() * e;
  std::uint64_t optimizer = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::uint64_t p = chunks_[c].parameters;
    optimizer += shard_step_ && members_[c] != 0 ? shard(p, members_[c]) : p;
  }
  now.optimizer = optimizer * static_cast<std::uint64_t>(shape_.optimizer_states) * e;
  now.activations = activations_ * e;
  now.activation_gradients = activation_gradients_ * e;
  now.messages = messages_ * e;
  if (now.total() > peak.total() || (peak.weights == 0 && peak.total() == 0)) peak = now;
}

RankBytes RankBytesWalk::walk(int rank) {
  rank_ = rank;
  const Config& config = program_.config;
  const int stage = stage_of(config, rank);
  micro_batches_ = static_cast<std::size_t>(std::max(0, config.micro_batches));
  rows_ = static_cast<std::uint64_t>(std::max(1, shape_.rows));
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const PipelinePosition where =
        position_of(program_.placement, config, stage, static_cast<int>(c));
    const LayerRange layers = split_[static_cast<std::size_t>(piece_at(where))];
    ChunkShape& s = chunks_[c];
    s = ChunkShape{};
    s.parameters = parameter_count(shape_.layer_widths, layers);
    for (int l = layers.begin; l <= layers.end; ++l) {
      s.boundaries += static_cast<std::uint64_t>(shape_.layer_widths[static_cast<std::size_t>(l)]);
    }
    s.input =
        static_cast<std::uint64_t>(shape_.layer_widths[static_cast<std::size_t>(layers.begin)]);
    s.output =
        static_cast<std::uint64_t>(shape_.layer_widths[static_cast<std::size_t>(layers.end)]);
  }
  const std::span<const Instruction> stream = program_.rank(rank);
  members_.assign(chunks_.size(), 0);
  gathered_.assign(chunks_.size(), false);
  shard_step_ = false;
  for (const Instruction& in : stream) {
    if (in.op == Opcode::AllGather && in.chunk < chunks_.size()) {
      members_[in.chunk] = group_of(in) == Group::world ? config.ranks() : config.dp;
    }
    if (in.op == Opcode::ShardStep) shard_step_ = true;
  }
  scattered_ = false;
  const std::size_t cells = chunks_.size() * micro_batches_;
  stashed_.assign(cells, 0);
  waiting_grad_.assign(cells, 0);
  unsent_grad_.assign(cells, 0);
  activations_ = activation_gradients_ = messages_ = 0;
  pending_.clear();

  RankBytes peak;
  peak.rank = rank;
  peak.stage = stage;
  update_peak(peak);
  for (const Instruction& in : stream) {
    const OpcodeInfo& row = info(in.op);
    const bool cell_ok = in_range(in);
    const ChunkShape* chunk = in.chunk < chunks_.size() ? &chunks_[in.chunk] : nullptr;
    if (in.op == Opcode::AllGather && chunk) gathered_[in.chunk] = true;
    if (in.op == Opcode::Release && chunk) gathered_[in.chunk] = false;
    if (in.op == Opcode::ZeroGrad) scattered_ = false;
    if (row.cost == CostKind::reduce_scatter || row.cost == CostKind::bwd_reduce_scatter) {
      scattered_ = true;
    }
    // A blocking message's buffer exists only while its rank waits in it:
    // counted at that moment, then gone.
    std::uint64_t transient = 0;
    if (row.cls == OpClass::p2p && chunk) {
      const std::uint64_t floats =
          rows_ * (is_send(in.op) == (in.kind == MessageKind::act) ? chunk->output : chunk->input);
      if (posts_request(in.op)) {
        pending_.push_back({in, floats});
        messages_ += floats;
      } else {
        transient = floats;
      }
      if (is_send(in.op) && in.kind == MessageKind::grad && cell_ok && unsent_grad_[cell(in)]) {
        unsent_grad_[cell(in)] = 0;
        activation_gradients_ -= rows_ * chunk->input;
      }
      if (is_recv(in.op) && in.kind == MessageKind::grad && cell_ok && !waiting_grad_[cell(in)]) {
        waiting_grad_[cell(in)] = 1;
        activation_gradients_ += rows_ * chunk->output;
      }
    }
    if (in.op == Opcode::Wait || in.op == Opcode::WaitAll) {
      for (auto it = pending_.begin(); it != pending_.end();) {
        const Instruction& p = it->in;
        const bool match =
            in.op == Opcode::WaitAll ||
            (p.kind == in.kind && p.micro_batch == in.micro_batch && p.chunk == in.chunk &&
             (in.direction == WaitDirection::send) == is_send(p.op));
        if (!match) {
          ++it;
          continue;
        }
        messages_ -= it->bytes;
        it = pending_.erase(it);
        if (in.op == Opcode::Wait) break;
      }
    }
    if (cell_ok && chunk && row.cls != OpClass::p2p) {
      const std::size_t c = cell(in);
      if (row.produces.contains(Value::activation) && !stashed_[c]) {
        stashed_[c] = 1;
        activations_ += rows_ * chunk->boundaries;
      }
      if (row.produces.contains(Value::target) && !waiting_grad_[c]) {
        waiting_grad_[c] = 1;  // the loss's gradient, made from the target
        activation_gradients_ += rows_ * chunk->output;
      }
      if (row.produces.contains(Value::input_gradient)) {
        if (waiting_grad_[c]) {
          waiting_grad_[c] = 0;
          activation_gradients_ -= rows_ * chunk->output;
        }
        const PipelinePosition where = position_of(program_.placement, config, stage, in.chunk);
        if (where.position > 0 && !unsent_grad_[c]) {
          unsent_grad_[c] = 1;
          activation_gradients_ += rows_ * chunk->input;
        }
      }
      if (row.produces.contains(Value::weight_gradient) && stashed_[c]) {
        stashed_[c] = 0;
        activations_ -= rows_ * chunk->boundaries;
      }
    }
    messages_ += transient;
    update_peak(peak);
    messages_ -= transient;
  }
  return peak;
}

}  // namespace

std::vector<RankBytes> peak_bytes(const Program& program, const MemoryShape& shape) {
  const int pieces = model_pieces(program.placement, program.config);
  std::vector<LayerRange> split = shape.split;
  if (split.empty()) {
    if (pieces < 1 || pieces > layer_count(shape.layer_widths)) return {};
    split = split_layers(shape.layer_widths, pieces);
  }
  if (static_cast<int>(split.size()) != pieces) return {};
  RankBytesWalk walk(program, shape, split);
  std::vector<RankBytes> ranks;
  ranks.reserve(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) ranks.push_back(walk.walk(r));
  return ranks;
}

nlohmann::json bytes_to_json(const std::vector<RankBytes>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankBytes& r : ranks) {
    out.push_back({{"rank", r.rank},
                   {"stage", r.stage},
                   {"peak_bytes", r.total()},
                   {"weights", r.weights},
                   {"gradients", r.gradients},
                   {"optimizer", r.optimizer},
                   {"activations", r.activations},
                   {"activation_gradients", r.activation_gradients},
                   {"messages", r.messages}});
  }
  return out;
}

}  // namespace pipevm
