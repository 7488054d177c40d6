// Cost files and flags (cost_files.hpp): `--cost k=v,...`, YAML files
// with `stages:`, `chunks:` and `layers:`, and the YAML `pipevm run
// --profile` writes.
// Every error names its place: "path:line:col: message".
#include "cost_files.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <iterator>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "read_file.hpp"
#include "shortest_text.hpp"

namespace pipevm::config {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

bool parse_number(std::string_view text, double& value) {
  text = trim(text);
  if (text.empty()) return false;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  return status == std::errc() && end == text.data() + text.size();
}

constexpr std::string_view kStagesKey = "stages";

// "line:col" of a place in the file (1-based); empty when unknown.
std::string position_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
}

// Why a cost file is refused, and where.
struct Refusal {
  YAML::Mark where = YAML::Mark::null_mark();
  std::string message;
};

bool refuse(const YAML::Node& at, std::string message, Refusal& refusal) {
  refusal = {at.Mark(), std::move(message)};
  return false;
}

constexpr std::string_view kChunksKey = "chunks";

// A key given twice in one mapping: yaml-cpp keeps both, and which one a
// lookup finds is not what a reader of the file expects.
bool refuse_duplicate_keys(const YAML::Node& map, Refusal& refusal) {
  std::vector<std::pair<std::string, YAML::Mark>> seen;
  for (const auto& key_value : map) {
    if (!key_value.first.IsScalar()) continue;
    const std::string key = key_value.first.Scalar();
    for (const auto& [earlier, where] : seen) {
      if (earlier == key) {
        return refuse(key_value.first,
                      "'" + key + "' is given twice (first at " + position_of(where) + ")",
                      refusal);
      }
    }
    seen.emplace_back(key, key_value.first.Mark());
  }
  return true;
}

std::string per_stage_key_names() {
  std::string names;
  for (const CostKey& key : cost_keys()) {
    if (key.per_stage) names += ' ' + std::string(key.name);
  }
  return names;
}

// One entry of `stages:` or of a stage's `chunks:`: a mapping of per-stage
// keys applied on top of `entry`; `which` names it in errors ("stage 1",
// "stage 1 chunk 0"). A stage's `chunks:` (not a chunk's) is handed back
// in `chunks`, to be read once the stage's own keys are set.
bool parse_entry(const YAML::Node& item, const std::string& which, Costs& entry,
                 std::optional<YAML::Node>* chunks, Refusal& refusal) {
  if (!item.IsMap()) {
    const std::string list(chunks != nullptr ? kStagesKey : kChunksKey);
    return refuse(item, which + " of '" + list + "' is not a mapping of keys to numbers (fwd: 1)",
                  refusal);
  }
  if (!refuse_duplicate_keys(item, refusal)) return false;
  for (const auto& key_value : item) {
    const std::string key = key_value.first.IsScalar() ? key_value.first.Scalar() : std::string();
    if (chunks != nullptr && key == kChunksKey) {
      *chunks = key_value.second;
      continue;
    }
    const CostKey* known = find_cost_key(key);
    if (known == nullptr || !known->per_stage) {
      return refuse(key_value.first,
                    which + ": '" + key + "' is not a cost that differs by stage (those are:" +
                        per_stage_key_names() + (chunks != nullptr ? " chunks)" : ")"),
                    refusal);
    }
    double value = 0;
    if (!key_value.second.IsScalar() || !parse_number(key_value.second.Scalar(), value)) {
      return refuse(key_value.second, which + ": cost '" + key + "' is not a number", refusal);
    }
    std::string error;
    if (!set_cost(entry, key, value, error)) {
      return refuse(key_value.second, which + ": " + error, refusal);
    }
  }
  return true;
}

constexpr std::string_view kLayersKey = "layers";
constexpr std::string_view kLayerNameKey = "name";

// The keys of one entry of `layers:`, in the order they are written.
struct LayerKey {
  std::string_view name;
  double LayerCost::*field;
};
constexpr LayerKey kLayerKeys[] = {
    {"fwd", &LayerCost::fwd},
    {"bwd-input", &LayerCost::bwd_input},
    {"bwd-weight", &LayerCost::bwd_weight},
    {"activation-bytes", &LayerCost::activation_bytes},
    {"weight-activation-bytes", &LayerCost::weight_activation_bytes},
    {"parameter-bytes", &LayerCost::parameter_bytes},
    {"output-bytes", &LayerCost::output_bytes},
};

std::string layer_key_names() {
  std::string names;
  for (const LayerKey& key : kLayerKeys) names += ' ' + std::string(key.name);
  return names + ' ' + std::string(kLayerNameKey);
}

bool parse_layer(const YAML::Node& item, const std::string& which, LayerCost& layer, Refusal& refusal) {
  if (!item.IsMap()) {
    return refuse(item, which + " of 'layers' is not a mapping of keys to numbers (fwd: 1)", refusal);
  }
  for (const auto& key_value : item) {
    const std::string key = key_value.first.IsScalar() ? key_value.first.Scalar() : std::string();
    if (key == kLayerNameKey && key_value.second.IsScalar()) continue;
    const auto* known = std::find_if(std::begin(kLayerKeys), std::end(kLayerKeys),
                                     [&](const LayerKey& k) { return k.name == key; });
    if (known == std::end(kLayerKeys)) {
      return refuse(key_value.first,
                    which + ": '" + key + "' is not a per-layer cost (those are:" + layer_key_names() + ")",
                    refusal);
    }
    double value = 0;
    if (!key_value.second.IsScalar() || !parse_number(key_value.second.Scalar(), value)) {
      return refuse(key_value.second, which + ": '" + key + "' is not a number", refusal);
    }
    if (!std::isfinite(value) || value < 0) {
      return refuse(key_value.second, which + ": '" + key + "' must be a finite number >= 0", refusal);
    }
    layer.*(known->field) = value;
  }
  return true;
}

// `layers:` of a cost file: one mapping per model layer, first layer
// first; a key not given is 0, `name` is a label and ignored.
bool parse_layers(const YAML::Node& list, Costs& costs, Refusal& refusal) {
  if (!list.IsSequence()) {
    return refuse(list, "'layers' is a list with one mapping per model layer (- fwd: 1)", refusal);
  }
  if (list.size() == 0) return refuse(list, "'layers' is empty: give one mapping per model layer", refusal);
  std::vector<LayerCost> layers;
  for (const auto& item : list) {
    LayerCost layer;
    if (!parse_layer(item, "layer " + std::to_string(layers.size()), layer, refusal)) return false;
    layers.push_back(layer);
  }
  costs.layers = std::move(layers);
  return true;
}

// `stages:` of a cost file: one mapping of per-stage keys per stage, each
// starting from the file's (and the flags') other keys, and in it
// optionally `chunks:`, one mapping of the same keys per chunk, each
// starting from the stage's values.
bool parse_stages(const YAML::Node& list, Costs& costs, Refusal& refusal) {
  if (!list.IsSequence()) {
    return refuse(list, "'stages' is a list with one mapping per stage (- fwd: 1)", refusal);
  }
  Costs base = costs;
  base.stages.clear();
  base.stages_source.clear();
  base.layers.clear();
  std::vector<Costs> stages;
  for (const auto& item : list) {
    const std::string which = "stage " + std::to_string(stages.size());
    Costs stage = base;
    std::optional<YAML::Node> chunks;
    if (!parse_entry(item, which, stage, &chunks, refusal)) return false;
    if (chunks) {
      if (!chunks->IsSequence()) {
        return refuse(*chunks, which + ": 'chunks' is a list with one mapping per chunk (- fwd: 1)",
                      refusal);
      }
      std::vector<Costs> of_chunks;
      for (const auto& chunk_item : *chunks) {
        Costs chunk = stage;
        if (!parse_entry(chunk_item, which + " chunk " + std::to_string(of_chunks.size()), chunk,
                         nullptr, refusal)) {
          return false;
        }
        of_chunks.push_back(std::move(chunk));
      }
      stage.chunks = std::move(of_chunks);
    }
    stages.push_back(std::move(stage));
  }
  costs.stages = std::move(stages);
  return true;
}

// `file`: a cost file, which must set something (an empty one is a
// mistake, not free compute); text given otherwise may be empty.
// `source` names where `stages:` is for later errors ("costs.yaml:"),
// before its line:col.
bool parse_costs(std::string_view yaml_text, Costs& costs, Refusal& refusal, bool file,
                 std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    refusal = {e.mark, "not YAML: " + e.msg};
    return false;
  }
  if (root.IsNull()) {
    if (!file) return true;
    refusal = {YAML::Mark(), "the cost file sets no cost: give the keys as `fwd: 1` lines"};
    return false;
  }
  if (!root.IsMap()) {
    return refuse(root, "a cost file is a mapping of keys to numbers (fwd: 1)", refusal);
  }
  if (!refuse_duplicate_keys(root, refusal)) return false;
  std::optional<YAML::Node> stages;
  YAML::Mark stages_at = YAML::Mark::null_mark();
  std::optional<YAML::Node> layers;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return refuse(entry.first, "a cost file's keys are names (fwd: 1), not sequences or mappings",
                    refusal);
    }
    const std::string key = entry.first.Scalar();
    if (key == kStagesKey) {
      stages = entry.second;
      stages_at = entry.first.Mark();
      continue;
    }
    if (key == kLayersKey) {
      layers = entry.second;
      continue;
    }
    if (!entry.second.IsScalar()) {
      return refuse(entry.second, "cost '" + key + "' is not a number", refusal);
    }
    std::string error;
    if (!set_cost_text(costs, key, entry.second.Scalar(), error)) {
      const bool known = key == kTransferCostKey || find_cost_key(key) != nullptr;
      return refuse(known ? entry.second : entry.first, error, refusal);
    }
  }
  if (layers && !parse_layers(*layers, costs, refusal)) return false;
  if (!stages) return true;
  costs.stages_source = std::string(source) + position_of(stages_at);
  return parse_stages(*stages, costs, refusal);
}

// One list item of per-stage keys, `indent` before its dash.
void write_entry(std::ostream& out, const Costs& entry, const std::string& indent) {
  std::string prefix = indent + "- ";
  for (const CostKey& key : cost_keys()) {
    const std::optional<double> value = cost_value(entry, key.name);
    if (!key.per_stage || !value) continue;
    out << prefix << key.name << ": " << shortest_text(*value) << '\n';
    prefix = indent + "  ";
  }
}

}  // namespace

bool set_cost_text(Costs& costs, std::string_view key, std::string_view text, std::string& error) {
  text = trim(text);
  if (key == kTransferCostKey) {
    if (parse_transfer_model(text, costs.transfer)) return true;
    error = "cost 'transfer' is auto, eager or rendezvous, not '" + std::string(text) + "'";
    return false;
  }
  double value = 0;
  if (!parse_number(text, value)) {
    error = "cost '" + std::string(key) + "' is not a number";
    return false;
  }
  return set_cost(costs, key, value, error);
}

bool parse_cost_flags(std::string_view text, Costs& costs, std::string& error) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    const auto equals = item.find('=');
    const std::string_view key = trim(item.substr(0, equals));
    double value = 0;
    if (equals != std::string_view::npos && key == kTransferCostKey) {
      if (!set_cost_text(costs, key, item.substr(equals + 1), error)) return false;
      continue;
    }
    if (equals == std::string_view::npos || !parse_number(item.substr(equals + 1), value)) {
      error = "expected key=number in --cost, got '" + std::string(item) + "'";
      return false;
    }
    if (!set_cost(costs, key, value, error)) return false;
  }
  return true;
}

bool parse_costs_yaml(std::string_view yaml_text, Costs& costs, std::string& error) {
  Refusal refusal;
  // Text given inline has lines but no file to name.
  if (parse_costs(yaml_text, costs, refusal, false, "the costs' line ")) return true;
  const std::string where = position_of(refusal.where);
  error = where.empty() ? refusal.message : where + ": " + refusal.message;
  return false;
}

bool read_costs_yaml(const std::string& path, Costs& costs, std::string& error) {
  std::string text;
  if (!read_input_file(path, kMaxYamlBytes, "cost files", text, error)) {
    error = "cannot read cost file '" + path + "': " + error;
    return false;
  }
  Refusal refusal;
  if (parse_costs(text, costs, refusal, true, path + ":")) return true;
  const std::string where = position_of(refusal.where);
  error = path + (where.empty() ? "" : ":" + where) + ": " + refusal.message;
  return false;
}

std::vector<std::string> cost_file_keys(const std::string& path) {
  std::vector<std::string> keys;
  std::string text;
  std::string error;
  if (!read_input_file(path, kMaxYamlBytes, "cost files", text, error)) return keys;
  const std::function<void(const YAML::Node&)> collect = [&](const YAML::Node& node) {
    if (node.IsSequence()) {
      for (const auto& item : node) collect(item);
      return;
    }
    if (!node.IsMap()) return;
    for (const auto& key_value : node) {
      if (!key_value.first.IsScalar()) continue;
      const std::string key = key_value.first.Scalar();
      if (key == kStagesKey || key == kChunksKey || key == kLayersKey) {
        collect(key_value.second);
      } else {
        keys.push_back(key);
      }
    }
  };
  try {
    collect(YAML::Load(text));
  } catch (const YAML::Exception&) {
    keys.clear();
  }
  return keys;
}

void write_costs_yaml(std::ostream& out, const Costs& costs, std::string_view comment) {
  out << "# pipevm cost model (pipevm simulate --costs FILE); time unit: microseconds\n";
  if (!comment.empty()) out << "# " << comment << '\n';
  if (costs.transfer != TransferModel::automatic) {
    out << kTransferCostKey << ": " << name(costs.transfer) << '\n';
  }
  for (const CostKey& key : cost_keys()) {
    if (const std::optional<double> value = cost_value(costs, key.name)) {
      out << key.name << ": " << shortest_text(*value) << '\n';
    }
  }
  if (!costs.layers.empty()) {
    out << kLayersKey << ":  # per layer, first layer first\n";
    for (const LayerCost& layer : costs.layers) {
      std::string prefix = "  - ";
      for (const LayerKey& key : kLayerKeys) {
        out << prefix << key.name << ": " << shortest_text(layer.*(key.field)) << '\n';
        prefix = "    ";
      }
    }
  }
  if (costs.stages.empty()) return;
  out << kStagesKey << ":  # per pipeline stage, stage 0 first\n";
  for (const Costs& stage : costs.stages) {
    write_entry(out, stage, "  ");
    if (stage.chunks.empty()) continue;
    out << "    " << kChunksKey << ":  # per model chunk of this stage, chunk 0 first\n";
    for (const Costs& chunk : stage.chunks) write_entry(out, chunk, "      ");
  }
}

}  // namespace pipevm::config
