// The GEMM work of the MLP, for the benchmarks: one layer's buffers and
// kernels, and the chain of one micro-batch's training step, each on one of
// several implementations: the runtime's own (layers.hpp: OpenBLAS) and the
// Eigen products it replaced, with activations row-major (as the runtime
// stores them) or column-major. Shared by the Google Benchmark suite, the
// chain benchmark of bench/run and the epoch benchmark (which take their
// compute bound from the best chain rate measured in the same run).
#pragma once

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <span>
#include <vector>

#include "layers.hpp"
#include "random.hpp"

namespace pipevm::runtime {

// CPU time of this process, in seconds.
inline double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

inline std::vector<float> filled(std::size_t count, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = random.uniform() - 0.5f;
  return values;
}

enum class Kernel { forward, input_gradient, weight_gradient };

// Who computes the products. Eigen's blocking is a process-wide setting
// (Eigen::setCpuCacheSizes), not a backend: see tune_eigen_for_one_core().
enum class Backend {
  runtime,          // layers.hpp: what training runs (OpenBLAS)
  eigen_row_major,  // Eigen 3.4 on the runtime's row-major buffers
  eigen_col_major,  // Eigen 3.4 with activations stored column-major (feature-major)
};
inline const char* name(Backend backend) {
  switch (backend) {
    case Backend::runtime:
      return "runtime";
    case Backend::eigen_row_major:
      return "eigen-row-major";
    case Backend::eigen_col_major:
      return "eigen-col-major";
  }
  return "?";
}

// One layer's buffers at `rows` rows.
struct LayerBuffers {
  int rows;
  int in;
  int out;
  std::vector<float> x, weight, bias, y, d_y, d_x, d_weight, d_bias;
  LayerBuffers(int rows_, int in_, int out_)
      : rows(rows_),
        in(in_),
        out(out_),
        x(filled(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(in_), 1)),
        weight(filled(static_cast<std::size_t>(out_) * static_cast<std::size_t>(in_), 2)),
        bias(filled(static_cast<std::size_t>(out_), 3)),
        y(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(out_)),
        d_y(filled(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(out_), 4)),
        d_x(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(in_)),
        d_weight(static_cast<std::size_t>(out_) * static_cast<std::size_t>(in_)),
        d_bias(static_cast<std::size_t>(out_)) {}

  void run(Kernel kernel, Backend backend = Backend::runtime) {
    if (backend != Backend::runtime) {
      run_eigen(kernel, backend == Backend::eigen_col_major);
      return;
    }
    switch (kernel) {
      case Kernel::forward:
        linear_forward(as_matrix(std::span(y), rows, out),
                       as_matrix(std::span<const float>(x), rows, in),
                       as_matrix(std::span<const float>(weight), out, in),
                       as_row_vector(std::span<const float>(bias)));
        break;
      case Kernel::input_gradient:
        linear_backward_input(as_matrix(std::span(d_x), rows, in),
                              as_matrix(std::span<const float>(d_y), rows, out),
                              as_matrix(std::span<const float>(weight), out, in));
        break;
      case Kernel::weight_gradient:
        linear_backward_weight(as_matrix(std::span(d_weight), out, in),
                               as_row_vector(std::span(d_bias)),
                               as_matrix(std::span<const float>(d_y), rows, out),
                               as_matrix(std::span<const float>(x), rows, in));
        break;
    }
  }

 private:
  // The products layers.cpp computed before it moved to OpenBLAS.
  void run_eigen(Kernel kernel, bool col_major) {
    using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
    const auto weights = as_matrix(std::span<const float>(weight), out, in);
    const auto bias_row = as_row_vector(std::span<const float>(bias));
    if (!col_major) {
      switch (kernel) {
        case Kernel::forward: {
          auto result = as_matrix(std::span(y), rows, out);
          result.noalias() = as_matrix(std::span<const float>(x), rows, in) * weights.transpose();
          result.rowwise() += bias_row;
          break;
        }
        case Kernel::input_gradient:
          as_matrix(std::span(d_x), rows, in).noalias() =
              as_matrix(std::span<const float>(d_y), rows, out) * weights;
          break;
        case Kernel::weight_gradient:
          as_matrix(std::span(d_weight), out, in).noalias() +=
              as_matrix(std::span<const float>(d_y), rows, out).transpose() *
              as_matrix(std::span<const float>(x), rows, in);
          break;
      }
      return;
    }
    const Eigen::Map<const ColMatrix> x_map(x.data(), rows, in);
    const Eigen::Map<const ColMatrix> d_y_map(d_y.data(), rows, out);
    switch (kernel) {
      case Kernel::forward: {
        Eigen::Map<ColMatrix> result(y.data(), rows, out);
        result.noalias() = x_map * weights.transpose();
        result.rowwise() += bias_row;
        break;
      }
      case Kernel::input_gradient:
        Eigen::Map<ColMatrix>(d_x.data(), rows, in).noalias() = d_y_map * weights;
        break;
      case Kernel::weight_gradient:
        as_matrix(std::span(d_weight), out, in).noalias() += d_y_map.transpose() * x_map;
        break;
    }
  }
};

// The GEMMs of one micro-batch's training step: every layer's forward and
// weight gradient, every input gradient but the first layer's (the runtime
// skips it).
class TrainingStepChain {
 public:
  TrainingStepChain(const std::vector<int>& sizes, int rows) {
    for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
      layers_.emplace_back(rows, sizes[l], sizes[l + 1]);
      flops_ += 2.0 * rows * sizes[l] * sizes[l + 1] * (l == 0 ? 2 : 3);
    }
  }
  void run(Backend backend = Backend::runtime) {
    for (auto& layer : layers_) layer.run(Kernel::forward, backend);
    for (std::size_t l = layers_.size(); l-- > 0;) {
      if (l > 0) layers_[l].run(Kernel::input_gradient, backend);
      layers_[l].run(Kernel::weight_gradient, backend);
    }
  }
  double flops() const { return flops_; }
  // Best rate (FLOP/s) of `repetitions` runs of about `seconds` of this
  // process's CPU time each. CPU time, not wall time: on a machine shared
  // with other work, time spent descheduled is not the kernel's.
  double measure_rate(double seconds, int repetitions, Backend backend = Backend::runtime) {
    double best = 0.0;
    for (int repetition = 0; repetition < repetitions; ++repetition) {
      const double start = cpu_seconds();
      long runs = 0;
      double elapsed = 0.0;
      do {
        run(backend);
        ++runs;
        elapsed = cpu_seconds() - start;
      } while (elapsed < seconds);
      best = std::max(best, flops_ * static_cast<double>(runs) / elapsed);
    }
    return best;
  }

 private:
  std::vector<LayerBuffers> layers_;
  double flops_ = 0.0;
};

}  // namespace pipevm::runtime
