// Names, descriptions and parameter counts of the models (model_config.hpp).
#include "model_config.hpp"

namespace pipevm {

std::string_view name(Loss loss) {
  switch (loss) {
    case Loss::cross_entropy:
      return "cross_entropy";
    case Loss::softmax_mse:
      return "softmax_mse";
  }
  return "?";
}

std::optional<Loss> loss_from_name(std::string_view text) {
  if (text == "cross_entropy") return Loss::cross_entropy;
  if (text == "softmax_mse") return Loss::softmax_mse;
  return std::nullopt;
}

std::string_view name(ModelKind kind) {
  switch (kind) {
    case ModelKind::mlp:
      return "mlp";
    case ModelKind::vit:
      return "vit";
  }
  return "?";
}

std::optional<ModelKind> model_kind_from_name(std::string_view text) {
  if (text == "mlp") return ModelKind::mlp;
  if (text == "vit") return ModelKind::vit;
  return std::nullopt;
}

void use_vit(ModelConfig& config, const VitShape& shape) {
  config.kind = ModelKind::vit;
  config.sizes = vit_layer_widths(shape);
  config.vit = shape;
}

std::string describe(const ModelConfig& config) {
  std::string text;
  if (config.kind == ModelKind::mlp) {
    for (const int size : config.sizes) text += (text.empty() ? "" : "-") + std::to_string(size);
    return text;
  }
  const VitShape& v = config.vit;
  const std::string side = std::to_string(v.image_side), patch = std::to_string(v.patch);
  return "ViT " + side + "x" + side + " in " + patch + "x" + patch + " patches (" +
         std::to_string(v.tokens()) + " tokens), width " + std::to_string(v.width) + ", " +
         std::to_string(v.blocks) + " blocks, " + std::to_string(v.heads) + " heads, hidden " +
         std::to_string(v.hidden) + ", " + std::to_string(v.classes) + " classes";
}

std::size_t parameter_count(const ModelConfig& config, LayerRange layers) {
  if (config.kind == ModelKind::mlp) return parameter_count(config.sizes, layers);
  std::size_t count = 0;
  for (int unit = layers.begin; unit < layers.end; ++unit) {
    count += vit_unit_parameter_count(config.vit, unit);
  }
  return count;
}

}  // namespace pipevm
