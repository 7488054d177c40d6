// The ViT's layers (see vit_layers.hpp): Eigen views in, the ViT's kernels
// (vit_kernels.hpp) underneath. Each kernel gives the same bits wherever the
// heap put a buffer; the few loops left here (patches, positions, pooling)
// are element by element in a fixed order for the same reason (layers.cpp
// says how vectorised Eigen reductions made bits depend on addresses).
#include "vit_layers.hpp"

#include <cassert>

namespace pipevm::runtime {

namespace {

int to_int(Eigen::Index value) {
  return static_cast<int>(value);
}

// Calls copy(image, first pixel in the image, patch row index, first column
// in the patch) for every run of `patch` pixels that one image row has in one
// patch.
template <typename Copy>
void for_each_patch_run(int images, int side, int patch, Copy copy) {
  const int per_side = side / patch;
  const int tokens = per_side * per_side;
  for (int image = 0; image < images; ++image) {
    for (int y = 0; y < side; ++y) {
      const int token_row = image * tokens + (y / patch) * per_side;
      const int column = (y % patch) * patch;
      for (int px = 0; px < per_side; ++px)
        copy(image, y * side + px * patch, token_row + px, column);
    }
  }
}

// out = left * right (right transposed: right^T), all row-major and whole.
RowMajorGemm product(MatrixMap out, ConstMatrixMap left, ConstMatrixMap right,
                     bool right_transposed) {
  const Eigen::Index shared = right_transposed ? right.cols() : right.rows();
  assert(out.rows() == left.rows() && left.cols() == shared &&
         out.cols() == (right_transposed ? right.rows() : right.cols()));
  return {
      false,       right_transposed,    to_int(out.rows()), to_int(out.cols()),   to_int(shared),
      left.data(), to_int(left.cols()), right.data(),       to_int(right.cols()), 0.0f,
      out.data(),  to_int(out.cols())};
}

RowMajorGemm times_transposed(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight) {
  return product(out, in, weight, true);
}

RowMajorGemm times(MatrixMap out, ConstMatrixMap left, ConstMatrixMap right) {
  return product(out, left, right, false);
}

}  // namespace

void patches_from_images(MatrixMap patches, ConstMatrixMap images, int side, int patch) {
  assert(side % patch == 0 && images.cols() == side * side);
  assert(patches.cols() == patch * patch &&
         patches.rows() == images.rows() * (side / patch) * (side / patch));
  for_each_patch_run(to_int(images.rows()), side, patch,
                     [&](int image, int pixel, int row, int column) {
                       for (int i = 0; i < patch; ++i) {
                         patches(row, column + i) = images(image, pixel + i);
                       }
                     });
}

void images_from_patches(MatrixMap d_images, ConstMatrixMap d_patches, int side, int patch) {
  assert(d_images.cols() == side * side && d_patches.cols() == patch * patch);
  for_each_patch_run(to_int(d_images.rows()), side, patch,
                     [&](int image, int pixel, int row, int column) {
                       for (int i = 0; i < patch; ++i) {
                         d_images(image, pixel + i) = d_patches(row, column + i);
                       }
                     });
}

void patch_embedding_forward(MatrixMap tokens, ConstMatrixMap patches, ConstMatrixMap weight,
                             ConstRowVectorMap bias, ConstMatrixMap positions) {
  assert(tokens.rows() % positions.rows() == 0 && tokens.cols() == positions.cols());
  ProductArgs args{times_transposed(tokens, patches, weight)};
  args.bias = bias.data();
  args.addend = positions.data();
  args.ld_addend = to_int(positions.cols());
  args.addend_period = to_int(positions.rows());
  vit_kernels().product(args);
}

void patch_embedding_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, MatrixMap d_positions,
                                     ConstMatrixMap d_tokens, ConstMatrixMap patches) {
  assert(d_tokens.rows() % d_positions.rows() == 0 && d_tokens.cols() == d_positions.cols());
  vit_linear_backward_weight(d_weight, d_bias, d_tokens, patches);
  for (Eigen::Index row = 0; row < d_tokens.rows(); ++row) {
    d_positions.row(row % d_positions.rows()) += d_tokens.row(row);
  }
}

void vit_linear_forward(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                        ConstRowVectorMap bias) {
  ProductArgs args{times_transposed(out, in, weight)};
  args.bias = bias.data();
  vit_kernels().product(args);
}

void vit_linear_forward_residual(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                                 ConstRowVectorMap bias, ConstMatrixMap residual) {
  assert(residual.rows() == out.rows() && residual.cols() == out.cols());
  ProductArgs args{times_transposed(out, in, weight)};
  args.bias = bias.data();
  if (residual.data() == out.data()) {
    args.product.beta = 1.0f;
  } else {
    args.addend = residual.data();
    args.ld_addend = to_int(residual.cols());
  }
  vit_kernels().product(args);
}

void vit_linear_gelu_forward(MatrixMap slope, MatrixMap out, ConstMatrixMap in,
                             ConstMatrixMap weight, ConstRowVectorMap bias) {
  assert(out.rows() == slope.rows() && out.cols() == slope.cols());
  ProductArgs args{times_transposed(slope, in, weight)};
  args.bias = bias.data();
  args.epilogue = Epilogue::gelu;
  args.activated = out.data();
  args.ld_activated = to_int(out.cols());
  vit_kernels().product(args);
}

void vit_linear_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap weight) {
  vit_kernels().product(ProductArgs{times(d_in, d_out, weight)});
}

void vit_linear_gelu_backward_input(MatrixMap d_pre, ConstMatrixMap d_out, ConstMatrixMap weight,
                                    ConstMatrixMap slope) {
  assert(slope.rows() == d_pre.rows() && slope.cols() == d_pre.cols());
  ProductArgs args{times(d_pre, d_out, weight)};
  args.epilogue = Epilogue::times;
  args.factor = slope.data();
  args.ld_factor = to_int(slope.cols());
  vit_kernels().product(args);
}

void vit_linear_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, ConstMatrixMap d_out,
                                ConstMatrixMap in) {
  assert(d_weight.rows() == d_out.cols() && d_weight.cols() == in.cols() &&
         d_out.rows() == in.rows() && d_bias.size() == d_weight.rows());
  ProductArgs args{{true, false, to_int(d_weight.rows()), to_int(d_weight.cols()),
                    to_int(in.rows()), d_out.data(), to_int(d_out.cols()), in.data(),
                    to_int(in.cols()), 1.0f, d_weight.data(), to_int(d_weight.cols())}};
  args.bias_gradient = d_bias.data();
  vit_kernels().product(args);
}

void layernorm_forward(MatrixMap out, MatrixMap normalized, std::span<float> inverse_std,
                       ConstMatrixMap in, ConstRowVectorMap gamma, ConstRowVectorMap beta) {
  assert(static_cast<Eigen::Index>(inverse_std.size()) >= in.rows());
  assert(out.rows() == in.rows() && normalized.rows() == in.rows() && gamma.size() == in.cols());
  vit_kernels().layernorm_forward({to_int(in.rows()), to_int(in.cols()), in.data(), out.data(),
                                   normalized.data(), inverse_std.data(), gamma.data(),
                                   beta.data()});
}

void layernorm_backward(MatrixMap d_in, RowVectorMap d_gamma, RowVectorMap d_beta,
                        ConstMatrixMap d_out, ConstMatrixMap normalized,
                        std::span<const float> inverse_std, ConstRowVectorMap gamma,
                        std::span<const float> residual) {
  assert(d_in.rows() == d_out.rows() && d_in.cols() == d_out.cols() && d_in.data() != d_out.data());
  assert(residual.empty() || residual.size() >= static_cast<std::size_t>(d_in.size()));
  vit_kernels().layernorm_backward({to_int(d_out.rows()), to_int(d_out.cols()), d_out.data(),
                                    normalized.data(), inverse_std.data(), gamma.data(),
                                    residual.empty() ? nullptr : residual.data(), d_in.data(),
                                    d_gamma.data(), d_beta.data()});
}

void attention_forward(MatrixMap context, std::span<float> probabilities, ConstMatrixMap qkv,
                       int tokens, int heads) {
  const int width = to_int(context.cols());
  const int samples = to_int(qkv.rows()) / tokens;
  assert(width % heads == 0 && qkv.cols() == 3 * width && context.rows() == qkv.rows());
  assert(probabilities.size() >=
         static_cast<std::size_t>(samples) * heads * tokens * static_cast<std::size_t>(tokens));
  AttentionArgs args{samples, tokens, heads, width, qkv.data(), probabilities.data()};
  args.context = context.data();
  vit_kernels().attention_forward(args);
}

void attention_backward(MatrixMap d_qkv, ConstMatrixMap d_context, ConstMatrixMap qkv,
                        std::span<const float> probabilities, int tokens, int heads) {
  const int width = to_int(d_context.cols());
  assert(d_qkv.cols() == 3 * width && d_qkv.rows() == qkv.rows());
  AttentionArgs args{to_int(qkv.rows()) / tokens, tokens, heads, width, qkv.data()};
  args.saved_probabilities = probabilities.data();
  args.d_context = d_context.data();
  args.d_qkv = d_qkv.data();
  vit_kernels().attention_backward(args);
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
