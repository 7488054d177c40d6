// The ViT kernels on AVX2 with FMA (vit_kernels.hpp): 16 lanes in two ymm
// registers, the low one lanes 0-7, so that sums over lanes take the
// AVX-512 set's tree and give its bits; products in tiles of 6 rows x 16
// columns (12 accumulators of the 16 registers). Compiled with -mavx2 -mfma
// and without AVX-512 on every x86-64 build (runtime/CMakeLists.txt), run
// only where the CPU has both (vit_kernels.cpp).
#include "intrinsics.hpp"
#include "vit_kernel_products.hpp"
#include "vit_kernel_sets.hpp"
#include "vit_kernel_x86.hpp"

namespace pipevm::runtime {
namespace vit_avx2 {

struct Lanes {
  struct V {
    __m256 low, high;
  };
  static constexpr int kTileRows = 6;
  static constexpr int kTileVectors = 1;
  static constexpr int kNarrowRows = 6;

  // Lanes below n of each half, as a mask of all-ones lanes.
  static __m256i first(int n, int half) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * half), index);
  }
  static V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static V set(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static V load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  // Whole vectors without a mask (see vit_kernels_avx512.cpp).
  static V load(const float* p, int n, float fill) {
    if (n >= 16) return load(p);
    const __m256i low = first(n, 0);
    const __m256i high = first(n, 1);
    const __m256 f = _mm256_set1_ps(fill);
    return {_mm256_blendv_ps(f, _mm256_maskload_ps(p, low), _mm256_castsi256_ps(low)),
            _mm256_blendv_ps(f, _mm256_maskload_ps(p + 8, high), _mm256_castsi256_ps(high))};
  }
  static void store(float* p, V v) {
    _mm256_storeu_ps(p, v.low);
    _mm256_storeu_ps(p + 8, v.high);
  }
  static void store(float* p, V v, int n) {
    if (n >= 16) {
      store(p, v);
      return;
    }
    _mm256_maskstore_ps(p, first(n, 0), v.low);
    _mm256_maskstore_ps(p + 8, first(n, 1), v.high);
  }
  static V add(V a, V b) { return {_mm256_add_ps(a.low, b.low), _mm256_add_ps(a.high, b.high)}; }
  static V sub(V a, V b) { return {_mm256_sub_ps(a.low, b.low), _mm256_sub_ps(a.high, b.high)}; }
  static V mul(V a, V b) { return {_mm256_mul_ps(a.low, b.low), _mm256_mul_ps(a.high, b.high)}; }
  static V div(V a, V b) { return {_mm256_div_ps(a.low, b.low), _mm256_div_ps(a.high, b.high)}; }
  static V min(V a, V b) { return {_mm256_min_ps(a.low, b.low), _mm256_min_ps(a.high, b.high)}; }
  static V max(V a, V b) { return {_mm256_max_ps(a.low, b.low), _mm256_max_ps(a.high, b.high)}; }
  static V fma(V a, V b, V c) {
    return {_mm256_fmadd_ps(a.low, b.low, c.low), _mm256_fmadd_ps(a.high, b.high, c.high)};
  }
  static V abs(V a) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    return {_mm256_and_ps(a.low, magnitude), _mm256_and_ps(a.high, magnitude)};
  }
  static V select_less(V a, V b, V if_less, V otherwise) {
    return {
        _mm256_blendv_ps(otherwise.low, if_less.low, _mm256_cmp_ps(a.low, b.low, _CMP_LT_OQ)),
        _mm256_blendv_ps(otherwise.high, if_less.high, _mm256_cmp_ps(a.high, b.high, _CMP_LT_OQ))};
  }
  static V round(V a) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return {_mm256_round_ps(a.low, kNearest), _mm256_round_ps(a.high, kNearest)};
  }
  static __m256 pow2(__m256 n) {
    const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  }
  static V pow2(V n) { return {pow2(n.low), pow2(n.high)}; }
  // An 8 x 8 block: rows of 32-bit pairs, then columns of 4 within each
  // 128-bit half, then the halves gathered.
  static void transpose8(const float* src, int ld_src, float* dst, int ld_dst) {
    __m256 row[8], pairs[8], quads[8];
    for (int i = 0; i < 8; ++i) row[i] = _mm256_loadu_ps(src + i * ld_src);
    for (int i = 0; i < 8; i += 2) {
      pairs[i] = _mm256_unpacklo_ps(row[i], row[i + 1]);
      pairs[i + 1] = _mm256_unpackhi_ps(row[i], row[i + 1]);
    }
    // quads[4g + c], half h: rows 4g .. 4g + 3 at column 4h + c.
    for (int g = 0; g < 8; g += 4) {
      quads[g] = _mm256_shuffle_ps(pairs[g], pairs[g + 2], 0x44);
      quads[g + 1] = _mm256_shuffle_ps(pairs[g], pairs[g + 2], 0xEE);
      quads[g + 2] = _mm256_shuffle_ps(pairs[g + 1], pairs[g + 3], 0x44);
      quads[g + 3] = _mm256_shuffle_ps(pairs[g + 1], pairs[g + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
      _mm256_storeu_ps(dst + c * ld_dst, _mm256_permute2f128_ps(quads[c], quads[4 + c], 0x20));
      _mm256_storeu_ps(dst + (4 + c) * ld_dst,
                       _mm256_permute2f128_ps(quads[c], quads[4 + c], 0x31));
    }
  }
  static void transpose16(const float* src, int ld_src, float* dst, int ld_dst) {
    for (int i = 0; i < 16; i += 8) {
      for (int j = 0; j < 16; j += 8)
        transpose8(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);
    }
  }
  static float sum(V v) { return vit_kernel::sum_of_eight<Lanes>(_mm256_add_ps(v.low, v.high)); }
  static float max(V v) { return vit_kernel::max_of_eight<Lanes>(_mm256_max_ps(v.low, v.high)); }
};

}  // namespace vit_avx2

extern const KernelSet kVitKernelsAvx2 = vit_kernel::make_kernel_set<vit_avx2::Lanes>("avx2");

}  // namespace pipevm::runtime
