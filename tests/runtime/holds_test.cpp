// Holds of a model piece (Hold and Drop, docs/memory.md): a held value
// outlives its last use in its own category of the ledger until it is
// dropped or the step ends, without blocking its slot; a held gradient at
// the model's input is computed (and equals the product of the gradient
// above layer 0 and its weights, and what a split of the model computes);
// a weight gradient held apart and dropped sums to the same gradient as
// accumulating it; misuse throws std::logic_error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "model.hpp"
#include "random.hpp"

namespace pipevm::runtime {
namespace {

constexpr std::size_t kFloat = sizeof(float);

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = 2.0F * random.uniform() - 1.0F;
  return values;
}

std::vector<float> copy_of(std::span<const float> values) {
  return {values.begin(), values.end()};
}

std::uint64_t bytes(Piece& piece, MemoryCategory category) {
  return piece.ledger().current()[category];
}

void expect_close(std::span<const float> actual, std::span<const float> expected, double tolerance,
                  const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double largest = 0.0;
  for (const float value : expected) largest = std::max(largest, std::abs(double{value}));
  ASSERT_GT(largest, 0.0) << what << ": all zeros prove nothing";
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(double{actual[i]}, double{expected[i]}, tolerance * largest)
        << what << " element " << i;
  }
}

ModelConfig three_layers(std::uint64_t seed) {
  ModelConfig config;
  config.sizes = {6, 5, 4, 3};
  config.seed = seed;
  return config;
}

// sizes 4-3-2 as one last piece, 3 rows: a 3 x 3 activation at boundary 1,
// a 3 x 2 output.
struct SmallPiece {
  ModelConfig config;
  Piece piece;
  const std::vector<std::uint8_t> labels{0, 1, 0};
  static ModelConfig make_config() {
    ModelConfig config;
    config.sizes = {4, 3, 2};
    config.seed = 7;
    return config;
  }
  SmallPiece() : config(make_config()), piece(config, {0, 2}) { piece.reserve(1, 3); }
  void forward(std::uint64_t seed) { piece.forward(0, random_values(12, seed), 3); }
  void backward() {
    piece.loss(0, labels, 1.0F);
    piece.backward_input(0, {});
    piece.backward_weight(0);
  }
};

TEST(holds, held_activations_outlive_their_last_use_until_dropped) {
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::activation, 0, 1);  // the input of layer 1
  piece.hold(HeldValue::activation, 0, 2);  // the output
  small.forward(1);
  const std::vector<float> inner = copy_of(piece.held(HeldValue::activation, 0, 1));
  const std::vector<float> output = copy_of(piece.output(0));
  ASSERT_EQ(inner.size(), 9U);
  small.backward();
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), (9 + 6) * kFloat)
      << "both held past their last use, as activations";
  EXPECT_EQ(copy_of(piece.held(HeldValue::activation, 0, 1)), inner);
  EXPECT_EQ(copy_of(piece.held(HeldValue::activation, 0, 2)), output);
  EXPECT_TRUE(piece.output(0).empty()) << "out of the slot";

  // The slot takes the next micro-batch while they are held.
  small.forward(2);
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), (9 + 6 + 12 + 9 + 6) * kFloat);
  piece.drop(HeldValue::activation, 0, 1);
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), (6 + 12 + 9 + 6) * kFloat);
  EXPECT_TRUE(piece.held(HeldValue::activation, 0, 1).empty());
  EXPECT_EQ(copy_of(piece.held(HeldValue::activation, 0, 2)), output);
  small.backward();
  piece.end_holds();
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), 0U) << "the step's end frees the rest";
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 0U);
}

TEST(holds, a_weight_gradient_held_but_not_made_blocks_no_step) {
  // As the checker: only a gradient made apart would be missed.
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::weight_gradient, 0, 1);
  EXPECT_NO_THROW(piece.zero_grad());
  EXPECT_NO_THROW(piece.require_no_held_weight_gradient(1, "a step"));
  small.forward(3);
  small.backward();
  EXPECT_THROW(piece.require_no_held_weight_gradient(1, "a step"), std::logic_error);
  piece.drop(HeldValue::weight_gradient, 0, 1);
  EXPECT_NO_THROW(piece.require_no_held_weight_gradient(1, "a step"));
  piece.end_holds();
}

TEST(holds, a_value_dropped_before_its_last_use_goes_at_its_last_use) {
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::activation, 0, 1);
  small.forward(1);
  EXPECT_EQ(piece.held(HeldValue::activation, 0, 1).size(), 9U) << "held in its slot";
  piece.drop(HeldValue::activation, 0, 1);
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), (12 + 9 + 6) * kFloat);
  small.backward();
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), 0U);
  EXPECT_THROW(piece.drop(HeldValue::activation, 0, 1), std::logic_error) << "not held";
}

TEST(holds, a_held_output_stays_an_activation_while_a_send_reads_it) {
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::activation, 0, 2);
  small.forward(1);
  piece.begin_output_send(0);
  small.backward();
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), 6 * kFloat);
  EXPECT_EQ(bytes(piece, MemoryCategory::messages), 0U);
  piece.drop(HeldValue::activation, 0, 2);
  EXPECT_EQ(bytes(piece, MemoryCategory::activations), 0U);
  EXPECT_EQ(bytes(piece, MemoryCategory::messages), 6 * kFloat) << "a message until sent";
  piece.end_output_send(0);
  EXPECT_EQ(bytes(piece, MemoryCategory::messages), 0U);
  EXPECT_THROW(piece.end_output_send(0), std::logic_error) << "no send in flight";
}

TEST(holds, a_held_input_gradient_outlives_its_send) {
  ModelConfig config;
  config.sizes = {6, 5, 4, 3, 2};
  Piece piece(config, {1, 3});  // neither first nor last: its input gradient is sent
  piece.reserve(1, 2);
  piece.hold(HeldValue::gradient, 0, 1);
  piece.forward(0, random_values(10, 3), 2);
  const std::vector<float> sent = copy_of(piece.backward_input(0, random_values(6, 4)));
  piece.backward_weight(0);
  piece.begin_input_gradient_send(0);  // an ISend: its last use
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 10 * kFloat);
  EXPECT_EQ(bytes(piece, MemoryCategory::messages), 0U);
  piece.end_input_gradient_send(0);
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 10 * kFloat) << "still held";
  EXPECT_EQ(copy_of(piece.held(HeldValue::gradient, 0, 1)), sent);
  piece.drop(HeldValue::gradient, 0, 1);
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 0U);
  EXPECT_EQ(bytes(piece, MemoryCategory::messages), 0U);
}

// The gradient at the model's input: without a hold the first piece skips
// it; held, it is the gradient above layer 0 (held too) times layer 0's
// weights, and what the first piece of a split computes from the input
// gradient of the piece above it.
TEST(holds, a_held_model_input_gradient_is_computed_on_the_first_piece) {
  const ModelConfig config = three_layers(11);
  constexpr int kRows = 2;
  const std::vector<float> input = random_values(kRows * 6, 5);
  const std::vector<std::uint8_t> labels{2, 0};

  Piece whole(config, {0, 3});
  whole.reserve(1, kRows);
  whole.forward(0, input, kRows);
  whole.loss(0, labels, 0.5F);
  whole.backward_input(0, {});
  whole.backward_weight(0);
  EXPECT_EQ(bytes(whole, MemoryCategory::activation_gradients), 0U) << "not computed unheld";

  whole.hold(HeldValue::gradient, 0, 0);
  whole.hold(HeldValue::gradient, 0, 1);
  whole.forward(0, input, kRows);
  whole.loss(0, labels, 0.5F);
  EXPECT_TRUE(whole.backward_input(0, {}).empty()) << "not the piece's sent input gradient";
  whole.backward_weight(0);
  EXPECT_EQ(bytes(whole, MemoryCategory::activation_gradients), kRows * (6 + 5) * kFloat);
  const std::vector<float> computed = copy_of(whole.held(HeldValue::gradient, 0, 0));
  const std::span<const float> above = whole.held(HeldValue::gradient, 0, 1);
  const std::span<const float> weight = whole.layer_parameters(0).weight;  // 5 x 6
  std::vector<float> expected(kRows * 6);
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t i = 0; i < 6; ++i) {
      double sum = 0.0;
      for (std::size_t o = 0; o < 5; ++o)
        sum += double{above[r * 5 + o]} * double{weight[o * 6 + i]};
      expected[r * 6 + i] = static_cast<float>(sum);
    }
  }
  expect_close(computed, expected, 1e-6, "input gradient against its product");

  Piece bottom(config, {0, 1});
  Piece top(config, {1, 3});
  bottom.reserve(1, kRows);
  top.reserve(1, kRows);
  bottom.hold(HeldValue::gradient, 0, 0);
  top.forward(0, bottom.forward(0, input, kRows), kRows);
  top.loss(0, labels, 0.5F);
  const std::vector<float> passed = copy_of(top.backward_input(0, {}));
  bottom.backward_input(0, passed);
  bottom.backward_weight(0);
  expect_close(bottom.held(HeldValue::gradient, 0, 0), computed, 1e-6, "split against whole");

  whole.drop(HeldValue::gradient, 0, 0);
  whole.drop(HeldValue::gradient, 0, 1);
  EXPECT_EQ(bytes(whole, MemoryCategory::activation_gradients), 0U);
}

// Two micro-batches, once accumulated as usual and once with weight
// gradients held apart (slot 0: every layer; slot 1: layer 2 only).
TEST(holds, weight_gradients_held_apart_and_dropped_sum_as_accumulated) {
  const ModelConfig config = three_layers(13);
  constexpr int kRows = 3;
  const std::vector<std::uint8_t> labels{2, 0, 1};
  const auto run_slot = [&](Piece& piece, int slot, std::vector<int>& hooked) {
    piece.forward(slot, random_values(kRows * 6, 20 + static_cast<std::uint64_t>(slot)), kRows);
    piece.loss(slot, labels, 0.25F);
    piece.backward_input(slot, {});
    piece.backward_weight(slot,
                          [&hooked](int layer, std::span<float>) { hooked.push_back(layer); });
  };
  std::vector<int> hooked;
  Piece accumulated(config, {0, 3});
  accumulated.reserve(2, kRows);
  for (int slot = 0; slot < 2; ++slot) run_slot(accumulated, slot, hooked);
  EXPECT_EQ(hooked, (std::vector<int>{2, 1, 0, 2, 1, 0}));

  Piece apart(config, {0, 3});
  apart.reserve(2, kRows);
  const std::uint64_t sizes[] = {5 * 6 + 5, 4 * 5 + 4, 3 * 4 + 3};
  for (int layer = 0; layer < 3; ++layer) apart.hold(HeldValue::weight_gradient, 0, layer);
  apart.hold(HeldValue::weight_gradient, 1, 2);
  apart.hold(HeldValue::weight_gradient, 1, 1);
  apart.drop(HeldValue::weight_gradient, 1, 1);  // before it is made: accumulated as usual
  hooked.clear();
  run_slot(apart, 0, hooked);
  EXPECT_TRUE(hooked.empty()) << "no layer hook for a gradient kept apart";
  for (int layer = 0; layer < 3; ++layer) EXPECT_FALSE(apart.has_gradients(layer));
  EXPECT_EQ(bytes(apart, MemoryCategory::gradients), (sizes[0] + sizes[1] + sizes[2]) * kFloat);
  run_slot(apart, 1, hooked);
  EXPECT_EQ(hooked, (std::vector<int>{1, 0}));
  EXPECT_FALSE(apart.has_gradients(2));
  EXPECT_EQ(bytes(apart, MemoryCategory::gradients),
            (2 * sizes[0] + 2 * sizes[1] + 2 * sizes[2]) * kFloat);
  EXPECT_THROW(apart.zero_grad(), std::logic_error) << "it would miss the gradients apart";
  EXPECT_THROW(apart.require_no_held_weight_gradient(2, "a step"), std::logic_error);

  apart.drop(HeldValue::weight_gradient, 0, 2);  // makes layer 2's accumulated gradient
  EXPECT_TRUE(apart.has_gradients(2));
  EXPECT_EQ(bytes(apart, MemoryCategory::gradients),
            (2 * sizes[0] + 2 * sizes[1] + 2 * sizes[2]) * kFloat);
  apart.drop(HeldValue::weight_gradient, 0, 1);
  apart.drop(HeldValue::weight_gradient, 0, 0);
  apart.drop(HeldValue::weight_gradient, 1, 2);
  EXPECT_EQ(bytes(apart, MemoryCategory::gradients), (sizes[0] + sizes[1] + sizes[2]) * kFloat);
  expect_close(apart.gradients(), accumulated.gradients(), 1e-6, "weight gradients");
  EXPECT_NO_THROW(apart.require_no_held_weight_gradient(2, "a step"));
  EXPECT_NO_THROW(apart.end_holds());
}

TEST(holds, a_weight_gradient_never_dropped_fails_the_step_end_and_is_freed) {
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::weight_gradient, 0, 1);
  small.forward(1);
  small.backward();
  EXPECT_GT(bytes(piece, MemoryCategory::gradients), 0U);
  EXPECT_THROW(piece.end_holds(), std::logic_error);
  EXPECT_EQ(bytes(piece, MemoryCategory::gradients), (3 * 4 + 3) * kFloat)
      << "layer 0's accumulated gradient stays, layer 1's apart one is gone";
}

TEST(holds, misuse_throws) {
  SmallPiece small;
  Piece& piece = small.piece;
  piece.hold(HeldValue::gradient, 0, 2);
  EXPECT_THROW(piece.hold(HeldValue::gradient, 0, 2), std::logic_error) << "held twice";
  EXPECT_THROW(piece.hold(HeldValue::activation, 0, 3), std::out_of_range) << "past the output";
  EXPECT_THROW(piece.hold(HeldValue::weight_gradient, 0, 2), std::out_of_range) << "no layer 2";
  EXPECT_THROW(piece.hold(HeldValue::activation, 1, 0), std::out_of_range) << "one slot";
  EXPECT_THROW(piece.drop(HeldValue::weight_gradient, 0, 0), std::logic_error) << "not held";
  small.forward(1);
  small.backward();
  EXPECT_THROW(piece.hold(HeldValue::gradient, 0, 2), std::logic_error)
      << "held still, past its last use";
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 6 * kFloat);
  piece.release(0);
  EXPECT_EQ(bytes(piece, MemoryCategory::activation_gradients), 0U) << "release frees held ones";
  EXPECT_NO_THROW(piece.hold(HeldValue::gradient, 0, 2));
}

}  // namespace
}  // namespace pipevm::runtime
