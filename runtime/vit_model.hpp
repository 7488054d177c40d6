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
// micro-batch the stashes a unit asks for: what the forward leaves for the
// backward-input (given back by it), what the forward leaves for the
// backward-weight (the linear layers' inputs), and what the backward-input
// leaves for the backward-weight: the gradients at the linear layers'
// outputs, and the micro-batch's LayerNorm scale and shift gradients,
// which the backward-input reduces (O(tokens x width) sums, no GEMM) so
// that the normalised values and the gradients at the LayerNorms need not
// wait for the weight pass; only the linear layers' weight gradients are
// deferred, as in the Zero Bubble paper's implementation. A unit reads its
// input in its forward only. Leaves out dropout, class tokens and anything
// but one channel.
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

// Floats of a unit's stashes: per sample, and the LayerNorms' gradients
// per micro-batch (whatever its rows).
struct VitStashSizes {
  std::size_t forward_for_input = 0;     // forward -> backward-input (activations)
  std::size_t forward_for_weight = 0;    // forward -> backward-weight (activations)
  std::size_t gradients_for_weight = 0;  // backward-input -> backward-weight
  // backward-input -> backward-weight, per micro-batch: each LayerNorm's
  // scale and shift gradients of the micro-batch (2 x width per LayerNorm).
  std::size_t layernorm_gradients = 0;
};
VitStashSizes vit_stash_sizes(const VitShape& shape, int unit);

// One unit's buffers for one micro-batch of `rows` samples. `input` is
// rows x (pixels or tokens * width), read by the forward only (the
// backward halves may pass it empty), `output` rows x (tokens * width or
// classes); the stashes hold rows times vit_stash_sizes' floats, the
// LayerNorms' gradients layernorm_gradients floats (the forward may pass
// it empty).
struct VitUnitBuffers {
  int rows = 0;
  std::span<const float> input;
  std::span<float> output;
  std::span<float> forward_for_input;
  std::span<float> forward_for_weight;
  std::span<float> gradients_for_weight;
  std::span<float> layernorm_gradients;
};

void vit_unit_forward(const VitShape& shape, int unit, std::span<const float> parameters,
                      const VitUnitBuffers& buffers);
// From the gradient at the unit's output (`output_gradient`, kept as it is
// for the weight half), writes the gradient at its input into
// `input_gradient` (on unit 0, the pixels' gradient, computed only when
// input_gradient is not empty) and the micro-batch's LayerNorm gradients
// into their stash (written, not added).
void vit_unit_backward_input(const VitShape& shape, int unit, std::span<const float> parameters,
                             const VitUnitBuffers& buffers, std::span<const float> output_gradient,
                             std::span<float> input_gradient);
// Adds (+=) the unit's weight gradients, in its flat layout, into
// `gradients`: the linear layers' computed here, the LayerNorms' from
// their stash, in the order of the layers from the top down.
void vit_unit_backward_weight(const VitShape& shape, int unit, std::span<float> gradients,
                              const VitUnitBuffers& buffers,
                              std::span<const float> output_gradient);

}  // namespace pipevm::runtime
