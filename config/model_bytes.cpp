// A model's bytes for one configuration, what a run configuration's model
// counts, and memory limits as users write them (model_bytes.hpp).
#include "model_bytes.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

namespace pipevm::config {

MemoryShape memory_shape(const ModelBytes& model, const Config& config) {
  MemoryShape shape;
  shape.layer_widths = model.layer_widths;
  shape.element_bytes = model.element_bytes;
  shape.bias = model.bias;
  const int split = std::max(1, config.dp) * std::max(1, config.micro_batches);
  shape.rows = std::max(1, model.batch_size / split);
  shape.optimizer_states = model.optimizer_states;
  shape.layer_parameter_counts = model.layer_parameter_counts;
  shape.layer_stashes = model.layer_stashes;
  return shape;
}

bool parse_memory_limit(const std::string& text, double& activations, std::uint64_t& bytes) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  if (!std::isfinite(value) || value < 0) return false;
  const std::string unit = text.substr(used);
  if (unit.empty()) {
    activations = value;
    return true;
  }
  const std::pair<const char*, double> units[] = {
      {"B", 1},          {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"kB", 1e3}, {"MB", 1e6},        {"GB", 1e9},
      {"TB", 1e12}};
  for (const auto& [name, scale] : units) {
    if (unit == name) {
      bytes = static_cast<std::uint64_t>(value * scale);
      return bytes > 0;
    }
  }
  return false;
}

ModelBytes model_bytes(const RunConfig& run) {
  ModelBytes model;
  model.layer_widths = run.model.sizes;
  model.element_bytes = run.element_bytes;
  model.bias = run.bias;
  model.batch_size = run.batch_size;
  if (run.optimizer.kind == "adam") {
    model.optimizer_states = 2;
  } else {
    model.optimizer_states = run.optimizer.momentum != 0.0F ? 1 : 0;
  }
  if (run.model.kind == ModelKind::vit) {
    for (int unit = 0; unit < run.model.vit.blocks; ++unit) {
      model.layer_parameter_counts.push_back(vit_unit_parameter_count(run.model.vit, unit));
      const VitStashSizes stash = vit_stash_sizes(run.model.vit, unit);
      model.layer_stashes.push_back({stash.forward_for_input, stash.forward_for_weight,
                                     stash.gradients_for_weight, stash.layernorm_gradients});
    }
  }
  return model;
}

std::vector<LayerCost> layer_bytes(const MemoryShape& shape) {
  std::vector<LayerCost> layers;
  const auto rows = static_cast<double>(shape.rows);
  const auto element = static_cast<double>(shape.element_bytes);
  for (int l = 0; l < layer_count(shape.layer_widths); ++l) {
    const auto at = static_cast<std::size_t>(l);
    LayerCost layer;
    if (shape.layer_stashes.empty()) {
      layer.activation_bytes = rows * shape.layer_widths[at] * element;
      layer.weight_activation_bytes = layer.activation_bytes;
    } else {
      const MemoryShape::LayerStash& stash = shape.layer_stashes.at(at);
      layer.activation_bytes =
          rows * static_cast<double>(stash.forward_for_input + stash.forward_for_weight) * element;
      layer.weight_activation_bytes =
          (rows * static_cast<double>(stash.forward_for_weight + stash.gradients_for_weight) +
           static_cast<double>(stash.reduced_gradients)) *
          element;
    }
    layer.parameter_bytes = static_cast<double>(layer_parameters(shape, l)) * element;
    layer.output_bytes = rows * shape.layer_widths[at + 1] * element;
    layers.push_back(layer);
  }
  return layers;
}

void expand_for_model(const RunConfig& run, ExpandOptions& options) {
  options.layer_widths = run.model.sizes;
}

}  // namespace pipevm::config
