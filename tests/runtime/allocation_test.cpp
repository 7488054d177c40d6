// No heap allocation in the steady state: once reserved, a training step
// (batches, forward, loss, both backward halves, optimizer) of the MLP or
// of the ViT allocates nothing. This executable replaces malloc and its relatives with counting
// wrappers around glibc's own, so Eigen's internal buffers count too.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <functional>

#include "data.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "sequential.hpp"
#include "tensor.hpp"

// Sanitizers interpose malloc themselves; counting on top of them would
// hand their free() memory they never allocated.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PIPEVM_COUNTS_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define PIPEVM_COUNTS_ALLOCATIONS 0
#endif
#endif
#ifndef PIPEVM_COUNTS_ALLOCATIONS
#define PIPEVM_COUNTS_ALLOCATIONS 1
#endif

namespace {
std::atomic<long> allocations{0};
}  // namespace

#if PIPEVM_COUNTS_ALLOCATIONS
extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
}

extern "C" void* malloc(std::size_t size) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(size);
}
extern "C" void* calloc(std::size_t count, std::size_t size) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(count, size);
}
extern "C" void* realloc(void* pointer, std::size_t size) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(pointer, size);
}
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(alignment, size);
}
extern "C" int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
  allocations.fetch_add(1, std::memory_order_relaxed);
  *out = __libc_memalign(alignment, size);
  return *out ? 0 : ENOMEM;
}
#endif

namespace pipevm::runtime {
namespace {

TEST(allocation, counter_sees_allocations) {
  if (!PIPEVM_COUNTS_ALLOCATIONS) GTEST_SKIP() << "a sanitizer owns malloc";
  // Through volatile pointers, so the compiler cannot elide the pair.
  void* (*volatile allocate)(std::size_t) = &std::malloc;
  void (*volatile release)(void*) = &std::free;
  const long before = allocations.load();
  release(allocate(4000));
  EXPECT_EQ(allocations.load() - before, 1);
}

TEST(allocation, free_training_step_on_two_pieces) {
  if (!PIPEVM_COUNTS_ALLOCATIONS) GTEST_SKIP() << "a sanitizer owns malloc";
  tune_eigen_for_one_core();
  const ModelConfig config;
  constexpr int kRows = 32;
  constexpr int kMicroBatches = 4;
  const DataSplit data = synthetic(512, 0, 784, 10, 1);
  Batcher batcher(data.train, 1, kRows * kMicroBatches, 1, kMicroBatches);
  const std::vector<LayerRange> split = split_layers(config.sizes, 2);
  Piece first(config, split[0]);
  Piece last(config, split[1]);
  first.reserve(kMicroBatches, kRows);
  last.reserve(kMicroBatches, kRows);
  Optimizer first_optimizer(OptimizerConfig{}, first.parameters().size());
  Optimizer last_optimizer(OptimizerConfig{}, last.parameters().size());
  std::vector<float> input(static_cast<std::size_t>(kRows) * 784);
  std::vector<std::uint8_t> labels(kRows);
  int layers_done = 0;
  const std::function<void(int, std::span<float>)> hook = [&layers_done](int, std::span<float>) {
    ++layers_done;
  };

  const auto step = [&](int batch) {
    first.zero_grad();
    last.zero_grad();
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      batcher.input(batch, 0, mb, input);
      last.forward(mb, first.forward(mb, input, kRows), kRows);
    }
    for (int mb = kMicroBatches - 1; mb >= 0; --mb) {
      batcher.labels(batch, 0, mb, labels);
      last.loss(mb, labels, 1.0f / (kRows * kMicroBatches));
      first.backward_input(mb, last.backward_input(mb, {}));
      last.end_input_gradient_send(mb);  // as if sent
      last.backward_weight(mb, hook);
      first.backward_weight(mb, hook);
    }
    for (auto [piece, optimizer] :
         {std::pair{&first, &first_optimizer}, std::pair{&last, &last_optimizer}}) {
      optimizer->begin_step();
      for (int layer = piece->layers().begin; layer < piece->layers().end; ++layer) {
        optimizer->update(piece->layer_parameters(layer).all, piece->layer_gradients(layer).all,
                          piece->layer_offset(layer));
      }
    }
  };
  batcher.start_epoch(0);
  step(0);
  const long before = allocations.load();
  step(1);
  step(2);
  batcher.start_epoch(1);
  step(0);
  EXPECT_EQ(allocations.load() - before, 0);
  EXPECT_EQ(layers_done, 4 * kMicroBatches * 7);
}

TEST(allocation, free_vit_training_step) {
  if (!PIPEVM_COUNTS_ALLOCATIONS) GTEST_SKIP() << "a sanitizer owns malloc";
  ModelConfig config;
  use_vit(config, VitShape{});
  constexpr int kRows = 4;
  constexpr int kMicroBatches = 2;
  const DataSplit data = synthetic(64, 0, 784, 10, 1);
  Batcher batcher(data.train, 1, kRows * kMicroBatches, 1, kMicroBatches);
  SequentialTrainer trainer(config, OptimizerConfig{}, kRows * kMicroBatches, kMicroBatches);
  batcher.start_epoch(0);
  trainer.train_batch(batcher, 0);
  const long before = allocations.load();
  trainer.train_batch(batcher, 1);
  trainer.train_batch(batcher, 2);
  EXPECT_EQ(allocations.load() - before, 0);
}

}  // namespace
}  // namespace pipevm::runtime
