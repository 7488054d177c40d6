// Eigen, as every pipevm file includes it: through this header only, so that
// the one workaround below covers every translation unit.
//
// GCC 12's AVX-512 intrinsics make their "don't care" operands with
// `__m512 __Y = __Y;` (_mm512_undefined_ps and friends). Once Eigen's
// AVX-512 kernels (ptranspose, gemm_pack_lhs, pmax, ...) are inlined, GCC 12
// reports `'__Y' may be used uninitialized [-Wmaybe-uninitialized]` (or `is
// used uninitialized`, -Wuninitialized, where it is sure) inside
// avx512fintrin.h: a false positive, GCC bug 105593, that -march=native
// turns into a failed build with warnings as errors on any AVX-512 machine
// (138 errors from runtime/layers.cpp alone). The warning is reported at the
// intrinsic's line in the system header, so it is silenced for the lines of
// the headers included here — <immintrin.h> first, so that it is not
// included from elsewhere before — and only for GCC 12: pipevm's own code
// keeps both warnings. The CI build compiles every file that includes Eigen
// for x86-64-v4 as well (PIPEVM_CHECK_AVX512, cmake/Avx512Check.cmake), so
// that this cannot come back unseen on a machine without AVX-512.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <Eigen/Core>

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic pop
#endif
