// The GEMMs of one ViT micro-batch's training step (runtime/vit_model.cpp),
// at their exact shapes and in the order the step runs them: every unit's
// forward (unit 0's patch embedding, then per block qkv, attention's scores
// and context per sample and head, the projection, fc1, fc2; the last
// unit's head), every unit's input half from the top (the head, fc2, fc1,
// the projection, attention's four products per sample and head, qkv), then
// every unit's weight half from the top (the head, fc2, fc1, the
// projection, qkv, unit 0's patch embedding). The patch embedding's input
// gradient is left out, as the runtime leaves it out (nothing trains the
// pixels). Each site owns operands of its exact shapes and strides, so the
// chain's memory footprint is a step's. Leaves out everything that is not
// a product: bias, softmax, LayerNorm, GELU.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gemm.hpp"
#include "vit_model.hpp"

namespace pipevm::bench {

// One call site: a product c = a' * b' (+ c when beta is 1), repeated for
// samples x heads groups (attention) whose operands lie at fixed strides.
struct GemmSite {
  std::string name;  // "block 1 fc1 forward"
  std::string kind;  // "fc1 forward": the same product in every block
  runtime::RowMajorGemm gemm;
  // Where an operand of group (sample, head) starts in its buffer.
  struct Stride {
    std::ptrdiff_t sample = 0, head = 0;
    std::ptrdiff_t offset(int s, int h) const { return s * sample + h * head; }
  };
  int samples = 1;  // groups: samples x heads
  int heads = 1;
  Stride a_stride, b_stride, c_stride;
  std::vector<float> a, b, c;

  double flops() const { return 2.0 * gemm.m * gemm.n * gemm.k * samples * heads; }
  // The product of group (sample, head), with its operands' pointers.
  runtime::RowMajorGemm group(int sample, int head);
};

// The sites of one micro-batch of `rows` samples, in the step's order.
std::vector<GemmSite> step_gemm_sites(const runtime::VitShape& shape, int rows);

}  // namespace pipevm::bench
