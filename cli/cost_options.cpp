// The cost options (cost_options.hpp).
#include "cost_options.hpp"

#include <algorithm>
#include <iostream>

namespace pipevm::cli {

bool costs_of(std::string_view command, const std::string& cost_file,
              const std::string& cost_flags, const RunConfig& run, Costs& costs) {
  if (cost_file.empty() && cost_flags.empty() && run.costs.empty()) {
    costs = default_costs();
    return true;
  }
  costs = Costs{};
  std::string error;
  for (const CostSetting& setting : run.costs) {
    if (!set_cost(costs, setting.key, setting.value, error)) {
      std::cerr << "pipevm " << command << ": " << setting.where << ": costs: " << error << '\n';
      return false;
    }
  }
  if ((!cost_file.empty() && !read_costs_yaml(cost_file, costs, error)) ||
      !parse_cost_flags(cost_flags, costs, error)) {
    std::cerr << "pipevm " << command << ": " << error << '\n';
    return false;
  }
  return true;
}

std::string cost_keys_help() {
  std::string text = "Cost keys (--cost k=v,... and --costs YAML files; unset keys cost 0):\n";
  for (const CostKey& key : cost_keys()) {
    text += "  " + std::string(key.name) +
            std::string(22 - std::min<std::size_t>(key.name.size(), 21), ' ') +
            std::string(key.doc) + "\n";
  }
  return text;
}

}  // namespace pipevm::cli
