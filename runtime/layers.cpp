// Linear, ReLU and the two softmax losses on Eigen views (see layers.hpp).
// The three GEMMs go to OpenBLAS (the serial build, one thread: each MPI
// rank owns one core); bench/RESULTS.md has the measurements behind that
// choice. Everything else is Eigen.
#include "layers.hpp"

#include <cblas.h>

#include <cassert>
#include <cmath>
#include <mutex>
#include <string>

#include "gemm.hpp"

namespace pipevm::runtime {

namespace {

int blas_int(Eigen::Index value) {
  return static_cast<int>(value);
}

// The sequential OpenBLAS keeps one packing buffer for the whole process and
// is not re-entrant: threads that share a process (the in-process ranks of
// the tests) take turns. Ranks of `pipevm run` are processes of one thread
// each, so this lock is never contended there (an uncontended lock costs tens
// of nanoseconds against GEMMs of tens of microseconds).
std::mutex gemm_mutex;

}  // namespace

void run_gemm(const RowMajorGemm& g) {
  const std::lock_guard lock(gemm_mutex);
  cblas_sgemm(CblasRowMajor, g.a_transposed ? CblasTrans : CblasNoTrans,
              g.b_transposed ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b,
              g.ldb, g.beta, g.c, g.ldc);
}

std::string gemm_backend() {
  std::string version = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  version = version.substr(version.find_first_not_of(' '));
  version = version.substr(0, version.find_last_not_of(' ') + 1);
  // 0: the sequential build; 1 or 2 would be threads competing with the ranks.
  const char* threading = openblas_get_parallel() == 0 ? " serial" : " THREADED";
  return version + threading + ", core " + openblas_get_corename();
}

void linear_forward(MatrixMap out, ConstMatrixMap in, ConstMatrixMap weight,
                    ConstRowVectorMap bias) {
  assert(out.rows() == in.rows() && out.cols() == weight.rows() && in.cols() == weight.cols());
  // out = bias (every row), then out += in * weight^T: OpenBLAS with beta 0
  // zeroes the output before accumulating into it anyway, so the bias costs
  // no pass of its own.
  out.rowwise() = bias;
  run_gemm({false, true, blas_int(out.rows()), blas_int(out.cols()), blas_int(in.cols()), in.data(),
            blas_int(in.cols()), weight.data(), blas_int(weight.cols()), 1.0f, out.data(),
            blas_int(out.cols())});
}

void linear_backward_input(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap weight) {
  assert(d_in.rows() == d_out.rows() && d_in.cols() == weight.cols());
  run_gemm({false, false, blas_int(d_in.rows()), blas_int(d_in.cols()), blas_int(d_out.cols()),
            d_out.data(), blas_int(d_out.cols()), weight.data(), blas_int(weight.cols()), 0.0f,
            d_in.data(), blas_int(d_in.cols())});
}

void linear_backward_weight(MatrixMap d_weight, RowVectorMap d_bias, ConstMatrixMap d_out,
                            ConstMatrixMap in) {
  assert(d_weight.rows() == d_out.cols() && d_weight.cols() == in.cols());
  run_gemm({true, false, blas_int(d_weight.rows()), blas_int(d_weight.cols()), blas_int(in.rows()),
            d_out.data(), blas_int(d_out.cols()), in.data(), blas_int(in.cols()), 1.0f,
            d_weight.data(), blas_int(d_weight.cols())});
  // Row by row, not d_out.colwise().sum(): Eigen vectorises that column sum
  // only from the first 32-byte-aligned element of d_bias on, and sums the
  // columns before it in another order, so the bits of the gradient depended
  // on where the heap had put the gradient array (4-rank runs differed from
  // run to run). Element-wise adds in row order give the same bits anywhere.
  for (Eigen::Index r = 0; r < d_out.rows(); ++r) d_bias += d_out.row(r);
}

void relu_forward(MatrixMap out, ConstMatrixMap in) {
  out = in.cwiseMax(0.0f);
}

void relu_backward(MatrixMap d_in, ConstMatrixMap d_out, ConstMatrixMap out) {
  d_in.array() = (out.array() > 0.0f).select(d_out.array(), 0.0f);
}

namespace {

// Writes softmax(logits row) into `probabilities` and returns the row's
// log-sum-exp shifted by its maximum: log softmax[k] = logit[k] - shift.
//
// Scalar loops on purpose. Eigen vectorises a row from its first aligned
// element on and does the elements before it one by one: its packet exp()
// rounds differently from std::exp, and its sum() adds in another order. A
// row's address (the heap's layout, which changes from run to run) then
// changed the bits of the loss gradient. One std::exp per logit is cheap.
template <typename Row, typename OutRow>
float softmax_row(OutRow probabilities, const Row& logits) {
  const float maximum = logits.maxCoeff();
  float sum = 0.0f;
  for (Eigen::Index k = 0; k < logits.size(); ++k) {
    probabilities(k) = std::exp(logits(k) - maximum);
    sum += probabilities(k);
  }
  probabilities /= sum;
  return maximum + std::log(sum);
}

}  // namespace

float softmax_cross_entropy(MatrixMap d_logits, ConstMatrixMap logits,
                            std::span<const std::uint8_t> labels, float scale) {
  assert(d_logits.rows() == logits.rows() && d_logits.cols() == logits.cols());
  assert(static_cast<Eigen::Index>(labels.size()) == logits.rows());
  double loss = 0.0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const Eigen::Index label = labels[static_cast<std::size_t>(r)];
    assert(label < logits.cols());
    const float shift = softmax_row(d_logits.row(r), logits.row(r));
    loss += static_cast<double>(shift - logits(r, label));
    d_logits(r, label) -= 1.0f;
    d_logits.row(r) *= scale;
  }
  return static_cast<float>(loss) * scale;
}

float softmax_mse(MatrixMap d_logits, ConstMatrixMap logits, std::span<const std::uint8_t> labels,
                  float scale) {
  assert(d_logits.rows() == logits.rows() && d_logits.cols() == logits.cols());
  assert(static_cast<Eigen::Index>(labels.size()) == logits.rows());
  double loss = 0.0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const Eigen::Index label = labels[static_cast<std::size_t>(r)];
    assert(label < logits.cols());
    auto p = d_logits.row(r);
    softmax_row(p, logits.row(r));
    // With e = p - onehot: loss = |e|^2 = |p|^2 - 2 p_label + 1, dloss/dp = 2e,
    // and through the softmax Jacobian dloss/dz_k = 2 p_k (e_k - e.p) with
    // e.p = |p|^2 - p_label.
    const float p_label = p(label);
    float p_squared = 0.0f;  // in index order, for the reason softmax_row gives
    for (Eigen::Index k = 0; k < p.size(); ++k) p_squared += p(k) * p(k);
    loss += static_cast<double>(p_squared - 2.0f * p_label + 1.0f);
    const float error_dot_p = p_squared - p_label;
    p.array() = 2.0f * p.array() * (p.array() - error_dot_p);
    p(label) -= 2.0f * p_label;
    p *= scale;
  }
  return static_cast<float>(loss) * scale;
}

int count_correct(ConstMatrixMap logits, std::span<const std::uint8_t> labels) {
  assert(static_cast<Eigen::Index>(labels.size()) == logits.rows());
  int correct = 0;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    Eigen::Index predicted = 0;
    logits.row(r).maxCoeff(&predicted);
    if (predicted == labels[static_cast<std::size_t>(r)]) ++correct;
  }
  return correct;
}

}  // namespace pipevm::runtime
