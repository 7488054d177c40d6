// What the ViT's two x86 kernel sets share: the end of the lanes' fixed sum
// and max trees once 16 lanes are down to 8 (lanes i and i + 4, then i and
// i + 2, then the last two). Templates on the set's lanes type, so that
// each set's file has instantiations of its own, compiled for its own
// instruction set (see vit_kernel_math.hpp).
#pragma once

#include "intrinsics.hpp"

namespace pipevm::runtime::vit_kernel {

template <class L>
float sum_of_eight(__m256 eight) {
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_movehdup_ps(four)));
}

template <class L>
float max_of_eight(__m256 eight) {
  __m128 four = _mm_max_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  four = _mm_max_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_max_ss(four, _mm_movehdup_ps(four)));
}

}  // namespace pipevm::runtime::vit_kernel
