// Building blocks repeated, squeezed and reordered into compute orders
// (building_blocks.hpp).
#include "building_blocks.hpp"

#include <algorithm>
#include <limits>
#include <cstdlib>
#include <set>
#include <tuple>

namespace pipevm::synthesis {

namespace {

constexpr int kPeriod = 6;
// The passes of a stage by type: F, f, B, b, then the weight passes: one
// list W for both chunks (the k-th weight pass is that of the k-th backward
// in slot order), or W of B and w of b apart.
enum Type : std::size_t { kF = 0, kf = 1, kB = 2, kb = 3, kW = 4, kw = 5 };

// slots[t][k]: the slot of the k-th pass of type t on one stage.
using StageSlots = std::vector<std::vector<int>>;
using Slots = std::vector<StageSlots>;

int last_slot(const StageSlots& stage) {
  int last = -1;
  for (const auto& list : stage) {
    if (!list.empty()) last = std::max(last, list.back());
  }
  return last;
}

// The type whose next pass (next[t]) comes first, lower types first on a
// tie; -1 when every list is done.
int next_type(const StageSlots& stage, const std::vector<std::size_t>& next, std::size_t types) {
  int best = -1;
  int best_slot = std::numeric_limits<int>::max();
  for (std::size_t t = 0; t < types; ++t) {
    if (next[t] < stage[t].size() && stage[t][next[t]] < best_slot) {
      best_slot = stage[t][next[t]];
      best = static_cast<int>(t);
    }
  }
  return best;
}

// Weight passes into the free slots after their backwards, first in first
// out (W before w when both wait, when apart), the rest after the last.
StageSlots with_weights(StageSlots stage, bool apart) {
  stage.resize(4);
  const int bound = last_slot(stage);
  stage.resize(apart ? 6 : 5);
  std::vector<std::size_t> next(4, 0);
  std::array<int, 2> pending{0, 0};
  for (int i = 0; i <= bound; ++i) {
    const int t = next_type(stage, next, 4);
    if (t >= 0 && stage[static_cast<std::size_t>(t)][next[static_cast<std::size_t>(t)]] == i) {
      ++next[static_cast<std::size_t>(t)];
      if (t >= static_cast<int>(kB)) ++pending[apart ? static_cast<std::size_t>(t) - kB : 0];
      continue;
    }
    for (std::size_t w = 0; w < 2; ++w) {
      if (pending[w] == 0) continue;
      stage[kW + w].push_back(i);
      --pending[w];
      break;
    }
  }
  int slot = bound;
  for (std::size_t w = 0; w < 2; ++w) {
    for (; pending[w] > 0; --pending[w]) stage[kW + w].push_back(++slot);
  }
  return stage;
}

// The stage's peak as the paper counts it: +1 a forward, -1 a weight
// pass; without weight lists, each free slot after a backward stands for
// one.
int peak_of(const StageSlots& stage) {
  const bool weights = stage.size() > 4;
  const int bound = last_slot(stage);
  std::vector<std::size_t> next(stage.size(), 0);
  int held = 0;
  int peak = 0;
  int waiting = 0;
  for (int i = 0; i <= bound; ++i) {
    const int t = next_type(stage, next, stage.size());
    if (t >= 0 && stage[static_cast<std::size_t>(t)][next[static_cast<std::size_t>(t)]] == i) {
      ++next[static_cast<std::size_t>(t)];
      if (t <= static_cast<int>(kf)) ++held;
      if (t >= static_cast<int>(kW)) --held;
      if (t == static_cast<int>(kB) || t == static_cast<int>(kb)) ++waiting;
    } else if (!weights && waiting > 0) {
      --held;
      --waiting;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

struct Item {
  int slot;
  std::size_t stage;
  std::size_t type;
  std::size_t index;
  friend bool operator<(const Item& a, const Item& b) {
    return std::tie(a.slot, a.stage, a.type, a.index) < std::tie(b.slot, b.stage, b.type, b.index);
  }
};

std::vector<Item> items_in_slot_order(const Slots& slots) {
  std::vector<Item> items;
  for (std::size_t s = 0; s < slots.size(); ++s) {
    for (std::size_t t = 0; t < slots[s].size(); ++t) {
      for (std::size_t k = 0; k < slots[s][t].size(); ++k) items.push_back({slots[s][t][k], s, t, k});
    }
  }
  std::sort(items.begin(), items.end());
  return items;
}

// The latest slot among what pass (s, t, k) waits for on the V: the same
// chunk's pass on the neighbouring stage (F and B from above, f and b from
// below), the pass of the type before it on its stage, its predecessor of
// the same type; a weight pass of a shared list, the k-th backward.
int dependency_slot(const Slots& slots, std::size_t s, std::size_t t, std::size_t k) {
  int latest = -1;
  const std::size_t stages = slots.size();
  if ((t == kF || t == kB) && s > 0) latest = std::max(latest, slots[s - 1][t][k]);
  if ((t == kf || t == kb) && s + 1 < stages) latest = std::max(latest, slots[s + 1][t][k]);
  if (t > kF && t < kW) latest = std::max(latest, slots[s][t - 1][k]);
  if (t == kW && slots[s].size() == 5) {
    std::vector<int> backwards = slots[s][kB];
    backwards.insert(backwards.end(), slots[s][kb].begin(), slots[s][kb].end());
    std::sort(backwards.begin(), backwards.end());
    latest = std::max(latest, backwards[k]);
  }
  if (k > 0) latest = std::max(latest, slots[s][t][k - 1]);
  return latest;
}

// Squeezing at unit costs: every pass as early as its stage and what it
// waits for allow, in slot order. The result's slots are start times.
std::optional<Slots> squeeze(const Slots& slots) {
  Slots start = slots;
  Slots end = slots;
  for (auto& stage : end) {
    for (auto& list : stage) std::fill(list.begin(), list.end(), -1);
  }
  std::vector<int> free(slots.size(), 0);
  for (const Item& item : items_in_slot_order(slots)) {
    const std::size_t s = item.stage;
    const std::size_t t = item.type;
    const std::size_t k = item.index;
    int ready = free[s];
    const auto wait_for = [&](std::size_t stage, std::size_t type, std::size_t index) {
      if (end[stage][type][index] < 0) return false;
      ready = std::max(ready, end[stage][type][index]);
      return true;
    };
    bool known = true;
    if ((t == kF || t == kB) && s > 0) known = known && wait_for(s - 1, t, k);
    if ((t == kf || t == kb) && s + 1 < slots.size()) known = known && wait_for(s + 1, t, k);
    if (t > kF && t < kW) known = known && wait_for(s, t - 1, k);
    if (k > 0) known = known && wait_for(s, t, k - 1);
    if (!known) return std::nullopt;
    start[s][t][k] = ready;
    end[s][t][k] = ready + 1;
    free[s] = ready + 1;
  }
  return start;
}

// The paper's reordering: passes visited in slot order over all stages;
// one of the warm-up (before stage 0's first b; only with weight lists)
// or of the cool-down (after the first stage's last F) moves to its
// earliest free slot after what it waits for, when the stage's peak does
// not rise above the schedule's. The result is squeezed.
std::optional<Slots> reorder(Slots slots, bool with_weight_list) {
  if (with_weight_list) {
    for (auto& stage : slots) stage = with_weights(stage, false);
  }
  int allowed = 0;
  int horizon = 0;
  for (const auto& stage : slots) {
    allowed = std::max(allowed, peak_of(stage));
    horizon = std::max(horizon, last_slot(stage) + 1);
  }
  const std::size_t micro_batches = slots.front()[kF].size();
  std::vector<std::vector<bool>> occupied(slots.size(), std::vector<bool>(static_cast<std::size_t>(horizon), false));
  const auto occupy = [&](std::size_t s, int slot) { occupied[s][static_cast<std::size_t>(slot)] = true; };
  int phase = 0;  // 0 warm-up, 1 steady, 2 cool-down
  for (const Item& item : items_in_slot_order(slots)) {
    const std::size_t s = item.stage;
    const std::size_t t = item.type;
    const std::size_t k = item.index;
    if (t == kb && s == 0 && phase == 0) phase = 1;
    if (phase == 1) {
      if (t == kF && k + 1 == micro_batches) phase = 2;
      occupy(s, item.slot);
      continue;
    }
    if (phase == 0 && !with_weight_list) {
      occupy(s, item.slot);
      continue;
    }
    int& slot = slots[s][t][k];
    bool moved = false;
    for (int earlier = dependency_slot(slots, s, t, k) + 1; earlier < item.slot; ++earlier) {
      if (occupied[s][static_cast<std::size_t>(earlier)]) continue;
      slot = earlier;
      if (peak_of(slots[s]) <= allowed) {
        moved = true;
        break;
      }
    }
    if (!moved) slot = item.slot;
    occupy(s, slot);
  }
  if (!with_weight_list) {
    for (auto& stage : slots) stage = with_weights(stage, false);
  }
  return squeeze(slots);
}

Pass pass_of(std::size_t type, int index) {
  switch (type) {
    case kF:
      return {PassKind::forward, index, 0};
    case kf:
      return {PassKind::forward, index, 1};
    case kB:
      return {PassKind::backward_input, index, 1};
    case kb:
      return {PassKind::backward_input, index, 0};
    case kW:
      return {PassKind::backward_weight, index, 1};
    default:
      return {PassKind::backward_weight, index, 0};
  }
}

}  // namespace

BuildingBlock v_min_block(int stages) {
  const int p = stages;
  const int g = p % 3 == 0 ? 2 : 0;
  BuildingBlock block{"V-Min", {}};
  for (int i = 0; i < p; ++i) block.slots.push_back({i, 2 * p - i - 1, 2 * p + g + i, 4 * p + g - i - 1});
  return block;
}

BuildingBlock v_half_block(int stages) {
  const int p = stages;
  const int g = p % 2 == 0 ? 3 : 0;
  BuildingBlock block{"V-Half", {}};
  for (int i = 0; i < p; ++i) {
    block.slots.push_back({2 * i, 3 * p - i - 2, 3 * p + g + 2 * i - 1, 6 * p + g - i - 2});
  }
  return block;
}

std::optional<ComputeOrder> block_order(const Problem& problem, const BuildingBlock& block,
                                        bool reorder_passes) {
  const Config& c = problem.config;
  if (problem.placement != Placement::v || c.chunks != 2 ||
      static_cast<int>(block.slots.size()) != c.stages) {
    return std::nullopt;
  }
  const int m = c.micro_batches;
  Slots slots(block.slots.size(), StageSlots(4));
  for (std::size_t s = 0; s < block.slots.size(); ++s) {
    const auto& first = block.slots[s];
    // Two passes share a slot in some repetition when their first slots
    // differ by a multiple of the period less than m periods.
    for (std::size_t a = 0; a < 4; ++a) {
      for (std::size_t b = a + 1; b < 4; ++b) {
        const int apart = std::abs(first[a] - first[b]);
        if (apart % kPeriod == 0 && apart / kPeriod < m) return std::nullopt;
      }
    }
    for (std::size_t t = 0; t < 4; ++t) {
      slots[s][t].reserve(static_cast<std::size_t>(m));
      for (int k = 0; k < m; ++k) slots[s][t].push_back(first[t] + kPeriod * k);
    }
  }
  if (reorder_passes) {
    auto first = reorder(slots, true);
    if (!first) return std::nullopt;
    for (auto& stage : *first) stage.resize(4);
    auto second = reorder(*first, false);
    if (!second) return std::nullopt;
    slots = std::move(*second);
    for (auto& stage : slots) stage.resize(4);
  }
  ComputeOrder order;
  order.placement = Placement::v;
  order.config = c;
  order.config.dp = 1;
  for (StageSlots& stage : slots) {
    stage = with_weights(stage, true);
    std::vector<std::pair<int, Pass>> passes;
    for (std::size_t t = 0; t < stage.size(); ++t) {
      for (std::size_t k = 0; k < stage[t].size(); ++k) {
        passes.emplace_back(stage[t][k], pass_of(t, static_cast<int>(k)));
      }
    }
    std::stable_sort(passes.begin(), passes.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    auto& out = order.stages.emplace_back();
    for (const auto& [slot, pass] : passes) out.push_back(pass);
  }
  if (!problem.split_backward) order = with_backwards(std::move(order), false);
  if (!order_error(order).empty()) return std::nullopt;
  return order;
}

std::vector<BuildingBlock> adaptive_blocks(int stages) {
  const int p = stages;
  // F, f, B, b move by (k, -1, k, -1) slots from a stage to the next.
  const auto offsets = [](int k) { return std::array<int, 4>{k, -1, k, -1}; };
  std::vector<BuildingBlock> blocks;
  std::set<std::vector<std::array<int, 4>>> seen;
  for (int ff = 1; ff < kPeriod; ++ff) {
    for (int bb_first = 1; bb_first < kPeriod; ++bb_first) {
      for (int bb_second = 1; bb_second < kPeriod; ++bb_second) {
        if (ff == bb_first || ff == bb_second || bb_first == bb_second) continue;
        const std::array<int, 4> first{0, ff, bb_first, bb_second};
        for (int k0 = 1; k0 < kPeriod; ++k0) {
          for (int k1 = 1; k1 <= k0; ++k1) {
            for (int switch_at = 1; switch_at < std::max(p, 2); ++switch_at) {
              // The pattern (slots mod 6) of every stage.
              std::vector<std::array<int, 4>> pattern{first};
              bool collides = false;
              for (int i = 0; i + 1 < p && !collides; ++i) {
                const auto delta = offsets(i < switch_at ? k0 : k1);
                std::array<int, 4> next{};
                for (std::size_t t = 0; t < 4; ++t) next[t] = ((pattern.back()[t] + delta[t]) % kPeriod + kPeriod) % kPeriod;
                for (std::size_t a = 0; a < 4; ++a) {
                  for (std::size_t b = a + 1; b < 4; ++b) collides = collides || next[a] == next[b];
                }
                pattern.push_back(next);
              }
              if (collides) continue;
              // Micro-batch 0's slots: each pass at the first slot of its
              // pattern's residue after the pass it waits for.
              const auto after = [](int previous, int residue) {
                return previous + ((residue - previous - 1) % kPeriod + kPeriod) % kPeriod + 1;
              };
              std::vector<std::array<int, 4>> slots(static_cast<std::size_t>(p));
              const auto at = [](int i) { return static_cast<std::size_t>(i); };
              slots[0][kF] = pattern[0][kF];
              for (int i = 1; i < p; ++i) slots[at(i)][kF] = after(slots[at(i - 1)][kF], pattern[at(i)][kF]);
              slots[at(p - 1)][kf] = after(slots[at(p - 1)][kF], pattern[at(p - 1)][kf]);
              for (int i = p - 2; i >= 0; --i) slots[at(i)][kf] = after(slots[at(i + 1)][kf], pattern[at(i)][kf]);
              slots[0][kB] = after(slots[0][kf], pattern[0][kB]);
              for (int i = 1; i < p; ++i) slots[at(i)][kB] = after(slots[at(i - 1)][kB], pattern[at(i)][kB]);
              slots[at(p - 1)][kb] = after(slots[at(p - 1)][kB], pattern[at(p - 1)][kb]);
              for (int i = p - 2; i >= 0; --i) slots[at(i)][kb] = after(slots[at(i + 1)][kb], pattern[at(i)][kb]);
              if (!seen.insert(slots).second) continue;
              blocks.push_back({"building block f " + std::to_string(ff) + ", B " + std::to_string(bb_first) +
                                    ", b " + std::to_string(bb_second) + ", offsets " + std::to_string(k0) +
                                    (k1 == k0 ? std::string()
                                              : " to stage " + std::to_string(switch_at) + ", then " +
                                                    std::to_string(k1)),
                                std::move(slots)});
            }
          }
        }
      }
    }
  }
  return blocks;
}

}  // namespace pipevm::synthesis
