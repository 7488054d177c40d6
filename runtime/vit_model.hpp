// The ViT-style encoder pipevm trains as its second model (model.kind: vit):
// Fashion-MNIST's images cut into patch x patch patches, a linear patch
// embedding plus learned positions, `blocks` pre-norm transformer blocks
// (LayerNorm, multi-head self-attention, residual, LayerNorm, GELU MLP,
// residual), a final LayerNorm, the mean over tokens and a linear head.
//
// Its pipeline "layers" (units) are the blocks: unit 0 also holds the patch
// embedding, the last unit the final LayerNorm, pooling and head. The values
// between units are rows x (tokens * width) token matrices; the model's
// input is rows x pixels, its output rows x classes logits. A Piece
// (model.hpp) runs units through the functions here, and keeps per
// micro-batch three stashes a unit asks for: what the forward leaves for the
// backward-input (given back by it), what the forward leaves for the
// backward-weight, and what the backward-input leaves for the
// backward-weight (the gradients at the linear layers' outputs and at the
// LayerNorms'). Leaves out dropout, class tokens and anything but one
// channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pipevm::runtime {

struct VitShape {
  int image_side = 28;
  int patch = 7;
  int width = 64;
  int blocks = 4;
  int heads = 4;
  int hidden = 256;  // the MLP's hidden width
  int classes = 10;
  int tokens() const { return (image_side / patch) * (image_side / patch); }
  int patch_pixels() const { return patch * patch; }
  friend bool operator==(const VitShape&, const VitShape&) = default;
};

// Throws std::invalid_argument for sizes that do not make a ViT (a patch
// that does not divide the image, heads that do not divide the width, ...).
void check_vit_shape(const VitShape& shape);
// The widths at the unit boundaries, input first: pixels, tokens * width
// between blocks, classes (blocks + 1 numbers): the model's "layer widths"
// as the checker and the split see them (core/model_shape.hpp).
std::vector<int> vit_layer_widths(const VitShape& shape);

// One named tensor of a unit, at `offset` in the unit's flat parameters.
struct VitTensor {
  std::string name;  // e.g. "blocks.0.qkv.weight" (PyTorch's [out, in] order)
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;
  std::size_t size = 0;
};
// The unit's tensors in their flat order.
std::vector<VitTensor> vit_unit_tensors(const VitShape& shape, int unit);
std::size_t vit_unit_parameter_count(const VitShape& shape, int unit);
// Linear weights uniform in +-1/sqrt(in) (PyTorch's default bound), biases
// 0, LayerNorm scales 1 and shifts 0, positions uniform in +-0.02; drawn
// from a generator seeded by (seed, unit) alone.
void initialize_vit_unit(std::span<float> parameters, const VitShape& shape, std::uint64_t seed,
                         int unit);

// Floats per sample of a unit's three stashes.
struct VitStashSizes {
  std::size_t forward_for_input = 0;     // forward -> backward-input (activations)
  std::size_t forward_for_weight = 0;    // forward -> backward-weight (activations)
  std::size_t gradients_for_weight = 0;  // backward-input -> backward-weight
};
VitStashSizes vit_stash_sizes(const VitShape& shape, int unit);

// One unit's buffers for one micro-batch of `rows` samples. `input` is
// rows x (pixels or tokens * width), `output` rows x (tokens * width or
// classes); the stashes hold rows times vit_stash_sizes' floats.
struct VitUnitBuffers {
  int rows = 0;
  std::span<const float> input;
  std::span<float> output;
  std::span<float> forward_for_input;
  std::span<float> forward_for_weight;
  std::span<float> gradients_for_weight;
};

void vit_unit_forward(const VitShape& shape, int unit, std::span<const float> parameters,
                      const VitUnitBuffers& buffers);
// From the gradient at the unit's output (`output_gradient`, kept as it is
// for the weight half), writes the gradient at its input into
// `input_gradient` (on unit 0, the pixels' gradient, computed only when
// input_gradient is not empty).
void vit_unit_backward_input(const VitShape& shape, int unit, std::span<const float> parameters,
                             const VitUnitBuffers& buffers, std::span<const float> output_gradient,
                             std::span<float> input_gradient);
// Adds (+=) the unit's weight gradients, in its flat layout, into `gradients`.
void vit_unit_backward_weight(const VitShape& shape, int unit, std::span<float> gradients,
                              const VitUnitBuffers& buffers,
                              std::span<const float> output_gradient);

}  // namespace pipevm::runtime
