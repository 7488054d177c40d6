// The ViT's layers (see vit_layers.hpp). GEMMs, the per-head ones too, go to
// OpenBLAS through gemm.hpp; softmax, normalisation and reductions are
// scalar loops in a fixed order, so that the bits of a result never depend
// on where the heap put a buffer (layers.cpp says how vectorised Eigen
// reductions made them depend on it).
#include "vit_layers.hpp"

#include <cassert>
#include <cmath>
#include <vector>

#include "gemm.hpp"
#include "layers.hpp"

namespace pipevm::runtime {

namespace {

int blas_int(Eigen::Index value) {
  return static_cast<int>(value);
}

// Calls visit(image row index, pixel index, patch row index, column in
// the patch) for every pixel of every image.
template <typename Visit>
void for_each_patch_pixel(int images, int side, int patch, Visit visit) {
  const int per_side = side / patch;
  const int tokens = per_side * per_side;
  for (int image = 0; image < images; ++image) {
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        const int token = (y / patch) * per_side + x / patch;
        visit(image, y * side + x, image * tokens + token, (y % patch) * patch + x % patch);
      }
    }
  }
}

}  // namespace

void patches_from_images(MatrixMap patches, ConstMatrixMap images, int side, int patch) {
  assert(side % patch == 0 && images.cols() == side * side);
  assert(patches.cols() == patch * patch &&
         patches.rows() == images.rows() * (side / patch) * (side / patch));
  for_each_patch_pixel(blas_int(images.rows()), side, patch,
                       [&](int image, int pixel, int row, int column) {
                         patches(row, column) = images(image, pixel);
                       });
}

void images_from_patches(MatrixMap d_images, ConstMatrixMap d_patches, int side, int patch) {
  assert(d_images.cols() == side * side && d_patches.cols() == patch * patch);
  for_each_patch_pixel(blas_int(d_images.rows()), side, patch,
                       [&](int image, int pixel, int row, int column) {
                         d_images(image, pixel) = d_patches(row, column);
                       });
}

void patch_embedding_forward(MatrixMap tokens, ConstMatrixMap patches, ConstMatrixMap weight,
                             ConstRowVectorMap bias, ConstMatrixMap positions) {
  assert(tokens.rows() % positions.rows() == 0 && tokens.cols() == positions.cols());
  linear_forward(tokens, patches, weight, bias);
  for (Eigen::Index row = 0; row < tokens.rows(); ++row) {
    tokens.row(row) += positions.row(row % positions.rows());
  }
}

void patch_embedding_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, MatrixMap d_positions,
                                     ConstMatrixMap d_tokens, ConstMatrixMap patches) {
  assert(d_tokens.rows() % d_positions.rows() == 0 && d_tokens.cols() == d_positions.cols());
  linear_backward_weight(d_weight, d_bias, d_tokens, patches);
  for (Eigen::Index row = 0; row < d_tokens.rows(); ++row) {
    d_positions.row(row % d_positions.rows()) += d_tokens.row(row);
  }
}

void linear_forward_add(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                        ConstRowVectorMap bias) {
  assert(out.rows() == in.rows() && out.cols() == weight.rows() && in.cols() == weight.cols());
  out.rowwise() += bias;
  run_gemm({false, true, blas_int(out.rows()), blas_int(out.cols()), blas_int(in.cols()), in.data(),
            blas_int(in.cols()), weight.data(), blas_int(weight.cols()), 1.0f, out.data(),
            blas_int(out.cols())});
}

void layernorm_forward(MatrixMap out, MatrixMap normalized, std::span<float> inverse_std,
                       ConstMatrixMap in, ConstRowVectorMap gamma, ConstRowVectorMap beta) {
  assert(static_cast<Eigen::Index>(inverse_std.size()) >= in.rows());
  const Eigen::Index width = in.cols();
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    double sum = 0.0;
    for (Eigen::Index c = 0; c < width; ++c) sum += static_cast<double>(in(r, c));
    const double mean = sum / static_cast<double>(width);
    double squares = 0.0;
    for (Eigen::Index c = 0; c < width; ++c) {
      const double centred = static_cast<double>(in(r, c)) - mean;
      squares += centred * centred;
    }
    const double variance = squares / static_cast<double>(width);
    const auto scale =
        static_cast<float>(1.0 / std::sqrt(variance + static_cast<double>(kLayerNormEpsilon)));
    inverse_std[static_cast<std::size_t>(r)] = scale;
    for (Eigen::Index c = 0; c < width; ++c) {
      const float x_hat = static_cast<float>(static_cast<double>(in(r, c)) - mean) * scale;
      normalized(r, c) = x_hat;
      out(r, c) = x_hat * gamma(c) + beta(c);
    }
  }
}

void layernorm_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap normalized,
                              std::span<const float> inverse_std, ConstRowVectorMap gamma) {
  const Eigen::Index width = d_out.cols();
  for (Eigen::Index r = 0; r < d_out.rows(); ++r) {
    // With g = d_out * gamma: d_in = inverse_std * (g - mean(g) - x_hat * mean(g * x_hat)).
    double sum = 0.0;
    double sum_times_x_hat = 0.0;
    for (Eigen::Index c = 0; c < width; ++c) {
      const double g = static_cast<double>(d_out(r, c)) * static_cast<double>(gamma(c));
      sum += g;
      sum_times_x_hat += g * static_cast<double>(normalized(r, c));
    }
    const auto mean = static_cast<float>(sum / static_cast<double>(width));
    const auto mean_times_x_hat = static_cast<float>(sum_times_x_hat / static_cast<double>(width));
    const float scale = inverse_std[static_cast<std::size_t>(r)];
    for (Eigen::Index c = 0; c < width; ++c) {
      d_in(r, c) += scale * (d_out(r, c) * gamma(c) - mean - normalized(r, c) * mean_times_x_hat);
    }
  }
}

void layernorm_backward_weight(RowVectorMap d_gamma, RowVectorMap d_beta, ConstMatrixMap d_out,
                               ConstMatrixMap normalized) {
  for (Eigen::Index r = 0; r < d_out.rows(); ++r) {
    for (Eigen::Index c = 0; c < d_out.cols(); ++c) {
      d_gamma(c) += d_out(r, c) * normalized(r, c);
      d_beta(c) += d_out(r, c);
    }
  }
}

namespace {

// Where one sample's one head lives in the token matrices.
struct HeadView {
  int tokens, head_width, width;
  Eigen::Index first_row;  // the sample's first token
  int head;
  const float* query(const float* qkv) const { return at(qkv, 3 * width, head * head_width); }
  const float* key(const float* qkv) const { return at(qkv, 3 * width, width + head * head_width); }
  const float* value(const float* qkv) const {
    return at(qkv, 3 * width, 2 * width + head * head_width);
  }
  template <typename Float>
  Float* at(Float* matrix, int row_stride, int column) const {
    return matrix + first_row * row_stride + column;
  }
};

}  // namespace

void attention_forward(MatrixMap context, std::span<float> probabilities, ConstMatrixMap qkv,
                       int tokens, int heads) {
  const int width = blas_int(context.cols());
  assert(width % heads == 0 && qkv.cols() == 3 * width && context.rows() == qkv.rows());
  const int head_width = width / heads;
  const int samples = blas_int(qkv.rows()) / tokens;
  const std::size_t square = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(tokens);
  assert(probabilities.size() >= static_cast<std::size_t>(samples * heads) * square);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
  for (int sample = 0; sample < samples; ++sample) {
    for (int head = 0; head < heads; ++head) {
      const HeadView view{tokens, head_width, width, Eigen::Index{sample} * tokens, head};
      float* p = probabilities.data() + static_cast<std::size_t>(sample * heads + head) * square;
      run_gemm({false, true, tokens, tokens, head_width, view.query(qkv.data()), 3 * width,
                view.key(qkv.data()), 3 * width, 0.0f, p, tokens});
      for (int i = 0; i < tokens; ++i) {
        float* row = p + static_cast<std::ptrdiff_t>(i) * tokens;
        float maximum = row[0] * scale;
        for (int j = 0; j < tokens; ++j) {
          row[j] *= scale;
          maximum = std::max(maximum, row[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < tokens; ++j) {
          row[j] = std::exp(row[j] - maximum);
          sum += row[j];
        }
        for (int j = 0; j < tokens; ++j) row[j] /= sum;
      }
      run_gemm({false, false, tokens, head_width, tokens, p, tokens, view.value(qkv.data()),
                3 * width, 0.0f, view.at(context.data(), width, head * head_width), width});
    }
  }
}

void attention_backward(MatrixMap d_qkv, ConstMatrixMap d_context, ConstMatrixMap qkv,
                        std::span<const float> probabilities, int tokens, int heads) {
  const int width = blas_int(d_context.cols());
  assert(d_qkv.cols() == 3 * width && d_qkv.rows() == qkv.rows());
  const int head_width = width / heads;
  const int samples = blas_int(qkv.rows()) / tokens;
  const std::size_t square = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(tokens);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_width));
  std::vector<float> d_scores(square);
  for (int sample = 0; sample < samples; ++sample) {
    for (int head = 0; head < heads; ++head) {
      const HeadView view{tokens, head_width, width, Eigen::Index{sample} * tokens, head};
      const float* p =
          probabilities.data() + static_cast<std::size_t>(sample * heads + head) * square;
      const float* d_ctx = view.at(d_context.data(), width, head * head_width);
      float* d_q = view.at(d_qkv.data(), 3 * width, head * head_width);
      float* d_k = view.at(d_qkv.data(), 3 * width, width + head * head_width);
      float* d_v = view.at(d_qkv.data(), 3 * width, 2 * width + head * head_width);
      // d_v = p^T d_ctx; d_p = d_ctx v^T.
      run_gemm(
          {true, false, tokens, head_width, tokens, p, tokens, d_ctx, width, 0.0f, d_v, 3 * width});
      run_gemm({false, true, tokens, tokens, head_width, d_ctx, width, view.value(qkv.data()),
                3 * width, 0.0f, d_scores.data(), tokens});
      // Through the softmax, row by row, and the scale: d_s = scale * p * (d_p - <d_p, p>).
      for (int i = 0; i < tokens; ++i) {
        float* d_row = d_scores.data() + static_cast<std::ptrdiff_t>(i) * tokens;
        const float* p_row = p + static_cast<std::ptrdiff_t>(i) * tokens;
        float inner = 0.0f;
        for (int j = 0; j < tokens; ++j) inner += d_row[j] * p_row[j];
        for (int j = 0; j < tokens; ++j) d_row[j] = scale * p_row[j] * (d_row[j] - inner);
      }
      // d_q = d_s k; d_k = d_s^T q.
      run_gemm({false, false, tokens, head_width, tokens, d_scores.data(), tokens,
                view.key(qkv.data()), 3 * width, 0.0f, d_q, 3 * width});
      run_gemm({true, false, tokens, head_width, tokens, d_scores.data(), tokens,
                view.query(qkv.data()), 3 * width, 0.0f, d_k, 3 * width});
    }
  }
}

namespace {
constexpr float kInverseSqrt2 = 0.70710678118654752f;
constexpr float kInverseSqrt2Pi = 0.39894228040143268f;
}  // namespace

void gelu_forward(MatrixMap out, ConstMatrixMap in) {
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    for (Eigen::Index c = 0; c < in.cols(); ++c) {
      const float x = in(r, c);
      out(r, c) = 0.5f * x * (1.0f + std::erf(x * kInverseSqrt2));
    }
  }
}

void gelu_backward(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap in, ConstMatrixMap out) {
  for (Eigen::Index r = 0; r < in.rows(); ++r) {
    for (Eigen::Index c = 0; c < in.cols(); ++c) {
      const float x = in(r, c);
      const float cdf = x != 0.0f ? out(r, c) / x : 0.5f;
      const float density = kInverseSqrt2Pi * std::exp(-0.5f * x * x);
      d_in(r, c) = d_out(r, c) * (cdf + x * density);
    }
  }
}

void mean_over_tokens_forward(MatrixMap out, ConstMatrixMap in, int tokens) {
  assert(in.rows() == out.rows() * tokens && in.cols() == out.cols());
  for (Eigen::Index sample = 0; sample < out.rows(); ++sample) {
    for (Eigen::Index c = 0; c < out.cols(); ++c) {
      float sum = 0.0f;
      for (int t = 0; t < tokens; ++t) sum += in(sample * tokens + t, c);
      out(sample, c) = sum / static_cast<float>(tokens);
    }
  }
}

void mean_over_tokens_backward(MatrixMap d_in, ConstMatrixMap d_out, int tokens) {
  assert(d_in.rows() == d_out.rows() * tokens && d_in.cols() == d_out.cols());
  for (Eigen::Index row = 0; row < d_in.rows(); ++row) {
    d_in.row(row) = d_out.row(row / tokens) / static_cast<float>(tokens);
  }
}

}  // namespace pipevm::runtime
