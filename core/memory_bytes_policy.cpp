// The byte walk's memory policies (memory_bytes_walk.hpp), per cell:
//  - FwdCheckpoint keeps the chunk's input and nothing between its layers;
//    its output lives until it is sent (its only use left), and on the
//    model's last piece (no send) not at all. Recompute is then a forward
//    (memory_bytes.cpp's `forward`): the cell holds what a Fwd leaves.
//  - Offload counts the cell's stash in host memory from its start: every
//    activation of the cell's boundaries still on the device and each
//    layer's forward stashes (the ViT's). The wait that completes it frees
//    them on the device (a value a send still reads stays there as a
//    message until the send completes). Reload takes them on the device
//    again from its start; the wait that completes it frees the host copy.
// Which wait completes which copy is the link's rule (link.hpp), kept here
// by the rank alone: a WaitOffload or WaitReload the oldest pending copy
// of its direction and cell, WaitAll every one. Where a program breaks the
// rules (check_memory_policy.cpp refuses it) the count follows the
// instructions as written. Leaves out: whether a copy is late (the
// simulator's), the copies' own buffers in flight (none: a copy moves the
// values' own buffers).
#include <algorithm>

#include "memory_bytes_walk.hpp"

namespace pipevm::bytes_walk {

void RankBytesWalk::forward_checkpoint(const Chunk& c, std::uint32_t mb) {
  if (!c.last) set(a_, activations_, slot(c, mb, c.layers.end), c.layers.end, live);
  where_[cell_of(static_cast<std::uint16_t>(&c - chunks_.data()), mb)] = input_only;
}

void RankBytesWalk::sent_checkpointed_output(const Chunk& c, std::uint32_t mb, std::size_t s) {
  if (where_[cell_of(static_cast<std::uint16_t>(&c - chunks_.data()), mb)] != input_only) return;
  free_value(a_, activations_, s, c.layers.end);
}

void RankBytesWalk::leave_device(std::size_t s, int boundary) {
  const bool sent = std::any_of(pending_.begin(), pending_.end(),
                                [&](const Pending& p) { return p.slot == s && p.activation; });
  set(a_, activations_, s, boundary, sent ? sending : absent);
}

void RankBytesWalk::copy(const Instruction& in) {
  const Chunk& c = chunks_[in.chunk];
  const std::uint32_t mb = in.micro_batch;
  const std::size_t cell = cell_of(in.chunk, mb);
  const bool to_host = info(in.op).direction == Direction::to_host;
  copies_.push_back({in.chunk, mb, to_host});
  const auto layer_stash = [&](int l) -> const MemoryShape::LayerStash* {
    return shape_.layer_stashes.empty() ? nullptr
                                        : &shape_.layer_stashes.at(static_cast<std::size_t>(l));
  };
  if (to_host) {
    std::uint64_t floats = 0;
    for (int b = c.layers.begin; b <= c.layers.end; ++b) {
      const std::size_t s = slot(c, mb, b);
      if (a_[s] != live) continue;
      a_host_[s] = 1;
      floats += this->floats(b);
    }
    for (int l = c.layers.begin; l < c.layers.end; ++l) {
      const std::size_t at = apart_index(l, mb);
      if (layer_stash(l) == nullptr || stash_[at] != 1) continue;
      stash_host_[at] = 1;
      floats += rows_ * (layer_stash(l)->forward_for_input + layer_stash(l)->forward_for_weight);
    }
    host_floats_[cell] += floats;
    host_ += floats;
    where_[cell] = offloading;
    record_copy(floats);
    return;
  }
  record_copy(host_floats_[cell]);
  for (int b = c.layers.begin; b <= c.layers.end; ++b) {
    const std::size_t s = slot(c, mb, b);
    if (a_host_[s]) set(a_, activations_, s, b, live);
  }
  for (int l = c.layers.begin; l < c.layers.end; ++l) {
    const std::size_t at = apart_index(l, mb);
    if (!stash_host_[at]) continue;
    activations_ +=
        rows_ * (layer_stash(l)->forward_for_input + layer_stash(l)->forward_for_weight);
    stash_[at] = 1;
  }
  where_[cell] = reloading;
}

void RankBytesWalk::record_copy(std::uint64_t floats) {
  if (copy_bytes == nullptr) return;
  (*copy_bytes)[program_.rank_begin[static_cast<std::size_t>(rank_)] + index_] =
      floats * static_cast<std::uint64_t>(shape_.element_bytes);
}

void RankBytesWalk::wait_copies(const Instruction& in) {
  const bool all = in.op == Opcode::WaitAll;
  if (!all && !is_host_copy(in.op)) return;
  const bool to_host = info(in.op).direction == Direction::to_host;
  for (auto it = copies_.begin(); it != copies_.end();) {
    if (!all && (it->to_host != to_host || it->chunk != in.chunk || it->mb != in.micro_batch)) {
      ++it;
      continue;
    }
    const Copy done = *it;
    it = copies_.erase(it);
    finish_copy(done.chunk, done.mb, done.to_host);
    if (!all) return;
  }
}

void RankBytesWalk::finish_copy(std::uint16_t chunk, std::uint32_t mb, bool to_host) {
  const Chunk& c = chunks_[chunk];
  const std::size_t cell = cell_of(chunk, mb);
  if (to_host) {
    for (int b = c.layers.begin; b <= c.layers.end; ++b) {
      const std::size_t s = slot(c, mb, b);
      if (a_host_[s]) leave_device(s, b);
    }
    for (int l = c.layers.begin; l < c.layers.end; ++l) {
      const std::size_t at = apart_index(l, mb);
      if (!stash_host_[at]) continue;
      const MemoryShape::LayerStash& st = shape_.layer_stashes.at(static_cast<std::size_t>(l));
      activations_ -= rows_ * (st.forward_for_input + st.forward_for_weight);
      stash_[at] = 0;
    }
    where_[cell] = on_host;
    return;
  }
  host_ -= host_floats_[cell];
  host_floats_[cell] = 0;
  for (int b = c.layers.begin; b <= c.layers.end; ++b) a_host_[slot(c, mb, b)] = 0;
  for (int l = c.layers.begin; l < c.layers.end; ++l) stash_host_[apart_index(l, mb)] = 0;
  where_[cell] = on_device;
}

}  // namespace pipevm::bytes_walk
