// The ViT's layers as free functions, llm.c style: outputs first, shapes
// explicit (token matrices are (samples * tokens) x width, row-major, one
// sample's tokens after another), no allocation. Layers with weights come in
// three parts: forward, backward_input (the gradient the layer below needs)
// and backward_weight (weight gradients, accumulated with +=, as
// micro-batches sum into them). Layers without weights (attention's scores
// and softmax, pooling) do all their backward in one function. Every
// product and every row sweep runs on the ViT's kernels (vit_kernels.hpp),
// with what can ride along fused in: a linear layer's bias, the residual it
// adds to, the GELU after it and the GELU's derivative on the way back, a
// LayerNorm's scale and shift gradients and the residual's gradient.
// Leaves out dropout, masks and any model composition (vit_model.hpp).
#pragma once

#include <span>

#include "tensor.hpp"
#include "vit_kernels.hpp"

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

// --- linear layers (weight [out, in], as PyTorch's) -------------------------
// out = in * weight^T + bias.
void vit_linear_forward(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                        ConstRowVectorMap bias);
// out = residual + in * weight^T + bias: a linear layer whose output adds
// into the residual stream (residual may be out itself).
void vit_linear_forward_residual(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                                 ConstRowVectorMap bias, ConstMatrixMap residual);
// out = GELU(pre) (exact, erf form, as PyTorch's nn.GELU()) and slope =
// GELU'(pre), pre = in * weight^T + bias, in one pass over the product:
// the slope is all the GELU's backward needs.
void vit_linear_gelu_forward(MatrixMap slope, MatrixMap out, ConstMatrixMap in,
                             ConstMatrixMap weight, ConstRowVectorMap bias);
// d_in = d_out * weight.
void vit_linear_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap weight);
// d_pre = (d_out * weight) * slope, element by element: back through a
// linear layer and the GELU before it, whose slope the forward left.
void vit_linear_gelu_backward_input(MatrixMap d_pre, ConstMatrixMap d_out, ConstMatrixMap weight,
                                    ConstMatrixMap slope);
// d_weight += d_out^T * in; d_bias += column sums of d_out, in row order.
void vit_linear_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, ConstMatrixMap d_out,
                                ConstMatrixMap in);

// --- layer normalisation (over each row, eps kLayerNormEpsilon as PyTorch's)
// normalized = (in - mean) * inverse_std, out = normalized * gamma + beta;
// inverse_std holds one value per row. out may be in.
void layernorm_forward(MatrixMap out, MatrixMap normalized, std::span<float> inverse_std,
                       ConstMatrixMap in, ConstRowVectorMap gamma, ConstRowVectorMap beta);
// d_in = residual (when not empty: the gradient the residual path brings,
// rows x width; it may be d_in's own memory) + the gradient through the
// normalisation; d_gamma and d_beta = the column sums of d_out * normalized
// and of d_out (written, not added). d_in must not alias d_out.
void layernorm_backward(MatrixMap d_in, RowVectorMap d_gamma, RowVectorMap d_beta,
                        ConstMatrixMap d_out, ConstMatrixMap normalized,
                        std::span<const float> inverse_std, ConstRowVectorMap gamma,
                        std::span<const float> residual);

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

// --- mean over each sample's tokens ----------------------------------------
// out (rows x width) = the mean of each sample's `tokens` rows of in.
void mean_over_tokens_forward(MatrixMap out, ConstMatrixMap in, int tokens);
// d_in = d_out / tokens, for every token of the sample (written).
void mean_over_tokens_backward(MatrixMap d_in, ConstMatrixMap d_out, int tokens);

}  // namespace pipevm::runtime
