// A cost file from a torch.profiler trace, as `pipevm costs
// --from-torch-trace` writes it: per pipeline stage (and per chunk of a
// stage, for interleaved and V placements) the median of each pass kind's
// durations in microseconds (pytorch/torch_trace.hpp reads them). PyTorch
// numbers its stages globally; `chunks` and `placement` say which pipeline
// stage and chunk a global stage is (looped: s -> s mod P, chunk s / P; v:
// s < P -> stage s, chunk 0, else stage 2P-1-s, chunk 1). Kinds the trace
// never ran stay unset. Leaves out: messages, loads and optimizer steps,
// which PyTorch's runtime does not annotate per pass.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "costs.hpp"
#include "program.hpp"
#include "torch_trace.hpp"

namespace pipevm::api {

struct TraceCostRequest {
  pytorch::TraceOptions trace;
  int chunks = 1;  // model chunks per rank
  Placement placement = Placement::looped;
};

struct TraceCosts {
  Costs costs;
  std::string comment;  // where the figures come from, for the file's header
};

// Nullopt with a one-line `error` (prefixed by `name`, the trace's file
// name) for a trace that cannot be read or whose stages do not fit `chunks`.
std::optional<TraceCosts> costs_from_torch_trace(std::string_view json_text, std::string_view name,
                                                 const TraceCostRequest& request, std::string& error);

}  // namespace pipevm::api
