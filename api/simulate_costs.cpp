// The costs a program is timed with (simulate_costs.hpp).
#include "simulate_costs.hpp"

#include <algorithm>
#include <string_view>

namespace pipevm::api {

Costs fitted_costs(const Program& program, const Costs& composed,
                   const std::vector<std::string>& given) {
  const int chunks = program.config.chunks;
  if (!given.empty() || chunks <= 1) return composed;
  Costs costs = composed;
  costs.fwd /= chunks;
  costs.bwd_input /= chunks;
  costs.bwd_weight /= chunks;
  return costs;
}

std::string chunk_cost_note(const Program& program, const std::vector<std::string>& given) {
  const int chunks = program.config.chunks;
  if (given.empty() || chunks <= 1) return "";
  const std::string n = std::to_string(chunks);
  return "the costs are per chunk: each rank runs " + n +
         " chunks, so a micro-batch's forward on a rank takes " + n +
         " x fwd (for costs per stage, give fwd/" + n + ", bwd-input/" + n + ", ...)";
}

std::vector<std::string> unset_cost_warnings(const Program& program,
                                             const std::vector<std::string>& given) {
  std::vector<std::string> warnings;
  if (given.empty()) return warnings;
  const auto is_given = [&](std::string_view key) {
    return std::find(given.begin(), given.end(), key) != given.end();
  };
  const auto runs = [&](CostKind kind) {
    return std::any_of(program.code.begin(), program.code.end(),
                       [kind](const Instruction& i) { return info(i.op).cost == kind; });
  };
  const auto warn = [&](std::string_view key, std::string_view what) {
    warnings.push_back("the costs leave '" + std::string(key) + "' unset: " + std::string(what) +
                       " takes no time");
  };
  if (runs(CostKind::fwd) && !is_given("fwd")) warn("fwd", "Fwd");
  if ((runs(CostKind::bwd) || runs(CostKind::bwd_allreduce)) && !is_given("bwd")) {
    const bool input = is_given("bwd-input");
    const bool weight = is_given("bwd-weight");
    if (!input && !weight) warn("bwd", "Bwd");
    if (input && !weight) warn("bwd-weight", "Bwd's weight half");
    if (!input && weight) warn("bwd-input", "Bwd's input half");
  }
  if (runs(CostKind::bwd_input) && !is_given("bwd-input")) warn("bwd-input", "BwdInput");
  if (runs(CostKind::bwd_weight) && !is_given("bwd-weight")) warn("bwd-weight", "BwdWeight");
  return warnings;
}

}  // namespace pipevm::api
