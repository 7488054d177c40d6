// The ViT kernels' row and elementwise work (vit_kernels.hpp), written once
// over a 16-lane type L that each kernel set's file defines (AVX-512, AVX2,
// portable): exp, the erf-based GELU and its derivative, softmax rows and
// their backward, LayerNorm forward and backward. Every function is a
// template on L, so each set's instantiations are its own symbols: nothing
// compiled for AVX-512 can stand in for the AVX2 set's code at link time.
// For the same reason nothing here calls the standard library.
//
// L provides: V (16 floats), kTileRows and kTileVectors (the product's
// micro-tile), kNarrowRows (its rows when one vector wide), zero, set, load(p), load(p, n, fill)
// (lanes from n on hold fill), store(p, v), store(p, v, n), add, sub, mul, div, min, max, fma (a *
// b + c), abs, select_less(a, b, x, y) (a < b ? x : y), round (to nearest, ties to even), pow2 (2^n
// for integral n in [-126, 127]), and sum and max over the 16 lanes in one fixed tree: lanes i and
// i + 8, then i and i + 4, then i and i + 2, then the last two; and transpose16(src, ld_src, dst,
// ld_dst), a 16 x 16 block of floats transposed.
#pragma once

#include "vit_kernels.hpp"

namespace pipevm::runtime::vit_kernel {

inline constexpr int kLanes = 16;

// Lanes of a row chunk at column c of a row of `width`: 16, or the rest.
constexpr int lanes_at(int c, int width) {
  return width - c < kLanes ? width - c : kLanes;
}

// exp(x) per lane, within about 1 ulp: x = n ln 2 + r with |r| <= ln 2 / 2,
// e^r by its Taylor polynomial of degree 7 (relative error below 6e-9),
// times 2^n. 0 below -87.3 (e^-87.3 is about the least normal float, and
// -inf gives 0); inputs above 88 give e^88.
template <class L>
typename L::V exp(typename L::V x) {
  constexpr float kLog2E = 1.44269504f;
  constexpr float kLn2High = 0.693359375f;  // few bits: n * kLn2High is exact
  constexpr float kLn2Low = -2.12194440e-4f;
  const typename L::V clamped = L::min(L::max(x, L::set(-87.3f)), L::set(88.0f));
  const typename L::V n = L::round(L::mul(clamped, L::set(kLog2E)));
  typename L::V r = L::fma(n, L::set(-kLn2High), clamped);
  r = L::fma(n, L::set(-kLn2Low), r);
  typename L::V p = L::set(1.0f / 5040.0f);
  p = L::fma(p, r, L::set(1.0f / 720.0f));
  p = L::fma(p, r, L::set(1.0f / 120.0f));
  p = L::fma(p, r, L::set(1.0f / 24.0f));
  p = L::fma(p, r, L::set(1.0f / 6.0f));
  p = L::fma(p, r, L::set(0.5f));
  p = L::fma(p, r, L::set(1.0f));
  p = L::fma(p, r, L::set(1.0f));
  return L::select_less(x, L::set(-87.3f), L::zero(), L::mul(p, L::pow2(n)));
}

// exp(a^2) erfc(a) = G(a - 2) on 0 <= a <= 4, G of degree 15, fitted by
// bench/vit/fit_erf.py (relative error 2.3e-8; 1 + erf below within
// 2.2e-7).
inline constexpr float kScaledErfc[] = {
    0.255395681f,    -0.106796481f,    0.041802939f,    -0.0154604949f,
    0.0054397122f,   -0.00183194585f,  0.000594585494f, -0.000184633391f,
    5.36270272e-05f, -1.62027154e-05f, 5.73508532e-06f, -1.40498503e-06f,
    3.40947715e-08f, -4.04620693e-08f, 6.48514202e-08f, -1.41398573e-08f};

template <class L, std::size_t kCount>
typename L::V polynomial(const float (&coefficients)[kCount], typename L::V x) {
  typename L::V p = L::set(coefficients[kCount - 1]);
  for (std::size_t i = kCount - 1; i-- > 0;) p = L::fma(p, x, L::set(coefficients[i]));
  return p;
}

// GELU(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, PyTorch's nn.GELU().
inline constexpr float kSqrtHalf = 0.707106781f;
inline constexpr float kInverseSqrt2Pi = 0.398942280f;

// activated = GELU(x) and slope = GELU'(x) = Phi(x) + x phi(x) over rows x
// cols (a product's tile: x is read from slope's place and overwritten
// there). With z = x / sqrt 2 and e = exp(-z^2), phi(x) = e / sqrt(2 pi)
// and, for |z| < 4, erfc(|z|) = e G(|z| - 2); 2 Phi(x) = 1 + erf(z) is
// 2 - erfc(z) for z >= 0 and erfc(-z) for z < 0, which keeps its relative
// accuracy where Phi is small; beyond |z| = 4 it is 2 or 0. One exp serves
// both.
template <class L>
[[gnu::noinline]] void gelu_rows(float* activated, int ld_activated, float* slope, int ld_slope,
                                 int rows, int cols) {
  using V = typename L::V;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; c += kLanes) {
      const int n = lanes_at(c, cols);
      float* at = slope + r * ld_slope + c;
      const V x = L::load(at, n, 0.0f);
      const V z = L::mul(x, L::set(kSqrtHalf));
      const V e = exp<L>(L::mul(L::sub(L::zero(), z), z));
      const V a = L::min(L::abs(z), L::set(4.0f));
      const V erfc = L::mul(e, polynomial<L>(kScaledErfc, L::sub(a, L::set(2.0f))));
      const V inside = L::select_less(z, L::zero(), erfc, L::sub(L::set(2.0f), erfc));
      const V outside = L::select_less(z, L::zero(), L::zero(), L::set(2.0f));
      const V half_phi = L::mul(L::set(0.5f), L::select_less(a, L::set(4.0f), inside, outside));
      L::store(activated + r * ld_activated + c, L::mul(x, half_phi), n);
      L::store(at, L::fma(x, L::mul(L::set(kInverseSqrt2Pi), e), half_phi), n);
    }
  }
}

// c *= factor over rows x cols (a product's tile).
template <class L>
[[gnu::noinline]] void times_rows(float* c, int ldc, const float* factor, int ld_factor, int rows,
                                  int cols) {
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; j += kLanes) {
      const int n = lanes_at(j, cols);
      float* out = c + r * ldc + j;
      L::store(out, L::mul(L::load(out, n, 0.0f), L::load(factor + r * ld_factor + j, n, 0.0f)), n);
    }
  }
}

// Each row of `cols` floats (rows `ld` apart) becomes its softmax.
template <class L>
[[gnu::noinline]] void softmax_rows(float* p, int ld, int rows, int cols) {
  constexpr float kMinusInfinity = -__builtin_inff();
  if (cols <= kLanes) {  // a row in one vector: one load and one store
    for (int r = 0; r < rows; ++r) {
      const typename L::V x = L::load(p + r * ld, cols, kMinusInfinity);
      const typename L::V e = exp<L>(L::sub(x, L::set(L::max(x))));
      L::store(p + r * ld, L::div(e, L::set(L::sum(e))), cols);
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    float* row = p + r * ld;
    typename L::V largest = L::set(kMinusInfinity);
    for (int c = 0; c < cols; c += kLanes) {
      largest = L::max(largest, L::load(row + c, lanes_at(c, cols), kMinusInfinity));
    }
    const typename L::V shift = L::set(L::max(largest));
    typename L::V total = L::zero();
    for (int c = 0; c < cols; c += kLanes) {
      const int n = lanes_at(c, cols);
      const typename L::V e = exp<L>(L::sub(L::load(row + c, n, kMinusInfinity), shift));
      L::store(row + c, e, n);
      total = L::add(total, e);
    }
    const typename L::V sum = L::set(L::sum(total));
    for (int c = 0; c < cols; c += kLanes) {
      const int n = lanes_at(c, cols);
      L::store(row + c, L::div(L::load(row + c, n, 0.0f), sum), n);
    }
  }
}

// Through the softmax and a scale, row by row: d_s = scale * p * (d_p -
// <d_p, p>); d_p is overwritten by d_s.
template <class L>
[[gnu::noinline]] void softmax_backward_rows(float* d_p, const float* p, int ld, int rows, int cols,
                                             float scale) {
  if (cols <= kLanes) {  // a row in one vector: one load of each and one store
    for (int r = 0; r < rows; ++r) {
      const typename L::V d = L::load(d_p + r * ld, cols, 0.0f);
      const typename L::V q = L::load(p + r * ld, cols, 0.0f);
      const typename L::V dot = L::set(L::sum(L::mul(d, q)));
      L::store(d_p + r * ld, L::mul(L::mul(L::set(scale), q), L::sub(d, dot)), cols);
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    float* d_row = d_p + r * ld;
    const float* p_row = p + r * ld;
    typename L::V inner = L::zero();
    for (int c = 0; c < cols; c += kLanes) {
      const int n = lanes_at(c, cols);
      inner = L::fma(L::load(d_row + c, n, 0.0f), L::load(p_row + c, n, 0.0f), inner);
    }
    const typename L::V dot = L::set(L::sum(inner));
    for (int c = 0; c < cols; c += kLanes) {
      const int n = lanes_at(c, cols);
      const typename L::V scaled_p = L::mul(L::set(scale), L::load(p_row + c, n, 0.0f));
      L::store(d_row + c, L::mul(scaled_p, L::sub(L::load(d_row + c, n, 0.0f), dot)), n);
    }
  }
}

template <class L>
[[gnu::noinline]] void layernorm_forward_rows(const LayerNormForwardArgs& a) {
  const int w = a.width;
  const float inverse_width = 1.0f / static_cast<float>(w);
  for (int r = 0; r < a.rows; ++r) {
    const float* x = a.in + r * w;
    typename L::V total = L::zero();
    for (int c = 0; c < w; c += kLanes) total = L::add(total, L::load(x + c, lanes_at(c, w), 0.0f));
    const float mean_value = L::sum(total) * inverse_width;
    const typename L::V mean = L::set(mean_value);
    typename L::V squares = L::zero();
    for (int c = 0; c < w; c += kLanes) {
      const typename L::V centred = L::sub(L::load(x + c, lanes_at(c, w), mean_value), mean);
      squares = L::fma(centred, centred, squares);
    }
    const float inverse_std =
        1.0f / __builtin_sqrtf(L::sum(squares) * inverse_width + kLayerNormEpsilon);
    a.inverse_std[r] = inverse_std;
    const typename L::V scale = L::set(inverse_std);
    for (int c = 0; c < w; c += kLanes) {
      const int n = lanes_at(c, w);
      const typename L::V x_hat = L::mul(L::sub(L::load(x + c, n, 0.0f), mean), scale);
      L::store(a.normalized + r * w + c, x_hat, n);
      L::store(a.out + r * w + c,
               L::fma(x_hat, L::load(a.gamma + c, n, 0.0f), L::load(a.beta + c, n, 0.0f)), n);
    }
  }
}

// With g = d_out * gamma: d_in = inverse_std (g - mean(g) - x_hat mean(g x_hat)).
template <class L>
[[gnu::noinline]] void layernorm_backward_rows(const LayerNormBackwardArgs& a) {
  const int w = a.width;
  const float inverse_width = 1.0f / static_cast<float>(w);
  for (int c = 0; c < w; c += kLanes) {
    L::store(a.d_gamma + c, L::zero(), lanes_at(c, w));
    L::store(a.d_beta + c, L::zero(), lanes_at(c, w));
  }
  for (int r = 0; r < a.rows; ++r) {
    const float* d_out = a.d_out + r * w;
    const float* x_hat = a.normalized + r * w;
    typename L::V sum = L::zero();
    typename L::V sum_x_hat = L::zero();
    for (int c = 0; c < w; c += kLanes) {
      const int n = lanes_at(c, w);
      const typename L::V dy = L::load(d_out + c, n, 0.0f);
      const typename L::V xh = L::load(x_hat + c, n, 0.0f);
      const typename L::V g = L::mul(dy, L::load(a.gamma + c, n, 0.0f));
      sum = L::add(sum, g);
      sum_x_hat = L::fma(g, xh, sum_x_hat);
      L::store(a.d_gamma + c, L::fma(dy, xh, L::load(a.d_gamma + c, n, 0.0f)), n);
      L::store(a.d_beta + c, L::add(L::load(a.d_beta + c, n, 0.0f), dy), n);
    }
    const typename L::V mean = L::set(L::sum(sum) * inverse_width);
    const typename L::V mean_x_hat = L::set(L::sum(sum_x_hat) * inverse_width);
    const typename L::V scale = L::set(a.inverse_std[r]);
    for (int c = 0; c < w; c += kLanes) {
      const int n = lanes_at(c, w);
      const typename L::V g = L::mul(L::load(d_out + c, n, 0.0f), L::load(a.gamma + c, n, 0.0f));
      const typename L::V xh = L::load(x_hat + c, n, 0.0f);
      typename L::V d = L::mul(scale, L::sub(L::sub(g, mean), L::mul(xh, mean_x_hat)));
      if (a.addend != nullptr) d = L::add(L::load(a.addend + r * w + c, n, 0.0f), d);
      L::store(a.d_in + r * w + c, d, n);
    }
  }
}

}  // namespace pipevm::runtime::vit_kernel
