// Memory policies of a Piece (model.hpp): a checkpointed forward and its
// recomputation, an offload to host memory and its reload. Each takes and
// gives back its buffers where the byte walk counts them
// (core/memory_bytes_policy.cpp), so that `run --report` measures what
// `check` and `simulate` count. Leaves out: whether a program may do it
// (the checker's rules), the copy thread (host_copies.hpp).
#include <stdexcept>
#include <string>

#include "model.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

std::string of_slot(int slot) {
  return " of slot " + std::to_string(slot);
}

}  // namespace

void Piece::forward_checkpoint(int slot) {
  Slot& s = checked_slot(slot, "forward_checkpoint");
  if (s.a.front().empty() || s.forward_next != 0 || s.stash != StashState::on_device) {
    throw std::logic_error("forward_checkpoint: slot " + std::to_string(slot) +
                           " is not ready for a forward (out of order)");
  }
  s.stash = StashState::input_only;
  const int layers = static_cast<int>(shapes_.size());
  for (int l = 0; l < layers; ++l) {
    forward_layer(slot, layers_.begin + l);
    // What only the backward would read goes at once: the input of every
    // layer but the first (the ViT's forward gave it back itself), a ViT
    // unit's stashes.
    if (l > 0) give_back(MemoryCategory::activations, s.a[to_size(l)]);
    if (is_vit()) give_back_stashes(s, l);
  }
  if (is_last()) give_back(MemoryCategory::activations, s.a.back());
  // Not forwarded as far as the backward knows: recompute() first.
  s.forward_next = 0;
  s.input_next = s.weight_next = -1;
}

void Piece::recompute(int slot) {
  Slot& s = checked_slot(slot, "recompute");
  if (s.stash != StashState::input_only || s.a.front().empty()) {
    throw std::logic_error("recompute: slot " + std::to_string(slot) +
                           " kept no input to recompute from (FwdCheckpoint first)");
  }
  if (s.output_sends > 0 || s.output_kept) {
    throw std::logic_error("recompute: the output" + of_slot(slot) +
                           " is still being sent (complete its send first)");
  }
  // An output never sent is made again with the rest.
  give_back(MemoryCategory::activations, s.a.back());
  s.stash = StashState::on_device;
  forward_all(slot);
}

StashState Piece::stash_state(int slot) const {
  return checked_slot(slot, "stash_state").stash;
}

void Piece::require_stash_on_device(const Slot& s, int slot, const char* operation) const {
  switch (s.stash) {
    case StashState::on_device:
      return;
    case StashState::input_only:
      throw std::logic_error(std::string(operation) + ": the forward" + of_slot(slot) +
                             " kept only its input (recompute first)");
    case StashState::offloading:
    case StashState::on_host:
    case StashState::reloading:
      throw std::logic_error(std::string(operation) + ": the activations" + of_slot(slot) +
                             " are not on the device (offloaded; reload, and wait, first)");
  }
}

void Piece::list_stash(Slot& s) {
  s.offloaded.clear();
  s.offloaded_floats.clear();
  const auto add = [&s](std::span<float>& buffer) {
    if (buffer.empty()) return;
    s.offloaded.push_back(&buffer);
    s.offloaded_floats.push_back(buffer.size());
  };
  for (std::span<float>& a : s.a) add(a);
  for (std::size_t k = 0; k < shapes_.size(); ++k) {
    add(s.forward_for_input[k]);
    add(s.forward_for_weight[k]);
  }
}

void Piece::start_offload(int slot, HostCopies& copies) {
  Slot& s = checked_slot(slot, "offload");
  const int top = static_cast<int>(shapes_.size()) - 1;
  if (s.stash != StashState::on_device || s.forward_next != top + 1 || s.input_next != top ||
      s.weight_next != top) {
    throw std::logic_error("offload: slot " + std::to_string(slot) +
                           " is not between its forward and its backward");
  }
  list_stash(s);
  std::size_t floats = 0;
  for (const std::size_t f : s.offloaded_floats) floats += f;
  s.host = copies.pool().take(MemoryCategory::host, floats);
  s.parts.clear();
  std::size_t at = 0;
  for (std::size_t i = 0; i < s.offloaded.size(); ++i) {
    s.parts.push_back({s.offloaded[i]->data(), s.host.data() + at, s.offloaded_floats[i]});
    at += s.offloaded_floats[i];
  }
  s.copies = &copies;
  s.ticket = copies.start(s.parts);
  s.stash = StashState::offloading;
}

void Piece::finish_offload(int slot) {
  Slot& s = checked_slot(slot, "finish_offload");
  if (s.stash != StashState::offloading) {
    throw std::logic_error("finish_offload: no offload" + of_slot(slot) + " under way");
  }
  s.copies->wait(s.ticket);
  for (std::span<float>* buffer : s.offloaded) {
    if (buffer == &s.a.back() && s.output_sends > 0) {
      // A send still reads the output: a message until it completes.
      pool_->ledger().move(MemoryCategory::activations, MemoryCategory::messages,
                           buffer->size_bytes());
      kept_.push_back(Kept{slot, HeldValue::activation, static_cast<int>(shapes_.size()), *buffer,
                           s.output_sends, false});
      s.output_sends = 0;
      *buffer = {};
      continue;
    }
    give_back(MemoryCategory::activations, *buffer);
  }
  s.stash = StashState::on_host;
}

void Piece::start_reload(int slot) {
  Slot& s = checked_slot(slot, "reload");
  if (s.stash != StashState::on_host) {
    throw std::logic_error("reload: the activations" + of_slot(slot) + " are not offloaded");
  }
  s.parts.clear();
  std::size_t at = 0;
  for (std::size_t i = 0; i < s.offloaded.size(); ++i) {
    *s.offloaded[i] = take(MemoryCategory::activations, s.offloaded_floats[i]);
    s.parts.push_back({s.host.data() + at, s.offloaded[i]->data(), s.offloaded_floats[i]});
    at += s.offloaded_floats[i];
  }
  s.ticket = s.copies->start(s.parts);
  s.stash = StashState::reloading;
}

void Piece::finish_reload(int slot) {
  Slot& s = checked_slot(slot, "finish_reload");
  if (s.stash != StashState::reloading) {
    throw std::logic_error("finish_reload: no reload" + of_slot(slot) + " under way");
  }
  drop_host_copy(s);
}

void Piece::drop_host_copy(Slot& s) {
  if (s.copies == nullptr) {
    s.stash = StashState::on_device;
    return;
  }
  s.copies->wait(s.ticket);
  s.copies->pool().give_back(MemoryCategory::host, s.host);
  s.host = {};
  s.copies = nullptr;
  s.offloaded.clear();
  s.offloaded_floats.clear();
  s.parts.clear();
  s.stash = StashState::on_device;
}

}  // namespace pipevm::runtime
