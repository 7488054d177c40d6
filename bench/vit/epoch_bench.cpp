// ViT training epochs on one core without MPI (issue 40): one Piece of the
// whole model stepped in the order `pipevm run schedules/gpipe.pipe` steps it
// on one rank (every micro-batch forward, then each one's loss and both
// backward halves, then Adam), timed in wall and in process CPU time per
// epoch, training only; then the test accuracy. bench/vit/run compares its
// CPU seconds with the GEMM-chain bound, and bench/vit/profile records it
// with perf for the profile per kind of work (--steps keeps that run short).
//
//   bench_vit_epoch [--epochs 1] [--steps N] [--micro-batches 4]
//                   [--data DIR | --data synthetic] [--no-test]
//
// Prints "epoch E wall_s cpu_s steps test_accuracy" per epoch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "data.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "tensor.hpp"

namespace {

using namespace pipevm::runtime;

struct Options {
  int epochs = 1;
  int steps = -1;  // per epoch; -1: all
  int micro_batches = 4;
  std::string data = kFashionMnistDirectory;
  bool test = true;
};

Options parse(int argc, char** argv) {
  Options options;
  pipevm::bench::parse_flags(
      argc, argv,
      {{"--epochs", [&](const std::string& v) { options.epochs = std::stoi(v); }},
       {"--steps", [&](const std::string& v) { options.steps = std::stoi(v); }},
       {"--micro-batches", [&](const std::string& v) { options.micro_batches = std::stoi(v); }},
       {"--data", [&](const std::string& v) { options.data = v; }}},
      {{"--no-test", [&] { options.test = false; }}});
  return options;
}

double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One optimizer step on batch `step`, as gpipe.pipe runs it on one rank.
void train_step(Piece& piece, Optimizer& optimizer, const Batcher& batcher, int step,
                std::vector<std::vector<float>>& inputs, std::vector<std::uint8_t>& labels) {
  const int micro_batches = static_cast<int>(inputs.size());
  const int rows = batcher.micro_batch_rows();
  piece.zero_grad();
  for (int mb = 0; mb < micro_batches; ++mb) {
    batcher.input(step, 0, mb, inputs[static_cast<std::size_t>(mb)]);
    piece.forward(mb, inputs[static_cast<std::size_t>(mb)], rows);
  }
  for (int mb = 0; mb < micro_batches; ++mb) {
    batcher.labels(step, 0, mb, labels);
    piece.loss(mb, labels, 1.0f / static_cast<float>(rows * micro_batches));
    piece.backward_input(mb, {});
    piece.backward_weight(mb);
  }
  optimizer.begin_step();
  for (int layer = piece.layers().begin; layer < piece.layers().end; ++layer) {
    optimizer.update(piece.layer_parameters(layer).all, piece.layer_gradients(layer).all,
                     piece.layer_offset(layer));
  }
}

int run(const Options& options) {
  constexpr int kBatch = 128;
  if (options.micro_batches < 1 || kBatch % options.micro_batches != 0) {
    throw std::runtime_error("--micro-batches must divide the batch of 128");
  }
  const int rows = kBatch / options.micro_batches;
  tune_eigen_for_one_core();
  ModelConfig model;
  use_vit(model, VitShape{});
  const DataSplit data = options.data == "synthetic" ? synthetic(51000, 10000, 784, 10, 1)
                                                     : load_directory(options.data);
  Piece piece(model, LayerRange{0, layer_count(model.sizes)});
  piece.reserve(options.micro_batches, rows);
  Optimizer optimizer(OptimizerConfig{}, piece.parameters().size());
  Batcher batcher(data.train, 0, kBatch, 1, options.micro_batches);
  std::vector<std::vector<float>> inputs(static_cast<std::size_t>(options.micro_batches),
                                         std::vector<float>(static_cast<std::size_t>(rows) * 784));
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(rows));
  const int steps = options.steps < 0 ? batcher.batches_per_epoch()
                                      : std::min(options.steps, batcher.batches_per_epoch());
  std::printf("ViT, %d micro-batches of %d, %d of %d steps per epoch\n", options.micro_batches,
              rows, steps, batcher.batches_per_epoch());
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    batcher.start_epoch(epoch);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    for (int step = 0; step < steps; ++step) {
      train_step(piece, optimizer, batcher, step, inputs, labels);
    }
    const double cpu = cpu_seconds() - cpu_start;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double accuracy = options.test ? evaluate(piece, data.test).accuracy : 0.0;
    std::printf("epoch %d %.3f %.3f %d %.4f\n", epoch, wall, cpu, steps, accuracy);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return pipevm::bench::run_reporting_errors("bench_vit_epoch",
                                             [&] { return run(parse(argc, argv)); });
}
