// SGD with momentum and Adam with bias correction over flat arrays (see
// optimizer.hpp). Adam follows PyTorch's arithmetic (the bias corrections
// are folded into the step size and the denominator), but for one division.
#include "optimizer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "eigen.hpp"

namespace pipevm::runtime {
namespace {

bool in_unit_interval(float value) {
  return value >= 0.0f && value < 1.0f;
}

// The update runs over blocks of kBlock floats as fixed-size Eigen arrays,
// which Eigen evaluates with whole packets (unaligned loads) and no scalar
// path; the last partial block is copied into a zero-padded block and takes
// the same packet code. Every element therefore sees the same instructions
// wherever it lies in the array and wherever the heap put the array, so a
// model split into pieces steps exactly as the whole model (Eigen's dynamic
// expressions do the elements before the first aligned address one by one,
// and those may round differently).
constexpr int kBlock = 16;
using Block = Eigen::Array<float, kBlock, 1>;
using BlockMap = Eigen::Map<Block>;
using ConstBlockMap = Eigen::Map<const Block>;

// Calls update(p, g, first, second) on blocks of the parameters, their
// gradients and up to two state arrays (null when the optimizer keeps fewer;
// update must then leave that argument alone), in one pass.
template <typename Update>
void for_each_block(std::span<float> params, std::span<const float> grads, float* first,
                    float* second, const Update& update) {
  std::array<float, kBlock> p{};
  std::array<float, kBlock> g{};
  std::array<float, kBlock> a{};
  std::array<float, kBlock> b{};
  const std::size_t n = params.size();
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    update(BlockMap(params.data() + i), ConstBlockMap(grads.data() + i),
           BlockMap(first != nullptr ? first + i : a.data()),
           BlockMap(second != nullptr ? second + i : b.data()));
  }
  const std::size_t rest = n - i;
  if (rest == 0) return;
  std::copy_n(params.data() + i, rest, p.data());
  std::copy_n(grads.data() + i, rest, g.data());
  if (first != nullptr) std::copy_n(first + i, rest, a.data());
  if (second != nullptr) std::copy_n(second + i, rest, b.data());
  update(BlockMap(p.data()), ConstBlockMap(g.data()), BlockMap(a.data()), BlockMap(b.data()));
  std::copy_n(p.data(), rest, params.data() + i);
  if (first != nullptr) std::copy_n(a.data(), rest, first + i);
  if (second != nullptr) std::copy_n(b.data(), rest, second + i);
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
  begin_step();
  update(params, grads, 0);
}

void Optimizer::begin_step() {
  ++steps_;
}

void Optimizer::update(std::span<float> params, std::span<const float> grads, std::size_t offset) {
  if (params.size() != grads.size() || offset > parameter_count_ ||
      params.size() > parameter_count_ - offset) {
    throw std::invalid_argument("optimizer update: the range is not within the parameters");
  }
  if (adam_) {
    const double t = static_cast<double>(steps_);
    const auto correction1 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta1), t));
    const auto correction2 =
        static_cast<float>(1.0 - std::pow(static_cast<double>(config_.beta2), t));
    const float step_size = config_.lr / correction1;
    // sqrt(v) / sqrt(correction2) as a product: one division per element
    // (the divider bounds this pass), not two as in PyTorch's formula.
    const float inverse_root_correction2 = 1.0f / std::sqrt(correction2);
    const float beta1 = config_.beta1;
    const float beta2 = config_.beta2;
    const float eps = config_.eps;
    // One pass over p, g, m and v (PyTorch's arithmetic, element by element).
    for_each_block(params, grads, first_moment_.data() + offset, second_moment_.data() + offset,
                   [&](BlockMap p, ConstBlockMap g, BlockMap m, BlockMap v) {
                     m = beta1 * m + (1.0f - beta1) * g;
                     v = beta2 * v + (1.0f - beta2) * g.square();
                     p -= step_size * m / (v.sqrt() * inverse_root_correction2 + eps);
                   });
  } else if (config_.momentum > 0.0f) {
    const float momentum = config_.momentum;
    const float lr = config_.lr;
    for_each_block(params, grads, first_moment_.data() + offset, nullptr,
                   [&](BlockMap p, ConstBlockMap g, BlockMap velocity, BlockMap) {
                     velocity = momentum * velocity + g;
                     p -= lr * velocity;
                   });
  } else {
    const float lr = config_.lr;
    for_each_block(params, grads, nullptr, nullptr,
                   [&](BlockMap p, ConstBlockMap g, BlockMap, BlockMap) { p -= lr * g; });
  }
}

std::size_t Optimizer::state_bytes() const {
  return (first_moment_.size() + second_moment_.size()) * sizeof(float);
}

Optimizer::State Optimizer::state() const {
  State state;
  state.steps = steps_;
  if (adam_) {
    state.arrays.emplace_back("first_moment", first_moment_);
    state.arrays.emplace_back("second_moment", second_moment_);
  } else if (!first_moment_.empty()) {
    state.arrays.emplace_back("velocity", first_moment_);
  }
  return state;
}

void Optimizer::restore(const State& state) {
  const State mine = this->state();
  bool fits = state.steps >= 0 && state.arrays.size() == mine.arrays.size();
  for (std::size_t i = 0; fits && i < mine.arrays.size(); ++i) {
    fits = state.arrays[i].first == mine.arrays[i].first &&
           state.arrays[i].second.size() == parameter_count_;
  }
  if (!fits) {
    std::string expected = mine.arrays.empty() ? "no state arrays" : "";
    for (const auto& [name, values] : mine.arrays) {
      expected += (expected.empty() ? "" : ", ") + name;
    }
    throw std::invalid_argument("the optimizer state is not one of " + config_.kind + " over " +
                                std::to_string(parameter_count_) + " parameters (expected " +
                                expected + ")");
  }
  steps_ = state.steps;
  if (adam_) {
    first_moment_ = state.arrays[0].second;
    second_moment_ = state.arrays[1].second;
  } else if (!first_moment_.empty()) {
    first_moment_ = state.arrays[0].second;
  }
}

}  // namespace pipevm::runtime
