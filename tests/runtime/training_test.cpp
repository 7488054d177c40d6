// End to end on one process: the sequential trainer learns the synthetic
// set, with either loss, and its micro-batch split does not change the step.
#include <gtest/gtest.h>

#include "sequential.hpp"

namespace pipevm::runtime {
namespace {

struct TrainingRun {
  double train_accuracy = 0.0;
  Evaluation test;
};

TrainingRun train_synthetic(Loss loss, const OptimizerConfig& optimizer, int epochs) {
  const DataSplit data = synthetic(2048, 512, 64, 10, 7);
  ModelConfig model;
  model.sizes = {64, 32, 10};
  model.loss = loss;
  SequentialTrainer trainer(model, optimizer, 32, 2);
  Batcher batcher(data.train, 1, 32, 1, 2);
  TrainingRun run;
  for (int epoch = 0; epoch < epochs; ++epoch)
    run.train_accuracy = trainer.train_epoch(batcher, epoch).accuracy;
  run.test = evaluate(trainer.model(), data.test);
  return run;
}

TEST(training, cross_entropy_with_adam_learns_the_synthetic_set) {
  // 5 epochs of 64 steps.
  const TrainingRun run = train_synthetic(Loss::cross_entropy, OptimizerConfig{}, 5);
  EXPECT_GT(run.test.accuracy, 0.95);
  EXPECT_GT(run.train_accuracy, 0.9);
}

TEST(training, softmax_mse_with_sgd_momentum_learns_the_synthetic_set) {
  OptimizerConfig sgd;
  sgd.kind = "sgd";
  sgd.lr = 0.5f;
  sgd.momentum = 0.9f;
  const TrainingRun run = train_synthetic(Loss::softmax_mse, sgd, 5);
  EXPECT_GT(run.test.accuracy, 0.9);
}

TEST(training, micro_batch_split_does_not_change_the_step) {
  const DataSplit data = synthetic(256, 0, 20, 5, 3);
  ModelConfig model;
  model.sizes = {20, 16, 12, 5};
  SequentialTrainer one(model, OptimizerConfig{}, 32, 1);
  SequentialTrainer four(model, OptimizerConfig{}, 32, 4);
  Batcher whole(data.train, 9, 32, 1, 1);
  Batcher quarters(data.train, 9, 32, 1, 4);
  for (int batch = 0; batch < 3; ++batch) {
    one.train_batch(whole, batch);
    four.train_batch(quarters, batch);
  }
  const auto a = one.model().parameters();
  const auto b = four.model().parameters();
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << i;
}

}  // namespace
}  // namespace pipevm::runtime
