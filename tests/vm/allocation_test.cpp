// Once training runs, a VM step allocates nothing: not the VM, not the model,
// not the in-process Comm's mailboxes and collectives. This executable
// interposes glibc's malloc family (so operator new and Eigen's temporaries
// are seen too) and counts the calls of each thread; every rank of the
// in-process world is a thread and measures its own steps.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>

#include "inprocess_comm.hpp"
#include "vm.hpp"
#include "vm_test_support.hpp"

extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void __libc_free(void* pointer);
}

namespace {
thread_local long allocations_of_this_thread = 0;
}

extern "C" {
void* malloc(std::size_t size) {
  ++allocations_of_this_thread;
  return __libc_malloc(size);
}
void* calloc(std::size_t count, std::size_t size) {
  ++allocations_of_this_thread;
  return __libc_calloc(count, size);
}
void* realloc(void* pointer, std::size_t size) {
  ++allocations_of_this_thread;
  return __libc_realloc(pointer, size);
}
void* aligned_alloc(std::size_t alignment, std::size_t size) {
  ++allocations_of_this_thread;
  return __libc_memalign(alignment, size);
}
void* memalign(std::size_t alignment, std::size_t size) {
  ++allocations_of_this_thread;
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
  ++allocations_of_this_thread;
  *out = __libc_memalign(alignment, size);
  return *out == nullptr ? ENOMEM : 0;
}
void free(void* pointer) {
  __libc_free(pointer);
}
}

namespace pipevm {
namespace {

// Allocations during steps 2..5 of the schedule in `file` on every rank
// (after two warm-up steps).
std::vector<long> steady_state_allocations(const std::string& file, const Config& config) {
  const Program program = vm_test::compile_file(file, config, vm_test::small_model().sizes);
  std::vector<long> counts(static_cast<std::size_t>(config.ranks()), -1);
  std::mutex mutex;
  runtime::run_in_process(config.stages, config.dp, [&](runtime::Comm& comm) {
    MachineOptions options;
    options.model = vm_test::small_model();
    options.optimizer = vm_test::sgd();
    options.global_batch = 16;
    Machine machine(program, comm.world_rank(), comm, options);
    runtime::Batcher batcher(vm_test::small_data().train, 1, 16, config.dp, config.micro_batches);
    batcher.start_epoch(0);
    for (int step = 0; step < 2; ++step) {
      machine.set_batch(&batcher, step);
      Vm::run(program, machine);
    }
    const long before = allocations_of_this_thread;
    for (int step = 2; step < 6; ++step) {
      machine.set_batch(&batcher, step);
      Vm::run(program, machine);
    }
    const long during = allocations_of_this_thread - before;
    std::lock_guard lock(mutex);
    counts[static_cast<std::size_t>(comm.world_rank())] = during;
  });
  return counts;
}

TEST(allocation, counting_sees_allocations) {
  const long before = allocations_of_this_thread;
  auto* p = new std::vector<float>(1000);
  delete p;
  EXPECT_GE(allocations_of_this_thread - before, 2);
}

TEST(allocation, gpipe_steps_allocate_nothing) {
  for (const long count :
       steady_state_allocations(vm_test::schedule_path("gpipe"), Config{2, 4, 1, 2})) {
    EXPECT_EQ(count, 0);
  }
}

TEST(allocation, one_f_one_b_steps_allocate_nothing) {
  for (const long count :
       steady_state_allocations(vm_test::schedule_path("1f1b"), Config{4, 4, 1, 1})) {
    EXPECT_EQ(count, 0);
  }
}

// Holds keep buffers out of their slots in a list, which the first steps grow.
TEST(allocation, steps_holding_values_allocate_nothing) {
  const std::string holds = std::string(PIPEVM_SOURCE_DIR) + "/tests/vm/holds.pipe";
  for (const long count : steady_state_allocations(holds, Config{2, 4, 1, 1})) {
    EXPECT_EQ(count, 0);
  }
}

// Recomputation takes its buffers from the pool as a forward does; an
// offload's host buffer comes from the host pool, its copy's parts and its
// queue entry from room reserved or grown by the first steps.
TEST(allocation, steps_recomputing_or_offloading_allocate_nothing) {
  for (const char* schedule : {"1f1b-recompute", "1f1b-offload"}) {
    for (const long count :
         steady_state_allocations(vm_test::schedule_path(schedule), Config{4, 4, 1, 1})) {
      EXPECT_EQ(count, 0) << schedule;
    }
  }
}

}  // namespace
}  // namespace pipevm
