// The ViT's units: initialisation and the three passes of a unit (see
// vit_model.hpp), on the parameter and stash layouts of core/vit_shape.hpp.
// A stash is cut into regions, each holding one value for all rows of the
// micro-batch (rows x its floats per sample, contiguous), so that a region
// is a token matrix as it is.
#include "vit_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "random.hpp"
#include "tensor.hpp"
#include "vit_layers.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

bool is_last_unit(const VitShape& shape, int unit) {
  return unit == shape.blocks - 1;
}

// A region of a stash: `rows * per_sample` rows of `cols`, at rows * offset.
MatrixMap region(std::span<float> stash, int rows, std::size_t offset, int per_sample, int cols) {
  const std::size_t floats = to_size(rows) * to_size(per_sample) * to_size(cols);
  return as_matrix(stash.subspan(to_size(rows) * offset, floats), rows * per_sample, cols);
}
ConstMatrixMap region(std::span<const float> stash, int rows, std::size_t offset, int per_sample,
                      int cols) {
  const std::size_t floats = to_size(rows) * to_size(per_sample) * to_size(cols);
  return as_matrix(stash.subspan(to_size(rows) * offset, floats), rows * per_sample, cols);
}
std::span<float> floats_of(std::span<float> stash, int rows, std::size_t offset,
                           std::size_t per_sample) {
  return stash.subspan(to_size(rows) * offset, to_size(rows) * per_sample);
}

// The unit's parameters as views.
struct Weights {
  std::span<const float> all;
  ConstMatrixMap matrix(std::size_t offset, int rows, int cols) const {
    return as_matrix(all.subspan(offset, to_size(rows) * to_size(cols)), rows, cols);
  }
  ConstRowVectorMap vector(std::size_t offset, int size) const {
    return as_row_vector(all.subspan(offset, to_size(size)));
  }
};
struct Gradients {
  std::span<float> all;
  MatrixMap matrix(std::size_t offset, int rows, int cols) const {
    return as_matrix(all.subspan(offset, to_size(rows) * to_size(cols)), rows, cols);
  }
  RowVectorMap vector(std::size_t offset, int size) const {
    return as_row_vector(all.subspan(offset, to_size(size)));
  }
};

void check_parameters(const VitShape& s, int unit, std::size_t floats, const char* operation) {
  if (floats != vit_unit_parameter_count(s, unit)) {
    throw std::invalid_argument(std::string(operation) + ": " + std::to_string(floats) +
                                " floats for a unit of " +
                                std::to_string(vit_unit_parameter_count(s, unit)));
  }
}

// What every pass of a unit starts from: its layouts and the sizes of
// one micro-batch (n: its token rows).
struct UnitPass {
  VitParameterLayout p;
  VitStashLayout u;
  int rows, t, d, h, n;
};
UnitPass unit_pass(const VitShape& s, int unit, std::size_t parameter_floats, int rows,
                   const char* operation) {
  check_parameters(s, unit, parameter_floats, operation);
  return {vit_parameter_layout(s, unit, false),
          vit_stash_layout(s, unit),
          rows,
          s.tokens(),
          s.width,
          s.hidden,
          rows * s.tokens()};
}

void check_layernorm_stash(const VitStashLayout& u, std::span<const float> stash,
                           const char* operation) {
  if (stash.size() < u.sizes.layernorm_gradients) {
    throw std::invalid_argument(std::string(operation) + ": a LayerNorm gradient stash of " +
                                std::to_string(stash.size()) + " floats, the unit needs " +
                                std::to_string(u.sizes.layernorm_gradients));
  }
}

// A LayerNorm's backward: d_in = residual (when not empty) + the gradient
// through it; its scale and shift gradients of the micro-batch into their
// place (`offset`) in the per-micro-batch stash.
void layernorm_backward_into(MatrixMap d_in, std::span<float> stash, std::size_t offset,
                             ConstMatrixMap d_out, ConstMatrixMap normalized,
                             std::span<const float> inverse_std, ConstRowVectorMap gamma,
                             std::span<const float> residual) {
  const std::size_t width = static_cast<std::size_t>(d_out.cols());
  layernorm_backward(d_in, as_row_vector(stash.subspan(offset, width)),
                     as_row_vector(stash.subspan(offset + width, width)), d_out, normalized,
                     inverse_std, gamma, residual);
}

// Adds a LayerNorm's stashed gradients into its scale's (at `gamma`) and
// shift's (at `beta`).
void add_layernorm_gradients(const Gradients& g, std::size_t gamma, std::size_t beta,
                             std::span<const float> stash, std::size_t offset, int width) {
  g.vector(gamma, width) += as_row_vector(stash.subspan(offset, to_size(width)));
  g.vector(beta, width) += as_row_vector(stash.subspan(offset + to_size(width), to_size(width)));
}

}  // namespace

void initialize_vit_unit(std::span<float> parameters, const VitShape& s, std::uint64_t seed,
                         int unit) {
  const VitParameterLayout p = vit_parameter_layout(s, unit);
  check_parameters(s, unit, parameters.size(), "initialize_vit_unit");
  SplitMix64 random(seed, static_cast<std::uint64_t>(unit));
  for (const VitTensor& tensor : p.tensors) {
    const std::span<float> values = parameters.subspan(tensor.offset, tensor.size);
    const bool layernorm_scale = tensor.name.ends_with("ln1.weight") ||
                                 tensor.name.ends_with("ln2.weight") ||
                                 tensor.name == "norm.weight";
    if (layernorm_scale) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (tensor.name == "embed.positions") {
      for (float& v : values) v = 0.02f * (2.0f * random.uniform() - 1.0f);
    } else if (tensor.shape.size() == 2) {
      const float bound = 1.0f / std::sqrt(static_cast<float>(tensor.shape[1]));
      for (float& v : values) v = bound * (2.0f * random.uniform() - 1.0f);
    } else {
      std::fill(values.begin(), values.end(), 0.0f);
    }
  }
}

void vit_unit_forward(const VitShape& s, int unit, std::span<const float> parameters,
                      const VitUnitBuffers& b) {
  const auto [p, u, rows, t, d, h, n] =
      unit_pass(s, unit, parameters.size(), b.rows, "vit_unit_forward");
  const Weights w{parameters};
  const std::span<float> in_stash = b.forward_for_input;
  const std::span<float> w_stash = b.forward_for_weight;

  // The residual stream: the unit's output, on the last unit the block's
  // output before the final LayerNorm.
  MatrixMap y =
      is_last_unit(s, unit) ? region(in_stash, rows, u.block_out, t, d) : as_matrix(b.output, n, d);
  // The block's input: on unit 0 the embedded patches, made in the residual
  // stream's place, so that nothing keeps them past the forward.
  if (unit == 0) {
    const MatrixMap patches = region(w_stash, rows, u.patches, t, s.patch_pixels());
    patches_from_images(patches, as_matrix(b.input, rows, s.image_side * s.image_side),
                        s.image_side, s.patch);
    patch_embedding_forward(y, as_const(patches), w.matrix(p.patch_weight, d, s.patch_pixels()),
                            w.vector(p.patch_bias, d), w.matrix(p.positions, t, d));
  }
  const ConstMatrixMap x = unit == 0 ? as_const(y) : as_matrix(b.input, n, d);

  const MatrixMap ln1_out = region(w_stash, rows, u.ln1_out, t, d);
  layernorm_forward(ln1_out, region(in_stash, rows, u.normalized1, t, d),
                    floats_of(in_stash, rows, u.inverse_std1, to_size(t)), x,
                    w.vector(p.ln1_gamma, d), w.vector(p.ln1_beta, d));
  const MatrixMap qkv = region(in_stash, rows, u.qkv, t, 3 * d);
  vit_linear_forward(qkv, as_const(ln1_out), w.matrix(p.qkv_weight, 3 * d, d),
                     w.vector(p.qkv_bias, 3 * d));
  const MatrixMap context = region(w_stash, rows, u.context, t, d);
  attention_forward(context, floats_of(in_stash, rows, u.probabilities, to_size(s.heads * t * t)),
                    as_const(qkv), t, s.heads);
  // The residual stream: y = x + the projection (on unit 0, y is x).
  vit_linear_forward_residual(y, as_const(context), w.matrix(p.proj_weight, d, d),
                              w.vector(p.proj_bias, d), x);

  const MatrixMap ln2_out = region(w_stash, rows, u.ln2_out, t, d);
  layernorm_forward(ln2_out, region(in_stash, rows, u.normalized2, t, d),
                    floats_of(in_stash, rows, u.inverse_std2, to_size(t)), as_const(y),
                    w.vector(p.ln2_gamma, d), w.vector(p.ln2_beta, d));
  const MatrixMap gelu_out = region(w_stash, rows, u.gelu_out, t, h);
  vit_linear_gelu_forward(region(in_stash, rows, u.gelu_slope, t, h), gelu_out, as_const(ln2_out),
                          w.matrix(p.fc1_weight, h, d), w.vector(p.fc1_bias, h));
  vit_linear_forward_residual(y, as_const(gelu_out), w.matrix(p.fc2_weight, d, h),
                              w.vector(p.fc2_bias, d), as_const(y));

  if (is_last_unit(s, unit)) {
    // Normalised in place: the backward reads only the normalised values.
    layernorm_forward(y, region(in_stash, rows, u.normalized_norm, t, d),
                      floats_of(in_stash, rows, u.inverse_std_norm, to_size(t)), as_const(y),
                      w.vector(p.norm_gamma, d), w.vector(p.norm_beta, d));
    const MatrixMap pooled = region(w_stash, rows, u.pooled, 1, d);
    mean_over_tokens_forward(pooled, as_const(y), t);
    vit_linear_forward(as_matrix(b.output, rows, s.classes), as_const(pooled),
                       w.matrix(p.head_weight, s.classes, d), w.vector(p.head_bias, s.classes));
  }
}

void vit_unit_backward_input(const VitShape& s, int unit, std::span<const float> parameters,
                             const VitUnitBuffers& b, std::span<const float> output_gradient,
                             std::span<float> input_gradient) {
  const auto [p, u, rows, t, d, h, n] =
      unit_pass(s, unit, parameters.size(), b.rows, "vit_unit_backward_input");
  check_layernorm_stash(u, b.layernorm_gradients, "vit_unit_backward_input");
  const Weights w{parameters};
  const std::span<float> in_stash = b.forward_for_input;
  const std::span<float> g_stash = b.gradients_for_weight;
  const std::span<float> ln_stash = b.layernorm_gradients;

  // The gradient at the block's output.
  const float* d_y_data = output_gradient.data();
  if (is_last_unit(s, unit)) {
    // Through the head and the pooling: the pooled gradient borrows the
    // block output's gradient (made after it), the gradient at the final
    // LayerNorm's output the normalised output (read by nothing any more).
    const MatrixMap d_pooled = region(g_stash, rows, u.d_block_out, 1, d);
    vit_linear_backward_input(d_pooled, as_matrix(output_gradient, rows, s.classes),
                              w.matrix(p.head_weight, s.classes, d));
    const MatrixMap d_norm_out = region(in_stash, rows, u.block_out, t, d);
    mean_over_tokens_backward(d_norm_out, as_const(d_pooled), t);
    const MatrixMap d_block_out = region(g_stash, rows, u.d_block_out, t, d);
    layernorm_backward_into(d_block_out, ln_stash, u.d_norm, as_const(d_norm_out),
                            as_const(region(in_stash, rows, u.normalized_norm, t, d)),
                            floats_of(in_stash, rows, u.inverse_std_norm, to_size(t)),
                            w.vector(p.norm_gamma, d), {});
    d_y_data = d_block_out.data();
  }
  const ConstMatrixMap d_y(d_y_data, n, d);
  const std::span<const float> d_y_floats(d_y_data, to_size(n) * to_size(d));

  // MLP half: fc2 and the GELU, fc1, LayerNorm 2 plus the residual. The
  // gradient at LayerNorm 2's output borrows the GELU's slope, read for the
  // last time just before (check_vit_shape: hidden >= width).
  const MatrixMap d_fc1_out = region(g_stash, rows, u.d_fc1_out, t, h);
  vit_linear_gelu_backward_input(d_fc1_out, d_y, w.matrix(p.fc2_weight, d, h),
                                 as_const(region(in_stash, rows, u.gelu_slope, t, h)));
  const MatrixMap d_ln2_out = region(in_stash, rows, u.gelu_slope, t, d);
  vit_linear_backward_input(d_ln2_out, as_const(d_fc1_out), w.matrix(p.fc1_weight, h, d));
  const MatrixMap d_residual = region(g_stash, rows, u.d_residual, t, d);
  layernorm_backward_into(d_residual, ln_stash, u.d_ln2, as_const(d_ln2_out),
                          as_const(region(in_stash, rows, u.normalized2, t, d)),
                          floats_of(in_stash, rows, u.inverse_std2, to_size(t)),
                          w.vector(p.ln2_gamma, d), d_y_floats);

  // Attention half: the projection's input gradient borrows the slope's
  // place in turn, the gradient at LayerNorm 1's output borrows q k v once attention
  // has read them; then LayerNorm 1 plus the residual.
  const MatrixMap d_context = region(in_stash, rows, u.gelu_slope, t, d);
  vit_linear_backward_input(d_context, as_const(d_residual), w.matrix(p.proj_weight, d, d));
  const MatrixMap d_qkv = region(g_stash, rows, u.d_qkv, t, 3 * d);
  attention_backward(d_qkv, as_const(d_context), as_const(region(in_stash, rows, u.qkv, t, 3 * d)),
                     floats_of(in_stash, rows, u.probabilities, to_size(s.heads * t * t)), t,
                     s.heads);
  const MatrixMap d_ln1_out = region(in_stash, rows, u.qkv, t, d);
  vit_linear_backward_input(d_ln1_out, as_const(d_qkv), w.matrix(p.qkv_weight, 3 * d, d));
  const bool first = unit == 0;
  if (!first && input_gradient.empty()) {
    throw std::invalid_argument("vit_unit_backward_input: no room for the input gradient");
  }
  const MatrixMap d_x =
      first ? region(g_stash, rows, u.d_tokens, t, d) : as_matrix(input_gradient, n, d);
  layernorm_backward_into(d_x, ln_stash, u.d_ln1, as_const(d_ln1_out),
                          as_const(region(in_stash, rows, u.normalized1, t, d)),
                          floats_of(in_stash, rows, u.inverse_std1, to_size(t)),
                          w.vector(p.ln1_gamma, d),
                          std::span<const float>(d_residual.data(), to_size(n) * to_size(d)));

  if (first && !input_gradient.empty()) {
    // The pixels' gradient, which only a hold asks for (nothing trains the
    // input), through the callers' slot of the kernels' scratch.
    const std::size_t floats = to_size(n) * to_size(s.patch_pixels());
    const MatrixMap d_patches =
        as_matrix(std::span(kernel_scratch(3, floats), floats), n, s.patch_pixels());
    vit_linear_backward_input(d_patches, as_const(d_x),
                              w.matrix(p.patch_weight, d, s.patch_pixels()));
    images_from_patches(as_matrix(input_gradient, rows, s.image_side * s.image_side),
                        as_const(d_patches), s.image_side, s.patch);
  }
}

void vit_unit_backward_weight(const VitShape& s, int unit, std::span<float> gradients,
                              const VitUnitBuffers& b, std::span<const float> output_gradient) {
  const auto [p, u, rows, t, d, h, n] =
      unit_pass(s, unit, gradients.size(), b.rows, "vit_unit_backward_weight");
  check_layernorm_stash(u, b.layernorm_gradients, "vit_unit_backward_weight");
  const Gradients g{gradients};
  const std::span<const float> w_stash = b.forward_for_weight;
  const std::span<const float> g_stash = b.gradients_for_weight;
  const std::span<const float> ln_stash = b.layernorm_gradients;

  const float* d_y_data = output_gradient.data();
  if (is_last_unit(s, unit)) {
    vit_linear_backward_weight(
        g.matrix(p.head_weight, s.classes, d), g.vector(p.head_bias, s.classes),
        as_matrix(output_gradient, rows, s.classes), region(w_stash, rows, u.pooled, 1, d));
    add_layernorm_gradients(g, p.norm_gamma, p.norm_beta, ln_stash, u.d_norm, d);
    d_y_data = region(g_stash, rows, u.d_block_out, t, d).data();
  }
  const ConstMatrixMap d_y(d_y_data, n, d);
  vit_linear_backward_weight(g.matrix(p.fc2_weight, d, h), g.vector(p.fc2_bias, d), d_y,
                             region(w_stash, rows, u.gelu_out, t, h));
  vit_linear_backward_weight(g.matrix(p.fc1_weight, h, d), g.vector(p.fc1_bias, h),
                             region(g_stash, rows, u.d_fc1_out, t, h),
                             region(w_stash, rows, u.ln2_out, t, d));
  add_layernorm_gradients(g, p.ln2_gamma, p.ln2_beta, ln_stash, u.d_ln2, d);
  vit_linear_backward_weight(g.matrix(p.proj_weight, d, d), g.vector(p.proj_bias, d),
                             region(g_stash, rows, u.d_residual, t, d),
                             region(w_stash, rows, u.context, t, d));
  vit_linear_backward_weight(g.matrix(p.qkv_weight, 3 * d, d), g.vector(p.qkv_bias, 3 * d),
                             region(g_stash, rows, u.d_qkv, t, 3 * d),
                             region(w_stash, rows, u.ln1_out, t, d));
  add_layernorm_gradients(g, p.ln1_gamma, p.ln1_beta, ln_stash, u.d_ln1, d);
  if (unit == 0) {
    patch_embedding_backward_weight(g.matrix(p.patch_weight, d, s.patch_pixels()),
                                    g.vector(p.patch_bias, d), g.matrix(p.positions, t, d),
                                    region(g_stash, rows, u.d_tokens, t, d),
                                    region(w_stash, rows, u.patches, t, s.patch_pixels()));
  }
}

}  // namespace pipevm::runtime
