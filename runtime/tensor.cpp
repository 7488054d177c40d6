// Start-up tuning of Eigen's GEMM blocking for one AVX-512 core.
#include "tensor.hpp"

namespace pipevm::runtime {

void tune_eigen_for_one_core() {
  // Eigen derives its L1 blocking from the reported L1 size, and with
  // AVX-512 registers that blocking overflows L1: the 128x784 by 784x128
  // forward GEMM drops to ~63 GFLOP/s. An 8 KiB budget keeps the packed
  // panels resident (ANCHORS.md); L2 and L3 stay as Eigen measured them.
  constexpr std::ptrdiff_t kL1Budget = 8 * 1024;
  Eigen::setCpuCacheSizes(kL1Budget, Eigen::l2CacheSize(), Eigen::l3CacheSize());
}

}  // namespace pipevm::runtime
