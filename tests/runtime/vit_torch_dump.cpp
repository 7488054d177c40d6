// Writes one batch of the default ViT through pipevm for
// bench/reference/torch_vit.py to redo in PyTorch: a safetensors file with
// the weights (vit_model.hpp's names), "input" (rows x pixels), "labels"
// (as floats), pipevm's "logits", and every weight gradient of the batch's
// mean cross-entropy as "grad." + name; the loss in the metadata.
//
//     runtime_vit_torch_dump OUT.safetensors [rows]
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "model.hpp"
#include "random.hpp"
#include "safetensors.hpp"

int main(int argc, char** argv) {
  using namespace pipevm::runtime;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT.safetensors [rows]\n", argv[0]);
    return 2;
  }
  try {
    const int rows = argc == 3 ? std::stoi(argv[2]) : 32;
    ModelConfig config;
    use_vit(config, VitShape{});
    config.seed = 3;
    Piece model(config, LayerRange{0, config.vit.blocks});
    model.reserve(1, rows);
    const auto pixels = static_cast<std::size_t>(config.sizes.front());
    const auto classes = static_cast<std::size_t>(config.vit.classes);
    const auto count = static_cast<std::size_t>(rows);
    SplitMix64 random(17);
    std::vector<float> input(count * pixels);
    for (float& value : input) value = 2.0f * random.uniform() - 1.0f;
    std::vector<std::uint8_t> labels(count);
    std::vector<float> label_floats(count);
    for (std::size_t r = 0; r < count; ++r) {
      labels[r] = static_cast<std::uint8_t>(random.below(static_cast<std::uint32_t>(classes)));
      label_floats[r] = static_cast<float>(labels[r]);
    }
    const std::span<const float> out = model.forward(0, input, rows);
    const std::vector<float> logits(out.begin(), out.end());
    const LossResult loss = model.loss(0, labels, 1.0f / static_cast<float>(rows));
    model.backward_input(0, {});
    model.backward_weight(0);
    const std::vector<float> gradients = model.gradients();

    std::vector<TensorToWrite> tensors = vit_tensors(config.vit, model.parameters());
    for (TensorToWrite& t : vit_tensors(config.vit, gradients, "grad.")) tensors.push_back(t);
    tensors.push_back({"input", {rows, static_cast<std::int64_t>(pixels)}, input});
    tensors.push_back({"labels", {rows}, label_floats});
    tensors.push_back({"logits", {rows, static_cast<std::int64_t>(classes)}, logits});
    std::map<std::string, std::string> metadata = vit_metadata(config.vit);
    char loss_text[32];
    std::snprintf(loss_text, sizeof loss_text, "%.9g", static_cast<double>(loss.loss));
    metadata["loss"] = loss_text;
    write_safetensors(argv[1], tensors, metadata);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return 1;
  }
}
