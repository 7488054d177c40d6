// A sequential training epoch on one core (no MPI) against its compute
// bound. The bound is the epoch's GEMM work divided by the best rate of the
// same GEMM chain measured in this run (before and after the epochs), so the
// ratio holds on any machine. Epochs are timed in wall time and in process
// CPU time; the ratio uses CPU time, which other work on a shared machine
// does not inflate. Prints one line per epoch and a summary.
//
//   bench_runtime_epoch [--epochs N] [--data DIR | --data synthetic]
//                       [--batch B] [--micro-batches M] [--untuned] [--loss
//                       cross_entropy|softmax_mse]
//                       [--optimizer adam|sgd] [--lr X]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench_cli.hpp"
#include "data.hpp"
#include "gemm_chain.hpp"
#include "model.hpp"
#include "sequential.hpp"
#include "tensor.hpp"

namespace {

using namespace pipevm::runtime;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Options {
  int epochs = 3;
  std::string data = kFashionMnistDirectory;
  int batch = 128;
  int micro_batches = 4;
  bool tuned = true;
  Loss loss = Loss::cross_entropy;
  OptimizerConfig optimizer;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--epochs") {
      options.epochs = std::stoi(value());
    } else if (flag == "--data") {
      options.data = value();
    } else if (flag == "--batch") {
      options.batch = std::stoi(value());
    } else if (flag == "--micro-batches") {
      options.micro_batches = std::stoi(value());
    } else if (flag == "--untuned") {
      options.tuned = false;
    } else if (flag == "--loss") {
      const auto loss = loss_from_name(value());
      if (!loss) throw std::runtime_error("unknown loss");
      options.loss = *loss;
    } else if (flag == "--optimizer") {
      options.optimizer.kind = value();
    } else if (flag == "--lr") {
      options.optimizer.lr = std::stof(value());
    } else {
      throw std::runtime_error("unknown flag " + flag);
    }
  }
  return options;
}

int run(const Options& options) {
  if (options.tuned) tune_eigen_for_one_core();
  ModelConfig model;
  model.loss = options.loss;
  const int rows = options.batch / options.micro_batches;

  TrainingStepChain chain(model.sizes, rows);
  const double chain_rate_before = chain.measure_rate(0.5, 3);

  const auto load_start = Clock::now();
  const DataSplit data = options.data == "synthetic" ? synthetic(51000, 10000, 784, 10, 1)
                                                     : load_directory(options.data);
  const double load_seconds = seconds_since(load_start);

  SequentialTrainer trainer(model, options.optimizer, options.batch, options.micro_batches);
  Batcher batcher(data.train, 0, options.batch, 1, options.micro_batches);
  const double flops_per_sample = chain.flops() / rows;
  const double epoch_flops = flops_per_sample * batcher.batches_per_epoch() * options.batch;

  std::printf("data %s: %d train, %d validation, %d test samples, loaded in %.2f s\n",
              options.data.c_str(), data.train.samples, data.validation.samples, data.test.samples,
              load_seconds);
  std::printf("Eigen blocking %s, micro-batch %d, epoch GEMM work %.1f GFLOP\n",
              options.tuned ? "tuned (L1 8 KiB)" : "default", rows, epoch_flops / 1e9);
  std::printf("%5s %9s %9s %10s %10s %9s %9s\n", "epoch", "wall_s", "cpu_s", "samples/s",
              "train_loss", "val_acc", "test_acc");
  std::vector<double> epoch_cpu_seconds;
  std::vector<double> epoch_wall_seconds;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const auto start = Clock::now();
    const double cpu_start = cpu_seconds();
    const EpochResult result = trainer.train_epoch(batcher, epoch);
    const double cpu = cpu_seconds() - cpu_start;
    const double wall = seconds_since(start);
    epoch_cpu_seconds.push_back(cpu);
    epoch_wall_seconds.push_back(wall);
    const Evaluation validation =
        data.validation.samples > 0 ? evaluate(trainer.model(), data.validation) : Evaluation{};
    const Evaluation test = evaluate(trainer.model(), data.test);
    std::printf("%5d %9.3f %9.3f %10.0f %10.4f %9.4f %9.4f\n", epoch, wall, cpu,
                result.steps * options.batch / wall, result.loss, validation.accuracy,
                test.accuracy);
  }
  const double chain_rate = std::max(chain_rate_before, chain.measure_rate(0.5, 3));
  const double bound = epoch_flops / chain_rate;
  const auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  const double cpu = median(epoch_cpu_seconds);
  std::printf(
      "GEMM chain alone: %.1f GFLOP/s (best of before and after) -> compute bound %.3f s/epoch\n",
      chain_rate / 1e9, bound);
  std::printf(
      "median epoch: %.3f s wall, %.3f s CPU = %.2f x the compute bound (%.1f GFLOP/s achieved)\n",
      median(epoch_wall_seconds), cpu, cpu / bound, epoch_flops / cpu / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return pipevm::bench::run_reporting_errors("bench_runtime_epoch", [&] { return run(parse(argc, argv)); });
}
