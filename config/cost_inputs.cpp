// Composing a command's costs (cost_inputs.hpp).
#include "cost_inputs.hpp"

#include "cost_files.hpp"

namespace pipevm::config {

bool compose_costs(const CostInputs& inputs, const std::vector<CostSetting>& configured,
                   Costs& costs, std::string& error) {
  if (inputs.file.empty() && inputs.text.empty() && inputs.flags.empty() && !inputs.values &&
      configured.empty()) {
    costs = default_costs();
  } else {
    costs = Costs{};
    for (const CostSetting& setting : configured) {
      if (!set_cost(costs, setting.key, setting.value, error)) {
        error = setting.where + ": costs: " + error;
        return false;
      }
    }
    if ((!inputs.file.empty() && !read_costs_yaml(inputs.file, costs, error)) ||
        (!inputs.text.empty() && !parse_costs_yaml(inputs.text, costs, error)) ||
        !parse_cost_flags(inputs.flags, costs, error)) {
      return false;
    }
    for (const auto& [key, value] :
         inputs.values.value_or(std::vector<std::pair<std::string, double>>{})) {
      if (!set_cost(costs, key, value, error)) return false;
    }
  }
  if (!inputs.transfer.empty() && !parse_transfer_model(inputs.transfer, costs.transfer)) {
    error = "transfer must be 'auto', 'eager' or 'rendezvous', not '" + inputs.transfer + "'";
    return false;
  }
  return true;
}

std::optional<bool> posted_order(std::string_view name) {
  if (name == "posted") return true;
  if (name == "independent" || name == "any") return false;
  return std::nullopt;
}

}  // namespace pipevm::config
