// The MLP's layers as free functions, llm.c style: outputs first, shapes
// given by the views, no allocation. A linear layer's weight is [out, in] (as
// in PyTorch and safetensors), its input a micro-batch of rows x in.
// Weight and bias gradients accumulate (+=) because micro-batches sum into
// them; an input gradient is written (=) because in an MLP nothing else
// contributes to it. Leaves out anything but linear, ReLU and the two losses.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "tensor.hpp"

namespace pipevm::runtime {

// What runs the GEMMs, for the run header and the benchmarks:
// "OpenBLAS 0.3.21 serial, core Zen" (the core is the kernel set OpenBLAS
// chose for this CPU; the environment variable OPENBLAS_CORETYPE overrides it).
std::string gemm_backend();

// out = in * weight^T + bias
void linear_forward(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                    ConstRowVectorMap bias);
// d_in = d_out * weight
void linear_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap weight);
// d_weight += d_out^T * in; d_bias += column sums of d_out
void linear_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, ConstMatrixMap d_out,
                            ConstMatrixMap in);

// out = max(in, 0); out may be in (in place).
void relu_forward(MatrixMap out, ConstMatrixMap in);
// d_in = d_out where out > 0, else 0; d_in may be d_out (in place).
void relu_backward(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap out);

// Both losses: one row of logits per sample, labels are class indices.
// Return scale * (sum over rows of the per-sample loss) and write
// d_logits = scale * d(sum of per-sample losses)/d(logits). With scale =
// 1 / global batch size, summing over micro-batches and replicas gives the
// batch mean. d_logits must not alias logits.
//
// Cross-entropy: per-sample loss -log softmax(logits)[label].
float softmax_cross_entropy(MatrixMap d_logits, ConstMatrixMap logits,
                            std::span<const std::uint8_t> labels, float scale);
// ShallowSpeed's loss: per-sample sum over classes of
// (softmax(logits) - one_hot(label))^2.
float softmax_mse(MatrixMap d_logits, ConstMatrixMap logits, std::span<const std::uint8_t> labels,
                  float scale);

// Rows whose largest logit is at the label (first maximum wins ties).
int count_correct(ConstMatrixMap logits, std::span<const std::uint8_t> labels);

}  // namespace pipevm::runtime
