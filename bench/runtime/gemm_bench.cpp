// Single-core GEMM rates of the MLP's shapes, as the runtime runs them
// (layers.hpp, row-major, float32): each layer's forward, input gradient and
// weight gradient at micro-batch 32 and 128, and the whole chain of one
// training step. Each with Eigen's default blocking and with the L1 budget
// of tune_eigen_for_one_core(), to measure ANCHORS.md's pitfall here.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "gemm_chain.hpp"
#include "model.hpp"

namespace pipevm::runtime {
namespace {

struct CacheSizes {
  std::ptrdiff_t l1 = Eigen::l1CacheSize();
  std::ptrdiff_t l2 = Eigen::l2CacheSize();
  std::ptrdiff_t l3 = Eigen::l3CacheSize();
};
const CacheSizes kEigenDefaults;

void set_blocking(bool tuned) {
  Eigen::setCpuCacheSizes(kEigenDefaults.l1, kEigenDefaults.l2, kEigenDefaults.l3);
  if (tuned) tune_eigen_for_one_core();
}

const std::vector<int> kSizes = ModelConfig{}.sizes;

// Arguments: layer, rows, kernel, tuned.
void BM_layer_gemm(benchmark::State& state) {
  const auto layer = static_cast<std::size_t>(state.range(0));
  const auto rows = static_cast<int>(state.range(1));
  const auto kernel = static_cast<Kernel>(state.range(2));
  set_blocking(state.range(3) != 0);
  LayerBuffers buffers(rows, kSizes[layer], kSizes[layer + 1]);
  for (auto _ : state) {
    buffers.run(kernel);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * rows * kSizes[layer] * kSizes[layer + 1];
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  static const char* const kNames[] = {"forward", "input_gradient", "weight_gradient"};
  state.SetLabel(std::string(kNames[state.range(2)]) + (state.range(3) ? " tuned" : " default"));
}

// The GEMMs of one micro-batch's training step (gemm_chain.hpp).
// Arguments: rows, tuned.
void BM_training_step_chain(benchmark::State& state) {
  set_blocking(state.range(1) != 0);
  TrainingStepChain chain(kSizes, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    chain.run();
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(chain.flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(state.range(1) ? "tuned" : "default");
}

void layer_arguments(benchmark::internal::Benchmark* benchmark) {
  for (int tuned = 0; tuned <= 1; ++tuned)
    for (int rows : {32, 128})
      for (int layer = 0; layer + 1 < static_cast<int>(kSizes.size()); ++layer)
        for (int kernel = 0; kernel < 3; ++kernel) benchmark->Args({layer, rows, kernel, tuned});
}

BENCHMARK(BM_layer_gemm)->Apply(layer_arguments)->ArgNames({"layer", "rows", "kernel", "tuned"});
BENCHMARK(BM_training_step_chain)->ArgsProduct({{32, 128}, {0, 1}})->ArgNames({"rows", "tuned"});

}  // namespace
}  // namespace pipevm::runtime

BENCHMARK_MAIN();
