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

std::vector<std::string> given_cost_keys(const CostInputs& inputs,
                                         const std::vector<CostSetting>& configured) {
  std::vector<std::string> keys;
  for (const CostSetting& setting : configured) keys.push_back(setting.key);
  if (!inputs.file.empty()) {
    const std::vector<std::string> in_file = cost_file_keys(inputs.file);
    keys.insert(keys.end(), in_file.begin(), in_file.end());
  }
  std::string_view flags = inputs.flags;
  while (!flags.empty()) {
    const auto comma = flags.find(',');
    const std::string_view item = flags.substr(0, comma);
    flags = comma == std::string_view::npos ? std::string_view{} : flags.substr(comma + 1);
    const std::string_view key = item.substr(0, item.find('='));
    const auto first = key.find_first_not_of(" \t");
    const auto last = key.find_last_not_of(" \t");
    if (first != std::string_view::npos) keys.emplace_back(key.substr(first, last - first + 1));
  }
  for (const auto& [key, value] :
       inputs.values.value_or(std::vector<std::pair<std::string, double>>{})) {
    keys.push_back(key);
  }
  return keys;
}

std::optional<bool> posted_order(std::string_view name) {
  if (name == "posted") return true;
  if (name == "independent" || name == "any") return false;
  return std::nullopt;
}

}  // namespace pipevm::config
