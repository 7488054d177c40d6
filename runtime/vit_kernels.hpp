// pipevm's own kernels for the ViT (issue 40): its products with their
// elementwise work fused in (bias, residual, GELU and its derivative, the
// bias gradient), attention over every sample and head in one call (scores,
// scale and softmax, context, and back), and LayerNorm forward and backward
// (with its scale and shift gradients and the residual's gradient) in one
// sweep each. Row-major float32 on plain pointers; nothing allocates once a
// thread's scratch has grown to the largest call.
//
// Three sets with the same arithmetic, chosen at run time for the CPU
// (vit_kernels()): avx512 (AVX-512F), avx2 (AVX2 + FMA) and portable (plain
// C++, any CPU). The two vector sets are compiled on every x86-64 build,
// whatever -march the rest of pipevm gets, and give the same bits: every
// product element is one fused multiply-add chain in the order of the shared
// dimension, and every row reduction runs over 16 lanes in one fixed tree,
// the AVX2 set holding 16 lanes in two registers. The portable set runs the
// same code on 16-lane arrays; it fuses multiply-adds where the compiler
// targets FMA, and otherwise rounds in between. The environment variable
// PIPEVM_KERNELS=avx512|avx2|portable overrides the choice (benchmarks,
// tests). Leaves out every shape but row-major, and any other model's layers.
#pragma once

#include <cstddef>
#include <span>

#include "gemm.hpp"

namespace pipevm::runtime {

// What a product does besides c = a' * b' (+ c when beta is 1).
enum class Epilogue {
  store,  // c = the product
  scale,  // c = scale * the product
  // activated = GELU(the product) and c = GELU'(the product): what a GELU
  // gives forward, and what its backward needs of it.
  gelu,
  times,  // c = the product * factor, element by element
};

struct ProductArgs {
  RowMajorGemm product;  // beta 0 or 1
  Epilogue epilogue = Epilogue::store;
  // + bias[j] on every row of c, before the product is added.
  const float* bias = nullptr;
  // + addend (beta 0 only): row r of c adds row r % addend_period (0: r) of
  // addend, whose rows are ld_addend apart. May be c itself.
  const float* addend = nullptr;
  int ld_addend = 0;
  int addend_period = 0;
  float scale = 1.0f;          // Epilogue::scale
  float* activated = nullptr;  // Epilogue::gelu: m x n
  int ld_activated = 0;
  const float* factor = nullptr;  // Epilogue::times: m x n
  int ld_factor = 0;
  // a transposed only: += the column sums of a (a bias's gradient from the
  // gradient at its output), in the order of a's rows.
  float* bias_gradient = nullptr;
};

// Multi-head self-attention over `samples` samples of `tokens` tokens:
// qkv is (samples * tokens) x (3 * width), queries, keys and values side by
// side, each `heads` heads of width / heads columns; probabilities holds
// samples * heads * tokens * tokens floats (per sample, per head, a square).
struct AttentionArgs {
  int samples = 0, tokens = 0, heads = 0, width = 0;
  const float* qkv = nullptr;
  float* probabilities = nullptr;              // forward: written
  float* context = nullptr;                    // forward: (samples * tokens) x width, written
  const float* saved_probabilities = nullptr;  // backward: the forward's
  const float* d_context = nullptr;            // backward: the gradient at the context
  float* d_qkv = nullptr;                      // backward: written
};

// LayerNorm over each row of width floats (eps kLayerNormEpsilon):
// normalized = (in - mean) * inverse_std, out = normalized * gamma + beta.
// out may be in.
struct LayerNormForwardArgs {
  int rows = 0, width = 0;
  const float* in = nullptr;
  float* out = nullptr;
  float* normalized = nullptr;
  float* inverse_std = nullptr;  // one per row
  const float* gamma = nullptr;
  const float* beta = nullptr;
};
// d_in = addend (when not null) + the gradient through the normalisation;
// d_gamma and d_beta = the column sums of d_out * normalized and of d_out
// (written, summed over the rows in order). d_in may be addend, not d_out.
struct LayerNormBackwardArgs {
  int rows = 0, width = 0;
  const float* d_out = nullptr;
  const float* normalized = nullptr;
  const float* inverse_std = nullptr;
  const float* gamma = nullptr;
  const float* addend = nullptr;
  float* d_in = nullptr;
  float* d_gamma = nullptr;
  float* d_beta = nullptr;
};

inline constexpr float kLayerNormEpsilon = 1e-5f;

struct KernelSet {
  const char* name;
  void (*product)(const ProductArgs&);
  // context = softmax(q k^T / sqrt(head width)) v per sample and head.
  void (*attention_forward)(const AttentionArgs&);
  // d_qkv from d_context, qkv and the forward's probabilities.
  void (*attention_backward)(const AttentionArgs&);
  void (*layernorm_forward)(const LayerNormForwardArgs&);
  void (*layernorm_backward)(const LayerNormBackwardArgs&);
};

// The set for this CPU, or PIPEVM_KERNELS's (std::runtime_error when it
// names an unknown set or one this CPU cannot run). Chosen once.
const KernelSet& vit_kernels();
// Every set this CPU runs, fastest first.
std::span<const KernelSet* const> runnable_vit_kernels();

// A thread's scratch: at least `floats` floats in slot 0, 1, 2 or 3, kept
// (and grown, never shrunk) for the thread's next call. The kernels use
// slots 0 to 2; slot 3 is the callers'.
float* kernel_scratch(int slot, std::size_t floats);

}  // namespace pipevm::runtime
