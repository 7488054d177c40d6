// The ViT's units (runtime/vit_model.hpp) on a tiny shape: each unit's
// input and weight gradients against central finite differences of
// sum(output * probe), through the stashes as a Piece passes them; a ViT
// cut into pieces computing the whole model's bits; and what a block keeps
// between its passes (less for the weight half than after the forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "gradient_check.hpp"
#include "model.hpp"
#include "vit_model.hpp"

namespace pipevm::runtime {
namespace {

VitShape tiny_vit() {
  VitShape shape;
  shape.image_side = 4;
  shape.patch = 2;
  shape.width = 4;
  shape.blocks = 2;
  shape.heads = 2;
  shape.hidden = 6;
  shape.classes = 3;
  return shape;
}

using gradient_check::dot;
using gradient_check::random_values;

struct UnitCase {
  static constexpr int kRows = 2;
  VitShape shape = tiny_vit();
  int unit = 0;
  std::vector<float> parameters;
  std::vector<float> input;
  std::vector<float> output;
  std::vector<float> probe;
  std::vector<float> for_input, for_weight, gradients_for_weight, layernorm_gradients;

  UnitCase(int which, int blocks) : unit(which) {
    shape.blocks = blocks;
    const std::vector<int> widths = vit_layer_widths(shape);
    parameters.resize(vit_unit_parameter_count(shape, unit));
    initialize_vit_unit(parameters, shape, 3, unit);
    // Perturb every parameter so LayerNorm scales and biases matter too.
    const std::vector<float> noise = random_values(parameters.size(), 11);
    for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] += 0.3f * noise[i];
    input =
        random_values(kRows * static_cast<std::size_t>(widths[static_cast<std::size_t>(unit)]), 5);
    output.resize(kRows * static_cast<std::size_t>(widths[static_cast<std::size_t>(unit) + 1]));
    probe = random_values(output.size(), 7);
    const VitStashSizes sizes = vit_stash_sizes(shape, unit);
    for_input.resize(kRows * sizes.forward_for_input);
    for_weight.resize(kRows * sizes.forward_for_weight);
    gradients_for_weight.resize(kRows * sizes.gradients_for_weight);
    layernorm_gradients.resize(sizes.layernorm_gradients);
  }
  VitUnitBuffers buffers() {
    return VitUnitBuffers{
        kRows, input, output, for_input, for_weight, gradients_for_weight, layernorm_gradients};
  }
  double objective() {
    vit_unit_forward(shape, unit, parameters, buffers());
    return dot(output, probe);
  }
};

void check_unit(int unit, int blocks = 2) {
  UnitCase c(unit, blocks);
  c.objective();
  std::vector<float> d_input(c.input.size(), 5.0f);  // written: the 5s must vanish
  vit_unit_backward_input(c.shape, unit, c.parameters, c.buffers(), c.probe, d_input);
  std::vector<float> d_parameters(c.parameters.size(), 0.0f);
  vit_unit_backward_weight(c.shape, unit, d_parameters, c.buffers(), c.probe);
  gradient_check::expect_gradient(
      d_input, c.input, [&] { return c.objective(); }, 3e-3);
  gradient_check::expect_gradient(
      d_parameters, c.parameters, [&] { return c.objective(); }, 3e-3);
}

TEST(vit, first_unit_gradients_match_finite_differences) {
  check_unit(0);
}

TEST(vit, last_unit_gradients_match_finite_differences) {
  check_unit(1);
}

TEST(vit, middle_unit_gradients_match_finite_differences) {
  check_unit(1, 3);
}

// One unit both embeds and ends the model.
TEST(vit, only_unit_gradients_match_finite_differences) {
  check_unit(0, 1);
}

// Forward, loss and backward of one micro-batch through `pieces` in a
// chain; returns the weight gradients, flat, the model's layout.
std::vector<float> chain_gradients(std::vector<Piece>& pieces, const std::vector<float>& images,
                                   const std::vector<std::uint8_t>& labels, int rows) {
  std::vector<float> activation = images;
  for (Piece& piece : pieces) {
    piece.reserve(1, rows);
    const std::span<const float> out = piece.forward(0, activation, rows);
    activation.assign(out.begin(), out.end());
  }
  pieces.back().loss(0, labels, 1.0f / static_cast<float>(rows));
  std::vector<float> gradient;
  for (auto piece = pieces.rbegin(); piece != pieces.rend(); ++piece) {
    const std::span<const float> d_in = piece->backward_input(0, gradient);
    piece->backward_weight(0);
    gradient.assign(d_in.begin(), d_in.end());
    if (piece != pieces.rbegin() + static_cast<std::ptrdiff_t>(pieces.size()) - 1) {
      piece->end_input_gradient_send(0);
    }
  }
  std::vector<float> all;
  for (const Piece& piece : pieces) {
    const std::vector<float> g = piece.gradients();
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

TEST(vit, pieces_compute_the_whole_models_gradients_bit_for_bit) {
  ModelConfig config;
  VitShape shape = tiny_vit();
  shape.blocks = 3;
  use_vit(config, shape);
  config.seed = 9;
  constexpr int kRows = 3;
  const std::vector<float> images = random_values(kRows * 16, 2);
  const std::vector<std::uint8_t> labels = {0, 2, 1};
  std::vector<Piece> whole;
  whole.emplace_back(config, LayerRange{0, 3});
  std::vector<Piece> cut;
  cut.emplace_back(config, LayerRange{0, 1});
  cut.emplace_back(config, LayerRange{1, 3});
  const std::vector<float> expected = chain_gradients(whole, images, labels, kRows);
  const std::vector<float> split = chain_gradients(cut, images, labels, kRows);
  EXPECT_EQ(split, expected);
  EXPECT_EQ(expected.size(), parameter_count(config, {0, 3}));
  EXPECT_NE(std::count(expected.begin(), expected.end(), 0.0f),
            static_cast<std::ptrdiff_t>(expected.size()));
  // Every buffer of the micro-batch is back.
  for (Piece& piece : cut) EXPECT_EQ(piece.ledger().current()[MemoryCategory::activations], 0U);
}

// What a block keeps once its forward is done (its stashes) against what
// it keeps from its input half to its weight half (the weight half's
// stashes, the gradient at its top, the LayerNorms' gradients of the
// micro-batch): less, as the Zero Bubble paper's M_W < M_B, for every block
// of the default ViT in a micro-batch of the default run (128 / 4 rows).
TEST(vit, a_block_keeps_less_for_its_weight_half_than_after_its_forward) {
  const VitShape shape;
  const VitStashSizes middle = vit_stash_sizes(shape, 1);
  EXPECT_EQ(middle.forward_for_input, 10'272U);  // normalised values, q k v, ...
  EXPECT_EQ(middle.forward_for_weight, 7'168U);  // the linears' inputs
  EXPECT_EQ(middle.gradients_for_weight, 8'192U);
  EXPECT_EQ(middle.layernorm_gradients, 4U * 64U);
  constexpr std::size_t kRows = 32;
  for (int unit = 0; unit < shape.blocks; ++unit) {
    SCOPED_TRACE(unit);
    const VitStashSizes s = vit_stash_sizes(shape, unit);
    const std::size_t top = unit + 1 == shape.blocks
                                ? static_cast<std::size_t>(shape.classes)
                                : static_cast<std::size_t>(shape.tokens() * shape.width);
    const std::size_t after_forward = kRows * (s.forward_for_input + s.forward_for_weight);
    const std::size_t after_input_half =
        kRows * (s.forward_for_weight + s.gradients_for_weight + top) + s.layernorm_gradients;
    EXPECT_LT(after_input_half, after_forward);
  }
  VitShape narrow = shape;
  narrow.hidden = 32;
  EXPECT_THROW(check_vit_shape(narrow), std::invalid_argument);
}

// A ViT piece's ledger: after the forward, the stashes and the logits (the
// images are gone: the stashes hold all the backward reads); after the
// input half, the weight half's stashes, the gradients at the top and
// between the blocks, and the LayerNorms' gradients (as gradients); after
// the weight half, the weight gradients alone.
TEST(vit, a_piece_keeps_only_what_its_next_pass_reads) {
  ModelConfig config;
  const VitShape shape = tiny_vit();
  use_vit(config, shape);
  constexpr std::size_t kRows = 3;
  Piece piece(config, LayerRange{0, 2});
  piece.reserve(1, static_cast<int>(kRows));
  piece.forward(0, random_values(kRows * 16, 2), static_cast<int>(kRows));
  const auto floats = [&](MemoryCategory category) {
    return piece.ledger().current()[category] / sizeof(float);
  };
  const VitStashSizes first = vit_stash_sizes(shape, 0);
  const VitStashSizes last = vit_stash_sizes(shape, 1);
  const auto classes = static_cast<std::size_t>(shape.classes);
  const auto between = static_cast<std::size_t>(shape.tokens() * shape.width);
  EXPECT_EQ(floats(MemoryCategory::activations),
            kRows * (first.forward_for_input + first.forward_for_weight + last.forward_for_input +
                     last.forward_for_weight + classes));
  const std::vector<std::uint8_t> labels = {0, 2, 1};
  piece.loss(0, labels, 1.0f / 3.0f);
  piece.backward_input_all(0);
  EXPECT_EQ(floats(MemoryCategory::activations),
            kRows * (first.forward_for_weight + last.forward_for_weight));
  EXPECT_EQ(floats(MemoryCategory::activation_gradients),
            kRows * (first.gradients_for_weight + last.gradients_for_weight + classes + between));
  EXPECT_EQ(floats(MemoryCategory::gradients),
            first.layernorm_gradients + last.layernorm_gradients);
  piece.backward_weight_all(0);
  EXPECT_EQ(floats(MemoryCategory::activations), 0U);
  EXPECT_EQ(floats(MemoryCategory::activation_gradients), 0U);
  EXPECT_EQ(floats(MemoryCategory::gradients), parameter_count(config, {0, 2}));
}

TEST(vit, widths_and_tensors_follow_the_shape) {
  const VitShape shape;  // the default: 7 x 7 patches of 28 x 28, width 64, 4 blocks
  EXPECT_EQ(shape.tokens(), 16);
  EXPECT_EQ(vit_layer_widths(shape), (std::vector<int>{784, 1024, 1024, 1024, 10}));
  const std::vector<VitTensor> first = vit_unit_tensors(shape, 0);
  EXPECT_EQ(first.front().name, "embed.patch.weight");
  EXPECT_EQ(first.back().name, "blocks.0.fc2.bias");
  const std::vector<VitTensor> last = vit_unit_tensors(shape, 3);
  EXPECT_EQ(last.back().name, "head.bias");
  EXPECT_EQ(last.back().offset + last.back().size, vit_unit_parameter_count(shape, 3));
  VitShape odd = shape;
  odd.heads = 5;
  EXPECT_THROW(check_vit_shape(odd), std::invalid_argument);
}

}  // namespace
}  // namespace pipevm::runtime
