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

#include "vit_shape.hpp"

namespace pipevm::runtime {

// The ViT's sizes and the layouts of a unit's parameters and stashes are
// the core's (core/vit_shape.hpp): the checker and the simulator count the
// same bytes without the runtime.
using pipevm::check_vit_shape;
using pipevm::vit_layer_widths;
using pipevm::vit_parameter_layout;
using pipevm::vit_stash_layout;
using pipevm::vit_stash_sizes;
using pipevm::vit_unit_parameter_count;
using pipevm::vit_unit_tensors;
using pipevm::VitParameterLayout;
using pipevm::VitShape;
using pipevm::VitStashLayout;
using pipevm::VitStashSizes;
using pipevm::VitTensor;

// Linear weights uniform in +-1/sqrt(in) (PyTorch's default bound), biases
// 0, LayerNorm scales 1 and shifts 0, positions uniform in +-0.02; drawn
// from a generator seeded by (seed, unit) alone.
void initialize_vit_unit(std::span<float> parameters, const VitShape& shape, std::uint64_t seed,
                         int unit);

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
