// What the VM sums and averages over ranks: a step's gradient reductions
// (AllReduce over the data-parallel group or over a piece's mirror holders,
// ReduceScatter), the Hold and Drop that keep a weight gradient apart and
// the guard that refuses to reduce or step without it, and the Machine's
// parameter averages (gossip exchanges, the global average). Not here: the
// per-layer all-reduces BwdAllReduce starts during its backward (vm.cpp) and
// the sharded layers' own reduce-scatter (vm_shards.cpp).
#include <algorithm>
#include <array>
#include <string>

#include "vm_step.hpp"

namespace pipevm {

void Machine::start_gossip(int round) {
  gossip_requests_.clear();
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::span<const float> p = chunks_[c].piece.parameters();
    std::copy(p.begin(), p.end(), gossip_buffers_[c].begin());
    gossip_requests_.push_back(
        comm_.iallreduce_sum(gossip_buffers_[c], gossip_groups_[static_cast<std::size_t>(round)]));
  }
  gossip_round_ = round;
}

bool Machine::wait_gossip() {
  if (gossip_round_ < 0) return false;
  for (const runtime::Comm::Request request : gossip_requests_) comm_.wait(request);
  gossip_requests_.clear();
  const float scale =
      1.0F / static_cast<float>(gossip_sizes_[static_cast<std::size_t>(gossip_round_)]);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    std::span<float> p = chunks_[c].piece.parameters();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = gossip_buffers_[c][i] * scale;
  }
  gossip_round_ = -1;
  return true;
}

void Machine::finish_gossip() {
  wait_gossip();
}

void Machine::global_average() {
  const float scale = 1.0F / static_cast<float>(program_->config.dp);
  for (Chunk& chunk : chunks_) {
    std::span<float> p = chunk.piece.parameters();
    if (program_->config.dp > 1) comm_.allreduce_sum(p);
    for (float& x : p) x *= scale;
  }
}

void Machine::swap_in_global_average() {
  saved_parameters_.clear();
  for (Chunk& chunk : chunks_) {
    const std::span<const float> p = chunk.piece.parameters();
    saved_parameters_.emplace_back(p.begin(), p.end());
  }
  global_average();
}

void Machine::restore_parameters() {
  for (std::size_t c = 0; c < chunks_.size() && c < saved_parameters_.size(); ++c) {
    std::span<float> p = chunks_[c].piece.parameters();
    std::copy(saved_parameters_[c].begin(), saved_parameters_[c].end(), p.begin());
  }
  saved_parameters_.clear();
}

void VmStep::reduce_scatter(const Instruction& in) {
  const int layer = layer_of(in);
  refuse_held_weight_gradients(layer, "reduce-scatter");
  const bool cell = operand_parts(in.op).micro_batch;
  for (Chunk& chunk : m_.chunks_) {
    if (cell && &chunk != &chunk_at(in)) continue;
    for (Machine::Layer& l : chunk.layers) {
      if (layer != kNoLayer && l.index != layer) continue;
      if (l.sharded) {
        m_.reduce_scatter(chunk, l);
        continue;
      }
      // A layer held whole keeps the whole sum (its own shard included).
      const std::span<float> grads = chunk.piece.layer_gradients(l.index).all;
      if (!grads.empty() && m_.comm_.dp() > 1) m_.comm_.allreduce_sum(grads);
    }
  }
}

void VmStep::all_reduce(Group group, int layer) {
  refuse_held_weight_gradients(layer, "all-reduce");
  switch (group) {
    case Group::dp:
      if (m_.comm_.dp() == 1) return;
      for (Chunk& chunk : m_.chunks_) {
        // The whole chunk in one call when it can.
        if (const std::span<float> all = chunk.piece.contiguous_gradients();
            layer == kNoLayer && !all.empty()) {
          m_.comm_.allreduce_sum(all);
          continue;
        }
        const runtime::LayerRange held = chunk.piece.layers();
        for (int l = held.begin; l < held.end; ++l) {
          if (layer != kNoLayer && l != layer) continue;
          const std::span<float> grads = chunk.piece.layer_gradients(l).all;
          if (grads.empty())
            unsupported("all-reduces layer " + std::to_string(l) + ", which has no gradient");
          m_.comm_.allreduce_sum(grads);
        }
      }
      return;
    case Group::mirror:
      sum_over_holders();
      return;
    case Group::none:
    case Group::pipeline:
    case Group::world:
    case Group::gossip:
      break;
  }
  unsupported("an all-reduce over the " + std::string(name(group)) + " group");
}

// Under mirror placement a piece lives on two ranks of the pipeline (or
// twice on the middle rank when the stage count is odd); each holder has
// the gradients of its own lane's micro-batches. Each piece's copies are
// summed, layer by layer in piece order, so that the holders, which hold
// their two pieces as different chunks, pass the same buffers.
void VmStep::sum_over_holders() {
  const auto layers = [this](std::size_t c) { return m_.chunks_[c].piece.layers(); };
  if (m_.chunks_.size() == 2 && piece_at(m_.chunks_[0].where) == piece_at(m_.chunks_[1].where)) {
    for (int l = layers(0).begin; l < layers(0).end; ++l) {
      const std::span<float> a = m_.chunks_[0].piece.layer_gradients(l).all;
      const std::span<float> b = m_.chunks_[1].piece.layer_gradients(l).all;
      if (a.empty() || b.empty()) unsupported("sums a layer that has no gradient");
      for (std::size_t i = 0; i < a.size(); ++i) b[i] = a[i] = a[i] + b[i];
    }
  }

  if (m_.mirror_group_ == Machine::kNoGroup) return;
  std::array<std::size_t, 2> order{0, 1};
  if (m_.chunks_.size() == 2 && piece_at(m_.chunks_[1].where) < piece_at(m_.chunks_[0].where)) {
    order = {1, 0};
  }
  for (const std::size_t c : order) {
    for (int l = layers(c).begin; l < layers(c).end; ++l) {
      const std::span<float> grads = m_.chunks_[c].piece.layer_gradients(l).all;
      if (grads.empty()) unsupported("sums a layer that has no gradient");
      m_.comm_.allreduce_sum(grads, m_.mirror_group_);
    }
  }
}

void VmStep::hold_or_drop(const Instruction& in, bool hold) {
  Chunk& chunk = chunk_of(in);
  const runtime::LayerRange held = chunk.piece.layers();
  const int layer = layer_of(in);
  const int slot = static_cast<int>(in.micro_batch);
  runtime::HeldValue value = runtime::HeldValue::activation;
  // Without `layer`: the chunk's output (act), its input gradient (grad),
  // every layer's weight gradient (wgrad).
  runtime::LayerRange indices{layer, layer + 1};
  switch (in.kind) {
    case MessageKind::act:
      if (layer == kNoLayer) indices = {held.end, held.end + 1};
      break;
    case MessageKind::grad:
      value = runtime::HeldValue::gradient;
      if (layer == kNoLayer) indices = {held.begin, held.begin + 1};
      break;
    case MessageKind::wgrad:
      value = runtime::HeldValue::weight_gradient;
      if (layer == kNoLayer) indices = held;
      break;
    case MessageKind::none:
      unsupported("names no value (act, grad or wgrad)");
  }
  for (int index = indices.begin; index < indices.end; ++index) {
    hold ? chunk.piece.hold(value, slot, index) : chunk.piece.drop(value, slot, index);
  }
}

void VmStep::refuse_held_weight_gradients(int layer, const char* operation) {
  for (const Chunk& chunk : m_.chunks_) {
    chunk.piece.require_no_held_weight_gradient(layer == kNoLayer ? -1 : layer, operation);
  }
}

}  // namespace pipevm
