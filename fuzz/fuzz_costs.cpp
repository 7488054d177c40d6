// Fuzz target `costs`: any bytes as a cost file (`pipevm simulate --costs
// FILE`, config/cost_files.hpp) and, the same bytes, as `--cost` flags.
// Asserts:
//   - refusing is returning false with a message: no exception escapes;
//   - every accepted cost is finite and not negative;
//   - an accepted cost model written by write_costs_yaml (what `pipevm run
//     --profile` writes) reads back to the same model, its stages and their
//     chunks included, exactly (the writer prints the shortest text of each
//     double).
// Leaves out the simulator (target `pipe` runs it).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cost_files.hpp"
#include "costs.hpp"
#include "fuzz_support.hpp"

namespace {

std::vector<double> values(const pipevm::Costs& c) {
  return {c.fwd,       c.bwd.value_or(-1.0), c.bwd_input, c.bwd_weight, c.load,      c.zero_grad,
          c.optimizer, c.allreduce,          c.send,      c.bandwidth,  c.act_bytes, c.grad_bytes};
}

void check_accepted(const pipevm::Costs& costs) {
  for (const double value : values(costs)) {
    FUZZ_ASSERT(std::isfinite(value), "accepted costs are finite");
  }
  FUZZ_ASSERT(!costs.bwd || *costs.bwd >= 0, "an accepted bwd is not negative");
  std::ostringstream written;
  pipevm::config::write_costs_yaml(written, costs, "fuzz");
  pipevm::Costs again;
  std::string error;
  FUZZ_ASSERT(pipevm::config::parse_costs_yaml(written.str(), again, error),
              "a written cost file reads back");
  FUZZ_ASSERT(again.bwd.has_value() == costs.bwd.has_value(), "bwd set or unset survives");
  FUZZ_ASSERT(again.stages.size() == costs.stages.size(), "every stage's costs read back");
  std::vector<double> before = values(costs);
  std::vector<double> after = values(again);
  const auto append = [](std::vector<double>& to, const pipevm::Costs& entry) {
    const std::vector<double> more = values(entry);
    to.insert(to.end(), more.begin(), more.end());
  };
  for (std::size_t s = 0; s < costs.stages.size(); ++s) {
    append(before, costs.stages[s]);
    append(after, again.stages[s]);
    FUZZ_ASSERT(again.stages[s].chunks.size() == costs.stages[s].chunks.size(),
                "every chunk's costs read back");
    for (std::size_t c = 0; c < costs.stages[s].chunks.size(); ++c) {
      append(before, costs.stages[s].chunks[c]);
      append(after, again.stages[s].chunks[c]);
    }
  }
  for (std::size_t i = 0; i < before.size(); ++i) {
    FUZZ_ASSERT(before[i] == after[i], "a written cost reads back exactly");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    pipevm::Costs costs;
    std::string error;
    if (pipevm::config::parse_costs_yaml(text, costs, error)) {
      check_accepted(costs);
    } else {
      FUZZ_ASSERT(!error.empty(), "a refused cost file says why");
    }
  }
  {
    pipevm::Costs costs;
    std::string error;
    if (pipevm::config::parse_cost_flags(text, costs, error)) {
      check_accepted(costs);
    } else {
      FUZZ_ASSERT(!error.empty(), "refused cost flags say why");
    }
  }
  return 0;
}
