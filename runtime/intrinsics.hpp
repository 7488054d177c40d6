// <immintrin.h>, as every pipevm file includes it: through this header only
// (eigen.hpp includes it before Eigen), so that the workaround below covers
// every translation unit, the ViT's kernel sets too.
//
// GCC 12's AVX-512 intrinsics make their "don't care" operands with
// `__m512 __Y = __Y;` (_mm512_undefined_ps and friends). Once AVX-512 code
// (Eigen's ptranspose, gemm_pack_lhs, pmax; the ViT kernels' masked loads,
// ...) is inlined, GCC 12 reports `'__Y' may be used uninitialized
// [-Wmaybe-uninitialized]` (or `is used uninitialized`, -Wuninitialized,
// where it is sure) inside avx512fintrin.h: a false positive, GCC bug
// 105593, that -march=native or -mavx512f turns into a failed build with
// warnings as errors (138 errors from runtime/layers.cpp alone). The warning
// is reported at the intrinsic's line in the system header, so it is
// silenced for the lines of that header, and only for GCC 12: pipevm's own
// code keeps both warnings.
#pragma once

// Around the inclusion of headers whose inlined AVX-512 code GCC 12 warns
// about falsely (eigen.hpp uses them around Eigen's too).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#define PIPEVM_BEGIN_INTRINSICS_HEADERS                                                      \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define PIPEVM_END_INTRINSICS_HEADERS _Pragma("GCC diagnostic pop")
#else
#define PIPEVM_BEGIN_INTRINSICS_HEADERS
#define PIPEVM_END_INTRINSICS_HEADERS
#endif

PIPEVM_BEGIN_INTRINSICS_HEADERS
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
PIPEVM_END_INTRINSICS_HEADERS
