// The VM's sharded weights, layer by layer: a layer the rank's stream
// gathers (AllGather of it or of its chunk) is held as the rank's own shard
// only, its whole weights exist from an AllGather (a pool buffer the piece
// computes with) to its Release, and after a reduce-scatter its gradient is
// the own shard's sum. A chunk with a sharded layer holds its other layers
// whole here too (its piece has no weights of its own: each layer is bound).
// Shards are equal, in dp_rank order, the last ones shorter (or empty) when
// the layer does not divide; every member stores ceil(P / members) floats
// (the rest padding, as PyTorch's FSDP pads its flat parameters), which is
// what the memory figures count (core/memory_bytes.hpp). The optimizer
// keeps state for the stored floats only. Not here: sharding over every rank (over world), which
// the VM refuses.
#include <algorithm>

#include "vm.hpp"

namespace pipevm {

namespace {

constexpr auto kWeights = runtime::MemoryCategory::weights;
constexpr auto kGradients = runtime::MemoryCategory::gradients;

bool gathers(std::span<const Instruction> stream, const Program& program, int stage, int chunk,
             int layer) {
  return std::any_of(stream.begin(), stream.end(), [&](const Instruction& in) {
    if (in.op != Opcode::AllGather) return false;
    if (layer_of(in) != kNoLayer) return layer_of(in) == layer;
    const LayerRange held = chunk_layers(program, stage, in.chunk);
    return in.chunk == chunk && (held.size() == 0 || (layer >= held.begin && layer < held.end));
  });
}

}  // namespace

std::vector<Machine::Layer> Machine::layers_of(int chunk, runtime::LayerRange range) const {
  const std::span<const Instruction> stream = program_->rank(rank_);
  const auto members = static_cast<std::size_t>(comm_.dp());
  std::vector<Layer> layers;
  std::size_t own_offset = 0;
  for (int index = range.begin; index < range.end; ++index) {
    Layer layer;
    layer.index = index;
    layer.sharded = gathers(stream, *program_, stage_, chunk, index);
    const std::size_t size = runtime::parameter_count(model_, {index, index + 1});
    layer.offset = 0;
    layer.count = size;
    if (layer.sharded) {
      const std::size_t per = (size + members - 1) / members;
      for (std::size_t m = 0; m < members; ++m) {
        const std::size_t offset = std::min(size, per * m);
        layer.counts.push_back(static_cast<int>(std::min(per, size - offset)));
        layer.displacements.push_back(static_cast<int>(offset));
      }
      layer.offset = std::min(size, per * static_cast<std::size_t>(dp_rank_));
      layer.count = std::min(per, size - layer.offset);
    }
    layer.stored = layer.sharded ? (size + members - 1) / members : size;
    layer.own_offset = own_offset;
    own_offset += layer.stored;
    layers.push_back(std::move(layer));
  }
  return layers;
}

Machine::Layer& Machine::layer(Chunk& chunk, int index) {
  for (Layer& l : chunk.layers) {
    if (l.index == index) return l;
  }
  throw std::logic_error("layer " + std::to_string(index) + " is not held by this chunk");
}

std::size_t Machine::own_floats(std::size_t chunk) const {
  std::size_t floats = 0;
  for (const Layer& l : chunks_[chunk].layers) floats += l.stored;
  return floats;
}

std::vector<Machine::HeldLayer> Machine::held_layers(std::size_t chunk) const {
  std::vector<HeldLayer> held;
  for (const Layer& l : chunks_[chunk].layers) {
    held.push_back({l.index, l.offset, l.count, l.own_offset});
  }
  return held;
}

std::span<float> Machine::held_parameters(std::size_t chunk, int index) {
  Chunk& c = chunks_[chunk];
  Layer& l = layer(c, index);
  return c.bound ? std::span<float>(l.own).first(l.count) : c.piece.layer_parameters(index).all;
}

void Machine::gather(Chunk& chunk, Layer& layer) {
  if (!layer.sharded) throw std::logic_error("AllGather of a layer this rank does not shard");
  if (!layer.gathered.empty()) throw std::logic_error("the layer's weights are already whole");
  const std::size_t size = chunk.piece.layer_size(layer.index);
  layer.gathered = pool_.take(kWeights, size);
  comm_.allgather(std::span(layer.own).first(layer.count), layer.gathered, layer.counts,
                  layer.displacements, runtime::Comm::kDataParallel);
  chunk.piece.bind_weights(layer.index, layer.gathered);
}

void Machine::release(Chunk& chunk, Layer& layer) {
  if (layer.gathered.empty()) throw std::logic_error("the layer's weights are not gathered");
  chunk.piece.unbind_weights(layer.index);
  pool_.give_back(kWeights, layer.gathered);
  layer.gathered = {};
}

void Machine::reduce_scatter(Chunk& chunk, Layer& layer) {
  if (!layer.sharded) {
    throw std::logic_error("ReduceScatter of layer " + std::to_string(layer.index) +
                           ", which this rank does not shard");
  }
  if (!layer.reduced.empty()) {
    throw std::logic_error("the gradient of layer " + std::to_string(layer.index) +
                           " is reduce-scattered already");
  }
  // The whole gradient (zeros where the rank computed none) is summed in
  // place; the own shard's sum lands in its first floats.
  if (!chunk.piece.has_gradients(layer.index)) {
    const std::vector<float> zeros(chunk.piece.layer_size(layer.index), 0.0F);
    chunk.piece.set_layer_gradients(layer.index, zeros);
  }
  const std::span<float> whole = chunk.piece.layer_gradients(layer.index).all;
  comm_.reduce_scatter_sum(whole, layer.counts, runtime::Comm::kDataParallel);
  layer.reduced = pool_.take(kGradients, layer.stored, true);
  std::copy_n(whole.begin(), layer.count, layer.reduced.begin());
  chunk.piece.drop_layer_gradients(layer.index);
}

void Machine::step(bool shards_only) {
  for (Chunk& chunk : chunks_) {
    if (shards_only && !std::any_of(chunk.layers.begin(), chunk.layers.end(),
                                    [](const Layer& l) { return l.sharded; })) {
      throw std::logic_error("ShardStep on a chunk that is not sharded (no AllGather of it)");
    }
    chunk.optimizer.begin_step();
    for (Layer& l : chunk.layers) {
      // The own floats' gradient: the reduced shard, else the own range of
      // the whole gradient (all-reduced, or the layer is not sharded).
      std::span<const float> grads = l.reduced.first(std::min(l.reduced.size(), l.count));
      if (grads.empty()) {
        const std::span<const float> whole = chunk.piece.layer_gradients(l.index).all;
        if (whole.empty()) continue;
        grads = whole.subspan(l.offset, l.count);
      }
      const std::span<float> params = chunk.bound ? std::span<float>(l.own).first(l.count)
                                                  : chunk.piece.layer_parameters(l.index).all;
      chunk.optimizer.update(params, grads, l.own_offset);
    }
  }
  drop_gradients();
}

void Machine::drop_gradients() {
  for (Chunk& chunk : chunks_) {
    chunk.piece.zero_grad();
    for (Layer& l : chunk.layers) {
      pool_.give_back(kGradients, l.reduced);
      l.reduced = {};
    }
  }
}

std::vector<float> Machine::whole_parameters(std::size_t chunk) {
  Chunk& c = chunks_[chunk];
  if (!c.bound) {
    const std::span<const float> p = c.piece.parameters();
    return {p.begin(), p.end()};
  }
  std::vector<float> whole;
  for (Layer& l : c.layers) {
    const std::size_t at = whole.size();
    whole.resize(at + c.piece.layer_size(l.index));
    const std::span<float> out = std::span<float>(whole).subspan(at);
    if (l.sharded) {
      comm_.allgather(std::span<const float>(l.own).first(l.count), out, l.counts, l.displacements,
                      runtime::Comm::kDataParallel);
    } else {
      std::copy(l.own.begin(), l.own.end(), out.begin());
    }
  }
  return whole;
}

void Machine::set_parameters(std::size_t chunk, std::span<const float> whole) {
  Chunk& c = chunks_[chunk];
  if (!c.bound) {
    if (whole.size() != c.piece.parameters().size()) {
      throw std::invalid_argument("set_parameters: wrong parameter count");
    }
    std::copy(whole.begin(), whole.end(), c.piece.parameters().begin());
    return;
  }
  std::size_t at = 0;
  for (Layer& l : c.layers) {
    const std::size_t size = c.piece.layer_size(l.index);
    if (at + size > whole.size()) throw std::invalid_argument("set_parameters: too few floats");
    std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(at + l.offset), l.count, l.own.begin());
    at += size;
  }
}

}  // namespace pipevm
