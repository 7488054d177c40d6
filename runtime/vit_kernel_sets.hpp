// The ViT's kernel sets, one per file (vit_kernels_avx512.cpp,
// vit_kernels_avx2.cpp, vit_kernels_portable.cpp); vit_kernels.cpp chooses
// among them. The vector sets exist only on x86-64.
#pragma once

#include "vit_kernels.hpp"

namespace pipevm::runtime {

#if defined(__x86_64__)
extern const KernelSet kVitKernelsAvx512;
extern const KernelSet kVitKernelsAvx2;
#endif
extern const KernelSet kVitKernelsPortable;

}  // namespace pipevm::runtime
