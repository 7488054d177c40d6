// The ViT kernels' products and attention (vit_kernels.hpp), written once
// over the 16-lane type L of vit_kernel_math.hpp.
//
// A product c = a' * b' is cut into column blocks of kTileVectors x 16
// columns and, in each, tiles of kTileRows rows (then 4, 2, 1 for the
// rest); when c has at most 16 columns, into one block one vector wide and
// tiles of kNarrowRows rows. A tile keeps its
// rows x columns of c in registers: it starts from what the epilogue adds
// (c itself, an addend, a bias), then for each p in order of the shared
// dimension broadcasts a(i, p) for each of its rows and adds it times row p
// of b's block with one fused multiply-add. So every element of c is the
// same chain of operations, whatever the tiling, the vector width or where
// the buffers lie. b's block is read in place when b is not transposed and
// the block is whole; otherwise it is packed first, transposed and padded
// with zeros, into a panel of the thread's scratch. The epilogue stores the
// tile, then applies the GELU (with its derivative) or a factor to it while
// it is in the first-level cache. Attention loops over samples and heads with these
// products on the heads' columns of qkv and with softmax_rows in between,
// so a head costs no call into a library.
#pragma once

#include "vit_kernel_math.hpp"

namespace pipevm::runtime::vit_kernel {

// b as panels of `width` columns: the panel of columns j0 .. j0 + width has
// row p at data + p * ld + j0.
struct Panels {
  const float* data;
  int ld;
};

// b, transposed back if it is, with its columns padded with zeros to a
// multiple of `width`, in the thread's scratch: k rows of ld floats.
template <class L>
[[gnu::noinline]] Panels pack_panels(const RowMajorGemm& g, int width) {
  const int ld = (g.n + width - 1) / width * width;
  float* packed = kernel_scratch(0, static_cast<std::size_t>(g.k) * static_cast<std::size_t>(ld));
  for (int p = 0; p < g.k; ++p) {
    for (int j = g.n; j < ld; ++j) packed[p * ld + j] = 0.0f;
  }
  if (g.b_transposed) {
    // 16 x 16 blocks through the lanes' transpose, the edges one by one.
    for (int j0 = 0; j0 < g.n; j0 += kLanes) {
      for (int p0 = 0; p0 < g.k; p0 += kLanes) {
        if (j0 + kLanes <= g.n && p0 + kLanes <= g.k) {
          L::transpose16(g.b + j0 * g.ldb + p0, g.ldb, packed + p0 * ld + j0, ld);
          continue;
        }
        for (int j = j0; j < g.n && j < j0 + kLanes; ++j) {
          for (int p = p0; p < g.k && p < p0 + kLanes; ++p) packed[p * ld + j] = g.b[j * g.ldb + p];
        }
      }
    }
  } else {
    for (int p = 0; p < g.k; ++p) {
      for (int j = 0; j < g.n; ++j) packed[p * ld + j] = g.b[p * g.ldb + j];
    }
  }
  return {packed, ld};
}

// The starting value of c's row i at columns j .. j + n (lanes past n: 0).
template <class L>
[[gnu::always_inline]] inline typename L::V tile_start(const ProductArgs& args, int i, int j,
                                                       int n) {
  const RowMajorGemm& g = args.product;
  typename L::V start = L::zero();
  if (g.beta != 0.0f) {
    start = L::load(g.c + i * g.ldc + j, n, 0.0f);
  } else if (args.addend != nullptr) {
    const int row = args.addend_period > 0 ? i % args.addend_period : i;
    start = L::load(args.addend + row * args.ld_addend + j, n, 0.0f);
  }
  if (args.bias != nullptr) start = L::add(start, L::load(args.bias + j, n, 0.0f));
  return start;
}

// Rows i0 .. i0 + kRows of c, columns j0 .. j0 + cols (cols <= 16 kVectors).
template <class L, int kRows, int kVectors, bool kATransposed, bool kBiasGradient>
[[gnu::noinline]] void product_tile(const ProductArgs& args, Panels b, int i0, int j0, int cols) {
  using V = typename L::V;
  const RowMajorGemm& g = args.product;
  int lanes[std::size_t{kVectors}];
  for (int v = 0; v < kVectors; ++v) {
    const int rest = cols - kLanes * v;
    lanes[v] = rest < 0 ? 0 : rest > kLanes ? kLanes : rest;
  }
  V acc[std::size_t{kRows}][std::size_t{kVectors}];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = lanes[v] > 0 ? tile_start<L>(args, i0 + r, j0 + kLanes * v, lanes[v]) : L::zero();
    }
  }
  V bias_gradient = L::zero();
  for (int p = 0; p < g.k; ++p) {
    V row[std::size_t{kVectors}];
    for (int v = 0; v < kVectors; ++v) row[v] = L::load(b.data + p * b.ld + j0 + kLanes * v);
    for (int r = 0; r < kRows; ++r) {
      const V a = L::set(kATransposed ? g.a[p * g.lda + i0 + r] : g.a[(i0 + r) * g.lda + p]);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = L::fma(a, row[v], acc[r][v]);
    }
    if constexpr (kBiasGradient) {
      bias_gradient = L::add(bias_gradient, L::load(g.a + p * g.lda + i0, kRows, 0.0f));
    }
  }
  if constexpr (kBiasGradient) {
    float* target = args.bias_gradient + i0;
    L::store(target, L::add(L::load(target, kRows, 0.0f), bias_gradient), kRows);
  }
  const bool scale = args.epilogue == Epilogue::scale;
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      if (lanes[v] == 0) continue;
      const V value = scale ? L::mul(L::set(args.scale), acc[r][v]) : acc[r][v];
      L::store(g.c + (i0 + r) * g.ldc + j0 + kLanes * v, value, lanes[v]);
    }
  }
  if (args.epilogue == Epilogue::gelu) {
    gelu_rows<L>(args.activated + i0 * args.ld_activated + j0, args.ld_activated,
                 g.c + i0 * g.ldc + j0, g.ldc, kRows, cols);
  } else if (args.epilogue == Epilogue::times) {
    times_rows<L>(g.c + i0 * g.ldc + j0, g.ldc, args.factor + i0 * args.ld_factor + j0,
                  args.ld_factor, kRows, cols);
  }
}

// Rows i0 .. i0 + kRows of c, every column block in turn (the bias
// gradient with the first), so that the tile's rows of a, c and the
// epilogue's matrices are read once, row after row.
template <class L, int kRows, int kVectors, bool kATransposed>
void product_row_tile(const ProductArgs& args, Panels b, int i0) {
  constexpr int kWidth = kLanes * kVectors;
  const int n = args.product.n;
  for (int j0 = 0; j0 < n; j0 += kWidth) {
    const int cols = n - j0 < kWidth ? n - j0 : kWidth;
    if constexpr (kATransposed) {
      if (j0 == 0 && args.bias_gradient != nullptr) {
        product_tile<L, kRows, kVectors, true, true>(args, b, i0, j0, cols);
        continue;
      }
    }
    product_tile<L, kRows, kVectors, kATransposed, false>(args, b, i0, j0, cols);
  }
}

// Every row tile: kRows rows at a time, then 4, 2, 1.
template <class L, int kRows, int kVectors, bool kATransposed>
void product_rows(const ProductArgs& args) {
  const RowMajorGemm& g = args.product;
  constexpr int kWidth = kLanes * kVectors;
  const Panels b =
      g.b_transposed || g.n % kWidth != 0 ? pack_panels<L>(g, kWidth) : Panels{g.b, g.ldb};
  int i = 0;
  for (; i + kRows <= g.m; i += kRows)
    product_row_tile<L, kRows, kVectors, kATransposed>(args, b, i);
  if constexpr (kRows > 4) {
    for (; i + 4 <= g.m; i += 4) product_row_tile<L, 4, kVectors, kATransposed>(args, b, i);
  }
  if constexpr (kRows > 2) {
    for (; i + 2 <= g.m; i += 2) product_row_tile<L, 2, kVectors, kATransposed>(args, b, i);
  }
  for (; i < g.m; ++i) product_row_tile<L, 1, kVectors, kATransposed>(args, b, i);
}

template <class L, bool kATransposed>
void product_of(const ProductArgs& args) {
  if (args.product.n <= kLanes) {
    product_rows<L, L::kNarrowRows, 1, kATransposed>(args);
  } else {
    product_rows<L, L::kTileRows, L::kTileVectors, kATransposed>(args);
  }
}

template <class L>
void product(const ProductArgs& args) {
  if (args.product.m <= 0 || args.product.n <= 0) return;
  if (args.product.a_transposed) {
    product_of<L, true>(args);
  } else {
    product_of<L, false>(args);
  }
}

// The heads' columns of one sample in the token matrices.
struct Head {
  int tokens, width, head_width;
  int sample, head;
  const float* at(const float* matrix, int ld, int column) const {
    return matrix + sample * tokens * ld + head * head_width + column;
  }
  float* at(float* matrix, int ld, int column) const {
    return matrix + sample * tokens * ld + head * head_width + column;
  }
};

template <class L>
void attention_forward(const AttentionArgs& a) {
  const int t = a.tokens, d = a.width, hw = a.width / a.heads, ld = 3 * d;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hw));
  for (int sample = 0; sample < a.samples; ++sample) {
    for (int head = 0; head < a.heads; ++head) {
      const Head h{t, d, hw, sample, head};
      float* p = a.probabilities + (sample * a.heads + head) * t * t;
      ProductArgs scores;
      scores.product = {false, true, t, t, hw, h.at(a.qkv, ld, 0), ld, h.at(a.qkv, ld, d),
                        ld,    0.0f, p, t};
      scores.epilogue = Epilogue::scale;
      scores.scale = scale;
      product<L>(scores);
      softmax_rows<L>(p, t, t, t);
      ProductArgs context;
      context.product = {
          false, false, t, hw, t, p, t, h.at(a.qkv, ld, 2 * d), ld, 0.0f, h.at(a.context, d, 0), d};
      product<L>(context);
    }
  }
}

template <class L>
void attention_backward(const AttentionArgs& a) {
  const int t = a.tokens, d = a.width, hw = a.width / a.heads, ld = 3 * d;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hw));
  float* d_scores = kernel_scratch(1, static_cast<std::size_t>(t) * static_cast<std::size_t>(t));
  for (int sample = 0; sample < a.samples; ++sample) {
    for (int head = 0; head < a.heads; ++head) {
      const Head h{t, d, hw, sample, head};
      const float* p = a.saved_probabilities + (sample * a.heads + head) * t * t;
      const float* d_context = h.at(a.d_context, d, 0);
      const float* q = h.at(a.qkv, ld, 0);
      const float* k = h.at(a.qkv, ld, d);
      // d_v = p^T d_context; d_p = d_context v^T; through the softmax and
      // the scale; d_q = d_s k; d_k = d_s^T q.
      ProductArgs step;
      step.product = {true, false, t, hw, t, p, t, d_context, d, 0.0f, h.at(a.d_qkv, ld, 2 * d),
                      ld};
      product<L>(step);
      step.product = {false, true, t,        t, hw, d_context, d, h.at(a.qkv, ld, 2 * d),
                      ld,    0.0f, d_scores, t};
      product<L>(step);
      softmax_backward_rows<L>(d_scores, p, t, t, t, scale);
      step.product = {false, false, t, hw, t, d_scores, t, k, ld, 0.0f, h.at(a.d_qkv, ld, 0), ld};
      product<L>(step);
      step.product = {true, false, t, hw, t, d_scores, t, q, ld, 0.0f, h.at(a.d_qkv, ld, d), ld};
      product<L>(step);
    }
  }
}

template <class L>
void layernorm_forward(const LayerNormForwardArgs& a) {
  layernorm_forward_rows<L>(a);
}

template <class L>
void layernorm_backward(const LayerNormBackwardArgs& a) {
  layernorm_backward_rows<L>(a);
}

// The set made of L's instantiations.
template <class L>
constexpr KernelSet make_kernel_set(const char* name) {
  return {name,
          &product<L>,
          &attention_forward<L>,
          &attention_backward<L>,
          &layernorm_forward<L>,
          &layernorm_backward<L>};
}

}  // namespace pipevm::runtime::vit_kernel
