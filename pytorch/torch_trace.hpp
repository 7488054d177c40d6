// Durations of pipeline passes read from a torch.profiler Chrome trace.
// PyTorch's pipelining runtime wraps every action it runs in a user
// annotation named `PP:` and the action (`PP:1I3`: stage 1, backward-input,
// micro-batch 3); a user's own labels are read with a regular expression
// whose named groups say where the stage, the kind and the micro-batch are.
// Both trace shapes are read: the `{"traceEvents": [...]}` object Kineto
// writes (fractional microsecond timestamps, a `cat` field) and the bare
// event array torch writes without Kineto (Debian's torch 1.13: integer
// timestamps, no `cat`). Only complete events (`"ph": "X"`) with a finite
// start and a duration >= 0, and names of at most 256 characters, are read.
// Leaves out: turning the durations into cost keys and writing them
// (api/trace_costs.hpp), and events of other phases (B/E pairs).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipevm::pytorch {

// The passes a label can name, with PyTorch's letters F, B, I, W.
enum class TracePass : std::uint8_t { forward, backward, backward_input, backward_weight };
inline constexpr std::size_t kTracePasses = 4;

// PyTorch's annotation: `PP:` + stage + F|B|I|W + micro-batch.
inline constexpr std::string_view kPipelineLabel = R"(^PP:(?<stage>\d+)(?<kind>[FBIW])(?<mb>\d+)$)";

struct TraceOptions {
  // An ECMAScript regular expression matched against whole event names,
  // with named groups `stage` and `kind` (F, B, I, W or the cost keys fwd,
  // bwd, bwd-input, bwd-weight) and optionally `mb`.
  std::string label = std::string(kPipelineLabel);
  // Steps left out at the start of the trace (warm-up): the k-th time a
  // label (stage, kind, micro-batch) occurs belongs to step k; without an
  // `mb` group, steps are the trace's `ProfilerStep#N` events.
  int skip_steps = 1;
};

// Every duration the trace gives, in microseconds, per stage and pass.
struct TraceDurations {
  // samples[stage][pass]: in the trace's order.
  std::vector<std::array<std::vector<double>, kTracePasses>> samples;
  int labelled_events = 0;  // events whose name matched the label
  int steps = 0;            // steps seen (the most any label occurs)
};

// Nullopt with a one-line `error` for text that is not a trace, a label
// expression without its groups, a trace with no matching event (the error
// says what to add), or one whose steps all fall to skip_steps.
std::optional<TraceDurations> read_torch_trace(std::string_view json_text, const TraceOptions& options,
                                               std::string& error);

}  // namespace pipevm::pytorch
