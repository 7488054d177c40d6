// Fuzz target `pipe`: any bytes as a .pipe file, through the whole static
// pipeline a user runs: parse, expand (three small configurations, one with
// data parallelism), check, simulate. Asserts, beyond "no crash and no
// sanitizer report":
//   - a parse or an expansion that fails says why (an error diagnostic);
//   - a Program has one stream per rank of its configuration;
//   - the checker's verdict is the same twice: checking the same program
//     again gives the same diagnostics and the same memory figures;
//   - a program the checker accepts simulates to its end (no deadlock, no
//     link failure) with finite, ordered times and a bubble in [0, 1].
// Expansion is capped at 1,000 instructions to keep each input fast. Leaves
// out the VM (it needs MPI and a model) and command-line flags.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "compile.hpp"
#include "costs.hpp"
#include "fuzz_support.hpp"
#include "simulate.hpp"

namespace {

// Everything the checker says about a program, comparable with ==.
nlohmann::json verdict(const pipevm::Program& program) {
  const pipevm::CheckResult result = pipevm::check(program);
  nlohmann::json out = nlohmann::json::object();
  out["diagnostics"] = nlohmann::json::array();
  for (const pipevm::Diagnostic& diagnostic : result.diagnostics) {
    out["diagnostics"].push_back(pipevm::to_json(diagnostic));
  }
  out["memory"] = pipevm::memory_to_json(result.memory);
  out["suppressed"] = result.suppressed;
  out["instructions"] = result.instructions;
  out["ok"] = result.ok();
  return out;
}

std::optional<pipevm::Program> expand_once(const pipevm::Schedule& schedule,
                                           const pipevm::Config& config) {
  pipevm::ExpandOptions options;
  options.max_instructions = 1'000;
  pipevm::Diagnostics diagnostics;
  auto program = pipevm::expand(schedule, config, diagnostics, options);
  FUZZ_ASSERT(program || diagnostics.has_errors(), "a failed expansion reports an error");
  if (program) {
    FUZZ_ASSERT(program->ranks() == config.ranks(), "one stream per rank");
  }
  return program;
}

void simulate_accepted(const pipevm::Program& program) {
  pipevm::Diagnostics diagnostics;
  const auto simulation = pipevm::simulate(program, pipevm::default_costs(), diagnostics);
  FUZZ_ASSERT(simulation.has_value(), "a program the checker accepts simulates to its end");
  const double makespan = simulation->timeline.makespan;
  FUZZ_ASSERT(std::isfinite(makespan) && makespan >= 0, "the makespan is finite");
  for (const pipevm::InstructionTime& time : simulation->timeline.times) {
    FUZZ_ASSERT(std::isfinite(time.ended), "every instruction ends");
    FUZZ_ASSERT(time.issued <= time.started && time.started <= time.ended,
                "issued <= started <= ended");
    FUZZ_ASSERT(time.ended <= makespan, "nothing ends after the makespan");
  }
  FUZZ_ASSERT(simulation->bubble_fraction >= 0 && simulation->bubble_fraction <= 1,
              "the bubble is a fraction");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipevm::Diagnostics diagnostics;
  const auto file = std::make_shared<const pipevm::SourceFile>("fuzz.pipe", text);
  const auto schedule = pipevm::parse(file, diagnostics);
  if (!schedule) {
    FUZZ_ASSERT(diagnostics.has_errors(), "a failed parse reports an error");
    return 0;
  }
  // stages, micro-batches, chunks, dp: small, and each of them above 1 once.
  constexpr int configurations[][4] = {{4, 6, 1, 1}, {1, 1, 2, 1}, {3, 3, 2, 1}, {2, 2, 1, 2}};
  for (const auto& c : configurations) {
    const pipevm::Config config{c[0], c[1], c[2], c[3]};
    const auto program = expand_once(*schedule, config);
    if (!program) continue;
    const nlohmann::json once = verdict(*program);
    FUZZ_ASSERT(once == verdict(*program), "the checker's verdict is the same twice");
    if (once["ok"].get<bool>()) simulate_accepted(*program);
  }
  return 0;
}
