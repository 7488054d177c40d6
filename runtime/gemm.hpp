// One row-major single-precision GEMM on OpenBLAS, shared by the MLP's
// layers (layers.cpp) and the ViT's (vit_layers.cpp): c = a' * b' + beta * c
// where a' and b' are a and b, transposed or not. Calls take turns on one
// lock (layers.cpp, where it lives, says why). Leaves out alpha (always 1)
// and any other BLAS routine.
#pragma once

namespace pipevm::runtime {

struct RowMajorGemm {
  bool a_transposed = false;
  bool b_transposed = false;
  int m = 0, n = 0, k = 0;  // c is m x n; the shared dimension is k
  const float* a = nullptr;
  int lda = 0;
  const float* b = nullptr;
  int ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int ldc = 0;
};

void run_gemm(const RowMajorGemm& gemm);

}  // namespace pipevm::runtime
