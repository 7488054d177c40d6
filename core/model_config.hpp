// Which model is trained, and with which optimizer, as plain data: the MLP
// of given layer widths or the ViT of a VitShape, its loss and seed, and
// the optimizer's kind and hyper-parameters. The run configuration
// (config/run_config.hpp) reads these, the memory figures count them and
// the runtime builds and trains them (runtime/model.hpp, optimizer.hpp).
// Here, below the runtime, so that reading a configuration or counting
// its bytes does not link the training runtime. Not here: what a layer
// computes, initialisation, the optimizer's steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model_shape.hpp"
#include "vit_shape.hpp"

namespace pipevm {

enum class Loss { cross_entropy, softmax_mse };
std::string_view name(Loss loss);
std::optional<Loss> loss_from_name(std::string_view name);

enum class ModelKind : std::uint8_t { mlp, vit };
std::string_view name(ModelKind kind);
std::optional<ModelKind> model_kind_from_name(std::string_view name);

struct ModelConfig {
  ModelKind kind = ModelKind::mlp;
  // Layer widths, input first: the MLP's; for the ViT, vit_layer_widths(vit)
  // (use_vit sets both).
  std::vector<int> sizes = default_layer_widths();
  VitShape vit;  // the ViT's sizes, when kind is vit
  Loss loss = Loss::cross_entropy;
  std::uint64_t seed = 0;
};
// Makes `config` the ViT of `shape` (kind, sizes, vit).
void use_vit(ModelConfig& config, const VitShape& shape);
// "784-128-10" for the MLP; "ViT 28x28 in 7x7 patches (16 tokens), width 64,
// 4 blocks, 4 heads, hidden 256, 10 classes".
std::string describe(const ModelConfig& config);
// Floats of the layers in `layers` of the configured model; the offset of
// layer i in the whole model's flat array is parameter_count(config, {0, i}).
std::size_t parameter_count(const ModelConfig& config, LayerRange layers);

struct OptimizerConfig {
  std::string kind = "adam";  // "adam" or "sgd"
  float lr = 1e-3f;
  float momentum = 0.0f;  // sgd: v = momentum * v + g; p -= lr * v (0: plain SGD)
  float beta1 = 0.9f;     // adam
  float beta2 = 0.999f;   // adam
  float eps = 1e-8f;      // adam
};

}  // namespace pipevm
