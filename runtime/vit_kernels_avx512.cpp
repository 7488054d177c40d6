// The ViT kernels on AVX-512F (vit_kernels.hpp): 16 lanes in one zmm
// register, products in tiles of 8 rows x 32 columns (16 accumulators), 16
// rows x 16 columns when c is one vector wide. Compiled with -mavx512f on
// every x86-64 build (runtime/CMakeLists.txt), run only where the CPU has
// it (vit_kernels.cpp). Leaves out AVX-512's other extensions.
#include "intrinsics.hpp"
#include "vit_kernel_products.hpp"
#include "vit_kernel_sets.hpp"
#include "vit_kernel_x86.hpp"

namespace pipevm::runtime {
namespace vit_avx512 {

struct Lanes {
  using V = __m512;
  static constexpr int kTileRows = 8;
  static constexpr int kTileVectors = 2;
  static constexpr int kNarrowRows = 16;

  static __mmask16 first(int n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  }
  static V zero() { return _mm512_setzero_ps(); }
  static V set(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // Whole vectors without a mask: masked stores combine worse, and GCC
  // treats a masked load as reading any memory.
  static V load(const float* p, int n, float fill) {
    if (n >= 16) return _mm512_loadu_ps(p);
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), first(n), p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v, int n) {
    if (n >= 16) {
      _mm512_storeu_ps(p, v);
    } else {
      _mm512_mask_storeu_ps(p, first(n), v);
    }
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V select_less(V a, V b, V if_less, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), otherwise, if_less);
  }
  static V round(V a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static V pow2(V n) {
    const __m512i biased = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(biased, 23));
  }
  // Rows of 32-bit pairs, then of 64-bit pairs within each 128-bit quarter,
  // then the quarters gathered across rows.
  static void transpose16(const float* src, int ld_src, float* dst, int ld_dst) {
    V row[16], pairs[16];
    for (int i = 0; i < 16; ++i) row[i] = _mm512_loadu_ps(src + i * ld_src);
    for (int i = 0; i < 16; i += 2) {
      pairs[i] = _mm512_unpacklo_ps(row[i], row[i + 1]);
      pairs[i + 1] = _mm512_unpackhi_ps(row[i], row[i + 1]);
    }
    // quads[4g + c], quarter q: rows 4g .. 4g + 3 at column 4q + c.
    V quads[16];
    for (int g = 0; g < 16; g += 4) {
      const __m512d low0 = _mm512_castps_pd(pairs[g]), high0 = _mm512_castps_pd(pairs[g + 1]);
      const __m512d low1 = _mm512_castps_pd(pairs[g + 2]), high1 = _mm512_castps_pd(pairs[g + 3]);
      quads[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(low0, low1));
      quads[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(low0, low1));
      quads[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(high0, high1));
      quads[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(high0, high1));
    }
    for (int c = 0; c < 4; ++c) {
      const V first01 = _mm512_shuffle_f32x4(quads[c], quads[4 + c], 0x44);
      const V first23 = _mm512_shuffle_f32x4(quads[c], quads[4 + c], 0xEE);
      const V second01 = _mm512_shuffle_f32x4(quads[8 + c], quads[12 + c], 0x44);
      const V second23 = _mm512_shuffle_f32x4(quads[8 + c], quads[12 + c], 0xEE);
      _mm512_storeu_ps(dst + c * ld_dst, _mm512_shuffle_f32x4(first01, second01, 0x88));
      _mm512_storeu_ps(dst + (4 + c) * ld_dst, _mm512_shuffle_f32x4(first01, second01, 0xDD));
      _mm512_storeu_ps(dst + (8 + c) * ld_dst, _mm512_shuffle_f32x4(first23, second23, 0x88));
      _mm512_storeu_ps(dst + (12 + c) * ld_dst, _mm512_shuffle_f32x4(first23, second23, 0xDD));
    }
  }
  // Lanes i and i + 8 of v, as 8 lanes.
  static __m256 low(V v) { return _mm512_castps512_ps256(v); }
  static __m256 high(V v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  }
  static float sum(V v) { return vit_kernel::sum_of_eight<Lanes>(_mm256_add_ps(low(v), high(v))); }
  static float max(V v) { return vit_kernel::max_of_eight<Lanes>(_mm256_max_ps(low(v), high(v))); }
};

}  // namespace vit_avx512

extern const KernelSet kVitKernelsAvx512 = vit_kernel::make_kernel_set<vit_avx512::Lanes>("avx512");

}  // namespace pipevm::runtime
