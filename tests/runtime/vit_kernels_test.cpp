// The ViT's kernel sets (runtime/vit_kernels.hpp): every set this CPU runs
// against a double-precision reference (products in all four transpositions
// with every epilogue, odd sizes and one-vector-wide ones; attention;
// LayerNorm), the two vector sets giving the same bits, and every set giving
// the same bits wherever a buffer lies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "gradient_check.hpp"
#include "vit_kernels.hpp"

namespace pipevm::runtime {
namespace {

using gradient_check::random_values;

const KernelSet* set_named(const std::string& name) {
  for (const KernelSet* set : runnable_vit_kernels()) {
    if (name == set->name) return set;
  }
  return nullptr;
}

double value(const std::vector<float>& v, std::size_t i) {
  return static_cast<double>(v[i]);
}

// `offset` zeros, then random_values(count, seed): the same values, shifted.
std::vector<float> shifted(std::size_t offset, std::size_t count, std::uint64_t seed,
                           float low = -1.0f, float high = 1.0f) {
  std::vector<float> values(offset, 0.0f);
  const std::vector<float> random = random_values(count, seed, low, high);
  values.insert(values.end(), random.begin(), random.end());
  return values;
}

// Everything one product reads and writes, at an offset into its buffers.
struct ProductCase {
  ProductCase(bool a_t, bool b_t, int rows, int cols, int shared)
      : a_transposed(a_t), b_transposed(b_t), m(rows), n(cols), k(shared) {}
  bool a_transposed, b_transposed;
  int m, n, k;
  bool accumulate = false;
  bool bias = false;
  bool addend = false;
  int addend_period = 0;
  Epilogue epilogue = Epilogue::store;
  bool bias_gradient = false;

  std::vector<float> a, b, c, bias_values, addend_values, factor, activated, bias_gradients;

  void fill(std::size_t offset) {
    const std::size_t s = offset;
    const auto size = [](int count) { return static_cast<std::size_t>(count); };
    a = shifted(s, size(m * k), 1);
    b = shifted(s, size(k * n), 2);
    c = shifted(s, size(m * n), 3);
    bias_values = shifted(s, size(n), 4);
    addend_values = shifted(s, size(m * n), 5);
    factor = shifted(s, size(m * n), 6);
    activated.assign(s + size(m * n), 0.0f);
    bias_gradients = shifted(s, size(m), 7);
  }
  // Runs `set` on the buffers from `offset` on (fill(offset) first).
  void run(const KernelSet& set, std::size_t offset) {
    fill(offset);
    const std::size_t s = offset;
    ProductArgs args{{a_transposed, b_transposed, m, n, k, a.data() + s, a_transposed ? m : k,
                      b.data() + s, b_transposed ? k : n, accumulate ? 1.0f : 0.0f, c.data() + s,
                      n}};
    args.epilogue = epilogue;
    args.scale = 0.25f;
    if (bias) args.bias = bias_values.data() + s;
    if (addend) {
      args.addend = addend_values.data() + s;
      args.ld_addend = n;
      args.addend_period = addend_period;
    }
    args.activated = activated.data() + s;
    args.ld_activated = n;
    args.factor = factor.data() + s;
    args.ld_factor = n;
    if (bias_gradient) args.bias_gradient = bias_gradients.data() + s;
    set.product(args);
    for (std::vector<float>* v : {&c, &activated, &bias_gradients}) {
      v->erase(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(s));
    }
  }
  double a_at(int i, int p) const {
    return value(a, static_cast<std::size_t>(a_transposed ? p * m + i : i * k + p));
  }
  double b_at(int p, int j) const {
    return value(b, static_cast<std::size_t>(b_transposed ? j * k + p : p * n + j));
  }
};

void expect_product_matches_reference(ProductCase pc) {
  for (const KernelSet* set : runnable_vit_kernels()) {
    SCOPED_TRACE(set->name);
    pc.fill(0);
    const std::vector<float> c_before = pc.c;
    const std::vector<float> bias_gradient_before = pc.bias_gradients;
    pc.run(*set, 0);
    for (int i = 0; i < pc.m; ++i) {
      for (int j = 0; j < pc.n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i * pc.n + j);
        double x = pc.accumulate ? value(c_before, at) : 0.0;
        if (pc.addend && !pc.accumulate) {
          const int row = pc.addend_period > 0 ? i % pc.addend_period : i;
          x += value(pc.addend_values, static_cast<std::size_t>(row * pc.n + j));
        }
        if (pc.bias) x += value(pc.bias_values, static_cast<std::size_t>(j));
        for (int p = 0; p < pc.k; ++p) x += pc.a_at(i, p) * pc.b_at(p, j);
        const double tolerance = 1e-5 * (1.0 + std::abs(x));
        switch (pc.epilogue) {
          case Epilogue::store:
            EXPECT_NEAR(pc.c[at], x, tolerance) << i << "," << j;
            break;
          case Epilogue::scale:
            EXPECT_NEAR(pc.c[at], 0.25 * x, tolerance) << i << "," << j;
            break;
          case Epilogue::times:
            EXPECT_NEAR(pc.c[at], x * value(pc.factor, at), tolerance) << i << "," << j;
            break;
          case Epilogue::gelu: {
            const double phi = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
            const double density = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
            EXPECT_NEAR(pc.activated[at], x * phi, tolerance) << i << "," << j;
            EXPECT_NEAR(pc.c[at], phi + x * density, tolerance) << i << "," << j;
            break;
          }
        }
      }
    }
    for (int i = 0; i < pc.m; ++i) {
      double expected = value(bias_gradient_before, static_cast<std::size_t>(i));
      if (pc.bias_gradient) {
        for (int p = 0; p < pc.k; ++p) expected += pc.a_at(i, p);
      }
      EXPECT_NEAR(pc.bias_gradients[static_cast<std::size_t>(i)], expected,
                  1e-5 * (1.0 + std::abs(expected)));
    }
  }
}

TEST(vit_kernels, products_match_a_double_reference_in_every_transposition) {
  for (const bool a_transposed : {false, true}) {
    for (const bool b_transposed : {false, true}) {
      SCOPED_TRACE(std::to_string(a_transposed) + std::to_string(b_transposed));
      // Odd sizes (tails of rows and of columns), one vector wide, a whole
      // tile grid, and a shared dimension of 1.
      expect_product_matches_reference({a_transposed, b_transposed, 13, 37, 19});
      expect_product_matches_reference({a_transposed, b_transposed, 16, 16, 16});
      expect_product_matches_reference({a_transposed, b_transposed, 24, 64, 33});
      expect_product_matches_reference({a_transposed, b_transposed, 3, 5, 1});
    }
  }
}

TEST(vit_kernels, products_add_what_their_arguments_ask_for) {
  ProductCase accumulate{false, true, 11, 40, 9};
  accumulate.accumulate = accumulate.bias = true;
  expect_product_matches_reference(accumulate);
  ProductCase positions{false, true, 12, 20, 7};
  positions.bias = positions.addend = true;
  positions.addend_period = 4;
  expect_product_matches_reference(positions);
  ProductCase scaled{false, true, 16, 16, 8};
  scaled.epilogue = Epilogue::scale;
  expect_product_matches_reference(scaled);
  ProductCase gelu{false, true, 9, 70, 12};
  gelu.bias = true;
  gelu.epilogue = Epilogue::gelu;
  expect_product_matches_reference(gelu);
  ProductCase times{false, false, 21, 33, 10};
  times.epilogue = Epilogue::times;
  expect_product_matches_reference(times);
  ProductCase weight_gradient{true, false, 19, 45, 30};
  weight_gradient.accumulate = weight_gradient.bias_gradient = true;
  expect_product_matches_reference(weight_gradient);
}

// Every output of one call of each kernel, on inputs at `offset` floats
// into their buffers.
std::vector<float> all_outputs(const KernelSet& set, std::size_t offset) {
  std::vector<float> outputs;
  const auto keep = [&](const std::vector<float>& v) {
    outputs.insert(outputs.end(), v.begin() + static_cast<std::ptrdiff_t>(offset), v.end());
  };
  ProductCase gelu{false, true, 29, 70, 23};
  gelu.bias = true;
  gelu.epilogue = Epilogue::gelu;
  gelu.run(set, offset);
  outputs.insert(outputs.end(), gelu.c.begin(), gelu.c.end());
  outputs.insert(outputs.end(), gelu.activated.begin(), gelu.activated.end());
  ProductCase weight_gradient{true, false, 19, 45, 30};
  weight_gradient.accumulate = weight_gradient.bias_gradient = true;
  weight_gradient.run(set, offset);
  outputs.insert(outputs.end(), weight_gradient.c.begin(), weight_gradient.c.end());
  outputs.insert(outputs.end(), weight_gradient.bias_gradients.begin(),
                 weight_gradient.bias_gradients.end());

  constexpr int kSamples = 3, kTokens = 17, kHeads = 2, kWidth = 36, kRows = kSamples * kTokens;
  const std::vector<float> qkv = shifted(offset, kRows * 3 * kWidth, 8, -2.0f, 2.0f);
  const std::vector<float> d_context = shifted(offset, kRows * kWidth, 9);
  std::vector<float> probabilities(offset + kSamples * kHeads * kTokens * kTokens);
  std::vector<float> context(offset + kRows * kWidth), d_qkv(offset + kRows * 3 * kWidth);
  AttentionArgs attention{kSamples,
                          kTokens,
                          kHeads,
                          kWidth,
                          qkv.data() + offset,
                          probabilities.data() + offset,
                          context.data() + offset};
  set.attention_forward(attention);
  attention.saved_probabilities = probabilities.data() + offset;
  attention.d_context = d_context.data() + offset;
  attention.d_qkv = d_qkv.data() + offset;
  set.attention_backward(attention);
  keep(probabilities);
  keep(context);
  keep(d_qkv);

  constexpr int kNormRows = 6, kNormWidth = 70;
  const std::vector<float> in = shifted(offset, kNormRows * kNormWidth, 10, -3.0f, 3.0f);
  const std::vector<float> gamma = shifted(offset, kNormWidth, 11);
  const std::vector<float> beta = shifted(offset, kNormWidth, 12);
  const std::vector<float> d_out = shifted(offset, kNormRows * kNormWidth, 13);
  const std::vector<float> residual = shifted(offset, kNormRows * kNormWidth, 14);
  std::vector<float> out(in.size()), normalized(in.size()), inverse_std(offset + kNormRows);
  std::vector<float> d_in(in.size()), d_gamma(gamma.size()), d_beta(gamma.size());
  set.layernorm_forward({kNormRows, kNormWidth, in.data() + offset, out.data() + offset,
                         normalized.data() + offset, inverse_std.data() + offset,
                         gamma.data() + offset, beta.data() + offset});
  set.layernorm_backward({kNormRows, kNormWidth, d_out.data() + offset, normalized.data() + offset,
                          inverse_std.data() + offset, gamma.data() + offset,
                          residual.data() + offset, d_in.data() + offset, d_gamma.data() + offset,
                          d_beta.data() + offset});
  for (const auto* v : {&out, &normalized, &inverse_std, &d_in, &d_gamma, &d_beta}) keep(*v);
  return outputs;
}

// The index of the first element where a and b differ in their bits, -1
// if none (and the sizes agree).
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return static_cast<long>(std::min(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<long>(i);
  }
  return -1;
}

TEST(vit_kernels, every_set_gives_the_same_bits_wherever_the_buffers_lie) {
  for (const KernelSet* set : runnable_vit_kernels()) {
    SCOPED_TRACE(set->name);
    const std::vector<float> aligned = all_outputs(*set, 0);
    for (const std::size_t offset : {1u, 3u, 8u, 15u}) {
      EXPECT_EQ(first_difference(all_outputs(*set, offset), aligned), -1) << "offset " << offset;
    }
  }
}

TEST(vit_kernels, the_vector_sets_give_the_same_bits) {
  const KernelSet* avx512 = set_named("avx512");
  const KernelSet* avx2 = set_named("avx2");
  if (avx512 == nullptr || avx2 == nullptr) GTEST_SKIP() << "this CPU runs only one vector set";
  EXPECT_EQ(first_difference(all_outputs(*avx2, 0), all_outputs(*avx512, 0)), -1);
#ifdef __FMA__
  // Built for FMA, the portable set fuses its multiply-adds too.
  EXPECT_EQ(first_difference(all_outputs(*set_named("portable"), 0), all_outputs(*avx512, 0)), -1);
#endif
}

TEST(vit_kernels, attention_and_layernorm_match_a_double_reference) {
  constexpr int kSamples = 2, kTokens = 5, kHeads = 2, kWidth = 6, kRows = kSamples * kTokens;
  constexpr int kHeadWidth = kWidth / kHeads;
  const std::vector<float> qkv = random_values(kRows * 3 * kWidth, 1, -2.0f, 2.0f);
  for (const KernelSet* set : runnable_vit_kernels()) {
    SCOPED_TRACE(set->name);
    std::vector<float> probabilities(kSamples * kHeads * kTokens * kTokens);
    std::vector<float> context(kRows * kWidth);
    set->attention_forward(
        {kSamples, kTokens, kHeads, kWidth, qkv.data(), probabilities.data(), context.data()});
    const auto at = [&](int sample, int token, int column) {
      return static_cast<double>(
          qkv[static_cast<std::size_t>((sample * kTokens + token) * 3 * kWidth + column)]);
    };
    for (int s = 0; s < kSamples; ++s) {
      for (int h = 0; h < kHeads; ++h) {
        for (int i = 0; i < kTokens; ++i) {
          std::vector<double> scores(kTokens);
          double largest = -1e300, total = 0.0;
          for (int j = 0; j < kTokens; ++j) {
            double dot = 0.0;
            for (int c = 0; c < kHeadWidth; ++c) {
              dot += at(s, i, h * kHeadWidth + c) * at(s, j, kWidth + h * kHeadWidth + c);
            }
            scores[static_cast<std::size_t>(j)] = dot / std::sqrt(double{kHeadWidth});
            largest = std::max(largest, scores[static_cast<std::size_t>(j)]);
          }
          for (double& score : scores) total += score = std::exp(score - largest);
          for (int c = 0; c < kHeadWidth; ++c) {
            double value = 0.0;
            for (int j = 0; j < kTokens; ++j) {
              value += scores[static_cast<std::size_t>(j)] / total *
                       at(s, j, 2 * kWidth + h * kHeadWidth + c);
            }
            EXPECT_NEAR(
                context[static_cast<std::size_t>((s * kTokens + i) * kWidth + h * kHeadWidth + c)],
                value, 1e-5);
          }
        }
      }
    }
    constexpr int kNormWidth = 21;
    const std::vector<float> in = random_values(kNormWidth, 2, -3.0f, 3.0f);
    const std::vector<float> gamma = random_values(kNormWidth, 3);
    const std::vector<float> beta = random_values(kNormWidth, 4);
    std::vector<float> out(kNormWidth), normalized(kNormWidth), inverse_std(1);
    set->layernorm_forward({1, kNormWidth, in.data(), out.data(), normalized.data(),
                            inverse_std.data(), gamma.data(), beta.data()});
    double mean = 0.0, squares = 0.0;
    for (std::size_t c = 0; c < in.size(); ++c) mean += value(in, c) / double{kNormWidth};
    for (std::size_t c = 0; c < in.size(); ++c) {
      squares += (value(in, c) - mean) * (value(in, c) - mean) / double{kNormWidth};
    }
    const double expected_inverse_std =
        1.0 / std::sqrt(squares + static_cast<double>(kLayerNormEpsilon));
    EXPECT_NEAR(inverse_std[0], expected_inverse_std, 1e-6 * expected_inverse_std);
    for (std::size_t c = 0; c < in.size(); ++c) {
      const double x_hat = (value(in, c) - mean) * expected_inverse_std;
      EXPECT_NEAR(normalized[c], x_hat, 1e-5);
      EXPECT_NEAR(out[c], x_hat * value(gamma, c) + value(beta, c), 1e-5);
    }
  }
}

TEST(vit_kernels, the_chosen_set_is_the_fastest_this_cpu_runs_unless_named) {
  const char* named = std::getenv("PIPEVM_KERNELS");
  const std::string expected = named != nullptr && *named != '\0'
                                   ? std::string(named)
                                   : std::string(runnable_vit_kernels().front()->name);
  EXPECT_EQ(vit_kernels().name, expected);
  EXPECT_EQ(std::string(runnable_vit_kernels().back()->name), "portable");
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(std::string(runnable_vit_kernels().front()->name), "avx512");
  }
#endif
}

}  // namespace
}  // namespace pipevm::runtime
