// The byte count of one rank's stream, walked in program order, layer by
// layer. Each value changes only at the rank's own instructions:
//  - weights: the layers of the rank's chunks whole, except sharded layers
//    (those the stream gathers), held as the own shard ceil(P / group) plus,
//    from an AllGather to its Release, a whole copy;
//  - gradients: a layer's from its first weight gradient (whole) to the
//    step; after a reduce-scatter of it, the own shard;
//  - optimizer state: states x (whole layers + own shards);
//  - activations, per micro-batch: the input of layer l from its arrival
//    (LoadInput, Recv; at the turn of a V, where no Recv brought it, the
//    forward that takes it from the chunk before it on the rank, whose
//    output stays its own) or the forward of the layer below until the weight
//    gradient of layer l; the chunk's output until the input gradient of its
//    top layer;
//  - activation gradients: the gradient at the top of layer l (received, the
//    loss's, or from the layer above) until the weight gradient of layer l;
//    the chunk's input gradient until it is sent (at the turn of a V, until
//    the backward of the chunk after it on the rank takes it, unsent);
//  - a layer's stashes (the ViT's), per micro-batch: what its forward keeps
//    for its input half, and for its weight half (activations), what its
//    input half keeps for its weight half (activation gradients, and the
//    weight gradients it reduced: gradients); such a layer's input is gone
//    after its forward;
//  - messages: a value a send still in flight keeps after its last use;
//  - held values (Hold ... Drop): an activation or activation gradient
//    held stays in its category past its last use until its Drop; a
//    weight gradient held apart is one more whole layer of gradients until
//    its Drop adds it into the layer's.
// Sends and receives use the values' own buffers, collectives reduce in
// place. What an instruction needs only while it runs (a loss gradient made
// and used by one Bwd, the zeros a member that computes no gradient of a
// layer reduce-scatters) is not counted: the moments are between
// instructions.
// Hold and Drop are memory_bytes_holds.cpp's; the memory policies
// (FwdCheckpoint, Recompute, Offload, Reload) memory_bytes_policy.cpp's.
#include "memory_bytes.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "memory_bytes_walk.hpp"

namespace pipevm {

std::uint64_t layer_parameters(const MemoryShape& shape, int layer) {
  if (!shape.layer_parameter_counts.empty()) {
    return shape.layer_parameter_counts.at(static_cast<std::size_t>(layer));
  }
  const auto in = static_cast<std::uint64_t>(shape.layer_widths[static_cast<std::size_t>(layer)]);
  const auto out =
      static_cast<std::uint64_t>(shape.layer_widths[static_cast<std::size_t>(layer) + 1]);
  return out * in + (shape.bias ? out : 0);
}

std::uint64_t shard_of(std::uint64_t whole, int members) {
  const auto m = static_cast<std::uint64_t>(std::max(1, members));
  return (whole + m - 1) / m;
}
namespace bytes_walk {

void RankBytesWalk::set(std::vector<std::uint8_t>& values, std::uint64_t& total, std::size_t s,
                        int boundary, Held to) {
  const std::uint8_t from = values[s];
  if (from == to) return;
  const std::uint64_t f = floats(boundary);
  if (from == live) total -= f;
  if (from == sending) messages_ -= f;
  if (to == live) total += f;
  if (to == sending) messages_ += f;
  values[s] = to;
}

// The value's last use: gone, unless a send still reads it or a Hold keeps it.
void RankBytesWalk::free_value(std::vector<std::uint8_t>& values, std::uint64_t& total,
                               std::size_t s, int boundary) {
  if (values[s] != live) return;
  (&values == &a_ ? a_past_ : g_past_)[s] = 1;
  if ((&values == &a_ ? a_held_ : g_held_)[s]) return;
  const bool sent = std::any_of(pending_.begin(), pending_.end(), [&](const Pending& p) {
    return p.slot == s && (&values == &a_) == p.activation;
  });
  set(values, total, s, boundary, sent ? sending : absent);
}

RankBytes RankBytesWalk::now() const {
  const auto e = static_cast<std::uint64_t>(shape_.element_bytes);
  RankBytes r;
  r.rank = rank_;
  r.stage = stage_;
  std::uint64_t weights = 0, gradients = 0, optimizer = 0;
  for (std::size_t l = 0; l < parameters_.size(); ++l) {
    const std::uint64_t p = parameters_[l];
    const bool sharded = group_[l] > 0;
    if (!held_[l] && !sharded) continue;
    const std::uint64_t own = sharded ? shard_of(p, group_[l]) : p;
    weights += own + (gathered_[l] ? p : 0);
    optimizer += own;
    if (grad_[l] == Grad::whole) gradients += p;
    if (grad_[l] == Grad::shard) gradients += own;
    gradients += apart_made_[l] * p;
  }
  gradients += reduced_gradients_;
  r.weights = weights * e;
  r.gradients = gradients * e;
  r.optimizer = optimizer * static_cast<std::uint64_t>(shape_.optimizer_states) * e;
  r.activations = activations_ * e;
  r.activation_gradients = activation_gradients_ * e;
  r.messages = messages_ * e;
  r.host = host_ * e;
  r.host_peak = host_peak_ * e;
  return r;
}

RankBytes RankBytesWalk::walk(int rank, const Moment& moment,
                              std::vector<HoldFinding>* findings) {
  rank_ = rank;
  findings_ = findings;
  const Config& config = program_.config;
  stage_ = stage_of(config, rank);
  const auto micro_batches = static_cast<std::size_t>(std::max(0, config.micro_batches));
  rows_ = static_cast<std::uint64_t>(std::max(1, shape_.rows));
  const std::size_t layers = parameters_.size();
  held_.assign(layers, 0);
  group_.assign(layers, 0);
  gathered_.assign(layers, 0);
  grad_.assign(layers, Grad::none);
  chunks_.clear();
  std::size_t slots = 0;
  const int last_position = lane_length(program_.placement, config) - 1;
  for (int c = 0; c < chunks_per_rank(program_.placement, config); ++c) {
    const PipelinePosition where = position_of(program_.placement, config, stage_, c);
    Chunk chunk;
    chunk.layers = split_[static_cast<std::size_t>(piece_at(where))];
    chunk.first = where.position == 0;
    chunk.last = where.position == last_position;
    chunk.base = slots;
    chunk.act_from = local_source_chunk(program_.placement, config, stage_, c, MessageKind::act);
    chunk.grad_from = local_source_chunk(program_.placement, config, stage_, c, MessageKind::grad);
    slots += micro_batches * static_cast<std::size_t>(chunk.layers.size() + 1);
    for (int l = chunk.layers.begin; l < chunk.layers.end; ++l)
      held_[static_cast<std::size_t>(l)] = 1;
    chunks_.push_back(chunk);
  }
  const std::span<const Instruction> stream = program_.rank(rank);
  for (const Instruction& in : stream) {
    if (in.op != Opcode::AllGather) continue;
    const int members = group_of(in) == Group::world ? config.ranks() : config.dp;
    const int layer = layer_of(in);
    if (layer != kNoLayer) {
      if (static_cast<std::size_t>(layer) < layers)
        group_[static_cast<std::size_t>(layer)] = members;
    } else if (in.chunk < chunks_.size()) {
      const LayerRange r = chunks_[in.chunk].layers;
      for (int l = r.begin; l < r.end; ++l) group_[static_cast<std::size_t>(l)] = members;
    }
  }
  a_.assign(slots, absent);
  g_.assign(slots, absent);
  a_held_.assign(slots, 0);
  g_held_.assign(slots, 0);
  a_past_.assign(slots, 0);
  g_past_.assign(slots, 0);
  micro_batches_ = micro_batches;
  apart_.assign(layers * micro_batches, not_apart);
  weight_done_.assign(layers * micro_batches, 0);
  stash_.assign(layers * micro_batches, 0);
  apart_made_.assign(layers, 0);
  pending_.clear();
  activations_ = activation_gradients_ = messages_ = reduced_gradients_ = 0;
  const std::size_t cells = chunks_.size() * micro_batches;
  where_.assign(cells, on_device);
  host_floats_.assign(cells, 0);
  a_host_.assign(slots, 0);
  stash_host_.assign(layers * micro_batches, 0);
  copies_.clear();
  host_ = host_peak_ = 0;

  RankBytes peak = now();
  moment(stream.size(), peak);
  for (std::size_t i = 0; i < stream.size(); ++i) {
    const Instruction& in = stream[i];
    index_ = i;
    for (int h = 0; h < half_count(in); ++h) {
      const Instruction part = half(in, h);
      switch (info(part.op).cls) {
        case OpClass::p2p:
          message(part);
          break;
        case OpClass::wait:
          wait(part);
          break;
        case OpClass::data:
        case OpClass::compute:
        case OpClass::collective:
        case OpClass::optimizer:
          compute(part);
          break;
      }
    }
    host_peak_ = std::max(host_peak_, host_);
    const RankBytes current = now();
    if (current.total() > peak.total()) peak = current;
    moment(i, current);
  }
  index_ = stream.empty() ? 0 : stream.size() - 1;
  unsummed({0, static_cast<int>(layers)}, "the step ends");
  peak.host_peak = host_peak_ * static_cast<std::uint64_t>(shape_.element_bytes);
  return peak;
}

// The backward of layer l of a cell: its input part (the gradient below it)
// and its weight part (its weight gradient, after which its input and the
// gradient above it are gone).
void RankBytesWalk::backward_layer(const Chunk& c, std::uint32_t mb, int l, bool input,
                                   bool weight) {
  const LayerRange r = c.layers;
  if (input) {
    if (l == r.end - 1) {
      // The top gradient: received, or made here by the loss from the output.
      set(g_, activation_gradients_, slot(c, mb, r.end), r.end, live);
      free_value(a_, activations_, slot(c, mb, r.end), r.end);
    }
    const std::size_t below = slot(c, mb, l);
    if (l > r.begin || !c.first) {
      set(g_, activation_gradients_, below, l, live);
    } else if (g_held_[below]) {
      // The model's input gradient, made only because it is held; it has no use.
      set(g_, activation_gradients_, below, l, live);
      free_value(g_, activation_gradients_, below, l);
    }
  }
  if (input) stash(l, mb, 2);
  if (weight) {
    stash(l, mb, 3);
    free_value(a_, activations_, slot(c, mb, l), l);
    free_value(g_, activation_gradients_, slot(c, mb, l + 1), l + 1);
    const std::size_t w = apart_index(l, mb);
    weight_done_[w] = 1;
    if (apart_[w] == apart_held) {
      apart_[w] = apart_made;
      ++apart_made_[static_cast<std::size_t>(l)];
      return;
    }
    Grad& grad = grad_[static_cast<std::size_t>(l)];
    if (grad == Grad::none) grad = Grad::whole;
  }
}

void RankBytesWalk::stash(int l, std::uint32_t mb, std::uint8_t pass) {
  if (shape_.layer_stashes.empty()) return;
  std::uint8_t& done = stash_[apart_index(l, mb)];
  if (done + 1 != pass) return;
  const MemoryShape::LayerStash& s = shape_.layer_stashes.at(static_cast<std::size_t>(l));
  if (pass == 1) {
    activations_ += rows_ * (s.forward_for_input + s.forward_for_weight);
  } else if (pass == 2) {
    activations_ -= rows_ * s.forward_for_input;
    activation_gradients_ += rows_ * s.gradients_for_weight;
    reduced_gradients_ += s.reduced_gradients;
  } else {
    activations_ -= rows_ * s.forward_for_weight;
    activation_gradients_ -= rows_ * s.gradients_for_weight;
    reduced_gradients_ -= s.reduced_gradients;
  }
  done = pass;
}

void RankBytesWalk::compute(const Instruction& in) {
  if (in.op == Opcode::Hold || in.op == Opcode::Drop) {
    hold(in);  // its boundary may be one past the chunk's last layer
    return;
  }
  const bool cell = operand_parts(in.op).micro_batch;
  const bool known = in.chunk < chunks_.size() &&
                     in.micro_batch < static_cast<std::uint32_t>(program_.config.micro_batches);
  if (cell && !known) return;
  const Chunk* c = in.chunk < chunks_.size() ? &chunks_[in.chunk] : nullptr;
  const std::uint32_t mb = in.micro_batch;
  const int layer = layer_of(in);
  const LayerRange r = c ? c->layers : LayerRange{};
  const LayerRange these = layer != kNoLayer ? LayerRange{layer, layer + 1} : r;
  // A layer outside the cell's chunk (a program expanded for another model)
  // is no work of this walk.
  if (cell && layer != kNoLayer && (layer < r.begin || layer >= r.end)) return;
  const bool in_model =
      static_cast<std::size_t>(these.end) <= parameters_.size() && these.begin >= 0;
  const LayerRange every{0, static_cast<int>(parameters_.size())};
  switch (in.op) {
    case Opcode::LoadInput:
      set(a_, activations_, slot(*c, mb, r.begin), r.begin, live);
      return;
    case Opcode::Fwd:
      if (these.begin == r.begin) take_on_rank(*c, mb, MessageKind::act);
      forward(*c, mb, these);
      return;
    case Opcode::FwdCheckpoint:
      take_on_rank(*c, mb, MessageKind::act);
      forward_checkpoint(*c, mb);
      return;
    case Opcode::Recompute:
      where_[cell_of(in.chunk, mb)] = on_device;
      forward(*c, mb, r);
      return;
    case Opcode::Offload:
    case Opcode::Reload:
      copy(in);
      return;
    case Opcode::Bwd:
    case Opcode::BwdAllReduce:
    case Opcode::BwdReduceScatter:
      if (these.end == r.end) take_on_rank(*c, mb, MessageKind::grad);
      for (int l = these.end - 1; l >= these.begin; --l) backward_layer(*c, mb, l, true, true);
      if (in.op != Opcode::Bwd) unsummed(these, "its backward reduces it");
      if (in.op == Opcode::BwdReduceScatter) {
        for (int l = these.begin; l < these.end; ++l) {
          if (group_[static_cast<std::size_t>(l)] > 0)
            grad_[static_cast<std::size_t>(l)] = Grad::shard;
        }
      }
      return;
    case Opcode::BwdInput:
      if (these.end == r.end) take_on_rank(*c, mb, MessageKind::grad);
      for (int l = these.end - 1; l >= these.begin; --l) backward_layer(*c, mb, l, true, false);
      return;
    case Opcode::BwdWeight:
      for (int l = these.end - 1; l >= these.begin; --l) backward_layer(*c, mb, l, false, true);
      return;
    case Opcode::AllGather:
    case Opcode::Release: {
      if (layer == kNoLayer && !c) return;
      if (!in_model) return;
      for (int l = these.begin; l < these.end; ++l) {
        gathered_[static_cast<std::size_t>(l)] = in.op == Opcode::AllGather ? 1 : 0;
      }
      return;
    }
    case Opcode::ReduceScatter:
      unsummed(layer == kNoLayer ? every : these, "it is reduce-scattered");
      reduce(in, true);
      return;
    case Opcode::ZeroGrad:
    case Opcode::OptimizerStep:
    case Opcode::ShardStep:
      unsummed(every, in.op == Opcode::ZeroGrad ? "ZeroGrad clears it" : "the optimizer steps");
      std::fill(grad_.begin(), grad_.end(), Grad::none);
      return;
    case Opcode::Hold:
    case Opcode::Drop:
      return;  // hold(), above
    case Opcode::AllReduce:
      unsummed(layer == kNoLayer ? every : these, "it is all-reduced");
      return;
    case Opcode::LoadTarget:
    case Opcode::GossipStart:
    case Opcode::GossipWait:
    case Opcode::GlobalAverage:
    case Opcode::FwdBwd:
    case Opcode::Send:
    case Opcode::Recv:
    case Opcode::ISend:
    case Opcode::IRecv:
    case Opcode::Wait:
    case Opcode::WaitAll:
    case Opcode::WaitOffload:
    case Opcode::WaitReload:
      return;
  }
}

void RankBytesWalk::forward(const Chunk& c, std::uint32_t mb, LayerRange these) {
  for (int l = these.begin; l < these.end; ++l) {
    set(a_, activations_, slot(c, mb, l + 1), l + 1, live);
    stash(l, mb, 1);
    if (!shape_.layer_stashes.empty()) free_value(a_, activations_, slot(c, mb, l), l);
  }
}


// A reduce-scatter leaves each sharded layer's own shard of the sum (also on
// a member that computed no gradient of it: it contributed zeros).
void RankBytesWalk::reduce(const Instruction& in, bool scatter) {
  if (!scatter) return;
  const int layer = layer_of(in);
  const std::size_t begin = layer == kNoLayer ? 0 : static_cast<std::size_t>(layer);
  const std::size_t end = layer == kNoLayer ? parameters_.size() : begin + 1;
  for (std::size_t l = begin; l < end && l < parameters_.size(); ++l) {
    if (group_[l] > 0) grad_[l] = Grad::shard;
  }
}

void RankBytesWalk::message(const Instruction& in) {
  if (in.chunk >= chunks_.size() ||
      in.micro_batch >= static_cast<std::uint32_t>(program_.config.micro_batches)) {
    return;
  }
  const Chunk& c = chunks_[in.chunk];
  const bool act = in.kind == MessageKind::act;
  // The value a message carries: a send reads the chunk's output (act) or
  // input gradient (grad); a receive makes its input (act) or top gradient.
  const int boundary = is_send(in.op) == act ? c.layers.end : c.layers.begin;
  const std::size_t s = slot(c, in.micro_batch, boundary);
  std::vector<std::uint8_t>& values = act ? a_ : g_;
  std::uint64_t& total = act ? activations_ : activation_gradients_;
  if (is_recv(in.op)) {
    set(values, total, s, boundary, live);
    return;
  }
  if (posts_request(in.op)) pending_.push_back({s, act, in});
  // A sent gradient has no other use, nor has a checkpointed output.
  if (!act) free_value(values, total, s, boundary);
  if (act) sent_checkpointed_output(c, in.micro_batch, s);
}

void RankBytesWalk::take_on_rank(const Chunk& c, std::uint32_t mb, MessageKind kind) {
  const bool act = kind == MessageKind::act;
  const int from = act ? c.act_from : c.grad_from;
  const int boundary = act ? c.layers.begin : c.layers.end;
  std::vector<std::uint8_t>& values = act ? a_ : g_;
  std::uint64_t& total = act ? activations_ : activation_gradients_;
  if (from < 0 || values[slot(c, mb, boundary)] == live) return;
  const Chunk& source = chunks_[static_cast<std::size_t>(from)];
  const int given = act ? source.layers.end : source.layers.begin;
  const std::size_t s = slot(source, mb, given);
  if (values[s] != live) return;
  set(values, total, slot(c, mb, boundary), boundary, live);
  if (act) {
    sent_checkpointed_output(source, mb, s);
  } else {
    free_value(values, total, s, given);
  }
}

void RankBytesWalk::wait(const Instruction& in) {
  wait_copies(in);
  if (in.op != Opcode::Wait && in.op != Opcode::WaitAll) return;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Instruction& p = it->in;
    const bool match =
        in.op == Opcode::WaitAll || (p.kind == in.kind && p.micro_batch == in.micro_batch &&
                                     p.chunk == in.chunk && in.direction == WaitDirection::send);
    if (!match) {
      ++it;
      continue;
    }
    const std::size_t s = it->slot;
    const bool act = it->activation;
    const std::uint16_t chunk = p.chunk;
    it = pending_.erase(it);
    std::vector<std::uint8_t>& values = act ? a_ : g_;
    const bool still_sent = std::any_of(pending_.begin(), pending_.end(), [&](const Pending& q) {
      return q.slot == s && q.activation == act;
    });
    if (values[s] == sending && !still_sent) {
      const Chunk& c = chunks_[chunk];
      const int boundary = act ? c.layers.end : c.layers.begin;
      set(values, act ? activations_ : activation_gradients_, s, boundary, absent);
    }
    if (in.op == Opcode::Wait) break;
  }
}

}  // namespace bytes_walk

namespace {

using bytes_walk::RankBytesWalk;

std::vector<LayerRange> split_for(const Program& program, const MemoryShape& shape) {
  const int pieces = model_pieces(program.placement, program.config);
  if (!shape.split.empty()) {
    return static_cast<int>(shape.split.size()) == pieces ? shape.split : std::vector<LayerRange>{};
  }
  if (program.layer_widths == shape.layer_widths && !program.layer_split.empty()) {
    return program.layer_split;
  }
  if (std::vector<LayerRange> cut = cut_for_model(program, shape.layer_widths); !cut.empty()) return cut;
  if (pieces < 1 || pieces > layer_count(shape.layer_widths)) return {};
  return split_layers(shape.layer_widths, pieces);
}

}  // namespace

std::vector<RankBytes> peak_bytes(const Program& program, const MemoryShape& shape) {
  const std::vector<LayerRange> split = split_for(program, shape);
  if (split.empty()) return {};
  RankBytesWalk walk(program, shape, split);
  std::vector<RankBytes> ranks;
  ranks.reserve(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) {
    ranks.push_back(walk.walk(r, [](std::size_t, const RankBytes&) {}));
  }
  return ranks;
}

std::vector<std::vector<RankBytes>> bytes_after_each(const Program& program,
                                                     const MemoryShape& shape) {
  const std::vector<LayerRange> split = split_for(program, shape);
  if (split.empty()) return {};
  RankBytesWalk walk(program, shape, split);
  std::vector<std::vector<RankBytes>> ranks(static_cast<std::size_t>(program.ranks()));
  for (int r = 0; r < program.ranks(); ++r) {
    std::vector<RankBytes>& after = ranks[static_cast<std::size_t>(r)];
    after.resize(program.rank(r).size());
    walk.walk(r, [&after](std::size_t i, const RankBytes& now) {
      if (i < after.size()) after[i] = now;
    });
  }
  return ranks;
}

std::vector<std::uint64_t> host_copy_bytes(const Program& program, const MemoryShape& shape) {
  const std::vector<LayerRange> split = split_for(program, shape);
  if (split.empty()) return {};
  std::vector<std::uint64_t> bytes(program.code.size(), 0);
  const bool copies =
      std::any_of(program.code.begin(), program.code.end(),
                  [](const Instruction& in) { return posts_request(in.op) && is_host_copy(in.op); });
  if (!copies) return bytes;
  RankBytesWalk walk(program, shape, split);
  walk.copy_bytes = &bytes;
  for (int r = 0; r < program.ranks(); ++r) walk.walk(r, [](std::size_t, const RankBytes&) {});
  return bytes;
}

std::vector<HoldFinding> hold_findings(const Program& program) {
  std::vector<HoldFinding> found;
  // Without a layer split there is nothing to walk: ask that before
  // scanning every instruction for a Hold.
  if (program.layer_split.empty()) return found;
  const bool holds = std::any_of(program.code.begin(), program.code.end(), [](const Instruction& in) {
    return in.op == Opcode::Hold || in.op == Opcode::Drop;
  });
  if (!holds) return found;
  MemoryShape shape;
  shape.layer_widths = program.layer_widths;
  const std::vector<LayerRange> split = split_for(program, shape);
  if (split.empty()) return found;
  RankBytesWalk walk(program, shape, split);
  for (int r = 0; r < program.ranks(); ++r) {
    walk.walk(r, [](std::size_t, const RankBytes&) {}, &found);
  }
  return found;
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
                   {"messages", r.messages},
                   {"host", r.host},
                   {"peak_host_bytes", r.host_peak}});
  }
  return out;
}

}  // namespace pipevm
