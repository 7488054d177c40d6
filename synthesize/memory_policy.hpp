// What synthesis may do with a unit's stash (a unit: one stage's chunk c
// and micro-batch mb) besides keeping it on the device from its forward to
// its backward: recompute it (FwdCheckpoint, then Recompute before the
// backward) or offload it (Offload after the forward, Reload before the
// backward), as docs/memory.md's "Choosing a policy per unit" maps each
// choice to instructions.
//
// Here: the choice per unit beside a compute order, its peak memory in
// chunk activations (counted as `check` counts peak_activations), the
// greedy assignment that makes an order fit a limit (longest-lived stashes
// first, PipeOffload's rule), and writing the choice into a placed program.
// Not here: which orders to start from and which result wins
// (policy_search.hpp), timing (the simulator).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "compute_order.hpp"
#include "place_comms.hpp"

namespace pipevm::synthesis {

// What a request lets synthesis do (`--memory-policy`).
enum class MemoryPolicy : std::uint8_t { keep, recompute, offload, any };
std::string_view name(MemoryPolicy policy);
std::optional<MemoryPolicy> memory_policy_named(std::string_view text);

enum class UnitPolicy : std::uint8_t { keep, recompute, offload };

// units[s][chunk * micro_batches + mb]: stage s's choice for that unit.
struct UnitPolicies {
  std::vector<std::vector<UnitPolicy>> units;
};

// Every unit of the order kept.
UnitPolicies keep_all(const ComputeOrder& order);

// Per stage, kept / recomputed / offloaded units.
struct PolicyCounts {
  int kept = 0;
  int recomputed = 0;
  int offloaded = 0;
};
// Counted from a program's streams: FwdCheckpoint recomputed, Offload
// offloaded, every other Fwd kept.
std::vector<PolicyCounts> policy_counts(const Program& program);
bool uses_policies(const UnitPolicies& policies);

// Peak device activations of each stage, in chunk activations, as the
// program with_policies writes holds them: a recomputed unit holds nothing
// from its forward until its Recompute (placed with the pass before its
// backward), an offloaded one leaves at the next forward, Recompute or
// Reload of its stage and comes back with its Reload (same place).
std::vector<double> peak_memory(const ComputeOrder& order, const UnitPolicies& policies,
                                double weight_memory);

// The choice for a unit that must leave the device between its forward
// and its backward; `offload_helps` is false when the unit's forward is
// the very moment that must shed memory (only recomputation helps there).
using PolicyRule = std::function<std::optional<UnitPolicy>(int stage, int chunk, int micro_batch,
                                                            bool offload_helps)>;

// Starts from `start` and, while a stage holds more than `limit` at some
// moment, changes the kept unit held there longest (forward to backward,
// in passes) as `rule` says. Nullopt when a moment cannot be brought
// under the limit.
std::optional<UnitPolicies> assign_policies(const ComputeOrder& order, UnitPolicies start,
                                            double limit, double weight_memory,
                                            const PolicyRule& rule);

// The placed program with the policies written in: FwdCheckpoint for a
// recomputed unit's Fwd; after the pass before its backward (before the
// backward's receive, so it runs while the gradient travels) `Wait send
// act` when the forward sent its output, then Recompute; for an offloaded
// unit Offload after the forward's send, WaitOffload before the stage's
// next forward, Recompute or Reload, `Wait send act` and Reload after the
// pass before its backward, WaitReload just before the backward.
Program with_policies(const BuiltProgram& placed, const ComputeOrder& order,
                      const UnitPolicies& policies);

}  // namespace pipevm::synthesis
