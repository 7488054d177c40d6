// OpenBLAS against BLIS on the GEMMs of the MLP's training step (issue 16):
// every layer's forward, input gradient and weight gradient with the
// runtime's transposes and row-major layouts (runtime/layers.cpp), and the
// whole chain of one micro-batch, at several row counts, measured in one
// process in alternating rounds. Prints each kernel's median CPU time per
// call and its ratio to OpenBLAS, then the chain's rates.
//
//   bench_runtime_blas [--rows 16,32,64,128] [--sizes 784,128,...,10]
//                      [--rounds 5] [--seconds 0.02]
//
// Implementations:
//   openblas        cblas_sgemm of Debian's sequential OpenBLAS (what runs now);
//   blis-cblas      cblas_sgemm of Debian's sequential BLIS;
//   blis-native     bli_sgemm_ex on the row-major buffers by their strides,
//                   BLIS's defaults (its small/unpacked "sup" path below its
//                   thresholds);
//   blis-sup-pack   the sup path with packing of both operands turned on in
//                   the rntm_t (sup's own packing, BLIS_PACK_A/B);
//   blis-packed     bli_sgemm_ex with sup turned off in the rntm_t: BLIS's
//                   conventional packed path.
// Both libraries export cblas_sgemm and sgemm_, so this program links neither:
// it opens each with dlopen(RTLD_LOCAL) from its own directory, and each
// library's internal calls resolve within that library.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "blis.h"

namespace {

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The CBLAS constants are fixed by the CBLAS standard (both headers agree).
constexpr int row_major = 101;
constexpr int no_trans = 111;
constexpr int trans = 112;
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
using BliSgemmEx = decltype(&bli_sgemm_ex);
using BliVersion = decltype(&bli_info_get_version_str);
using BliArchId = decltype(&bli_arch_query_id);
using BliArchName = decltype(&bli_arch_string);
using BliContext = decltype(&bli_gks_query_cntx);
using OpenblasString = char* (*)();

void* open_library(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  return handle;
}

template <typename Function>
Function symbol(void* handle, const char* name) {
  void* address = dlsym(handle, name);
  if (address == nullptr) throw std::runtime_error(std::string("dlsym ") + name + ": not found");
  return reinterpret_cast<Function>(address);
}

struct Libraries {
  CblasSgemm openblas = nullptr;
  CblasSgemm blis_cblas = nullptr;
  BliSgemmEx blis_native = nullptr;
  std::string openblas_name;
  std::string blis_name;
  dim_t sup_threshold[3] = {0, 0, 0};  // m, n, k below which BLIS takes sup (single precision)

  Libraries() {
    void* openblas_handle = open_library(PIPEVM_BENCH_OPENBLAS);
    void* blis_handle = open_library(PIPEVM_BENCH_BLIS);
    openblas = symbol<CblasSgemm>(openblas_handle, "cblas_sgemm");
    blis_cblas = symbol<CblasSgemm>(blis_handle, "cblas_sgemm");
    blis_native = symbol<BliSgemmEx>(blis_handle, "bli_sgemm_ex");
    std::string config = symbol<OpenblasString>(openblas_handle, "openblas_get_config")();
    openblas_name =
        config + ", core " + symbol<OpenblasString>(openblas_handle, "openblas_get_corename")();
    const arch_t arch = symbol<BliArchId>(blis_handle, "bli_arch_query_id")();
    blis_name = std::string("BLIS ") +
                symbol<BliVersion>(blis_handle, "bli_info_get_version_str")() + ", arch " +
                symbol<BliArchName>(blis_handle, "bli_arch_string")(arch);
    cntx_t* context = symbol<BliContext>(blis_handle, "bli_gks_query_cntx")();
    sup_threshold[0] = bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_MT, context);
    sup_threshold[1] = bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_NT, context);
    sup_threshold[2] = bli_cntx_get_l3_sup_thresh_dt(BLIS_FLOAT, BLIS_KT, context);
  }
};

enum class Impl { openblas, blis_cblas, blis_native, blis_sup_packing, blis_packed };
constexpr Impl impls[] = {Impl::openblas, Impl::blis_cblas, Impl::blis_native,
                          Impl::blis_sup_packing, Impl::blis_packed};
constexpr const char* impl_names[] = {"openblas", "blis-cblas", "blis-native", "blis-sup-pack",
                                      "blis-packed"};
constexpr int impl_count = 5;

enum class Kernel { forward, input_gradient, weight_gradient };
constexpr const char* kernel_names[] = {"fwd", "dX", "dW"};

std::vector<float> filled(std::size_t count, std::uint32_t seed) {
  std::vector<float> values(count);
  std::uint32_t state = seed * 2654435761u + 1u;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  return values;
}

// A row-major operand: its buffer, leading dimension, and whether the
// product takes it transposed.
struct Operand {
  const float* data;
  int ld;
  bool transposed;
  // BLIS strides of op(operand): row stride first.
  inc_t row_stride() const { return transposed ? 1 : ld; }
  inc_t column_stride() const { return transposed ? ld : 1; }
};

// C (m x n, row-major, leading dimension ldc) = op(A) op(B) + beta C.
struct Gemm {
  int m, n, k;
  Operand a, b;
  float beta;
  float* c;
  int ldc;
};

void run_gemm(const Libraries& libraries, Impl impl, const Gemm& g) {
  switch (impl) {
    case Impl::openblas:
    case Impl::blis_cblas: {
      const CblasSgemm sgemm = impl == Impl::openblas ? libraries.openblas : libraries.blis_cblas;
      sgemm(row_major, g.a.transposed ? trans : no_trans, g.b.transposed ? trans : no_trans, g.m,
            g.n, g.k, 1.0f, g.a.data, g.a.ld, g.b.data, g.b.ld, g.beta, g.c, g.ldc);
      return;
    }
    case Impl::blis_native:
    case Impl::blis_sup_packing:
    case Impl::blis_packed: {
      rntm_t rntm;
      bli_rntm_init(&rntm);
      bli_rntm_set_num_threads_only(1, &rntm);
      if (impl == Impl::blis_sup_packing) {
        bli_rntm_set_pack_a(true, &rntm);
        bli_rntm_set_pack_b(true, &rntm);
      }
      if (impl == Impl::blis_packed) bli_rntm_disable_l3_sup(&rntm);
      float alpha = 1.0f;
      float beta = g.beta;
      libraries.blis_native(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, g.m, g.n, g.k, &alpha,
                            const_cast<float*>(g.a.data), g.a.row_stride(), g.a.column_stride(),
                            const_cast<float*>(g.b.data), g.b.row_stride(), g.b.column_stride(),
                            &beta, g.c, g.ldc, 1, nullptr, &rntm);
      return;
    }
  }
}

// One layer's buffers at `rows` rows, and its three GEMMs as layers.cpp
// calls them (the forward pass first writes the bias into every row and
// accumulates into it, as the runtime does).
struct Layer {
  int rows, in, out;
  std::vector<float> x, weight, bias, y, d_y, d_x, d_weight;
  Layer(int rows_, int in_, int out_)
      : rows(rows_),
        in(in_),
        out(out_),
        x(filled(static_cast<std::size_t>(rows_ * in_), 1)),
        weight(filled(static_cast<std::size_t>(out_ * in_), 2)),
        bias(filled(static_cast<std::size_t>(out_), 3)),
        y(static_cast<std::size_t>(rows_ * out_)),
        d_y(filled(static_cast<std::size_t>(rows_ * out_), 4)),
        d_x(static_cast<std::size_t>(rows_ * in_)),
        d_weight(static_cast<std::size_t>(out_ * in_)) {}

  Gemm gemm(Kernel kernel) {
    const float one = 1.0f;
    const float zero = 0.0f;
    switch (kernel) {
      case Kernel::forward:  // y = x * weight^T + bias
        return {rows, out,      in, {x.data(), in, false}, {weight.data(), in, true},
                one,  y.data(), out};
      case Kernel::input_gradient:  // d_x = d_y * weight
        return {rows, in,         out, {d_y.data(), out, false}, {weight.data(), in, false},
                zero, d_x.data(), in};
      case Kernel::weight_gradient:  // d_weight += d_y^T * x
        return {out, in, rows, {d_y.data(), out, true}, {x.data(), in, false}, one, d_weight.data(),
                in};
    }
    throw std::logic_error("kernel");
  }

  void run(const Libraries& libraries, Impl impl, Kernel kernel) {
    if (kernel == Kernel::forward) {
      for (int r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * out);
    }
    run_gemm(libraries, impl, gemm(kernel));
  }

  double flops(Kernel) const { return 2.0 * rows * in * out; }
};

// The kernels of one micro-batch's training step, in the runtime's order:
// every forward, then from the last layer down each input gradient (none for
// the first layer) and weight gradient.
struct Step {
  std::vector<Layer> layers;
  std::vector<std::pair<std::size_t, Kernel>> kernels;
  double flops = 0.0;
  Step(const std::vector<int>& sizes, int rows) {
    for (std::size_t l = 0; l + 1 < sizes.size(); ++l)
      layers.emplace_back(rows, sizes[l], sizes[l + 1]);
    for (std::size_t l = 0; l < layers.size(); ++l) kernels.emplace_back(l, Kernel::forward);
    for (std::size_t l = layers.size(); l-- > 0;) {
      if (l > 0) kernels.emplace_back(l, Kernel::input_gradient);
      kernels.emplace_back(l, Kernel::weight_gradient);
    }
    for (const auto& [l, kernel] : kernels) flops += layers[l].flops(kernel);
  }
  void run(const Libraries& libraries, Impl impl) {
    for (const auto& [l, kernel] : kernels) layers[l].run(libraries, impl, kernel);
  }
};

// CPU seconds per call of `body`, over calls filling about `seconds`.
template <typename Body>
double seconds_per_call(double seconds, Body body) {
  const double start = cpu_seconds();
  long calls = 0;
  double elapsed = 0.0;
  do {
    body();
    ++calls;
    elapsed = cpu_seconds() - start;
  } while (elapsed < seconds);
  return elapsed / static_cast<double>(calls);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Each implementation's result for every kernel against OpenBLAS's: a wiring
// check (a transposed stride would give a different product, not a rounding
// difference).
void check_agreement(const Libraries& libraries, const std::vector<int>& sizes, int rows) {
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    for (Kernel kernel : {Kernel::forward, Kernel::input_gradient, Kernel::weight_gradient}) {
      std::vector<float> reference;
      for (Impl impl : impls) {
        Layer layer(rows, sizes[l], sizes[l + 1]);
        layer.run(libraries, impl, kernel);
        const std::vector<float>& result = kernel == Kernel::forward          ? layer.y
                                           : kernel == Kernel::input_gradient ? layer.d_x
                                                                              : layer.d_weight;
        if (impl == Impl::openblas) {
          reference = result;
          continue;
        }
        for (std::size_t i = 0; i < result.size(); ++i) {
          if (std::fabs(result[i] - reference[i]) > 1e-3f * (1.0f + std::fabs(reference[i]))) {
            throw std::runtime_error(std::string(impl_names[static_cast<int>(impl)]) +
                                     " disagrees with openblas on layer " + std::to_string(l) +
                                     " " + kernel_names[static_cast<int>(kernel)]);
          }
        }
      }
    }
  }
}

struct Options {
  std::vector<int> rows = {16, 32, 64, 128};
  std::vector<int> sizes = {784, 128, 127, 126, 125, 124, 123, 10};
  int rounds = 5;
  double seconds = 0.02;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "bench_runtime_blas [--rows 16,32,64,128] [--sizes 784,128,...,10] [--rounds 5] "
          "[--seconds 0.02]\n"
          "  OpenBLAS against BLIS (CBLAS, native, native without sup) on the model's GEMMs;\n"
          "  medians over alternating rounds of CPU time per call.\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--rows") {
      options.rows = pipevm::bench::parse_int_list(value);
    } else if (flag == "--sizes") {
      options.sizes = pipevm::bench::parse_int_list(value);
      if (options.sizes.size() < 2) throw std::runtime_error("--sizes needs at least two widths");
    } else if (flag == "--rounds") {
      options.rounds = std::stoi(value);
      if (options.rounds < 1) throw std::runtime_error("--rounds must be at least 1");
    } else if (flag == "--seconds") {
      options.seconds = std::stod(value);
    } else {
      throw std::runtime_error("unknown flag " + flag);
    }
  }
  return options;
}

int run(const Options& options) {
  const Libraries libraries;
  std::printf("openblas: %s\nblis: %s (sup below m %ld or n %ld or k %ld)\n",
              libraries.openblas_name.c_str(), libraries.blis_name.c_str(),
              static_cast<long>(libraries.sup_threshold[0]),
              static_cast<long>(libraries.sup_threshold[1]),
              static_cast<long>(libraries.sup_threshold[2]));
  std::vector<Step> steps;
  for (int rows : options.rows) {
    check_agreement(libraries, options.sizes, rows);
    steps.emplace_back(options.sizes, rows);
  }
  // times[step][kernel][impl] per round; chain[step][impl] per round.
  std::vector<std::vector<std::vector<std::vector<double>>>> times(steps.size());
  std::vector<std::vector<std::vector<double>>> chain(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    times[s].assign(steps[s].kernels.size(), std::vector<std::vector<double>>(impl_count));
    chain[s].assign(impl_count, {});
    for (Impl impl : impls) steps[s].run(libraries, impl);  // warm caches and BLIS's pools
  }
  for (int round = 0; round < options.rounds; ++round) {
    for (std::size_t s = 0; s < steps.size(); ++s) {
      Step& step = steps[s];
      for (std::size_t q = 0; q < step.kernels.size(); ++q) {
        const auto [l, kernel] = step.kernels[q];
        for (Impl impl : impls) {
          times[s][q][static_cast<std::size_t>(impl)].push_back(seconds_per_call(
              options.seconds, [&] { step.layers[l].run(libraries, impl, kernel); }));
        }
      }
      for (Impl impl : impls) {
        chain[s][static_cast<std::size_t>(impl)].push_back(
            seconds_per_call(options.seconds * 10, [&] { step.run(libraries, impl); }));
      }
    }
  }
  std::printf(
      "medians of %d alternating rounds, CPU time; ratio = openblas time / this one's "
      "(above 1: faster than openblas)\n",
      options.rounds);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    std::printf("\nrows %d\n%-6s %-4s %5s %5s %5s", step.layers[0].rows, "layer", "gemm", "m", "n",
                "k");
    for (const char* name : impl_names) std::printf(" %11s", name);
    for (int i = 1; i < impl_count; ++i)
      std::printf(" %11s", (std::string("x ") + impl_names[i]).c_str());
    std::printf("\n");
    for (std::size_t q = 0; q < step.kernels.size(); ++q) {
      const auto [l, kernel] = step.kernels[q];
      Layer layer = step.layers[l];
      const Gemm g = layer.gemm(kernel);
      std::printf("%-6zu %-4s %5d %5d %5d", l, kernel_names[static_cast<int>(kernel)], g.m, g.n,
                  g.k);
      double medians[impl_count];
      for (int i = 0; i < impl_count; ++i) {
        medians[i] = median(times[s][q][static_cast<std::size_t>(i)]);
        std::printf(" %9.2fus", medians[i] * 1e6);
      }
      for (int i = 1; i < impl_count; ++i) std::printf(" %11.3f", medians[0] / medians[i]);
      std::printf("\n");
    }
    double chain_medians[impl_count];
    std::printf("%-28s", "chain (one step's GEMMs)");
    for (int i = 0; i < impl_count; ++i) {
      chain_medians[i] = median(chain[s][static_cast<std::size_t>(i)]);
      std::printf(" %9.2fus", chain_medians[i] * 1e6);
    }
    for (int i = 1; i < impl_count; ++i)
      std::printf(" %11.3f", chain_medians[0] / chain_medians[i]);
    std::printf("\n%-28s", "chain GFLOP/s");
    for (int i = 0; i < impl_count; ++i)
      std::printf(" %11.1f", step.flops / chain_medians[i] / 1e9);
    std::printf("\n");
  }
  std::printf("\nsummary: chain time ratio openblas / each (rows:");
  for (const Step& step : steps) std::printf(" %d", step.layers[0].rows);
  std::printf(")\n");
  for (int i = 1; i < impl_count; ++i) {
    std::printf("%-14s", impl_names[i]);
    for (std::size_t s = 0; s < steps.size(); ++s) {
      std::printf(" %6.3f", median(chain[s][0]) / median(chain[s][static_cast<std::size_t>(i)]));
    }
    std::printf("\n");
  }
  // Per-call cost of a micro-batch against a whole batch (rows r vs the largest):
  // 1 would be perfect scaling of time with rows.
  std::printf("chain time per row relative to rows %d (1.0: time proportional to rows)\n",
              steps.back().layers[0].rows);
  for (int i = 0; i < impl_count; ++i) {
    std::printf("%-14s", impl_names[i]);
    const double last =
        median(chain.back()[static_cast<std::size_t>(i)]) / steps.back().layers[0].rows;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      std::printf(" %6.3f",
                  median(chain[s][static_cast<std::size_t>(i)]) / steps[s].layers[0].rows / last);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return pipevm::bench::run_reporting_errors("bench_runtime_blas",
                                             [&] { return run(parse(argc, argv)); });
}
