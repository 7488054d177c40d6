// The ViT kernels in plain C++ (vit_kernels.hpp), for any CPU: 16 lanes as
// an array the compiler may vectorise for whatever -march the build has,
// sums over lanes in the vector sets' tree. A multiply-add is fused where
// the build targets FMA (then the bits are the vector sets'), and rounds
// twice otherwise. Products in tiles of 4 rows x 16 columns.
#include "vit_kernel_products.hpp"
#include "vit_kernel_sets.hpp"

namespace pipevm::runtime {
namespace vit_portable {

struct Lanes {
  struct V {
    float lane[16];
  };
  static constexpr int kTileRows = 4;
  static constexpr int kTileVectors = 1;
  static constexpr int kNarrowRows = 4;

  template <typename F>
  static V each(F f) {
    V out;
    for (int i = 0; i < 16; ++i) out.lane[i] = f(i);
    return out;
  }
  static V zero() { return set(0.0f); }
  static V set(float x) {
    return each([x](int) { return x; });
  }
  static V load(const float* p) {
    return each([p](int i) { return p[i]; });
  }
  static V load(const float* p, int n, float fill) {
    return each([p, n, fill](int i) { return i < n ? p[i] : fill; });
  }
  static void store(float* p, V v) {
    for (int i = 0; i < 16; ++i) p[i] = v.lane[i];
  }
  static void store(float* p, V v, int n) {
    for (int i = 0; i < n && i < 16; ++i) p[i] = v.lane[i];
  }
  static V add(V a, V b) {
    return each([&](int i) { return a.lane[i] + b.lane[i]; });
  }
  static V sub(V a, V b) {
    return each([&](int i) { return a.lane[i] - b.lane[i]; });
  }
  static V mul(V a, V b) {
    return each([&](int i) { return a.lane[i] * b.lane[i]; });
  }
  static V div(V a, V b) {
    return each([&](int i) { return a.lane[i] / b.lane[i]; });
  }
  // As x86's minps and maxps: the second operand unless the first is less (greater).
  static V min(V a, V b) {
    return each([&](int i) { return a.lane[i] < b.lane[i] ? a.lane[i] : b.lane[i]; });
  }
  static V max(V a, V b) {
    return each([&](int i) { return a.lane[i] > b.lane[i] ? a.lane[i] : b.lane[i]; });
  }
  static V fma(V a, V b, V c) {
#ifdef __FMA__
    return each([&](int i) { return __builtin_fmaf(a.lane[i], b.lane[i], c.lane[i]); });
#else
    return each([&](int i) { return a.lane[i] * b.lane[i] + c.lane[i]; });
#endif
  }
  static V abs(V a) {
    return each([&](int i) { return __builtin_fabsf(a.lane[i]); });
  }
  static V select_less(V a, V b, V if_less, V otherwise) {
    return each([&](int i) { return a.lane[i] < b.lane[i] ? if_less.lane[i] : otherwise.lane[i]; });
  }
  static V round(V a) {
    return each([&](int i) { return __builtin_nearbyintf(a.lane[i]); });
  }
  static V pow2(V n) {
    return each([&](int i) {
      const auto bits = static_cast<unsigned>(static_cast<int>(n.lane[i]) + 127) << 23;
      return __builtin_bit_cast(float, bits);
    });
  }
  static void transpose16(const float* src, int ld_src, float* dst, int ld_dst) {
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 16; ++j) dst[j * ld_dst + i] = src[i * ld_src + j];
    }
  }
  static float sum(V v) {
    float eight[8], four[4];
    for (int i = 0; i < 8; ++i) eight[i] = v.lane[i] + v.lane[i + 8];
    for (int i = 0; i < 4; ++i) four[i] = eight[i] + eight[i + 4];
    return (four[0] + four[2]) + (four[1] + four[3]);
  }
  static float max(V v) {
    float largest = v.lane[0];
    for (int i = 1; i < 16; ++i) largest = largest < v.lane[i] ? v.lane[i] : largest;
    return largest;
  }
};

}  // namespace vit_portable

extern const KernelSet kVitKernelsPortable =
    vit_kernel::make_kernel_set<vit_portable::Lanes>("portable");

}  // namespace pipevm::runtime
