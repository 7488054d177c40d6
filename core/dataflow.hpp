// Dataflow state: what has happened to one (chunk, micro-batch) cell of a
// rank during one step, as bits, and how the Values of the instruction
// table (isa.def's Consumes and Produces columns) map onto them. The one
// definition that the checker (which proves the order) and the VM (which
// guards its buffers) share.
//
// Where a value comes from depends on where the cell's piece sits: the
// first piece of the model loads its input, the others receive it; the
// last piece makes its output gradient from the target, the others
// receive it.
#pragma once

#include <array>
#include <cstdint>

#include "isa.hpp"

namespace pipevm::dataflow {

enum CellState : std::uint16_t {
  input_loaded = 1u << 0,              // LoadInput
  input_received = 1u << 1,            // Recv act, or a completed IRecv act
  input_pending = 1u << 2,             // an IRecv act is in flight into the input
  forwarded = 1u << 3,                 // the activation exists (Fwd)
  target_loaded = 1u << 4,             // LoadTarget
  output_gradient_received = 1u << 5,  // Recv grad, or a completed IRecv grad
  output_gradient_pending = 1u << 6,   // an IRecv grad is in flight
  input_gradient_done = 1u << 7,       // Bwd, BwdInput, BwdAllReduce
  weight_gradient_done = 1u << 8,      // Bwd, BwdWeight, BwdAllReduce
  stashed = 1u << 9,                   // the stash: what the backward reads (Fwd, Recompute)
};

// Where a cell's piece sits in the model.
struct PieceEnds {
  bool first = false;  // holds the model's first layer: loads its input
  bool last = false;   // holds the model's last layer: computes the loss
};

// The state bit that makes `value` present in a cell. Zero for values that
// are not per cell (gradient, reduced_gradient) and for `message`, which
// message_value() resolves first.
constexpr std::uint16_t present(Value value, PieceEnds ends) {
  switch (value) {
    case Value::input: return ends.first ? input_loaded : input_received;
    case Value::target: return target_loaded;
    case Value::activation: return forwarded;
    case Value::output_gradient: return ends.last ? target_loaded : output_gradient_received;
    case Value::input_gradient: return input_gradient_done;
    case Value::weight_gradient: return weight_gradient_done;
    case Value::stash: return stashed;
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient:
    case Value::weights: return 0;
  }
  return 0;
}

// The bit set while a non-blocking receive of `value` is in flight; zero
// for values that are never received.
constexpr std::uint16_t pending(Value value) {
  switch (value) {
    case Value::input: return input_pending;
    case Value::output_gradient: return output_gradient_pending;
    case Value::target:
    case Value::activation:
    case Value::input_gradient:
    case Value::weight_gradient:
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient:
    case Value::weights:
    case Value::stash: return 0;
  }
  return 0;
}

// The bit an instruction of class `cls` sets when it produces `value`: a
// loaded input and a received one are told apart, so that a misplaced
// LoadInput does not stand in for a receive.
constexpr std::uint16_t produced(Value value, OpClass cls) {
  switch (value) {
    case Value::input: return cls == OpClass::data ? input_loaded : input_received;
    case Value::output_gradient: return output_gradient_received;
    case Value::target:
    case Value::activation:
    case Value::input_gradient:
    case Value::weight_gradient:
    case Value::stash: return present(value, {});
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient:
    case Value::weights: return 0;
  }
  return 0;
}

// The rules above as tables, for walks that run them tens of millions of
// times: kPresentBits[first + 2 * last][value], kPendingBits[value].
inline constexpr auto kPresentBits = [] {
  std::array<std::array<std::uint16_t, kValueCount>, 4> table{};
  for (std::size_t e = 0; e < 4; ++e) {
    for (std::size_t v = 0; v < kValueCount; ++v) {
      table[e][v] = present(static_cast<Value>(v), PieceEnds{(e & 1) != 0, (e & 2) != 0});
    }
  }
  return table;
}();
inline constexpr auto kPendingBits = [] {
  std::array<std::uint16_t, kValueCount> table{};
  for (std::size_t v = 0; v < kValueCount; ++v) table[v] = pending(static_cast<Value>(v));
  return table;
}();

// The per-cell values, in the order a consumer checks them (their order in
// Value): the first one missing is the one reported.
inline constexpr Value kCellValues[] = {Value::input,          Value::target,
                                        Value::activation,     Value::output_gradient,
                                        Value::input_gradient, Value::weight_gradient,
                                        Value::stash};
inline constexpr ValueSet kCellValueSet =
    ValueSet::of(Value::input, Value::target, Value::activation, Value::output_gradient,
                 Value::input_gradient, Value::weight_gradient, Value::stash);

// An opcode's row of isa.def, folded once into what a walk over cells needs
// at every instruction (the checker runs this for tens of millions).
struct CellPlan {
  std::uint32_t reads = 0;   // ValueSet bits of the cell values it reads (message apart)
  std::uint16_t makes = 0;   // state bits it sets (a received message and the stash apart)
  std::uint16_t again = 0;   // state bits that, set already, mean it makes a value twice
  bool reads_message = false;
  bool makes_message = false;
  bool stashes = false;    // makes the stash: held until its weight gradient
  bool unstashes = false;  // makes the weight gradient: frees the stash
  bool rank_level = false; // reads or makes the accumulated or reduced gradients
};

constexpr CellPlan cell_plan(const OpcodeInfo& row) {
  CellPlan plan;
  plan.reads = row.consumes.bits() & kCellValueSet.bits();
  plan.reads_message = row.consumes.contains(Value::message);
  plan.makes_message = row.produces.contains(Value::message);
  for (const Value v : kCellValues) {
    // The stash has rules of its own: made again only by a misplaced
    // Recompute (check_memory_policy.cpp), freed by the weight gradient.
    if (!row.produces.contains(v) || v == Value::stash) continue;
    const auto bit = produced(v, row.cls);
    plan.makes = static_cast<std::uint16_t>(plan.makes | bit);
    if (row.cls != OpClass::data) plan.again = static_cast<std::uint16_t>(plan.again | bit);
  }
  plan.stashes = row.produces.contains(Value::stash);
  plan.unstashes = row.produces.contains(Value::weight_gradient);
  plan.rank_level = row.consumes.contains(Value::gradient) ||
                    row.consumes.contains(Value::reduced_gradient) ||
                    row.produces.contains(Value::gradient) ||
                    row.produces.contains(Value::reduced_gradient) || plan.unstashes ||
                    row.produces.contains(Value::input_gradient);
  return plan;
}

inline constexpr std::array<CellPlan, kOpcodeCount> kCellPlans = [] {
  std::array<CellPlan, kOpcodeCount> plans{};
  for (std::size_t i = 0; i < kOpcodeCount; ++i) plans[i] = cell_plan(kOpcodeInfo[i]);
  return plans;
}();

// One layer of a chunk (`layer L`) does a cell's work in part: the layer a
// pass through the chunk meets first reads what the whole step reads, the
// layer it meets last makes what the whole step makes. A forward meets the
// chunk's bottom layer first; a backward its top one. Layers in between
// neither read nor make a cell value (their order is check_layers.cpp's).
enum class LayerRole : std::uint8_t { whole, first, last, between };

constexpr LayerRole layer_role(const OpcodeInfo& row, int layer, int begin, int end) {
  if (layer < 0 || (layer == begin && layer == end - 1)) return LayerRole::whole;
  const bool upward = row.produces.contains(Value::activation);
  const int first = upward ? begin : end - 1;
  const int last = upward ? end - 1 : begin;
  if (layer == first) return LayerRole::first;
  if (layer == last) return LayerRole::last;
  return LayerRole::between;
}

constexpr CellPlan layer_plan(CellPlan plan, LayerRole role) {
  if (role == LayerRole::last || role == LayerRole::between) {
    plan.reads = 0;
    plan.reads_message = false;
  }
  if (role == LayerRole::first || role == LayerRole::between) {
    plan.makes = plan.again = 0;
    plan.makes_message = plan.stashes = plan.unstashes = false;
  }
  return plan;
}

}  // namespace pipevm::dataflow
