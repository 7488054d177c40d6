// The GEMM-chain bound of a ViT epoch (issue 40): the products of one
// micro-batch's training step alone (step_gemms.hpp), at their exact shapes
// and in the step's order, on every implementation at hand, the chain run
// pass after pass by each implementation in alternating rounds in one
// process. Per product site and implementation, the median time of the
// site over the passes (wall time around the site: robust to the other work
// on a shared machine, which preempts a pass now and then); per
// implementation, their sum and, for information, the chain's CPU time per
// pass. The bound is the sum over the sites of the fastest implementation's
// median, times the micro-batches of an epoch: among OpenBLAS and Eigen (the
// libraries: the bound), and among every implementation including
// pipevm's own kernels (vit_kernels.hpp; a stricter bound).
//
//   bench_vit_gemms [--rows 32] [--batch 128] [--samples 51000]
//                   [--rounds 5] [--seconds 0.3]
//
// Implementations: OpenBLAS's cblas_sgemm (the sequential build pipevm
// links; its kernel set as OPENBLAS_CORETYPE or the CPU chose it), one call
// per product and per sample and head in attention; Eigen 3.4 on strided
// maps with tune_eigen_for_one_core()'s blocking; pipevm's kernels (the set
// this CPU runs, or PIPEVM_KERNELS's), one product call per sample and head
// too (the step's attention fuses more around them).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "layers.hpp"
#include "step_gemms.hpp"
#include "tensor.hpp"
#include "vit_kernels.hpp"

namespace {

using namespace pipevm::runtime;
using pipevm::bench::GemmSite;

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct Options {
  int rows = 32;
  int batch = 128;
  int samples = 51000;
  int rounds = 5;
  double seconds = 0.3;
};

Options parse(int argc, char** argv) {
  Options options;
  pipevm::bench::parse_flags(
      argc, argv,
      {{"--rows", [&](const std::string& v) { options.rows = std::stoi(v); }},
       {"--batch", [&](const std::string& v) { options.batch = std::stoi(v); }},
       {"--samples", [&](const std::string& v) { options.samples = std::stoi(v); }},
       {"--rounds", [&](const std::string& v) { options.rounds = std::stoi(v); }},
       {"--seconds", [&](const std::string& v) { options.seconds = std::stod(v); }}});
  if (options.rows < 1 || options.batch % options.rows != 0) {
    throw std::runtime_error("--rows must divide --batch");
  }
  return options;
}

void openblas_gemm(const RowMajorGemm& g) {
  cblas_sgemm(CblasRowMajor, g.a_transposed ? CblasTrans : CblasNoTrans,
              g.b_transposed ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b,
              g.ldb, g.beta, g.c, g.ldc);
}

void eigen_gemm(const RowMajorGemm& g) {
  using Stride = Eigen::OuterStride<>;
  using ConstStrided = Eigen::Map<const Matrix, 0, Stride>;
  const ConstStrided a(g.a, g.a_transposed ? g.k : g.m, g.a_transposed ? g.m : g.k, Stride(g.lda));
  const ConstStrided b(g.b, g.b_transposed ? g.n : g.k, g.b_transposed ? g.k : g.n, Stride(g.ldb));
  Eigen::Map<Matrix, 0, Stride> c(g.c, g.m, g.n, Stride(g.ldc));
  if (g.beta == 0.0f) c.setZero();
  if (!g.a_transposed && !g.b_transposed) c.noalias() += a * b;
  if (!g.a_transposed && g.b_transposed) c.noalias() += a * b.transpose();
  if (g.a_transposed && !g.b_transposed) c.noalias() += a.transpose() * b;
  if (g.a_transposed && g.b_transposed) c.noalias() += a.transpose() * b.transpose();
}

void pipevm_gemm(const RowMajorGemm& g) {
  vit_kernels().product(ProductArgs{g});
}

struct Implementation {
  std::string name;
  std::function<void(const RowMajorGemm&)> gemm;
  bool library;  // OpenBLAS or Eigen: what the bound is made of
};

void run_site(GemmSite& site, const Implementation& implementation) {
  for (int sample = 0; sample < site.samples; ++sample) {
    for (int head = 0; head < site.heads; ++head) implementation.gemm(site.group(sample, head));
  }
}

// Runs the chain on one implementation for about `seconds` of CPU time;
// returns CPU seconds per pass and adds each site's wall seconds per pass to
// site_seconds.
double run_chain(std::vector<GemmSite>& sites, const Implementation& implementation, double seconds,
                 std::vector<std::vector<double>>* site_seconds) {
  using Clock = std::chrono::steady_clock;
  const double start = cpu_seconds();
  long passes = 0;
  double elapsed = 0.0;
  do {
    for (std::size_t s = 0; s < sites.size(); ++s) {
      const auto begin = Clock::now();
      run_site(sites[s], implementation);
      if (site_seconds != nullptr) {
        (*site_seconds)[s].push_back(std::chrono::duration<double>(Clock::now() - begin).count());
      }
    }
    ++passes;
    elapsed = cpu_seconds() - start;
  } while (elapsed < seconds);
  return elapsed / static_cast<double>(passes);
}

int run(const Options& options) {
  tune_eigen_for_one_core();
  const VitShape shape;
  std::vector<GemmSite> sites = pipevm::bench::step_gemm_sites(shape, options.rows);
  const std::vector<Implementation> implementations = {
      {"openblas", openblas_gemm, true},
      {"eigen", eigen_gemm, true},
      {std::string("pipevm-") + vit_kernels().name, pipevm_gemm, false},
  };
  const std::size_t count = implementations.size();
  double flops = 0.0;
  for (const GemmSite& site : sites) flops += site.flops();
  const long micro_batches =
      static_cast<long>(options.samples / options.batch) * (options.batch / options.rows);

  // site_seconds[implementation][site]: wall seconds per pass; chain CPU seconds per round.
  std::vector<std::vector<std::vector<double>>> site_seconds(
      count, std::vector<std::vector<double>>(sites.size()));
  std::vector<std::vector<double>> chain_seconds(count);
  for (int round = -1; round < options.rounds; ++round) {  // round -1 warms up
    for (std::size_t i = 0; i < count; ++i) {
      const double per_pass = run_chain(sites, implementations[i], options.seconds,
                                        round < 0 ? nullptr : &site_seconds[i]);
      if (round >= 0) chain_seconds[i].push_back(per_pass);
    }
  }
  // Per site, its median over the passes; the bounds take the fastest
  // implementation of each site, among the libraries and among all.
  std::vector<double> sum(count, 0.0);
  double bound_library = 0.0, bound_all = 0.0;
  for (std::size_t s = 0; s < sites.size(); ++s) {
    double library = 1e30, all = 1e30;
    for (std::size_t i = 0; i < count; ++i) {
      const double t = median(site_seconds[i][s]);
      sum[i] += t;
      if (implementations[i].library) library = std::min(library, t);
      all = std::min(all, t);
    }
    bound_library += library;
    bound_all += all;
  }

  std::printf(
      "ViT GEMM chain: %d samples per micro-batch (%d token rows), %ld micro-batches per "
      "epoch; %.3f MFLOP per sample, %.1f GFLOP per epoch\n",
      options.rows, options.rows * shape.tokens(), micro_batches, flops / options.rows / 1e6,
      flops * static_cast<double>(micro_batches) / 1e9);
  std::printf("GEMMs: OpenBLAS as %s; pipevm kernels %s\n", gemm_backend().c_str(),
              vit_kernels().name);
  // Per product kind, summed over its sites (blocks), microseconds per micro-batch.
  std::printf("\n| product (all blocks) | m x n x k | calls | ");
  for (const Implementation& implementation : implementations) {
    std::printf("%s us | ", implementation.name.c_str());
  }
  std::printf("fastest |\n|---|---|---|");
  for (std::size_t i = 0; i <= count; ++i) std::printf("---|");
  std::printf("\n");
  std::vector<std::string> kinds;
  for (const GemmSite& site : sites) {
    if (std::find(kinds.begin(), kinds.end(), site.kind) == kinds.end()) {
      kinds.push_back(site.kind);
    }
  }
  for (const std::string& kind : kinds) {
    std::vector<double> total(count, 0.0);
    int calls = 0;
    const GemmSite* example = nullptr;
    for (std::size_t s = 0; s < sites.size(); ++s) {
      if (sites[s].kind != kind) continue;
      example = &sites[s];
      calls += sites[s].samples * sites[s].heads;
      for (std::size_t i = 0; i < count; ++i) total[i] += median(site_seconds[i][s]);
    }
    std::printf("| %s | %d x %d x %d | %d | ", kind.c_str(), example->gemm.m, example->gemm.n,
                example->gemm.k, calls);
    std::size_t fastest = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::printf("%.1f | ", total[i] * 1e6);
      if (total[i] < total[fastest]) fastest = i;
    }
    std::printf("%s |\n", implementations[fastest].name.c_str());
  }
  const double epoch = static_cast<double>(micro_batches);
  std::printf(
      "\n| chain | sum of the products' medians, ms per micro-batch | GFLOP/s | s per "
      "epoch | the chain in order, CPU ms per micro-batch |\n|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < count; ++i) {
    std::printf("| %s | %.3f | %.1f | %.3f | %.3f |\n", implementations[i].name.c_str(),
                sum[i] * 1e3, flops / sum[i] / 1e9, sum[i] * epoch, median(chain_seconds[i]) * 1e3);
  }
  std::printf(
      "| bound: the fastest library per product (OpenBLAS, Eigen) | %.3f | %.1f | %.3f | |\n",
      bound_library * 1e3, flops / bound_library / 1e9, bound_library * epoch);
  std::printf("| bound: the fastest implementation per product | %.3f | %.1f | %.3f | |\n",
              bound_all * 1e3, flops / bound_all / 1e9, bound_all * epoch);
  std::printf("\nbound %.3f s/epoch (libraries), %.3f s/epoch (all)\n", bound_library * epoch,
              bound_all * epoch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return pipevm::bench::run_reporting_errors("bench_vit_gemms",
                                             [&] { return run(parse(argc, argv)); });
}
