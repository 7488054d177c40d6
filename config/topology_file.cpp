// Gossip topologies given by name or file (topology_file.hpp).
#include "topology_file.hpp"

#include <yaml-cpp/yaml.h>

#include "read_file.hpp"

namespace pipevm::config {

namespace {
bool names_file(const std::string& value) {
  const auto ends = [&](std::string_view suffix) {
    return value.size() >= suffix.size() &&
           value.compare(value.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".yaml") || ends(".yml");
}
}  // namespace

std::optional<Topology> read_topology_yaml(const std::string& text, const std::string& name,
                                           std::string& error) {
  try {
    const YAML::Node root = YAML::Load(text);
    const YAML::Node rounds = root["rounds"];
    if (!rounds || !rounds.IsSequence()) {
      error = name + ": expected `rounds:`, a list of rounds, each a list of groups of ranks";
      return std::nullopt;
    }
    Topology topology;
    topology.name = name;
    for (const YAML::Node& round : rounds) {
      if (!round.IsSequence()) {
        error =
            name + ": round " + std::to_string(topology.rounds.size()) + " is not a list of groups";
        return std::nullopt;
      }
      auto& groups = topology.rounds.emplace_back();
      for (const YAML::Node& group : round) {
        if (!group.IsSequence()) {
          error = name + ": round " + std::to_string(topology.rounds.size() - 1) +
                  ": a group is not a list of ranks";
          return std::nullopt;
        }
        auto& ranks = groups.emplace_back();
        for (const YAML::Node& rank : group) ranks.push_back(rank.as<int>());
      }
    }
    return topology;
  } catch (const YAML::Exception& e) {
    error = name + ": " + e.what();
    return std::nullopt;
  }
}

bool topology_option(const std::string& value, ExpandOptions& options, std::string& error) {
  if (value.empty()) return true;
  if (!names_file(value)) {
    options.topology_name = value;
    return true;
  }
  std::string text;
  if (!read_input_file(value, 1 << 20, "topology files", text, error)) {
    error = "cannot read " + value + ": " + error;
    return false;
  }
  auto topology = read_topology_yaml(text, value, error);
  if (!topology) return false;
  options.topology = std::make_shared<const Topology>(std::move(*topology));
  return true;
}

}  // namespace pipevm::config
