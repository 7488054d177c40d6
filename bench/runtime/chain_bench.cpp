// The GEMM chain of one micro-batch's training step (gemm_chain.hpp) on every
// implementation at hand, measured alternately in one process so that they
// share the machine's state: the runtime's (OpenBLAS), Eigen on row-major
// buffers with its own blocking and with tune_eigen_for_one_core()'s, and
// Eigen on column-major activations. Prints each one's median rate over the
// rounds (GFLOP/s of this process's CPU time) and, last, the best one, which
// bench/run takes as the compute bound of an epoch.
//
//   bench_runtime_chain [--sizes 784,128,...,10] [--rows 32] [--rounds 5]
//                       [--seconds 0.2]
// Leaves out AVX-512 kernels of OpenBLAS: bench/run measures them in another
// process with OPENBLAS_CORETYPE set, where the CPU has them.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "eigen.hpp"
#include "gemm_chain.hpp"
#include "layers.hpp"
#include "model.hpp"
#include "tensor.hpp"

namespace {

using namespace pipevm::runtime;

struct Options {
  std::vector<int> sizes = ModelConfig{}.sizes;
  int rows = 32;
  int rounds = 5;
  double seconds = 0.2;
};

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> sizes = pipevm::bench::parse_int_list(text);
  if (sizes.size() < 2) throw std::runtime_error("--sizes needs at least two widths");
  return sizes;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      options.sizes = parse_sizes(value);
    } else if (flag == "--rows") {
      options.rows = std::stoi(value);
    } else if (flag == "--rounds") {
      options.rounds = std::stoi(value);
    } else if (flag == "--seconds") {
      options.seconds = std::stod(value);
    } else {
      throw std::runtime_error("unknown flag " + flag);
    }
  }
  return options;
}

struct Variant {
  std::string label;
  Backend backend;
  bool tuned_blocking;
  std::vector<double> rates;
};

int run(const Options& options) {
  const std::ptrdiff_t l1 = Eigen::l1CacheSize();
  const std::ptrdiff_t l2 = Eigen::l2CacheSize();
  const std::ptrdiff_t l3 = Eigen::l3CacheSize();
  std::vector<Variant> variants = {
      {"runtime (" + gemm_backend() + ")", Backend::runtime, false, {}},
      {"eigen row-major, Eigen's blocking", Backend::eigen_row_major, false, {}},
      {"eigen row-major, L1 blocking 8 KiB", Backend::eigen_row_major, true, {}},
      {"eigen col-major activations", Backend::eigen_col_major, false, {}},
  };
  TrainingStepChain chain(options.sizes, options.rows);
  for (Variant& variant : variants) chain.run(variant.backend);  // warm caches and buffers
  for (int round = 0; round < options.rounds; ++round) {
    for (Variant& variant : variants) {
      Eigen::setCpuCacheSizes(l1, l2, l3);
      if (variant.tuned_blocking) tune_eigen_for_one_core();
      variant.rates.push_back(chain.measure_rate(options.seconds, 1, variant.backend));
    }
  }
  std::printf(
      "chain rows %d, %.0f FLOP per sample (forward, weight and input gradients, "
      "none for the model input)\n",
      options.rows, chain.flops() / options.rows);
  const Variant* best = nullptr;
  double best_rate = 0.0;
  for (Variant& variant : variants) {
    std::sort(variant.rates.begin(), variant.rates.end());
    const double median = variant.rates[variant.rates.size() / 2];
    std::printf("variant %-45s median %6.1f GFLOP/s (min %.1f, max %.1f)\n", variant.label.c_str(),
                median / 1e9, variant.rates.front() / 1e9, variant.rates.back() / 1e9);
    if (median > best_rate) {
      best_rate = median;
      best = &variant;
    }
  }
  std::printf("best %.3f GFLOP/s %s\n", best_rate / 1e9, best->label.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return pipevm::bench::run_reporting_errors("bench_runtime_chain", [&] { return run(parse(argc, argv)); });
}
