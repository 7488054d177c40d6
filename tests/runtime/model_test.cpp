// Model pieces: the split, initialisation independent of it, gradients
// against a double-precision reference, and chains of pieces against the
// whole model, with several micro-batches in flight.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "eigen.hpp"
#include "layer_times.hpp"
#include "model.hpp"
#include "random.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

std::vector<float> random_inputs(int rows, int width, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<float> values(to_size(rows) * to_size(width));
  for (float& value : values) value = random.uniform();
  return values;
}

std::vector<std::uint8_t> random_labels(int rows, int classes, std::uint64_t seed) {
  SplitMix64 random(seed);
  // Filled by push_back: g++ 12 with -march=native on AVX-512 FP16 CPUs
  // (Sapphire Rapids) vectorizes a range-for over a vector of bytes and then
  // warns of a write past its end (-Wstringop-overflow, a false positive).
  std::vector<std::uint8_t> labels;
  labels.reserve(to_size(rows));
  for (int row = 0; row < rows; ++row)
    labels.push_back(static_cast<std::uint8_t>(random.below(static_cast<std::uint32_t>(classes))));
  return labels;
}

void expect_relatively_close(std::span<const float> actual, std::span<const float> expected,
                             double tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double largest = 0.0;
  for (const float value : expected)
    largest = std::max(largest, std::abs(static_cast<double>(value)));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(actual[i]), static_cast<double>(expected[i]),
                tolerance * largest)
        << what << " element " << i;
  }
}

TEST(model, split_balances_compute_by_hand_example) {
  // Costs 2, 3, 3, 3: {2,3}|{3,3} has the smallest largest part (6).
  const std::vector<LayerRange> split = split_layers({1, 1, 1, 1, 1}, 2);
  EXPECT_EQ(split, (std::vector<LayerRange>{{0, 2}, {2, 4}}));
}

TEST(model, split_of_the_default_model_isolates_the_first_layer) {
  const std::vector<int> sizes = ModelConfig{}.sizes;
  EXPECT_EQ(split_layers(sizes, 2), (std::vector<LayerRange>{{0, 1}, {1, 7}}));
  for (int pieces = 1; pieces <= 7; ++pieces) {
    const std::vector<LayerRange> split = split_layers(sizes, pieces);
    ASSERT_EQ(split.size(), to_size(pieces));
    EXPECT_EQ(split.front().begin, 0);
    EXPECT_EQ(split.back().end, 7);
    for (std::size_t i = 0; i < split.size(); ++i) {
      EXPECT_GT(split[i].size(), 0);
      if (i > 0) {
        EXPECT_EQ(split[i].begin, split[i - 1].end);
      }
    }
    EXPECT_EQ(split, split_layers(sizes, pieces)) << "not a pure function";
  }
  EXPECT_THROW(split_layers(sizes, 8), std::invalid_argument);
  EXPECT_THROW(split_layers(sizes, 0), std::invalid_argument);
}

TEST(model, split_layers_follows_given_costs) {
  const std::vector<int> sizes = ModelConfig{}.sizes;
  // Layer 0 cheap and layer 1 dear: the cut moves past layer 1.
  const std::vector<double> costs = {4.0, 2.0, 1.0, 1.0, 1.0, 1.0, 0.5};
  EXPECT_EQ(split_layers(sizes, 2, costs), (std::vector<LayerRange>{{0, 2}, {2, 7}}));
  EXPECT_EQ(split_layers(sizes, 2, {}), split_layers(sizes, 2));
  EXPECT_THROW(split_layers(sizes, 2, {1.0, 2.0}), std::invalid_argument);
}

TEST(model, measured_layer_costs_are_one_positive_time_per_layer) {
  ModelConfig model;
  model.sizes = {24, 20, 18, 6};
  const std::vector<double> costs = measure_layer_costs(model, OptimizerConfig{}, 8, 2);
  ASSERT_EQ(costs.size(), 3U);
  for (const double cost : costs) EXPECT_GT(cost, 0.0);
}

TEST(model, split_spreads_the_rest_evenly_after_the_bottleneck) {
  // With 3 pieces the first layer alone bounds the largest part; the other
  // six must still be shared out evenly (costs 96,774 and 143,196 multiply-
  // adds; {1,4}|{4,7} would be 144,024 and 95,946), not 1 + 5.
  const std::vector<LayerRange> split = split_layers(ModelConfig{}.sizes, 3);
  EXPECT_EQ(split, (std::vector<LayerRange>{{0, 1}, {1, 3}, {3, 7}}));
}

TEST(model, initialisation_does_not_depend_on_the_split) {
  ModelConfig config;
  config.seed = 42;
  const Piece whole(config, {0, 7});
  for (const int pieces : {2, 3, 7}) {
    for (const LayerRange range : split_layers(config.sizes, pieces)) {
      const Piece piece(config, range);
      EXPECT_EQ(piece.offset_in_model(), parameter_count(config.sizes, {0, range.begin}));
      const auto slice =
          whole.parameters().subspan(piece.offset_in_model(), piece.parameters().size());
      EXPECT_TRUE(std::equal(slice.begin(), slice.end(), piece.parameters().begin()));
    }
  }
  ModelConfig other = config;
  other.seed = 43;
  EXPECT_NE(Piece(other, {0, 1}).parameters()[0], whole.parameters()[0]);
}

TEST(model, initial_weights_are_he_uniform_with_zero_bias) {
  Piece piece(ModelConfig{}, {0, 1});
  const LayerView layer = piece.layer_parameters(0);
  const float bound = std::sqrt(6.0f / 784.0f);
  double sum = 0.0;
  for (const float w : layer.weight) {
    ASSERT_LE(std::abs(w), bound);
    sum += static_cast<double>(w);
  }
  EXPECT_LT(std::abs(sum / static_cast<double>(layer.weight.size())), 0.01);
  for (const float b : layer.bias) EXPECT_EQ(b, 0.0f);
}

// Straightforward double-precision forward and backward of the whole MLP.
struct Reference {
  std::vector<double> loss_gradient_of_parameters;
  double loss = 0.0;
};

Reference reference_backprop(const ModelConfig& config, std::span<const float> parameters,
                             const std::vector<float>& input,
                             const std::vector<std::uint8_t>& labels, int rows, double scale) {
  using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto& sizes = config.sizes;
  const int layers = layer_count(sizes);
  std::vector<MatrixD> weights, activations;
  std::vector<Eigen::RowVectorXd> biases;
  std::size_t offset = 0;
  for (int l = 0; l < layers; ++l) {
    const int in = sizes[to_size(l)], out = sizes[to_size(l) + 1];
    MatrixD w(out, in);
    Eigen::RowVectorXd b(out);
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) w(o, i) = static_cast<double>(parameters[offset++]);
    for (int o = 0; o < out; ++o) b(o) = static_cast<double>(parameters[offset++]);
    weights.push_back(w);
    biases.push_back(b);
  }
  MatrixD a(rows, sizes[0]);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < sizes[0]; ++c)
      a(r, c) = static_cast<double>(input[to_size(r * sizes[0] + c)]);
  activations.push_back(a);
  for (int l = 0; l < layers; ++l) {
    MatrixD z =
        (activations.back() * weights[to_size(l)].transpose()).rowwise() + biases[to_size(l)];
    if (l + 1 < layers) z = z.cwiseMax(0.0);
    activations.push_back(z);
  }
  Reference reference;
  MatrixD g = activations.back();
  for (int r = 0; r < rows; ++r) {
    const Eigen::RowVectorXd z = activations.back().row(r);
    const Eigen::RowVectorXd p =
        (z.array() - z.maxCoeff()).exp().matrix() / (z.array() - z.maxCoeff()).exp().sum();
    const int label = labels[to_size(r)];
    if (config.loss == Loss::cross_entropy) {
      reference.loss -= std::log(p(label)) * scale;
      g.row(r) = p;
      g(r, label) -= 1.0;
    } else {
      Eigen::RowVectorXd e = p;
      e(label) -= 1.0;
      reference.loss += e.squaredNorm() * scale;
      const double e_dot_p = e.dot(p);
      g.row(r) = 2.0 * (p.array() * (e.array() - e_dot_p)).matrix();
    }
  }
  g *= scale;
  std::vector<std::vector<double>> per_layer(to_size(layers));
  for (int l = layers - 1; l >= 0; --l) {
    const MatrixD d_weight = g.transpose() * activations[to_size(l)];
    const Eigen::RowVectorXd d_bias = g.colwise().sum();
    for (Eigen::Index i = 0; i < d_weight.size(); ++i)
      per_layer[to_size(l)].push_back(d_weight.data()[i]);
    for (Eigen::Index i = 0; i < d_bias.size(); ++i) per_layer[to_size(l)].push_back(d_bias(i));
    if (l > 0) {
      g = g * weights[to_size(l)];
      g = (activations[to_size(l)].array() > 0.0).select(g, 0.0);
    }
  }
  for (const auto& layer : per_layer) {
    reference.loss_gradient_of_parameters.insert(reference.loss_gradient_of_parameters.end(),
                                                 layer.begin(), layer.end());
  }
  return reference;
}

void check_against_reference(Loss loss) {
  ModelConfig config;
  config.sizes = {12, 9, 7, 5};
  config.loss = loss;
  config.seed = 3;
  constexpr int kRows = 6;
  Piece model(config, {0, 3});
  model.reserve(1, kRows);
  const std::vector<float> input = random_inputs(kRows, 12, 11);
  const std::vector<std::uint8_t> labels = random_labels(kRows, 5, 12);
  const float scale = 1.0f / kRows;
  model.forward(0, input, kRows);
  const LossResult result = model.loss(0, labels, scale);
  EXPECT_TRUE(model.backward_input(0, {}).empty()) << "the first piece skips the input gradient";
  model.backward_weight(0);

  const Reference reference =
      reference_backprop(config, model.parameters(), input, labels, kRows, 1.0 / kRows);
  EXPECT_NEAR(static_cast<double>(result.loss), reference.loss, 1e-5 * std::abs(reference.loss));
  const std::vector<float> expected(reference.loss_gradient_of_parameters.begin(),
                                    reference.loss_gradient_of_parameters.end());
  expect_relatively_close(model.gradients(), expected, 1e-5, "gradient");
}

TEST(model, cross_entropy_gradients_match_a_double_precision_reference) {
  check_against_reference(Loss::cross_entropy);
}

TEST(model, softmax_mse_gradients_match_a_double_precision_reference) {
  check_against_reference(Loss::softmax_mse);
}

// Two micro-batches through a chain of pieces: both forwards first, then
// the backwards in reverse order (as GPipe does), so the slots must keep
// their stashes apart.
struct ChainResult {
  std::vector<std::vector<float>> outputs;
  std::vector<float> losses;
  std::vector<float> gradients;  // the whole model's, concatenated in layer order
};

ChainResult run_chain(const ModelConfig& config, int pieces, int rows) {
  std::vector<Piece> chain;
  for (const LayerRange range : split_layers(config.sizes, pieces)) {
    chain.emplace_back(config, range);
    chain.back().reserve(2, rows);
  }
  ChainResult result;
  const std::vector<std::vector<float>> inputs = {random_inputs(rows, config.sizes[0], 21),
                                                  random_inputs(rows, config.sizes[0], 22)};
  const std::vector<std::vector<std::uint8_t>> labels = {random_labels(rows, 10, 23),
                                                         random_labels(rows, 10, 24)};
  for (int slot = 0; slot < 2; ++slot) {
    std::vector<float> activation = inputs[to_size(slot)];
    for (Piece& piece : chain) {
      const auto output = piece.forward(slot, activation, rows);
      activation.assign(output.begin(), output.end());  // the "message" to the next stage
    }
    result.outputs.push_back(activation);
    result.losses.push_back(chain.back().loss(slot, labels[to_size(slot)], 0.5f).loss);
  }
  for (int slot = 1; slot >= 0; --slot) {
    std::vector<float> gradient;
    for (auto piece = chain.rbegin(); piece != chain.rend(); ++piece) {
      const auto input_gradient = piece->backward_input(slot, gradient);
      EXPECT_EQ(input_gradient.empty(), piece->is_first());
      gradient.assign(input_gradient.begin(), input_gradient.end());
      piece->backward_weight(slot);
    }
  }
  for (const Piece& piece : chain) {
    const std::vector<float> gradients = piece.gradients();
    result.gradients.insert(result.gradients.end(), gradients.begin(), gradients.end());
  }
  return result;
}

TEST(model, chained_pieces_equal_the_whole_model) {
  ModelConfig config;
  config.seed = 5;
  constexpr int kRows = 8;
  const ChainResult whole = run_chain(config, 1, kRows);
  for (const int pieces : {2, 3, 7}) {
    SCOPED_TRACE(pieces);
    const ChainResult split = run_chain(config, pieces, kRows);
    for (std::size_t mb = 0; mb < 2; ++mb) {
      expect_relatively_close(split.outputs[mb], whole.outputs[mb], 1e-5, "output");
      EXPECT_NEAR(static_cast<double>(split.losses[mb]), static_cast<double>(whole.losses[mb]),
                  1e-5 * static_cast<double>(whole.losses[mb]));
    }
    expect_relatively_close(split.gradients, whole.gradients, 1e-5, "gradient");
  }
}

TEST(model, backward_weight_reports_each_layer_last_first) {
  ModelConfig config;
  config.sizes = {6, 5, 4, 3, 2};
  Piece piece(config, {1, 3});  // neither first nor last
  piece.reserve(1, 2);
  const std::vector<float> input = random_inputs(2, 5, 1);
  piece.forward(0, input, 2);
  const std::vector<float> gradient = random_inputs(2, 3, 2);
  EXPECT_THROW(piece.loss(0, std::vector<std::uint8_t>{0, 1}, 1.0f), std::logic_error)
      << "only the last piece has a loss";
  EXPECT_EQ(piece.backward_input(0, gradient).size(), 2u * 5u);
  std::vector<int> order;
  piece.backward_weight(0, [&](int layer, std::span<float> grads) {
    order.push_back(layer);
    EXPECT_EQ(grads.data(), piece.layer_gradients(layer).all.data());
    EXPECT_EQ(grads.size(),
              to_size(config.sizes[to_size(layer)] * config.sizes[to_size(layer) + 1] +
                      config.sizes[to_size(layer) + 1]));
  });
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

TEST(model, slots_reject_out_of_order_use) {
  ModelConfig config;
  config.sizes = {4, 3, 2};
  Piece piece(config, {0, 2});
  piece.reserve(2, 3);
  const std::vector<float> input = random_inputs(3, 4, 1);
  const std::vector<std::uint8_t> labels = {0, 1, 0};
  EXPECT_THROW(piece.backward_weight(0), std::logic_error);
  piece.forward(0, input, 3);
  EXPECT_THROW(piece.forward(0, input, 3), std::logic_error) << "slot 0 is busy";
  EXPECT_THROW(piece.forward(2, input, 3), std::out_of_range);
  EXPECT_THROW(piece.forward(1, std::span(input).first(5), 3), std::invalid_argument);
  EXPECT_THROW(piece.backward_input(0, {}), std::logic_error)
      << "the last piece needs its loss first";
  piece.loss(0, labels, 1.0f);
  piece.backward_input(0, {});
  piece.backward_weight(0);
  EXPECT_NO_THROW(piece.forward(0, std::span(input).first(8), 2))
      << "freed, and fewer rows than reserved are fine";
  piece.release(0);
  EXPECT_NO_THROW(piece.forward(0, input, 3)) << "released";
}

// One layer at a time computes the same bits as the whole piece at once.
TEST(model, layer_by_layer_equals_the_whole_piece) {
  ModelConfig config;
  config.sizes = {6, 5, 4, 3, 2};
  config.seed = 3;
  Piece whole(config, {1, 3});  // neither first nor last
  Piece layered(config, {1, 3});
  whole.reserve(1, 2);
  layered.reserve(1, 2);
  const std::vector<float> input = random_inputs(2, 5, 4);
  const std::vector<float> gradient = random_inputs(2, 3, 5);
  const auto out = whole.forward(0, input, 2);
  const std::vector<float> whole_output(out.begin(), out.end());
  const std::span<float> in = layered.take_input(0, 2);
  std::copy(input.begin(), input.end(), in.begin());
  for (int layer = 1; layer < 3; ++layer) layered.forward_layer(0, layer);
  EXPECT_TRUE(std::equal(whole_output.begin(), whole_output.end(), layered.output(0).begin()));
  const auto whole_input_gradient = whole.backward_input(0, gradient);
  const std::vector<float> expected(whole_input_gradient.begin(), whole_input_gradient.end());
  whole.backward_weight(0);
  const std::span<float> top = layered.take_output_gradient(0);
  std::copy(gradient.begin(), gradient.end(), top.begin());
  for (int layer = 2; layer >= 1; --layer) layered.backward_input_layer(0, layer);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), layered.input_gradient(0).begin()));
  EXPECT_THROW(layered.backward_weight_layer(0, 1), std::logic_error) << "layer 2 comes first";
  for (int layer = 2; layer >= 1; --layer) layered.backward_weight_layer(0, layer);
  EXPECT_EQ(layered.gradients(), whole.gradients());
}

// What a piece holds, counted in its ledger: weights always, a slot's
// activations from its forward to its weight gradients, the gradients from
// the first weight gradient to zero_grad.
TEST(model, buffers_are_counted_while_held) {
  ModelConfig config;
  config.sizes = {4, 3, 2};
  Piece piece(config, {0, 2});
  piece.reserve(1, 3);
  const std::uint64_t weights = (3 * 4 + 3 + 2 * 3 + 2) * sizeof(float);
  const auto held = [&] { return piece.ledger().current().total(); };
  EXPECT_EQ(held(), weights);
  piece.forward(0, random_inputs(3, 4, 1), 3);
  EXPECT_EQ(piece.ledger().current()[MemoryCategory::activations], 3 * (4 + 3 + 2) * sizeof(float));
  piece.loss(0, std::vector<std::uint8_t>{0, 1, 0}, 1.0f);
  piece.backward_input(0, {});
  piece.backward_weight(0);
  EXPECT_EQ(held(), 2 * weights) << "the slot is free, the gradients are held";
  piece.zero_grad();
  EXPECT_EQ(held(), weights);
}

TEST(buffer_pool, gives_back_buffers_for_the_next_take_of_their_size) {
  MemoryLedger ledger;
  BufferPool pool(ledger);
  const std::span<float> a = pool.take(MemoryCategory::activations, 6);
  const std::span<float> b = pool.take(MemoryCategory::gradients, 6, true);
  EXPECT_NE(a.data(), b.data());
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](float x) { return x == 0.0F; }));
  ledger.sample();
  EXPECT_EQ(ledger.current().total(), 12 * sizeof(float));
  pool.give_back(MemoryCategory::activations, a);
  const std::span<float> c = pool.take(MemoryCategory::messages, 6);
  EXPECT_EQ(c.data(), a.data()) << "reused";
  EXPECT_EQ(pool.allocated_bytes(), 12 * sizeof(float));
  EXPECT_EQ(ledger.current()[MemoryCategory::messages], 6 * sizeof(float));
  EXPECT_THROW(pool.give_back(MemoryCategory::activations, c), std::logic_error)
      << "no activations are held";
  pool.give_back(MemoryCategory::messages, c);
  pool.give_back(MemoryCategory::gradients, b);
  EXPECT_EQ(ledger.current().total(), 0u);
  EXPECT_EQ(ledger.peak().total(), 12 * sizeof(float)) << "the sampled moment";
}

TEST(model, evaluate_agrees_with_the_slot_loss) {
  ModelConfig config;
  config.sizes = {16, 8, 4};
  const DataSplit data = synthetic(50, 0, 16, 4, 9);
  Piece model(config, {0, 2});
  const Evaluation evaluation = evaluate(model, data.train, 16);
  model.reserve(1, 50);
  std::vector<float> input(50 * 16);
  to_inputs(data.train.pixels, input);
  model.forward(0, input, 50);
  const LossResult result = model.loss(0, data.train.labels, 1.0f / 50);
  EXPECT_EQ(evaluation.samples, 50);
  EXPECT_NEAR(evaluation.loss, static_cast<double>(result.loss), 1e-5);
  EXPECT_DOUBLE_EQ(evaluation.accuracy, result.correct / 50.0);
  EXPECT_THROW(evaluate(Piece(config, {0, 1}), data.train), std::invalid_argument);
}

}  // namespace
}  // namespace pipevm::runtime
