// The ViT's shape (pipevm's second model, runtime/vit_model.hpp), as far as
// sizes go: its sizes, the widths at its unit boundaries, the layout of a
// unit's parameters (named tensors at offsets) and of the stashes a unit
// keeps between its passes. Below the runtime, so that check, simulate,
// synthesize and the Python module count the ViT's bytes without linking
// the training runtime; the runtime computes on these same layouts.
//
// A unit is a transformer block: unit 0 also holds the patch embedding, the
// last unit the final LayerNorm, pooling and head. Not here: what a unit
// computes (runtime/vit_model.cpp), initialisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pipevm {

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
// as the checker and the split see them (model_shape.hpp).
std::vector<int> vit_layer_widths(const VitShape& shape);

// One named tensor of a unit, at `offset` in the unit's flat parameters.
struct VitTensor {
  std::string name;  // e.g. "blocks.0.qkv.weight" (PyTorch's [out, in] order)
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;
  std::size_t size = 0;
};

// Offsets of a unit's tensors in its flat parameters (0 where the unit has
// no such tensor), its tensors in order and their floats.
struct VitParameterLayout {
  std::size_t patch_weight = 0, patch_bias = 0, positions = 0;
  std::size_t ln1_gamma = 0, ln1_beta = 0, qkv_weight = 0, qkv_bias = 0;
  std::size_t proj_weight = 0, proj_bias = 0, ln2_gamma = 0, ln2_beta = 0;
  std::size_t fc1_weight = 0, fc1_bias = 0, fc2_weight = 0, fc2_bias = 0;
  std::size_t norm_gamma = 0, norm_beta = 0, head_weight = 0, head_bias = 0;
  std::vector<VitTensor> tensors;
  std::size_t count = 0;
};
// Throws std::invalid_argument for a bad shape, std::out_of_range for a unit
// the ViT does not have. Without `named`, `tensors` stays empty (the offsets
// alone, which allocates nothing: what a training pass asks for).
VitParameterLayout vit_parameter_layout(const VitShape& shape, int unit, bool named = true);
std::vector<VitTensor> vit_unit_tensors(const VitShape& shape, int unit);
std::size_t vit_unit_parameter_count(const VitShape& shape, int unit);

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

// Per-sample offsets of a unit's regions in its stashes (the LayerNorms'
// gradients: offsets in their per-micro-batch stash), and the stashes' sizes.
struct VitStashLayout {
  // forward -> backward-input; on the last unit, `block_out` holds the
  // block's output and then, normalised in place, the final LayerNorm's.
  std::size_t inverse_std1 = 0, normalized1 = 0, qkv = 0, probabilities = 0, inverse_std2 = 0,
              normalized2 = 0, gelu_slope = 0, block_out = 0, inverse_std_norm = 0,
              normalized_norm = 0;
  // forward -> backward-weight: the linear layers' inputs
  std::size_t patches = 0, ln1_out = 0, context = 0, ln2_out = 0, gelu_out = 0, pooled = 0;
  // backward-input -> backward-weight: the gradients at the linear layers' outputs
  std::size_t d_tokens = 0, d_qkv = 0, d_residual = 0, d_fc1_out = 0, d_block_out = 0;
  // backward-input -> backward-weight, per micro-batch: scale then shift
  std::size_t d_ln1 = 0, d_ln2 = 0, d_norm = 0;
  VitStashSizes sizes;
};
VitStashLayout vit_stash_layout(const VitShape& shape, int unit);
VitStashSizes vit_stash_sizes(const VitShape& shape, int unit);

}  // namespace pipevm
