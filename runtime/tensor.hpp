// Matrix types of the runtime: float32, row-major, so that a micro-batch
// (rows x features) is one contiguous buffer that is sent, received and
// stashed as it is. Views over caller-owned memory are Eigen::Maps built from
// std::spans. Leaves out any tensor of rank > 2: an MLP needs none.
#pragma once

#include <cassert>
#include <cstddef>
#include <span>

#include "eigen.hpp"

namespace pipevm::runtime {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using RowVectorMap = Eigen::Map<RowVector>;
using ConstRowVectorMap = Eigen::Map<const RowVector>;

// A rows x cols view of the first rows * cols floats of `data`.
inline MatrixMap as_matrix(std::span<float> data, int rows, int cols) {
  assert(data.size() >= static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  return MatrixMap(data.data(), rows, cols);
}
inline ConstMatrixMap as_matrix(std::span<const float> data, int rows, int cols) {
  assert(data.size() >= static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  return ConstMatrixMap(data.data(), rows, cols);
}
// A read-only view of the same memory (Eigen does not convert Maps implicitly).
inline ConstMatrixMap as_const(const MatrixMap& matrix) {
  return ConstMatrixMap(matrix.data(), matrix.rows(), matrix.cols());
}
inline RowVectorMap as_row_vector(std::span<float> data) {
  return RowVectorMap(data.data(), static_cast<Eigen::Index>(data.size()));
}
inline ConstRowVectorMap as_row_vector(std::span<const float> data) {
  return ConstRowVectorMap(data.data(), static_cast<Eigen::Index>(data.size()));
}

// Call once at start-up, before any GEMM: tells Eigen the L1 blocking that
// suits one AVX-512 core (ANCHORS.md: Eigen 3.4 over-estimates it and the
// first layer's forward GEMM runs at less than half speed). Idempotent.
void tune_eigen_for_one_core();

}  // namespace pipevm::runtime
