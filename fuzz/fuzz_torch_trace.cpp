// Fuzz target `torch_trace`: any bytes as a torch.profiler Chrome trace
// (`pipevm costs --from-torch-trace FILE`, pytorch/torch_trace.hpp) read
// with PyTorch's label, then turned into a cost model (api/trace_costs.hpp).
// Asserts:
//   - refusing is returning nullopt with a one-line message: no exception
//     escapes, the message is not empty and holds no newline;
//   - an accepted trace gives only finite durations >= 0, and a cost model
//     whose compute costs are finite and not negative.
// Leaves out the command line and writing the file (target `costs` reads
// written cost files back).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "torch_trace.hpp"
#include "trace_costs.hpp"

namespace {

void check_costs(const pipevm::Costs& costs) {
  for (const double value : {costs.fwd, costs.bwd.value_or(0.0), costs.bwd_input, costs.bwd_weight}) {
    FUZZ_ASSERT(std::isfinite(value) && value >= 0, "a cost from a trace is finite and >= 0");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pipevm::pytorch::TraceOptions options;
  options.skip_steps = size % 2 == 0 ? 0 : 1;
  std::string error;
  const auto durations = pipevm::pytorch::read_torch_trace(text, options, error);
  if (!durations) {
    FUZZ_ASSERT(!error.empty() && error.find('\n') == std::string::npos,
                "a refused trace gets a one-line reason");
    return 0;
  }
  for (const auto& stage : durations->samples) {
    for (const auto& samples : stage) {
      for (const double value : samples) {
        FUZZ_ASSERT(std::isfinite(value) && value >= 0, "durations are finite and >= 0");
      }
    }
  }
  pipevm::api::TraceCostRequest request;
  request.trace = options;
  const auto costs = pipevm::api::costs_from_torch_trace(text, "fuzz.json", request, error);
  FUZZ_ASSERT(costs.has_value(), "a trace that reads gives costs with one chunk per rank");
  check_costs(costs->costs);
  for (const pipevm::Costs& stage : costs->costs.stages) check_costs(stage);
  return 0;
}
