// The ViT's sizes and layouts (vit_shape.hpp).
#include "vit_shape.hpp"

#include <initializer_list>
#include <stdexcept>
#include <string_view>

namespace pipevm {

namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

bool is_last_unit(const VitShape& shape, int unit) {
  return unit == shape.blocks - 1;
}

// Appends one tensor of `dims` to the layout, named `prefix` + `name` when
// the layout keeps names; its offset.
std::size_t add(VitParameterLayout& p, bool named, std::string_view prefix, std::string_view name,
                std::initializer_list<std::int64_t> dims) {
  std::size_t size = 1;
  for (const std::int64_t d : dims) size *= static_cast<std::size_t>(d);
  const std::size_t offset = p.count;
  if (named) {
    std::string full(prefix);
    p.tensors.push_back(VitTensor{full.append(name), dims, offset, size});
  }
  p.count += size;
  return offset;
}

// Takes `floats` from the end of a stash; the region's offset.
std::size_t take(std::size_t& next, std::size_t floats) {
  const std::size_t at = next;
  next += floats;
  return at;
}

}  // namespace

void check_vit_shape(const VitShape& s) {
  if (s.image_side < 1 || s.patch < 1 || s.width < 1 || s.blocks < 1 || s.heads < 1 ||
      s.hidden < 1 || s.classes < 1) {
    throw std::invalid_argument("every ViT size must be positive");
  }
  if (s.image_side % s.patch != 0) {
    throw std::invalid_argument("the patch size " + std::to_string(s.patch) +
                                " does not divide the image side " + std::to_string(s.image_side));
  }
  if (s.width % s.heads != 0) {
    throw std::invalid_argument(std::to_string(s.heads) + " heads do not divide the width " +
                                std::to_string(s.width));
  }
  if (s.hidden < s.width) {
    // The backward borrows the MLP's hidden values for width-sized gradients.
    throw std::invalid_argument("the MLP's hidden width " + std::to_string(s.hidden) +
                                " is less than the width " + std::to_string(s.width));
  }
}

std::vector<int> vit_layer_widths(const VitShape& s) {
  check_vit_shape(s);
  std::vector<int> widths(to_size(s.blocks) + 1, s.tokens() * s.width);
  widths.front() = s.image_side * s.image_side;
  widths.back() = s.classes;
  return widths;
}

VitParameterLayout vit_parameter_layout(const VitShape& s, int unit, bool named) {
  check_vit_shape(s);
  if (unit < 0 || unit >= s.blocks) {
    throw std::out_of_range("the ViT has no unit " + std::to_string(unit));
  }
  const std::int64_t d = s.width, h = s.hidden;
  VitParameterLayout p;
  // Names are built only when asked for: a training pass takes the offsets
  // alone and allocates nothing.
  std::string block;
  if (named) block = "blocks." + std::to_string(unit) + ".";
  const auto model_tensor = [&](std::string_view name, std::initializer_list<std::int64_t> dims) {
    return add(p, named, "", name, dims);
  };
  const auto block_tensor = [&](std::string_view name, std::initializer_list<std::int64_t> dims) {
    return add(p, named, block, name, dims);
  };
  if (unit == 0) {
    p.patch_weight = model_tensor("embed.patch.weight", {d, s.patch_pixels()});
    p.patch_bias = model_tensor("embed.patch.bias", {d});
    p.positions = model_tensor("embed.positions", {s.tokens(), d});
  }
  p.ln1_gamma = block_tensor("ln1.weight", {d});
  p.ln1_beta = block_tensor("ln1.bias", {d});
  p.qkv_weight = block_tensor("qkv.weight", {3 * d, d});
  p.qkv_bias = block_tensor("qkv.bias", {3 * d});
  p.proj_weight = block_tensor("proj.weight", {d, d});
  p.proj_bias = block_tensor("proj.bias", {d});
  p.ln2_gamma = block_tensor("ln2.weight", {d});
  p.ln2_beta = block_tensor("ln2.bias", {d});
  p.fc1_weight = block_tensor("fc1.weight", {h, d});
  p.fc1_bias = block_tensor("fc1.bias", {h});
  p.fc2_weight = block_tensor("fc2.weight", {d, h});
  p.fc2_bias = block_tensor("fc2.bias", {d});
  if (is_last_unit(s, unit)) {
    p.norm_gamma = model_tensor("norm.weight", {d});
    p.norm_beta = model_tensor("norm.bias", {d});
    p.head_weight = model_tensor("head.weight", {s.classes, d});
    p.head_bias = model_tensor("head.bias", {s.classes});
  }
  return p;
}

std::vector<VitTensor> vit_unit_tensors(const VitShape& s, int unit) {
  return vit_parameter_layout(s, unit).tensors;
}

std::size_t vit_unit_parameter_count(const VitShape& s, int unit) {
  return vit_parameter_layout(s, unit, false).count;
}

VitStashLayout vit_stash_layout(const VitShape& s, int unit) {
  const std::size_t t = to_size(s.tokens()), d = to_size(s.width), h = to_size(s.hidden);
  const bool first = unit == 0;
  const bool last = is_last_unit(s, unit);
  VitStashLayout u;
  std::size_t& in = u.sizes.forward_for_input;
  u.inverse_std1 = take(in, t);
  u.normalized1 = take(in, t * d);
  u.qkv = take(in, t * 3 * d);
  u.probabilities = take(in, to_size(s.heads) * t * t);
  u.inverse_std2 = take(in, t);
  u.normalized2 = take(in, t * d);
  u.gelu_slope = take(in, t * h);
  if (last) {
    u.block_out = take(in, t * d);
    u.inverse_std_norm = take(in, t);
    u.normalized_norm = take(in, t * d);
  }
  std::size_t& w = u.sizes.forward_for_weight;
  if (first) u.patches = take(w, t * to_size(s.patch_pixels()));
  u.ln1_out = take(w, t * d);
  u.context = take(w, t * d);
  u.ln2_out = take(w, t * d);
  u.gelu_out = take(w, t * h);
  if (last) u.pooled = take(w, d);
  std::size_t& g = u.sizes.gradients_for_weight;
  if (first) u.d_tokens = take(g, t * d);
  u.d_qkv = take(g, t * 3 * d);
  u.d_residual = take(g, t * d);
  u.d_fc1_out = take(g, t * h);
  if (last) u.d_block_out = take(g, t * d);
  std::size_t& n = u.sizes.layernorm_gradients;
  u.d_ln1 = take(n, 2 * d);
  u.d_ln2 = take(n, 2 * d);
  if (last) u.d_norm = take(n, 2 * d);
  return u;
}

VitStashSizes vit_stash_sizes(const VitShape& s, int unit) {
  return vit_stash_layout(s, unit).sizes;
}

}  // namespace pipevm
