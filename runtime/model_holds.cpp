// Holds of a Piece (model.hpp): values a program keeps past their last use,
// as a reference solution keeps them, so that the memory a run measures is
// what the walk of docs/memory.md counts for Hold and Drop. A hold is a bit
// of its slot until the value reaches its last use; from then on the buffer
// is out of the slot, in kept_, until its Drop or the step's end. Leaves
// out: whether a program may hold a value (the checker's rules).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

std::uint8_t hold_bit(HeldValue value) {
  return static_cast<std::uint8_t>(1U << static_cast<unsigned>(value));
}

MemoryCategory category_of(HeldValue value) {
  switch (value) {
    case HeldValue::activation:
      return MemoryCategory::activations;
    case HeldValue::gradient:
      return MemoryCategory::activation_gradients;
    case HeldValue::weight_gradient:
      return MemoryCategory::gradients;
  }
  return MemoryCategory::activations;
}

std::string describe(HeldValue value, int index, int slot) {
  const std::string where = " of slot " + std::to_string(slot);
  switch (value) {
    case HeldValue::activation:
      return "the activation at boundary " + std::to_string(index) + where;
    case HeldValue::gradient:
      return "the gradient at boundary " + std::to_string(index) + where;
    case HeldValue::weight_gradient:
      return "the weight gradient of layer " + std::to_string(index) + where;
  }
  return "?";
}

}  // namespace

bool Piece::is_held(const Slot& s, HeldValue value, int local) {
  return (s.holds[to_size(local)] & hold_bit(value)) != 0;
}

int Piece::held_local(HeldValue value, int index, const char* operation) const {
  // Boundaries run to the piece's output, one past its last layer.
  const int end = value == HeldValue::weight_gradient ? layers_.end : layers_.end + 1;
  if (index < layers_.begin || index >= end) {
    throw std::out_of_range(std::string(operation) + ": " +
                            (value == HeldValue::weight_gradient ? "layer " : "boundary ") +
                            std::to_string(index) + " is not in this piece (layers " +
                            std::to_string(layers_.begin) + " .. " +
                            std::to_string(layers_.end - 1) + ")");
  }
  return index - layers_.begin;
}

std::vector<Piece::Kept>::iterator Piece::find_kept(int slot, HeldValue value, int local,
                                                    bool held) {
  return std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) {
    return k.slot == slot && k.value == value && k.local == local && k.held == held;
  });
}

void Piece::hold(HeldValue value, int slot, int index) {
  Slot& s = checked_slot(slot, "hold");
  const int l = held_local(value, index, "hold");
  if (is_held(s, value, l) || find_kept(slot, value, l, true) != kept_.end()) {
    throw std::logic_error("hold: " + describe(value, index, slot) + " is held already");
  }
  s.holds[to_size(l)] |= hold_bit(value);
}

void Piece::drop(HeldValue value, int slot, int index) {
  Slot& s = checked_slot(slot, "drop");
  const int l = held_local(value, index, "drop");
  const auto kept = find_kept(slot, value, l, true);
  if (kept == kept_.end()) {
    if (!is_held(s, value, l)) {
      throw std::logic_error("drop: " + describe(value, index, slot) + " is not held");
    }
    // Not made yet, or not past its last use: it goes at its last use.
    s.holds[to_size(l)] &= static_cast<std::uint8_t>(~hold_bit(value));
    return;
  }
  if (value == HeldValue::weight_gradient) {
    std::span<float>& grads = gradients_[to_size(l)];
    if (grads.empty()) take_gradients(l);
    std::transform(grads.begin(), grads.end(), kept->buffer.begin(), grads.begin(),
                   [](float sum, float part) { return sum + part; });
  } else if (kept->sends > 0) {
    pool_->ledger().move(category_of(value), MemoryCategory::messages, kept->buffer.size_bytes());
    kept->held = false;
    return;
  }
  pool_->give_back(category_of(value), kept->buffer);
  kept_.erase(kept);
}

std::span<const float> Piece::held(HeldValue value, int slot, int index) const {
  const Slot& s = checked_slot(slot, "held");
  const int l = held_local(value, index, "held");
  for (const Kept& k : kept_) {
    if (k.slot == slot && k.value == value && k.local == l && k.held) return k.buffer;
  }
  if (!is_held(s, value, l)) return {};
  switch (value) {
    case HeldValue::activation:
      return s.a[to_size(l)];
    case HeldValue::gradient:
      return s.g[to_size(l)];
    case HeldValue::weight_gradient:
      break;  // made apart only at its last use, which moves it out
  }
  return {};
}

void Piece::last_use(int slot, HeldValue value, int local, std::span<float>& buffer, int sends) {
  Slot& s = slots_[to_size(slot)];
  if (!is_held(s, value, local)) {
    give_back(category_of(value), buffer);
    return;
  }
  s.holds[to_size(local)] &= static_cast<std::uint8_t>(~hold_bit(value));
  kept_.push_back(Kept{slot, value, local, buffer, sends, true});
  buffer = {};
}

void Piece::end_kept_send(int slot, HeldValue value, int local, const char* operation) {
  const auto sending = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) {
    return k.slot == slot && k.value == value && k.local == local && k.sends > 0;
  });
  if (sending == kept_.end()) {
    if (value == HeldValue::gradient) return;  // nothing to give back, as without holds
    throw std::logic_error(std::string(operation) + ": no send of slot " + std::to_string(slot) +
                           "'s value in flight");
  }
  if (--sending->sends > 0 || sending->held) return;
  pool_->give_back(MemoryCategory::messages, sending->buffer);
  kept_.erase(sending);
}

bool Piece::give_back_kept(int slot) {
  bool apart = false;
  const auto first = std::remove_if(kept_.begin(), kept_.end(), [&](const Kept& k) {
    if (slot >= 0 && k.slot != slot) return false;
    apart = apart || k.value == HeldValue::weight_gradient;
    pool_->give_back(k.held ? category_of(k.value) : MemoryCategory::messages, k.buffer);
    return true;
  });
  kept_.erase(first, kept_.end());
  return apart;
}

void Piece::end_holds() {
  const bool apart = give_back_kept(-1);
  for (Slot& s : slots_) std::fill(s.holds.begin(), s.holds.end(), 0);
  if (apart) {
    throw std::logic_error(
        "the step ends with a weight gradient kept apart (Hold wgrad) that no Drop added to its "
        "layer's gradient");
  }
}

void Piece::require_no_held_weight_gradient(int layer, const char* operation) const {
  // Only one made apart: a hold whose backward has not run yet misses
  // nothing (the checker's rule, PV2045, is the same).
  for (const Kept& k : kept_) {
    if (k.value != HeldValue::weight_gradient) continue;
    if (layer >= 0 && k.local + layers_.begin != layer) continue;
    throw std::logic_error(std::string(operation) + ": " +
                           describe(HeldValue::weight_gradient, k.local + layers_.begin, k.slot) +
                           " is kept apart (Hold wgrad): Drop it first");
  }
}

}  // namespace pipevm::runtime
