// The layer functions: forward against a naive loop, both backward halves
// and both losses against central finite differences on small shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "gradient_check.hpp"
#include "layers.hpp"
#include "random.hpp"

namespace pipevm::runtime {
namespace {

std::vector<float> random_values(std::size_t count, std::uint64_t seed, float low = -1.0f,
                                 float high = 1.0f) {
  SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = low + (high - low) * random.uniform();
  return values;
}

// Keeps values away from ReLU's kink so that finite differences stay smooth.
std::vector<float> away_from_zero(std::vector<float> values) {
  for (float& value : values) value += value < 0.0f ? -0.2f : 0.2f;
  return values;
}

using gradient_check::numeric_gradient;

void expect_close(const std::vector<float>& analytic, const std::vector<double>& numeric,
                  double tolerance) {
  ASSERT_EQ(analytic.size(), numeric.size());
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(analytic[i]), numeric[i],
                tolerance * (1.0 + std::abs(numeric[i])))
        << "element " << i;
  }
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

constexpr int kRows = 3;
constexpr int kIn = 4;
constexpr int kOut = 5;

struct LinearCase {
  std::vector<float> in = random_values(kRows * kIn, 1);
  std::vector<float> weight = random_values(kOut * kIn, 2);
  std::vector<float> bias = random_values(kOut, 3);
  std::vector<float> out = std::vector<float>(kRows * kOut);
  // The objective is sum(out * probe), so d objective / d out = probe.
  std::vector<float> probe = random_values(kRows * kOut, 4);

  void forward() {
    linear_forward(as_matrix(std::span(out), kRows, kOut),
                   as_matrix(std::span<const float>(in), kRows, kIn),
                   as_matrix(std::span<const float>(weight), kOut, kIn),
                   as_row_vector(std::span<const float>(bias)));
  }
  double objective() {
    forward();
    return dot(out, probe);
  }
};

TEST(layers, linear_forward_matches_a_naive_loop) {
  LinearCase c;
  c.forward();
  for (int r = 0; r < kRows; ++r) {
    for (int o = 0; o < kOut; ++o) {
      double expected = static_cast<double>(c.bias[static_cast<std::size_t>(o)]);
      for (int i = 0; i < kIn; ++i) {
        expected += static_cast<double>(c.in[static_cast<std::size_t>(r * kIn + i)]) *
                    static_cast<double>(c.weight[static_cast<std::size_t>(o * kIn + i)]);
      }
      EXPECT_NEAR(static_cast<double>(c.out[static_cast<std::size_t>(r * kOut + o)]), expected,
                  1e-5);
    }
  }
}

TEST(layers, linear_backward_input_matches_finite_differences) {
  LinearCase c;
  std::vector<float> d_in(kRows * kIn, 99.0f);  // written, not accumulated: the 99s must vanish
  linear_backward_input(as_matrix(std::span(d_in), kRows, kIn),
                        as_matrix(std::span<const float>(c.probe), kRows, kOut),
                        as_matrix(std::span<const float>(c.weight), kOut, kIn));
  expect_close(d_in,
               numeric_gradient(
                   c.in, [&] { return c.objective(); }, 1e-2f),
               1e-3);
}

TEST(layers, linear_backward_weight_matches_finite_differences_and_accumulates) {
  LinearCase c;
  std::vector<float> d_weight(kOut * kIn, 0.0f);
  std::vector<float> d_bias(kOut, 0.0f);
  const auto accumulate = [&] {
    linear_backward_weight(as_matrix(std::span(d_weight), kOut, kIn),
                           as_row_vector(std::span(d_bias)),
                           as_matrix(std::span<const float>(c.probe), kRows, kOut),
                           as_matrix(std::span<const float>(c.in), kRows, kIn));
  };
  accumulate();
  expect_close(d_weight,
               numeric_gradient(
                   c.weight, [&] { return c.objective(); }, 1e-2f),
               1e-3);
  expect_close(d_bias,
               numeric_gradient(
                   c.bias, [&] { return c.objective(); }, 1e-2f),
               1e-3);

  const std::vector<float> once_weight = d_weight;
  const std::vector<float> once_bias = d_bias;
  accumulate();
  for (std::size_t i = 0; i < d_weight.size(); ++i)
    EXPECT_FLOAT_EQ(d_weight[i], 2.0f * once_weight[i]);
  for (std::size_t i = 0; i < d_bias.size(); ++i) EXPECT_FLOAT_EQ(d_bias[i], 2.0f * once_bias[i]);
}

TEST(layers, relu_forward_and_backward_match_finite_differences) {
  std::vector<float> in = away_from_zero(random_values(kRows * kOut, 5));
  std::vector<float> out(in.size());
  const std::vector<float> probe = random_values(in.size(), 6);
  const auto objective = [&] {
    relu_forward(as_matrix(std::span(out), kRows, kOut),
                 as_matrix(std::span<const float>(in), kRows, kOut));
    return dot(out, probe);
  };
  objective();
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i] > 0.0f ? in[i] : 0.0f);

  std::vector<float> d_in = probe;  // in place, as the model uses it
  relu_backward(as_matrix(std::span(d_in), kRows, kOut),
                as_matrix(std::span<const float>(d_in), kRows, kOut),
                as_matrix(std::span<const float>(out), kRows, kOut));
  expect_close(d_in, numeric_gradient(in, objective, 1e-2f), 1e-3);
}

using LossFunction = float (*)(MatrixMap, ConstMatrixMap, std::span<const std::uint8_t>, float);

void check_loss_gradient(LossFunction loss) {
  constexpr int kClasses = 6;
  std::vector<float> logits = random_values(kRows * kClasses, 7, -2.0f, 2.0f);
  const std::vector<std::uint8_t> labels = {0, 3, 5};
  std::vector<float> d_logits(logits.size());
  const float scale = 0.25f;
  const auto objective = [&] {
    std::vector<float> scratch(logits.size());
    return static_cast<double>(loss(as_matrix(std::span(scratch), kRows, kClasses),
                                    as_matrix(std::span<const float>(logits), kRows, kClasses),
                                    labels, scale));
  };
  loss(as_matrix(std::span(d_logits), kRows, kClasses),
       as_matrix(std::span<const float>(logits), kRows, kClasses), labels, scale);
  expect_close(d_logits, numeric_gradient(logits, objective, 1e-2f), 2e-3);
}

TEST(layers, cross_entropy_gradient_matches_finite_differences) {
  check_loss_gradient(&softmax_cross_entropy);
}

TEST(layers, softmax_mse_gradient_matches_finite_differences) {
  check_loss_gradient(&softmax_mse);
}

TEST(layers, losses_match_hand_computed_values) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const std::vector<std::uint8_t> label = {2};
  std::vector<float> d(3);
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0);
  const double sum = e1 + e2 + e3;
  const double p[3] = {e1 / sum, e2 / sum, e3 / sum};

  const float cross_entropy = softmax_cross_entropy(
      as_matrix(std::span(d), 1, 3), as_matrix(std::span<const float>(logits), 1, 3), label, 2.0f);
  EXPECT_NEAR(static_cast<double>(cross_entropy), 2.0 * -std::log(p[2]), 1e-5);
  EXPECT_NEAR(static_cast<double>(d[0]), 2.0 * p[0], 1e-6);
  EXPECT_NEAR(static_cast<double>(d[2]), 2.0 * (p[2] - 1.0), 1e-6);

  const float mse = softmax_mse(as_matrix(std::span(d), 1, 3),
                                as_matrix(std::span<const float>(logits), 1, 3), label, 1.0f);
  EXPECT_NEAR(static_cast<double>(mse), p[0] * p[0] + p[1] * p[1] + (p[2] - 1.0) * (p[2] - 1.0),
              1e-6);
}

TEST(layers, count_correct_takes_the_first_largest_logit) {
  const std::vector<float> logits = {0.1f, 0.9f, 0.0f,   // predicts 1
                                     0.5f, 0.5f, 0.2f,   // tie: predicts 0
                                     0.0f, 0.0f, 3.0f};  // predicts 2
  const std::vector<std::uint8_t> labels = {1, 1, 2};
  EXPECT_EQ(count_correct(as_matrix(std::span<const float>(logits), 3, 3), labels), 2);
}

}  // namespace
}  // namespace pipevm::runtime
