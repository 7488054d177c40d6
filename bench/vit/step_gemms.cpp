// The ViT step's GEMM sites (see step_gemms.hpp).
#include "step_gemms.hpp"

#include "random.hpp"

namespace pipevm::bench {
namespace {

using runtime::RowMajorGemm;

struct Strides {
  int samples = 1, heads = 1;
  std::ptrdiff_t a_sample = 0, a_head = 0, b_sample = 0, b_head = 0, c_sample = 0, c_head = 0;
};

// Floats an operand of stored_rows x stored_cols at leading dimension ld
// spans over every group.
std::size_t extent(const Strides& s, std::ptrdiff_t sample, std::ptrdiff_t head, int stored_rows,
                   int stored_cols, int ld) {
  return static_cast<std::size_t>((s.samples - 1) * sample + (s.heads - 1) * head +
                                  static_cast<std::ptrdiff_t>(stored_rows - 1) * ld + stored_cols);
}

std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  runtime::SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = random.uniform() - 0.5f;
  return values;
}

class SiteList {
 public:
  void add(std::string name, std::string kind, const RowMajorGemm& g, const Strides& s = {}) {
    GemmSite site;
    site.name = std::move(name);
    site.kind = std::move(kind);
    site.gemm = g;
    site.samples = s.samples;
    site.heads = s.heads;
    site.a_stride = {s.a_sample, s.a_head};
    site.b_stride = {s.b_sample, s.b_head};
    site.c_stride = {s.c_sample, s.c_head};
    const std::uint64_t seed = 3 * sites.size();
    site.a = random_floats(extent(s, s.a_sample, s.a_head, g.a_transposed ? g.k : g.m,
                                  g.a_transposed ? g.m : g.k, g.lda),
                           seed);
    site.b = random_floats(extent(s, s.b_sample, s.b_head, g.b_transposed ? g.n : g.k,
                                  g.b_transposed ? g.k : g.n, g.ldb),
                           seed + 1);
    site.c = random_floats(extent(s, s.c_sample, s.c_head, g.m, g.n, g.ldc), seed + 2);
    sites.push_back(std::move(site));
  }
  // One of attention's products, per sample and head.
  void attention(const std::string& where, const std::string& what, const RowMajorGemm& g,
                 const Strides& s) {
    add(where + " attention " + what, "attention " + what, g, s);
  }
  // out (rows x outputs) = in (rows x inputs) * weight^T (+ out when accumulating).
  void forward(const std::string& where, const std::string& what, int rows, int inputs, int outputs,
               bool accumulate) {
    add(where + " " + what + " forward", what + " forward",
        {false, true, rows, outputs, inputs, nullptr, inputs, nullptr, inputs,
         accumulate ? 1.0f : 0.0f, nullptr, outputs});
  }
  // d_in (rows x inputs) = d_out (rows x outputs) * weight.
  void input_gradient(const std::string& where, const std::string& what, int rows, int inputs,
                      int outputs) {
    add(where + " " + what + " input gradient", what + " input gradient",
        {false, false, rows, inputs, outputs, nullptr, outputs, nullptr, inputs, 0.0f, nullptr,
         inputs});
  }
  // d_weight (outputs x inputs) += d_out^T * in.
  void weight_gradient(const std::string& where, const std::string& what, int rows, int inputs,
                       int outputs) {
    add(where + " " + what + " weight gradient", what + " weight gradient",
        {true, false, outputs, inputs, rows, nullptr, outputs, nullptr, inputs, 1.0f, nullptr,
         inputs});
  }
  std::vector<GemmSite> sites;
};

}  // namespace

RowMajorGemm GemmSite::group(int sample, int head) {
  RowMajorGemm g = gemm;
  g.a = a.data() + a_stride.offset(sample, head);
  g.b = b.data() + b_stride.offset(sample, head);
  g.c = c.data() + c_stride.offset(sample, head);
  return g;
}

std::vector<GemmSite> step_gemm_sites(const runtime::VitShape& shape, int rows) {
  const int t = shape.tokens(), d = shape.width, h = shape.hidden, heads = shape.heads;
  const int hw = d / heads, n = rows * t, last = shape.blocks - 1;
  // Attention's products per sample and head: q, k, v, the context and its
  // gradient at their columns of the token matrices, the probabilities and
  // their gradient as tokens x tokens squares. Strides a_by_b_into_c.
  const std::ptrdiff_t qkv = t * 3 * d, context = t * d, square = t * t;
  const Strides qkv_by_qkv_into_square{rows, heads, qkv, hw, qkv, hw, square * heads, square};
  const Strides square_by_qkv_into_context{rows, heads, square * heads, square,
                                           qkv,  hw,    context,        hw};
  const Strides square_by_context_into_qkv{rows, heads, square * heads, square, context, hw,
                                           qkv,  hw};
  const Strides context_by_qkv_into_square{rows, heads, context,        hw,
                                           qkv,  hw,    square * heads, square};
  const Strides square_by_qkv_into_qkv{rows, heads, square * heads, square, qkv, hw, qkv, hw};
  const int ld3 = 3 * d;
  const auto name = [](int unit) { return "block " + std::to_string(unit); };
  SiteList list;
  for (int unit = 0; unit < shape.blocks; ++unit) {
    if (unit == 0) list.forward(name(unit), "patch", n, shape.patch_pixels(), d, false);
    list.forward(name(unit), "qkv", n, d, 3 * d, false);
    list.attention(name(unit), "scores",
                   {false, true, t, t, hw, nullptr, ld3, nullptr, ld3, 0.0f, nullptr, t},
                   qkv_by_qkv_into_square);
    list.attention(name(unit), "context",
                   {false, false, t, hw, t, nullptr, t, nullptr, ld3, 0.0f, nullptr, d},
                   square_by_qkv_into_context);
    list.forward(name(unit), "proj", n, d, d, true);
    list.forward(name(unit), "fc1", n, d, h, false);
    list.forward(name(unit), "fc2", n, h, d, true);
    if (unit == last) list.forward(name(unit), "head", rows, d, shape.classes, false);
  }
  for (int unit = last; unit >= 0; --unit) {
    if (unit == last) list.input_gradient(name(unit), "head", rows, d, shape.classes);
    list.input_gradient(name(unit), "fc2", n, h, d);
    list.input_gradient(name(unit), "fc1", n, d, h);
    list.input_gradient(name(unit), "proj", n, d, d);
    // d_v = p^T d_context; d_p = d_context v^T; d_q = d_s k; d_k = d_s^T q.
    list.attention(name(unit), "d_v",
                   {true, false, t, hw, t, nullptr, t, nullptr, d, 0.0f, nullptr, ld3},
                   square_by_context_into_qkv);
    list.attention(name(unit), "d_p",
                   {false, true, t, t, hw, nullptr, d, nullptr, ld3, 0.0f, nullptr, t},
                   context_by_qkv_into_square);
    list.attention(name(unit), "d_q",
                   {false, false, t, hw, t, nullptr, t, nullptr, ld3, 0.0f, nullptr, ld3},
                   square_by_qkv_into_qkv);
    list.attention(name(unit), "d_k",
                   {true, false, t, hw, t, nullptr, t, nullptr, ld3, 0.0f, nullptr, ld3},
                   square_by_qkv_into_qkv);
    list.input_gradient(name(unit), "qkv", n, d, 3 * d);
  }
  for (int unit = last; unit >= 0; --unit) {
    if (unit == last) list.weight_gradient(name(unit), "head", rows, d, shape.classes);
    list.weight_gradient(name(unit), "fc2", n, h, d);
    list.weight_gradient(name(unit), "fc1", n, d, h);
    list.weight_gradient(name(unit), "proj", n, d, d);
    list.weight_gradient(name(unit), "qkv", n, d, 3 * d);
    if (unit == 0) list.weight_gradient(name(unit), "patch", n, shape.patch_pixels(), d);
  }
  return std::move(list.sites);
}

}  // namespace pipevm::bench
