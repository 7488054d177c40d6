// The ViT's layer functions (runtime/vit_layers.hpp): every backward against
// central finite differences of sum(output * probe) on small shapes, weight
// gradients also for accumulating (+=), what the fused passes add (bias,
// residual, the GELU and its slope, LayerNorm's gradients), and the patch
// layout by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "gradient_check.hpp"
#include "vit_layers.hpp"

namespace pipevm::runtime {
namespace {

using gradient_check::dot;
using gradient_check::expect_gradient;
using gradient_check::random_values;

MatrixMap view(std::vector<float>& v, int rows, int cols) {
  return as_matrix(std::span(v), rows, cols);
}
ConstMatrixMap cview(const std::vector<float>& v, int rows, int cols) {
  return as_matrix(std::span<const float>(v), rows, cols);
}

TEST(vit, patches_follow_the_image_row_major_and_scatter_back) {
  constexpr int kSide = 4;
  constexpr int kPatch = 2;
  std::vector<float> images(2 * kSide * kSide);
  for (std::size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i);
  std::vector<float> patches(2 * 4 * kPatch * kPatch);
  patches_from_images(view(patches, 8, 4), cview(images, 2, 16), kSide, kPatch);
  // Token 1 of image 0 is the top-right patch: pixels (0,2) (0,3) (1,2) (1,3).
  EXPECT_EQ(patches[4], 2.0f);
  EXPECT_EQ(patches[5], 3.0f);
  EXPECT_EQ(patches[6], 6.0f);
  EXPECT_EQ(patches[7], 7.0f);
  // Token 0 of image 1 starts at the image's first pixel.
  EXPECT_EQ(patches[16], 16.0f);
  std::vector<float> back(images.size(), -1.0f);
  images_from_patches(view(back, 2, 16), cview(patches, 8, 4), kSide, kPatch);
  EXPECT_EQ(back, images);
}

TEST(vit, patch_embedding_weight_gradients_match_finite_differences_and_accumulate) {
  constexpr int kTokens = 3, kPixels = 4, kWidth = 5, kRows = 2 * kTokens;
  std::vector<float> patches = random_values(kRows * kPixels, 1);
  std::vector<float> weight = random_values(kWidth * kPixels, 2);
  std::vector<float> bias = random_values(kWidth, 3);
  std::vector<float> positions = random_values(kTokens * kWidth, 4);
  std::vector<float> probe = random_values(kRows * kWidth, 5);
  std::vector<float> tokens(kRows * kWidth);
  const auto objective = [&] {
    patch_embedding_forward(
        view(tokens, kRows, kWidth), cview(patches, kRows, kPixels), cview(weight, kWidth, kPixels),
        as_row_vector(std::span<const float>(bias)), cview(positions, kTokens, kWidth));
    return dot(tokens, probe);
  };
  std::vector<float> d_weight(weight.size(), 0.0f);
  std::vector<float> d_bias(bias.size(), 0.0f);
  std::vector<float> d_positions(positions.size(), 0.0f);
  for (int pass = 0; pass < 2; ++pass) {
    patch_embedding_backward_weight(view(d_weight, kWidth, kPixels),
                                    as_row_vector(std::span(d_bias)),
                                    view(d_positions, kTokens, kWidth), cview(probe, kRows, kWidth),
                                    cview(patches, kRows, kPixels));
  }
  for (float& value : d_weight) value /= 2.0f;
  for (float& value : d_bias) value /= 2.0f;
  for (float& value : d_positions) value /= 2.0f;
  expect_gradient(d_weight, weight, objective);
  expect_gradient(d_bias, bias, objective);
  expect_gradient(d_positions, positions, objective);
}

// out[r][o] = start[r][o] + bias[o] + in[r] . weight[o], in double.
std::vector<double> expected_linear(const std::vector<float>& start, const std::vector<float>& in,
                                    const std::vector<float>& weight,
                                    const std::vector<float>& bias, int rows, int inputs,
                                    int outputs) {
  std::vector<double> out(static_cast<std::size_t>(rows * outputs));
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < outputs; ++o) {
      double sum = static_cast<double>(start[static_cast<std::size_t>(r * outputs + o)]) +
                   static_cast<double>(bias[static_cast<std::size_t>(o)]);
      for (int i = 0; i < inputs; ++i) {
        sum += static_cast<double>(in[static_cast<std::size_t>(r * inputs + i)]) *
               static_cast<double>(weight[static_cast<std::size_t>(o * inputs + i)]);
      }
      out[static_cast<std::size_t>(r * outputs + o)] = sum;
    }
  }
  return out;
}

TEST(vit, linear_forward_adds_bias_and_residual_in_place_or_apart) {
  constexpr int kRows = 5, kIn = 19, kOut = 37;
  const std::vector<float> in = random_values(kRows * kIn, 1);
  const std::vector<float> weight = random_values(kOut * kIn, 2);
  const std::vector<float> bias = random_values(kOut, 3);
  const std::vector<float> residual = random_values(kRows * kOut, 4);
  const std::vector<double> expected =
      expected_linear(residual, in, weight, bias, kRows, kIn, kOut);
  std::vector<float> in_place = residual;
  vit_linear_forward_residual(view(in_place, kRows, kOut), cview(in, kRows, kIn),
                              cview(weight, kOut, kIn), as_row_vector(std::span<const float>(bias)),
                              cview(in_place, kRows, kOut));
  std::vector<float> apart(kRows * kOut, 7.0f);  // written: the 7s must vanish
  vit_linear_forward_residual(view(apart, kRows, kOut), cview(in, kRows, kIn),
                              cview(weight, kOut, kIn), as_row_vector(std::span<const float>(bias)),
                              cview(residual, kRows, kOut));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(in_place[i], expected[i], 1e-5) << i;
    EXPECT_EQ(apart[i], in_place[i]) << i;
  }
  std::vector<float> plain(kRows * kOut, 7.0f);
  vit_linear_forward(view(plain, kRows, kOut), cview(in, kRows, kIn), cview(weight, kOut, kIn),
                     as_row_vector(std::span<const float>(bias)));
  const std::vector<double> without =
      expected_linear(std::vector<float>(plain.size(), 0.0f), in, weight, bias, kRows, kIn, kOut);
  for (std::size_t i = 0; i < without.size(); ++i) EXPECT_NEAR(plain[i], without[i], 1e-5) << i;
}

TEST(vit, linear_backward_matches_finite_differences_and_accumulates_the_bias_gradient) {
  constexpr int kRows = 7, kIn = 5, kOut = 18;
  std::vector<float> in = random_values(kRows * kIn, 1);
  std::vector<float> weight = random_values(kOut * kIn, 2);
  std::vector<float> bias = random_values(kOut, 3);
  const std::vector<float> probe = random_values(kRows * kOut, 4);
  std::vector<float> out(kRows * kOut);
  const auto objective = [&] {
    vit_linear_forward(view(out, kRows, kOut), cview(in, kRows, kIn), cview(weight, kOut, kIn),
                       as_row_vector(std::span<const float>(bias)));
    return dot(out, probe);
  };
  std::vector<float> d_in(in.size(), 9.0f);  // written
  vit_linear_backward_input(view(d_in, kRows, kIn), cview(probe, kRows, kOut),
                            cview(weight, kOut, kIn));
  std::vector<float> d_weight(weight.size(), 0.0f);
  std::vector<float> d_bias(bias.size(), 0.0f);
  for (int pass = 0; pass < 2; ++pass) {
    vit_linear_backward_weight(view(d_weight, kOut, kIn), as_row_vector(std::span(d_bias)),
                               cview(probe, kRows, kOut), cview(in, kRows, kIn));
  }
  for (float& value : d_weight) value /= 2.0f;
  for (float& value : d_bias) value /= 2.0f;
  expect_gradient(d_in, in, objective);
  expect_gradient(d_weight, weight, objective);
  expect_gradient(d_bias, bias, objective);
}

struct LayerNormCase {
  static constexpr int kRows = 3, kWidth = 6;
  std::vector<float> in = random_values(kRows * kWidth, 1, -2.0f, 2.0f);
  std::vector<float> gamma = random_values(kWidth, 2, 0.5f, 1.5f);
  std::vector<float> beta = random_values(kWidth, 3);
  std::vector<float> probe = random_values(kRows * kWidth, 4);
  std::vector<float> out = std::vector<float>(kRows * kWidth);
  std::vector<float> normalized = std::vector<float>(kRows * kWidth);
  std::vector<float> inverse_std = std::vector<float>(kRows);
  double objective() {
    layernorm_forward(view(out, kRows, kWidth), view(normalized, kRows, kWidth),
                      std::span(inverse_std), cview(in, kRows, kWidth),
                      as_row_vector(std::span<const float>(gamma)),
                      as_row_vector(std::span<const float>(beta)));
    return dot(out, probe);
  }
};

TEST(vit, layernorm_normalises_each_row) {
  LayerNormCase c;
  c.objective();
  for (int r = 0; r < LayerNormCase::kRows; ++r) {
    double sum = 0.0, squares = 0.0;
    for (int k = 0; k < LayerNormCase::kWidth; ++k) {
      const double x = c.normalized[static_cast<std::size_t>(r * LayerNormCase::kWidth + k)];
      sum += x;
      squares += x * x;
    }
    EXPECT_NEAR(sum, 0.0, 1e-5);
    EXPECT_NEAR(squares / LayerNormCase::kWidth, 1.0, 1e-3);
  }
}

TEST(vit, layernorm_backward_matches_finite_differences_and_adds_the_residual) {
  LayerNormCase c;
  c.objective();
  const std::vector<float> residual(c.in.size(), 1.0f);  // the 1s must come through
  std::vector<float> d_in(c.in.size(), 5.0f);            // written
  std::vector<float> d_gamma(c.gamma.size(), 3.0f);      // written, not added
  std::vector<float> d_beta(c.beta.size(), 3.0f);
  layernorm_backward(view(d_in, c.kRows, c.kWidth), as_row_vector(std::span(d_gamma)),
                     as_row_vector(std::span(d_beta)), cview(c.probe, c.kRows, c.kWidth),
                     cview(c.normalized, c.kRows, c.kWidth), std::span<const float>(c.inverse_std),
                     as_row_vector(std::span<const float>(c.gamma)), residual);
  for (float& value : d_in) value -= 1.0f;
  expect_gradient(d_in, c.in, [&] { return c.objective(); });
  expect_gradient(d_gamma, c.gamma, [&] { return c.objective(); });
  expect_gradient(d_beta, c.beta, [&] { return c.objective(); });
  // The residual may be d_in's own memory.
  std::vector<float> in_place(c.in.size(), 1.0f);
  layernorm_backward(view(in_place, c.kRows, c.kWidth), as_row_vector(std::span(d_gamma)),
                     as_row_vector(std::span(d_beta)), cview(c.probe, c.kRows, c.kWidth),
                     cview(c.normalized, c.kRows, c.kWidth), std::span<const float>(c.inverse_std),
                     as_row_vector(std::span<const float>(c.gamma)), in_place);
  for (std::size_t i = 0; i < d_in.size(); ++i) EXPECT_EQ(in_place[i] - 1.0f, d_in[i]) << i;
}

TEST(vit, attention_probabilities_sum_to_one_and_backward_matches_finite_differences) {
  constexpr int kSamples = 2, kTokens = 3, kHeads = 2, kWidth = 4, kRows = kSamples * kTokens;
  std::vector<float> qkv = random_values(kRows * 3 * kWidth, 1, -1.5f, 1.5f);
  std::vector<float> probe = random_values(kRows * kWidth, 2);
  std::vector<float> context(kRows * kWidth);
  std::vector<float> probabilities(kSamples * kHeads * kTokens * kTokens);
  const auto objective = [&] {
    attention_forward(view(context, kRows, kWidth), std::span(probabilities),
                      cview(qkv, kRows, 3 * kWidth), kTokens, kHeads);
    return dot(context, probe);
  };
  objective();
  for (std::size_t row = 0; row < probabilities.size() / kTokens; ++row) {
    double sum = 0.0;
    for (std::size_t j = 0; j < kTokens; ++j) {
      sum += static_cast<double>(probabilities[row * kTokens + j]);
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  std::vector<float> d_qkv(qkv.size(), 7.0f);  // written: the 7s must vanish
  attention_backward(view(d_qkv, kRows, 3 * kWidth), cview(probe, kRows, kWidth),
                     cview(qkv, kRows, 3 * kWidth), std::span<const float>(probabilities), kTokens,
                     kHeads);
  expect_gradient(d_qkv, qkv, objective);
}

TEST(vit, gelu_after_a_linear_layer_is_the_erf_form_and_its_slope_its_derivative) {
  // One input, weight 1, bias 0: the linear layer passes x through.
  const std::vector<float> x = {-9.0f, -4.0f, -1.5f, -0.3f, 0.0f, 1e-3f, 0.7f, 1.0f, 2.5f, 6.0f};
  const int rows = static_cast<int>(x.size());
  const std::vector<float> one = {1.0f};
  const std::vector<float> zero = {0.0f};
  std::vector<float> out(x.size()), slope(x.size());
  vit_linear_gelu_forward(view(slope, rows, 1), view(out, rows, 1), cview(x, rows, 1),
                          cview(one, 1, 1), as_row_vector(std::span<const float>(zero)));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double phi = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double density = std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846);
    EXPECT_NEAR(out[i], v * phi, 3e-7 * (1.0 + std::abs(v))) << v;
    EXPECT_NEAR(slope[i], phi + v * density, 3e-7) << v;
  }
  EXPECT_NEAR(out[7], 0.8413447f, 1e-6);  // 1 * Phi(1); the tanh form gives 0.8411920
  // Backward through a linear layer (2 -> 3) and the GELU before it.
  constexpr int kRows = 4, kIn = 3, kOut = 2;
  std::vector<float> pre = random_values(kRows * kIn, 1, -3.0f, 3.0f);
  const std::vector<float> weight = random_values(kOut * kIn, 2);
  const std::vector<float> probe = random_values(kRows * kOut, 3);
  std::vector<float> activated(pre.size()), pre_slope(pre.size()), top(kRows * kOut);
  const std::vector<float> identity = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const std::vector<float> no_bias(kIn, 0.0f);
  const std::vector<float> no_bias_out(kOut, 0.0f);
  const auto objective = [&] {
    vit_linear_gelu_forward(view(pre_slope, kRows, kIn), view(activated, kRows, kIn),
                            cview(pre, kRows, kIn), cview(identity, kIn, kIn),
                            as_row_vector(std::span<const float>(no_bias)));
    vit_linear_forward(view(top, kRows, kOut), cview(activated, kRows, kIn),
                       cview(weight, kOut, kIn),
                       as_row_vector(std::span<const float>(no_bias_out)));
    return dot(top, probe);
  };
  objective();
  std::vector<float> d_pre(pre.size(), 4.0f);  // written
  vit_linear_gelu_backward_input(view(d_pre, kRows, kIn), cview(probe, kRows, kOut),
                                 cview(weight, kOut, kIn), cview(pre_slope, kRows, kIn));
  expect_gradient(d_pre, pre, objective);
}

TEST(vit, mean_over_tokens_backward_matches_finite_differences) {
  constexpr int kSamples = 2, kTokens = 3, kWidth = 4;
  std::vector<float> in = random_values(kSamples * kTokens * kWidth, 1);
  std::vector<float> probe = random_values(kSamples * kWidth, 2);
  std::vector<float> out(kSamples * kWidth);
  const auto objective = [&] {
    mean_over_tokens_forward(view(out, kSamples, kWidth), cview(in, kSamples * kTokens, kWidth),
                             kTokens);
    return dot(out, probe);
  };
  std::vector<float> d_in(in.size(), 3.0f);
  mean_over_tokens_backward(view(d_in, kSamples * kTokens, kWidth), cview(probe, kSamples, kWidth),
                            kTokens);
  expect_gradient(d_in, in, objective);
}

}  // namespace
}  // namespace pipevm::runtime
