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
  stashed = 1u << 9,                   // activations held for a backward (memory figures)
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
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient: return 0;
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
    case Value::reduced_gradient: return 0;
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
    case Value::weight_gradient: return present(value, {});
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient: return 0;
  }
  return 0;
}

// The per-cell values, in the order a consumer checks them: the first one
// missing is the one reported.
inline constexpr Value kCellValues[] = {Value::input,           Value::target,
                                        Value::activation,      Value::output_gradient,
                                        Value::input_gradient,  Value::weight_gradient};

}  // namespace pipevm::dataflow
