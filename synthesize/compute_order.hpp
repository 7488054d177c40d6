// A compute order: for every pipeline stage, the sequence of compute passes
// it runs (forward, fused backward, backward-input, backward-weight, each of
// one micro-batch and chunk). What synthesis searches over; communication is
// placed around it afterwards (place_comms.hpp).
//
// Memory is counted as the Zero Bubble paper counts it, in chunk
// activations: a forward adds 1, a backward-input leaves R (the paper's
// M_W / M_B) of it until the weight pass, which frees the rest; a fused
// backward frees it whole. With R = 1 this is the checker's
// `peak_activations`. Not here: how passes are timed (the simulator's job)
// or searched (heuristic.hpp, synthesize.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "program.hpp"

namespace pipevm::synthesis {

enum class PassKind : std::uint8_t { forward, backward, backward_input, backward_weight };

struct Pass {
  PassKind kind = PassKind::forward;
  int micro_batch = 0;
  int chunk = 0;
  friend bool operator==(const Pass&, const Pass&) = default;
};

struct ComputeOrder {
  Placement placement = Placement::looped;
  Config config;                         // dp is 1
  std::vector<std::vector<Pass>> stages;  // stages[s]: stage s's passes in order
};

// The instruction a pass is (Fwd, Bwd, BwdInput, BwdWeight).
Opcode opcode_of(PassKind kind);

// Peak held activations of each stage, in chunk activations, a
// backward-input leaving `weight_memory` of its forward's until the weight
// pass.
std::vector<double> peak_memory(const ComputeOrder& order, double weight_memory);

// Whether every stage runs each pass its chunks need exactly once, a
// backward after its forward and a weight pass after its backward-input;
// empty when so, else what is wrong.
std::string order_error(const ComputeOrder& order);

// The same order with its backwards as a problem runs them. Split: a
// fused backward becomes its backward-input with its weight pass right
// after (the same time and peak). Fused: a backward-input becomes the
// backward and its weight pass goes.
ComputeOrder with_backwards(ComputeOrder order, bool split);

// The compute order of a program (its Fwd, Bwd, BwdInput and BwdWeight in
// stream order; everything else dropped); empty with `error` set for a
// program synthesis cannot re-lower (replicas, placement mirror, per-layer
// passes, memory-policy instructions). An overlapped FwdBwd pair becomes its forward then its backward.
std::optional<ComputeOrder> compute_order_of(const Program& program, std::string& error);

}  // namespace pipevm::synthesis
