// The ViT's layers as free functions, llm.c style: outputs first, shapes
// explicit (token matrices are (samples * tokens) x width, row-major, one
// sample's tokens after another), no allocation. Layers with weights come in
// three parts: forward, backward_input (the gradient the layer below needs)
// and backward_weight (weight gradients, accumulated with +=, as
// micro-batches sum into them). Layers without weights (attention's scores
// and softmax, GELU, pooling) do all their backward in one function. The
// linear layer itself is layers.hpp's. Leaves out dropout, masks and any
// model composition (vit_model.hpp).
#pragma once

#include <span>

#include "tensor.hpp"

namespace pipevm::runtime {

// --- patch embedding -------------------------------------------------------
// Images are rows x (side * side) pixels; a patch is patch x patch pixels,
// patches in row-major order over the image, pixels row-major in the patch:
// patches is (rows * (side / patch)^2) x (patch * patch).
void patches_from_images(MatrixMap patches, ConstMatrixMap images, int side, int patch);
// The inverse scatter: d_images = the patch gradients put back in place.
void images_from_patches(MatrixMap d_images, ConstMatrixMap d_patches, int side, int patch);
// tokens = patches * weight^T + bias + positions (positions: tokens x width,
// the same for every sample).
void patch_embedding_forward(MatrixMap tokens, ConstMatrixMap patches, ConstMatrixMap weight,
                             ConstRowVectorMap bias, ConstMatrixMap positions);
// d_weight += d_tokens^T * patches; d_bias += column sums; d_positions +=
// the sum over samples of each token's gradient.
void patch_embedding_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, MatrixMap d_positions,
                                     ConstMatrixMap d_tokens, ConstMatrixMap patches);

// --- residual linear -------------------------------------------------------
// out += in * weight^T + bias: a linear layer whose output adds into a
// residual stream that `out` already holds (its backward is layers.hpp's).
void linear_forward_add(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                        ConstRowVectorMap bias);

// --- layer normalisation (over each row, eps 1e-5 as PyTorch's) --------------
inline constexpr float kLayerNormEpsilon = 1e-5f;
// normalized = (in - mean) * inverse_std, out = normalized * gamma + beta;
// inverse_std holds one value per row. out may be in (each element is read
// before it is written).
void layernorm_forward(MatrixMap out, MatrixMap normalized, std::span<float> inverse_std,
                       ConstMatrixMap in, ConstRowVectorMap gamma, ConstRowVectorMap beta);
// d_in += the gradient through the normalisation (d_in must not alias d_out).
void layernorm_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap normalized,
                              std::span<const float> inverse_std, ConstRowVectorMap gamma);
// d_gamma += column sums of d_out * normalized; d_beta += column sums of d_out.
void layernorm_backward_weight(RowVectorMap d_gamma, RowVectorMap d_beta, ConstMatrixMap d_out,
                               ConstMatrixMap normalized);

// --- multi-head self-attention (scores, softmax, weighted values) -----------
// qkv is (rows * tokens) x (3 * width): queries, keys, values side by side,
// each split into `heads` heads of width / heads columns. probabilities
// holds rows * heads * tokens * tokens floats: softmax(q k^T / sqrt(head
// width)) per sample and head. context = probabilities * v, heads side by
// side: (rows * tokens) x width.
void attention_forward(MatrixMap context, std::span<float> probabilities, ConstMatrixMap qkv,
                       int tokens, int heads);
// d_qkv = the gradient of q, k and v from d_context (written, not added).
void attention_backward(MatrixMap d_qkv, ConstMatrixMap d_context, ConstMatrixMap qkv,
                        std::span<const float> probabilities, int tokens, int heads);

// --- GELU, exact (erf), as PyTorch's nn.GELU() default -----------------------
void gelu_forward(MatrixMap out, ConstMatrixMap in);
// d_in = d_out * GELU'(in), from the forward's input and output: GELU(x) =
// x Phi(x) gives Phi(x) as out / x, which spares a second erf per element
// (the dearest part of the GELU). d_in may be d_out (in place).
void gelu_backward(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap in, ConstMatrixMap out);

// --- mean over each sample's tokens ----------------------------------------
// out (rows x width) = the mean of each sample's `tokens` rows of in.
void mean_over_tokens_forward(MatrixMap out, ConstMatrixMap in, int tokens);
// d_in = d_out / tokens, for every token of the sample (written).
void mean_over_tokens_backward(MatrixMap d_in, ConstMatrixMap d_out, int tokens);

}  // namespace pipevm::runtime
