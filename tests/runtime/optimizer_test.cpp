// The optimizers against hand-computed steps.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "optimizer.hpp"

namespace pipevm::runtime {
namespace {

TEST(optimizer, plain_sgd_steps_against_the_gradient) {
  OptimizerConfig config;
  config.kind = "sgd";
  config.lr = 0.1f;
  Optimizer optimizer(config, 2);
  std::vector<float> params = {1.0f, -2.0f};
  optimizer.step(params, std::vector<float>{0.5f, -1.0f});
  EXPECT_FLOAT_EQ(params[0], 0.95f);
  EXPECT_FLOAT_EQ(params[1], -1.9f);
  EXPECT_EQ(optimizer.steps_taken(), 1);
}

TEST(optimizer, sgd_momentum_accumulates_velocity) {
  OptimizerConfig config;
  config.kind = "sgd";
  config.lr = 0.1f;
  config.momentum = 0.9f;
  Optimizer optimizer(config, 1);
  std::vector<float> params = {1.0f};
  const std::vector<float> grad = {1.0f};
  optimizer.step(params, grad);  // v = 1,   p = 1 - 0.1
  optimizer.step(params, grad);  // v = 1.9, p = 0.9 - 0.19
  EXPECT_FLOAT_EQ(params[0], 0.71f);
}

TEST(optimizer, adam_matches_hand_computed_steps) {
  OptimizerConfig config;  // adam, lr 1e-3, betas 0.9 / 0.999, eps 1e-8
  Optimizer optimizer(config, 1);
  std::vector<float> params = {0.5f};
  const double g1 = 0.2, g2 = -0.4;
  optimizer.step(params, std::vector<float>{0.2f});
  // Step 1: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + eps).
  double expected = 0.5 - 1e-3 * g1 / (std::abs(g1) + 1e-8);
  EXPECT_NEAR(static_cast<double>(params[0]), expected, 1e-7);
  optimizer.step(params, std::vector<float>{-0.4f});
  const double m = 0.9 * 0.1 * g1 + 0.1 * g2;
  const double v = 0.999 * 0.001 * g1 * g1 + 0.001 * g2 * g2;
  const double m_hat = m / (1.0 - 0.9 * 0.9);
  const double v_hat = v / (1.0 - 0.999 * 0.999);
  expected -= 1e-3 * m_hat / (std::sqrt(v_hat) + 1e-8);
  EXPECT_NEAR(static_cast<double>(params[0]), expected, 1e-7);
}

TEST(optimizer, rejects_bad_configurations) {
  OptimizerConfig unknown;
  unknown.kind = "adagrad";
  EXPECT_THROW(Optimizer(unknown, 1), std::invalid_argument);
  OptimizerConfig negative;
  negative.lr = -1.0f;
  EXPECT_THROW(Optimizer(negative, 1), std::invalid_argument);
  OptimizerConfig beta;
  beta.beta2 = 1.0f;
  EXPECT_THROW(Optimizer(beta, 1), std::invalid_argument);
  Optimizer optimizer(OptimizerConfig{}, 2);
  std::vector<float> params(3);
  EXPECT_THROW(optimizer.step(params, std::vector<float>(3)), std::invalid_argument);
}

}  // namespace
}  // namespace pipevm::runtime
