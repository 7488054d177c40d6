// --topology on check, simulate and run (and Python's topology=): a built-in
// topology's name, or a YAML file of rounds of groups of data-parallel
// ranks:
//   rounds:
//     - [[0, 1], [2, 3]]
//     - [[1, 2], [3, 0]]
// Whether the rounds are valid (each a partition, together connected) is
// the checker's to say (check_gossip.cpp); here only the file's shape.
// Returns errors, never prints.
#pragma once

#include <optional>
#include <string>

#include "compile.hpp"
#include "topology.hpp"

namespace pipevm::config {

// A built-in name goes to options.topology_name, a file's (*.yaml, *.yml)
// rounds to options.topology; false with `error` when the file cannot be
// read or is not rounds of groups. An empty value changes nothing.
bool topology_option(const std::string& value, ExpandOptions& options, std::string& error);
// The rounds of a topology file's text; `name` (the file) names it in
// `error` and in the Topology. Only the shape is checked here.
std::optional<Topology> read_topology_yaml(const std::string& text, const std::string& name,
                                           std::string& error);

}  // namespace pipevm::config
