// The ViT's layer functions (runtime/vit_layers.hpp): every backward against
// central finite differences of sum(output * probe) on small shapes, weight
// gradients also for accumulating (+=), and the patch layout by hand.
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

TEST(vit, linear_forward_add_adds_to_the_residual) {
  constexpr int kRows = 3, kIn = 4, kOut = 2;
  const std::vector<float> in = random_values(kRows * kIn, 1);
  const std::vector<float> weight = random_values(kOut * kIn, 2);
  const std::vector<float> bias = random_values(kOut, 3);
  const std::vector<float> residual = random_values(kRows * kOut, 4);
  std::vector<float> out = residual;
  linear_forward_add(view(out, kRows, kOut), cview(in, kRows, kIn), cview(weight, kOut, kIn),
                     as_row_vector(std::span<const float>(bias)));
  for (int r = 0; r < kRows; ++r) {
    for (int o = 0; o < kOut; ++o) {
      double expected = static_cast<double>(residual[static_cast<std::size_t>(r * kOut + o)] +
                                            bias[static_cast<std::size_t>(o)]);
      for (int i = 0; i < kIn; ++i) {
        expected += static_cast<double>(in[static_cast<std::size_t>(r * kIn + i)] *
                                        weight[static_cast<std::size_t>(o * kIn + i)]);
      }
      EXPECT_NEAR(out[static_cast<std::size_t>(r * kOut + o)], expected, 1e-5);
    }
  }
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

TEST(vit, layernorm_backward_input_matches_finite_differences_and_adds) {
  LayerNormCase c;
  c.objective();
  std::vector<float> d_in(c.in.size(), 1.0f);  // added to: the 1s must stay
  layernorm_backward_input(view(d_in, c.kRows, c.kWidth), cview(c.probe, c.kRows, c.kWidth),
                           cview(c.normalized, c.kRows, c.kWidth),
                           std::span<const float>(c.inverse_std),
                           as_row_vector(std::span<const float>(c.gamma)));
  for (float& value : d_in) value -= 1.0f;
  expect_gradient(d_in, c.in, [&] { return c.objective(); });
}

TEST(vit, layernorm_backward_weight_matches_finite_differences) {
  LayerNormCase c;
  c.objective();
  std::vector<float> d_gamma(c.gamma.size(), 0.0f);
  std::vector<float> d_beta(c.beta.size(), 0.0f);
  layernorm_backward_weight(as_row_vector(std::span(d_gamma)), as_row_vector(std::span(d_beta)),
                            cview(c.probe, c.kRows, c.kWidth),
                            cview(c.normalized, c.kRows, c.kWidth));
  expect_gradient(d_gamma, c.gamma, [&] { return c.objective(); });
  expect_gradient(d_beta, c.beta, [&] { return c.objective(); });
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

TEST(vit, gelu_is_the_erf_form_and_backward_matches_finite_differences) {
  constexpr int kRows = 2, kCols = 5;
  std::vector<float> in = random_values(kRows * kCols, 1, -3.0f, 3.0f);
  std::vector<float> probe = random_values(kRows * kCols, 2);
  std::vector<float> out(in.size());
  const auto objective = [&] {
    gelu_forward(view(out, kRows, kCols), cview(in, kRows, kCols));
    return dot(out, probe);
  };
  std::vector<float> one = {1.0f};
  std::vector<float> gelu_one = {0.0f};
  gelu_forward(view(gelu_one, 1, 1), cview(one, 1, 1));
  EXPECT_NEAR(gelu_one[0], 0.8413447f, 1e-6);  // 1 * Phi(1); the tanh form gives 0.8411920
  objective();
  const std::vector<float> forward_out = out;
  std::vector<float> d_in = probe;  // in place
  gelu_backward(view(d_in, kRows, kCols), cview(d_in, kRows, kCols), cview(in, kRows, kCols),
                cview(forward_out, kRows, kCols));
  expect_gradient(d_in, in, objective);
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
