// A model's bytes for one configuration (model_bytes.hpp).
#include "model_bytes.hpp"

#include <algorithm>

namespace pipevm::api {

MemoryShape memory_shape(const ModelBytes& model, const Config& config) {
  MemoryShape shape;
  shape.layer_widths = model.layer_widths;
  shape.element_bytes = model.element_bytes;
  shape.bias = model.bias;
  const int split = std::max(1, config.dp) * std::max(1, config.micro_batches);
  shape.rows = std::max(1, model.batch_size / split);
  shape.optimizer_states = model.optimizer_states;
  shape.layer_parameter_counts = model.layer_parameter_counts;
  shape.layer_stashes = model.layer_stashes;
  return shape;
}

}  // namespace pipevm::api
