// The model whose bytes check and simulate count, as far as the bytes go:
// layer widths, element size, biases, the global batch and the optimizer's
// state per parameter. The command line fills it from a `pipevm run` YAML
// file (cli/memory_config.hpp), Python from keyword arguments. Not here:
// the stages, micro-batches and replicas, which come with each
// configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memory_bytes.hpp"
#include "model_shape.hpp"
#include "program.hpp"

namespace pipevm::api {

struct ModelBytes {
  std::vector<int> layer_widths = default_layer_widths();
  int element_bytes = 4;     // float32
  bool bias = true;          // every layer has a bias
  int batch_size = 128;      // the global batch, split over dp x micro-batches
  int optimizer_states = 2;  // state numbers per parameter: Adam 2, momentum 1, SGD 0
  // A model that is not an MLP (the ViT): each layer's parameters and what
  // its backward halves keep (MemoryShape's fields of the same names).
  std::vector<std::uint64_t> layer_parameter_counts;
  std::vector<MemoryShape::LayerStash> layer_stashes;
};

// The shape for one configuration: rows per micro-batch are the batch size
// over dp x micro-batches (at least one).
MemoryShape memory_shape(const ModelBytes& model, const Config& config);

// A memory limit as `synthesize --memory-limit` and pipevm.synthesize take
// it: a number of micro-batch activations M_B (4, 2.5) into `activations`,
// or bytes with a unit (B, KiB, MiB, GiB, TiB, or the powers of ten kB, MB,
// GB, TB) into `bytes`. False on anything else, negative or not finite.
bool parse_memory_limit(const std::string& text, double& activations, std::uint64_t& bytes);

}  // namespace pipevm::api
