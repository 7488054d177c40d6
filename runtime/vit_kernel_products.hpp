// The ViT kernels' products and attention (vit_kernels.hpp), written once
// over the 16-lane type L of vit_kernel_math.hpp.
//
// A product c = a' * b' is cut into tiles that keep rows x columns of c in
// registers: kTileRows x (16 kTileVectors), or kNarrowRows x 16 where c has
// at most 16 columns or a is transposed (a weight gradient), then 4, 2 and
// 1 rows for the rest. A tile starts from what the epilogue adds (c itself,
// an addend, a bias), then for each p in order of the shared dimension
// broadcasts a(i, p) for each of its rows and adds it times row p of b's
// panel with one fused multiply-add. So every element of c is the same
// chain of operations, whatever the tiling, the vector width or where the
// buffers lie. b is packed into contiguous panels in the thread's scratch
// (transposed back if it is), but for attention's heads, read in place.
// c goes in blocks of 64 rows, each block panel by panel; a weight
// gradient goes in ranges of p, tile by tile, with its rows of a and b
// fetched ahead. The epilogue stores the tile, then applies the GELU (with
// its slope) or a factor to it while it is in the first-level cache.
// Attention loops over samples and heads with these products on the
// heads' columns of qkv and with softmax_rows in between, so a head costs
// no call into a library.
#pragma once

#include "vit_kernel_math.hpp"

namespace pipevm::runtime::vit_kernel {

// b as panels of `width` columns: the panel of columns j0 .. j0 + width
// has row p at data + (j0 / width) * stride + p * ld.
struct Panels {
  const float* data;
  int ld;
  int stride;
  const float* row(int j0, int width, int p) const { return data + (j0 / width) * stride + p * ld; }
};

// b, transposed back if it is, as panels one after another in the thread's
// scratch (slot 0): each k rows of `width` floats, contiguous, padded with
// zeros past b's last column. A tile then reads its panel front to back,
// never two rows that share a set of the first-level cache.
template <class L>
[[gnu::noinline]] Panels pack_panels(const RowMajorGemm& g, int width) {
  const int panels = (g.n + width - 1) / width;
  const int stride = g.k * width;
  float* packed =
      kernel_scratch(0, static_cast<std::size_t>(panels) * static_cast<std::size_t>(stride));
  if (!g.b_transposed) {
    for (int j0 = 0; j0 < g.n; j0 += width) {
      float* panel = packed + (j0 / width) * stride;
      for (int p = 0; p < g.k; ++p) {
        for (int c = 0; c < width; c += kLanes) {
          const int j = j0 + c;
          const int n = g.n - j < 0 ? 0 : lanes_at(j, g.n);
          L::store(panel + p * width + c, L::load(g.b + p * g.ldb + j, n, 0.0f));
        }
      }
    }
    return {packed, width, stride};
  }
  // 16 x 16 blocks through the lanes' transpose (width is a multiple of
  // 16), the edges (zero past b's last column) one by one.
  for (int j0 = 0; j0 < panels * width; j0 += kLanes) {
    float* panel = packed + (j0 / width) * stride + j0 % width;
    for (int p0 = 0; p0 < g.k; p0 += kLanes) {
      if (j0 + kLanes <= g.n && p0 + kLanes <= g.k) {
        L::transpose16(g.b + j0 * g.ldb + p0, g.ldb, panel + p0 * width, width);
        continue;
      }
      for (int p = p0; p < g.k && p < p0 + kLanes; ++p) {
        for (int c = 0; c < kLanes; ++c) {
          panel[p * width + c] = j0 + c < g.n ? g.b[(j0 + c) * g.ldb + p] : 0.0f;
        }
      }
    }
  }
  return {packed, width, stride};
}

// The products' p from `begin` to `end`; `resume`: c holds the chains an
// earlier range began; `last`: the epilogue follows. With a transposed (a
// weight gradient sums over its many rows p), p goes in ranges of
// kTransposedSteps, every tile of c taking one range after the other, so
// that a range's panel of b stays in the first-level cache for all the
// tiles; the other products take all of p at once.
struct Steps {
  int begin, end;
  bool resume, last;
};
inline constexpr int kTransposedSteps = 128;
// How far ahead such a tile fetches its next rows of a and b (a line each,
// far apart).
inline constexpr int kPrefetchRows = 64;

// The starting value of c's row i at columns j .. j + n (lanes past n: 0):
// c itself when resuming.
template <class L>
[[gnu::always_inline]] inline typename L::V tile_start(const ProductArgs& args, int i, int j, int n,
                                                       bool resume) {
  const RowMajorGemm& g = args.product;
  typename L::V start = L::zero();
  if (resume || g.beta != 0.0f) {
    start = L::load(g.c + i * g.ldc + j, n, 0.0f);
    if (resume) return start;
  } else if (args.addend != nullptr) {
    const int row = args.addend_period > 0 ? i % args.addend_period : i;
    start = L::load(args.addend + row * args.ld_addend + j, n, 0.0f);
  }
  if (args.bias != nullptr) start = L::add(start, L::load(args.bias + j, n, 0.0f));
  return start;
}
// Rows i0 .. i0 + kRows of c, columns j0 .. j0 + cols (cols <= 16
// kVectors), over `steps`. a(i0 + r, p) is a_tile[r * lda + p], or
// a_tile[p * lda + r] when a is transposed.
template <class L, int kRows, int kVectors, bool kATransposed, bool kBiasGradient>
[[gnu::noinline]] void product_tile(const ProductArgs& args, Panels b, const float* a_tile, int i0,
                                    int j0, int cols, Steps steps) {
  using V = typename L::V;
  constexpr int kWidth = kLanes * kVectors;
  const RowMajorGemm& g = args.product;
  int lanes[std::size_t{kVectors}];
  for (int v = 0; v < kVectors; ++v) {
    const int rest = cols - kLanes * v;
    lanes[v] = rest < 0 ? 0 : rest > kLanes ? kLanes : rest;
  }
  // What the tile writes (a stash, far away in memory) and the factor it
  // reads are fetched while it computes: written lines first cost a read.
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      const int at = j0 + kLanes * v;
      if (g.beta == 0.0f && !steps.resume) __builtin_prefetch(g.c + (i0 + r) * g.ldc + at, 1);
      if (!steps.last) continue;
      if (args.epilogue == Epilogue::times) {
        __builtin_prefetch(args.factor + (i0 + r) * args.ld_factor + at);
      } else if (args.epilogue == Epilogue::gelu) {
        __builtin_prefetch(args.activated + (i0 + r) * args.ld_activated + at, 1);
      }
    }
  }
  V acc[std::size_t{kRows}][std::size_t{kVectors}];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = lanes[v] > 0
                      ? tile_start<L>(args, i0 + r, j0 + kLanes * v, lanes[v], steps.resume)
                      : L::zero();
    }
  }
  V bias_gradient = L::zero();
  for (int p = steps.begin; p < steps.end; ++p) {
    const float* b_row = b.row(j0, kWidth, p);
    const float* a_row = a_tile + p * g.lda;  // a transposed
    if constexpr (kATransposed) {
      __builtin_prefetch(a_row + kPrefetchRows * g.lda);
      __builtin_prefetch(b.row(j0, kWidth, p + kPrefetchRows));
    }
    V row[std::size_t{kVectors}];
    for (int v = 0; v < kVectors; ++v) row[v] = L::load(b_row + kLanes * v);
    for (int r = 0; r < kRows; ++r) {
      const V a = L::set(kATransposed ? a_row[r] : a_tile[r * g.lda + p]);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = L::fma(a, row[v], acc[r][v]);
    }
    // A masked load here makes GCC keep the accumulators in memory: whole
    // tiles of 16 rows load a whole vector.
    if constexpr (kBiasGradient) {
      bias_gradient =
          L::add(bias_gradient, kRows == kLanes ? L::load(a_row) : L::load(a_row, kRows, 0.0f));
    }
  }
  if constexpr (kBiasGradient) {
    float* target = args.bias_gradient + i0;
    L::store(target, L::add(L::load(target, kRows, 0.0f), bias_gradient), kRows);
  }
  const bool scale = steps.last && args.epilogue == Epilogue::scale;
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      if (lanes[v] == 0) continue;
      const V value = scale ? L::mul(L::set(args.scale), acc[r][v]) : acc[r][v];
      L::store(g.c + (i0 + r) * g.ldc + j0 + kLanes * v, value, lanes[v]);
    }
  }
  if (!steps.last) return;
  if (args.epilogue == Epilogue::gelu) {
    gelu_rows<L>(args.activated + i0 * args.ld_activated + j0, args.ld_activated,
                 g.c + i0 * g.ldc + j0, g.ldc, kRows, cols);
  } else if (args.epilogue == Epilogue::times) {
    times_rows<L>(g.c + i0 * g.ldc + j0, g.ldc, args.factor + i0 * args.ld_factor + j0,
                  args.ld_factor, kRows, cols);
  }
}

// Rows i0 .. i0 + kRows of c, columns j_begin .. j_end block by block (the
// bias gradient with the first).
template <class L, int kRows, int kVectors, bool kATransposed>
void product_row_tile(const ProductArgs& args, Panels b, int i0, int j_begin, int j_end,
                      Steps steps) {
  constexpr int kWidth = kLanes * kVectors;
  const RowMajorGemm& g = args.product;
  const float* a_tile = kATransposed ? g.a + i0 : g.a + i0 * g.lda;
  for (int j0 = j_begin; j0 < j_end; j0 += kWidth) {
    const int cols = g.n - j0 < kWidth ? g.n - j0 : kWidth;
    if constexpr (kATransposed) {
      if (j0 == 0 && args.bias_gradient != nullptr) {
        product_tile<L, kRows, kVectors, true, true>(args, b, a_tile, i0, j0, cols, steps);
        continue;
      }
    }
    product_tile<L, kRows, kVectors, kATransposed, false>(args, b, a_tile, i0, j0, cols, steps);
  }
}

// Rows i_begin .. i_end of c over columns j_begin .. j_end: kRows at a
// time, then 4, 2, 1.
template <class L, int kRows, int kVectors, bool kATransposed>
void product_block(const ProductArgs& args, Panels b, int i_begin, int i_end, int j_begin,
                   int j_end, Steps steps) {
  int i = i_begin;
  for (; i + kRows <= i_end; i += kRows) {
    product_row_tile<L, kRows, kVectors, kATransposed>(args, b, i, j_begin, j_end, steps);
  }
  if constexpr (kRows > 4) {
    for (; i + 4 <= i_end; i += 4) {
      product_row_tile<L, 4, kVectors, kATransposed>(args, b, i, j_begin, j_end, steps);
    }
  }
  if constexpr (kRows > 2) {
    for (; i + 2 <= i_end; i += 2) {
      product_row_tile<L, 2, kVectors, kATransposed>(args, b, i, j_begin, j_end, steps);
    }
  }
  for (; i < i_end; ++i) {
    product_row_tile<L, 1, kVectors, kATransposed>(args, b, i, j_begin, j_end, steps);
  }
}

// Products with a not transposed go in blocks of this many rows of c,
// each block one column block of b after the other, so that the block's
// tiles share the panel while a block's rows of a, c and the epilogue's
// matrices are read row after row.
inline constexpr int kBlockRows = 64;

template <class L, int kRows, int kVectors, bool kATransposed>
void product_rows(const ProductArgs& args) {
  const RowMajorGemm& g = args.product;
  constexpr int kWidth = kLanes * kVectors;
  // One vector wide and whole, b is read in place (attention's heads), but
  // where many tiles read it again, far apart (a weight gradient with at
  // least 8 tiles' rows): packing costs a copy of b, in place every tile
  // pays for its rows' lines.
  const bool reread = kATransposed && g.m >= 8 * kRows;
  const bool in_place = kVectors == 1 && !g.b_transposed && g.n % kWidth == 0 && !reread;
  const Panels b = in_place ? Panels{g.b, g.ldb, kWidth} : pack_panels<L>(g, kWidth);
  if constexpr (kATransposed) {
    for (int begin = 0; begin < g.k || begin == 0; begin += kTransposedSteps) {
      const int end = g.k - begin < kTransposedSteps ? g.k : begin + kTransposedSteps;
      product_block<L, kRows, kVectors, true>(args, b, 0, g.m, 0, g.n,
                                              Steps{begin, end, begin > 0, end == g.k});
    }
  } else {
    for (int i = 0; i < g.m; i += kBlockRows) {
      const int i_end = g.m - i < kBlockRows ? g.m : i + kBlockRows;
      for (int j0 = 0; j0 < g.n; j0 += kWidth) {
        product_block<L, kRows, kVectors, false>(args, b, i, i_end, j0, j0 + kWidth,
                                                 Steps{0, g.k, false, true});
      }
    }
  }
}

// With a transposed (a weight gradient sums over its many rows p: a's
// rows are far apart), tiles are one vector wide and kNarrowRows (a cache
// line's worth of a) high, so that each line of a serves one tile, which
// reads it once; b's panel, a vector wide, is the cheap operand to read
// again. Otherwise tiles are as wide as the set makes them, but where c has
// at most 16 columns.
template <class L, bool kATransposed>
void product_of(const ProductArgs& args) {
  if (kATransposed || args.product.n <= kLanes) {
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
  float* d_scores = kernel_scratch(2, static_cast<std::size_t>(t) * static_cast<std::size_t>(t));
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
