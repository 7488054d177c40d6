// The checker: the abstract interpreter of a Program. It proves, for one
// configuration, that every rank's stream completes under rendezvous
// semantics (a blocking send finishes only when its receive is posted), that
// every send pairs with the receive meant for it, that collectives line up
// over the data-parallel group, that non-blocking requests are used safely,
// and that each stage computes what it sends in a sensible order. It also
// measures, per stage, the peak number of stashed activations and of messages
// in flight.
//
// A pure function of (Program, options): one process checks any number of
// ranks, in time and memory linear in the number of instructions. It never
// prints; the command line turns CheckResult into text, gcc lines, JSON or
// SARIF with the helpers at the end of this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "diagnostics.hpp"
#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm {

struct CheckOptions {
  // The model's layer widths, input first: the default is the MLP pipevm
  // trains. It is cut into model_pieces(...) pieces by the runtime's rule
  // (piece_boundary_widths, model_shape.hpp) to know every message's size;
  // with more pieces than layers, sizes are unknown.
  std::vector<int> layer_widths = default_layer_widths();
  // The cut the run uses (e.g. balanced on measured times); empty: the
  // program's `cut` where it fits the model, else the multiply-add rule's
  // cut into model_pieces(...) pieces.
  std::vector<LayerRange> split;
  // Past this many diagnostics of one kind the rest are only counted.
  std::size_t max_diagnostics_per_kind = 16;
  // Each rank's point-to-point operations run one at a time in the order
  // they were posted, as NCCL runs them on one stream (`--p2p-order posted`);
  // false: each progresses on its own, as MPI promises.
  bool p2p_posted_order = false;
};

// What one stage needs at its worst moment (the maximum over its dp ranks).
struct StageMemory {
  int stage = 0;
  int peak_activations = 0;  // forwards whose activations are held for a backward
  int peak_in_flight = 0;    // requests posted and not yet completed
};

struct CheckResult {
  std::vector<Diagnostic> diagnostics;  // in a fixed order: same input, same output
  std::vector<StageMemory> memory;      // one entry per stage
  std::size_t suppressed = 0;           // diagnostics dropped past max_diagnostics_per_kind
  std::uint64_t instructions = 0;       // how many instructions were checked
  bool ok() const { return diagnostics.empty() && suppressed == 0; }
};

// A program whose requests cross the step boundary (`carry`) is checked on
// steps_to_unroll() consecutive steps laid out by unroll_steps: before the
// first, the exchanges the first step waits for; after the last, the waits
// that complete its exchanges; in between, step k's gossip exchanges use
// the topology's round k + 1 (they are waited for in step k + 1).
CheckResult check(const Program& program, const CheckOptions& options = {});

// {"stage": s, "peak_activations": a, "peak_in_flight": f} per stage.
nlohmann::json memory_to_json(const std::vector<StageMemory>& memory);
// "stage 0: peak 4 activations, 1 message in flight" per stage.
std::string memory_to_text(const std::vector<StageMemory>& memory);

// SARIF 2.1.0: one run of the pipevm tool with its rules (every PV2xxx and
// PV1xxx kind that occurs) and one result per diagnostic.
nlohmann::json to_sarif(const std::vector<Diagnostic>& diagnostics, const std::string& version);

}  // namespace pipevm
