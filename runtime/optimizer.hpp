// Optimizers over one flat parameter array: SGD (optionally with momentum)
// and Adam with bias correction. Elementwise, so a model split into pieces,
// each with its own Optimizer, takes exactly the steps the whole model would.
// State is allocated by the constructor; step() allocates nothing.
// Leaves out weight decay, schedules of the learning rate and clipping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model_config.hpp"

namespace pipevm::runtime {

// Its kind and hyper-parameters are the core's (model_config.hpp).
using pipevm::OptimizerConfig;

class Optimizer {
 public:
  // What a checkpoint keeps so that training continues bit for bit: the step
  // count and every state array by name (adam: "first_moment" and
  // "second_moment"; sgd with momentum: "velocity"; plain sgd: none), each
  // as many floats as the parameters, in their order.
  struct State {
    std::int64_t steps = 0;
    std::vector<std::pair<std::string, std::vector<float>>> arrays;
  };

  // Throws std::invalid_argument for an unknown kind or a bad hyper-parameter.
  Optimizer(const OptimizerConfig& config, std::size_t parameters);

  // One step: params and grads hold the `parameters` floats given at
  // construction, in the same order every step.
  void step(std::span<float> params, std::span<const float> grads);
  // The same step over ranges of the parameters (layer by layer): begin_step
  // once, then update each range, whose first float is the `offset`-th of
  // the parameters given at construction.
  void begin_step();
  void update(std::span<float> params, std::span<const float> grads, std::size_t offset);
  // Bytes of its state arrays.
  std::size_t state_bytes() const;

  const OptimizerConfig& config() const { return config_; }
  std::int64_t steps_taken() const { return steps_; }

  State state() const;
  // Continues from `state`. Throws std::invalid_argument, changing nothing,
  // when it is not a state of this kind of optimizer over as many parameters.
  void restore(const State& state);

 private:
  OptimizerConfig config_;
  bool adam_ = true;
  std::size_t parameter_count_ = 0;
  std::int64_t steps_ = 0;
  std::vector<float> first_moment_;   // adam's m, or sgd's velocity
  std::vector<float> second_moment_;  // adam's v
};

}  // namespace pipevm::runtime
