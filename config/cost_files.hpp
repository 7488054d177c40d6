// The cost model (interpreter/simulate/costs.hpp) as users write it:
// `--cost fwd=1,bwd=2`, and YAML cost files of the same keys, with compute
// per stage under `stages:` and per chunk under a stage's `chunks:` (what
// `pipevm run --profile` writes with write_costs_yaml), and per model
// layer under `layers:` (Costs::layers; what `pipevm.profile_torch`
// writes). Functions return errors, never print. Not here: which of a
// command's sources of costs wins (cost_inputs.hpp).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "costs.hpp"

namespace pipevm::config {

// Sets one key from its text: `transfer` from a model's name, every other
// key from a number (set_cost).
bool set_cost_text(Costs& costs, std::string_view key, std::string_view text, std::string& error);
// Applies "fwd=1,bwd=2,send=0.1" on top of `costs`.
bool parse_cost_flags(std::string_view text, Costs& costs, std::string& error);
// Applies a YAML mapping of the same keys (e.g. `fwd: 1`, `transfer: eager`) read from `path`;
// `stages:`, a list of mappings of per-stage keys (stage 0 first), replaces
// `stages`, each entry starting from the file's other keys; an entry's
// `chunks:`, a list of mappings of the same keys (chunk 0 first), gives
// its `chunks`, each starting from the stage's values. `layers:`, a list
// of mappings of the per-layer keys (fwd, bwd-input, bwd-weight,
// activation-bytes, weight-activation-bytes, parameter-bytes,
// output-bytes; a key not given is 0, `name:` is a label), gives `layers`.
// An error names the
// position: "path:line:col: message" (parse_costs_yaml: "line:col: message").
bool read_costs_yaml(const std::string& path, Costs& costs, std::string& error);
bool parse_costs_yaml(std::string_view yaml_text, Costs& costs, std::string& error);
// The keys a readable cost file sets, top-level and per stage, chunk or layer
// (empty when it cannot be read).
std::vector<std::string> cost_file_keys(const std::string& path);

// Writes every key that is set (a YAML mapping, with a comment header), and
// `layers:` when there are entries (every key of each), and `stages:`
// when there are entries, with each entry's `chunks:`.
void write_costs_yaml(std::ostream& out, const Costs& costs, std::string_view comment = {});

}  // namespace pipevm::config
