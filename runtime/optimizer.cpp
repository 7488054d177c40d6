// SGD with momentum and Adam with bias correction over flat arrays (see
// optimizer.hpp). Adam follows PyTorch's arithmetic: the bias corrections
// are folded into the step size and the denominator.
#include "optimizer.hpp"

#include <cmath>
#include <stdexcept>

#include "eigen.hpp"

namespace pipevm::runtime {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

bool in_unit_interval(float value) {
  return value >= 0.0f && value < 1.0f;
}

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& config, std::size_t parameters) : config_(config) {
  if (config.kind == "adam") {
    adam_ = true;
  } else if (config.kind == "sgd") {
    adam_ = false;
  } else {
    throw std::invalid_argument("unknown optimizer '" + config.kind + "' (expected adam or sgd)");
  }
  if (!(config.lr > 0.0f) || !std::isfinite(config.lr)) {
    throw std::invalid_argument("the learning rate must be positive");
  }
  if (!in_unit_interval(config.momentum) || !in_unit_interval(config.beta1) ||
      !in_unit_interval(config.beta2)) {
    throw std::invalid_argument("momentum, beta1 and beta2 must lie in [0, 1)");
  }
  if (!(config.eps > 0.0f)) throw std::invalid_argument("eps must be positive");
  if (adam_ || config.momentum > 0.0f) first_moment_.assign(parameters, 0.0f);
  if (adam_) second_moment_.assign(parameters, 0.0f);
  parameter_count_ = parameters;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads) {
  if (params.size() != parameter_count_ || grads.size() != parameter_count_) {
    throw std::invalid_argument("optimizer step: parameter or gradient count changed");
  }
  ++steps_;
  const auto n = static_cast<Eigen::Index>(params.size());
  ArrayMap p(params.data(), n);
  const ConstArrayMap g(grads.data(), n);
  if (adam_) {
    ArrayMap m(first_moment_.data(), n);
    ArrayMap v(second_moment_.data(), n);
    const double t = static_cast<double>(steps_);
    const auto correction1 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
    const auto correction2 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), t));
    const float step_size = config_.lr / correction1;
    const float root_correction2 = std::sqrt(correction2);
    m = config_.beta1 * m + (1.0f - config_.beta1) * g;
    v = config_.beta2 * v + (1.0f - config_.beta2) * g.square();
    p -= step_size * m / (v.sqrt() / root_correction2 + config_.eps);
  } else if (config_.momentum > 0.0f) {
    ArrayMap velocity(first_moment_.data(), n);
    velocity = config_.momentum * velocity + g;
    p -= config_.lr * velocity;
  } else {
    p -= config_.lr * g;
  }
}

}  // namespace pipevm::runtime
