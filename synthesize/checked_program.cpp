// Compiling back, checking and timing a placed program (checked_program.hpp).
#include "checked_program.hpp"

#include <memory>

#include "check.hpp"
#include "compile.hpp"

namespace pipevm::synthesis {

namespace {

// The checker's findings as one line; empty when the program is clean.
std::string check_failure(const Program& program, bool posted_order) {
  CheckOptions options;
  options.p2p_posted_order = posted_order;
  const CheckResult result = check(program, options);
  if (result.ok()) return {};
  const std::string mode = posted_order ? "check --p2p-order posted" : "check";
  if (result.diagnostics.empty()) return mode + " suppressed findings";
  return mode + " finds: " + result.diagnostics.front().message;
}

}  // namespace

std::string flat_text(const Program& program) {
  const Config& c = program.config;
  std::string text = "placement " + std::string(name(program.placement)) + "\n";
  text += "check stages " + std::to_string(c.stages) + " micro_batches " +
          std::to_string(c.micro_batches) + " chunks " + std::to_string(c.chunks) + "\n";
  for (int r = 0; r < program.ranks(); ++r) text += disassemble_rank(program, r);
  return text;
}

std::optional<CheckedProgram> check_and_time(const Program& placed, const Costs& costs,
                                             const MemoryShape* shape, std::string& error) {
  CheckedProgram checked;
  checked.text = flat_text(placed);
  Diagnostics diagnostics;
  auto compiled = compile(std::make_shared<const SourceFile>("synthesized.pipe", checked.text),
                          placed.config, diagnostics);
  if (!compiled) {
    error = "the synthesized program does not compile: " +
            (diagnostics.all().empty() ? std::string("no reason given") : diagnostics.all().front().message);
    return std::nullopt;
  }
  checked.program = std::move(*compiled);
  for (const bool posted : {false, true}) {
    error = check_failure(checked.program, posted);
    if (!error.empty()) {
      error = "the synthesized program fails " + error;
      return std::nullopt;
    }
  }
  Network network;
  if (shape != nullptr) network.host_copy_bytes = host_copy_bytes(checked.program, *shape);
  auto simulation = simulate(checked.program, costs, diagnostics, network);
  if (!simulation) {
    error = "the synthesized program cannot be simulated";
    return std::nullopt;
  }
  checked.simulation = std::move(*simulation);
  return checked;
}

}  // namespace pipevm::synthesis
