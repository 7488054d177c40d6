// Which ViT kernel set runs (vit_kernels.hpp), and the threads' scratch.
// The vector sets are chosen by what the CPU reports at run time (GCC's
// __builtin_cpu_supports, which also asks whether the OS saves the
// registers), never by the -march the build used.
#include "vit_kernels.hpp"

#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "vit_kernel_sets.hpp"

namespace pipevm::runtime {
namespace {

const std::vector<const KernelSet*>& runnable_sets() {
  static const std::vector<const KernelSet*> sets = [] {
    std::vector<const KernelSet*> found;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) found.push_back(&kVitKernelsAvx512);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      found.push_back(&kVitKernelsAvx2);
    }
#endif
    found.push_back(&kVitKernelsPortable);
    return found;
  }();
  return sets;
}

const KernelSet& choose() {
  const std::vector<const KernelSet*>& sets = runnable_sets();
  const char* wanted = std::getenv("PIPEVM_KERNELS");
  if (wanted == nullptr || *wanted == '\0') return *sets.front();
  std::string runnable;
  for (const KernelSet* set : sets) {
    if (std::string_view(set->name) == wanted) return *set;
    runnable += (runnable.empty() ? "" : ", ") + std::string(set->name);
  }
  throw std::runtime_error("PIPEVM_KERNELS=" + std::string(wanted) +
                           ": not a kernel set this CPU runs (it runs " + runnable + ")");
}

}  // namespace

const KernelSet& vit_kernels() {
  static const KernelSet& chosen = choose();
  return chosen;
}

std::span<const KernelSet* const> runnable_vit_kernels() {
  return runnable_sets();
}

float* kernel_scratch(int slot, std::size_t floats) {
  thread_local std::array<std::vector<float>, 4> scratch;
  std::vector<float>& buffer = scratch.at(static_cast<std::size_t>(slot));
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

}  // namespace pipevm::runtime
