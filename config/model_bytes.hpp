// The model whose bytes check, simulate and synthesize count, as far as the
// bytes go: layer widths, element size, biases, the global batch and the
// optimizer's state per parameter, and the ViT's per-block parameters and
// stashes (core/vit_shape.hpp). Read from a run configuration (the same
// YAML as `pipevm run`: model_bytes(RunConfig)) by the command line and
// the Python module alike. Not here: the stages, micro-batches and
// replicas, which come with each configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile.hpp"
#include "layer_costs.hpp"
#include "memory_bytes.hpp"
#include "model_shape.hpp"
#include "program.hpp"
#include "run_config.hpp"

namespace pipevm::config {

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

// Each layer's bytes per micro-batch of `shape.rows` rows, as the byte walk
// counts them (core/memory_bytes.cpp), in the per-layer keys of a cost
// file (the times left 0): an MLP layer keeps its input for both backward
// halves; a ViT block keeps its stashes (forward_for_input and
// forward_for_weight until the input half, forward_for_weight and
// gradients_for_weight and its reduced gradients until the weight half);
// its parameters, and its output (the message when the model is cut after it).
std::vector<LayerCost> layer_bytes(const MemoryShape& shape);

// A memory limit as `synthesize --memory-limit` and pipevm.synthesize take
// it: a number of micro-batch activations M_B (4, 2.5) into `activations`,
// or bytes with a unit (B, KiB, MiB, GiB, TiB, or the powers of ten kB, MB,
// GB, TB) into `bytes`. False on anything else, negative or not finite.
bool parse_memory_limit(const std::string& text, double& activations, std::uint64_t& bytes);

// What of `run` the memory figures count.
ModelBytes model_bytes(const RunConfig& run);

// Expansion of the configuration's model: its layer widths give the
// built-in names layers, layer_begin and layer_end.
void expand_for_model(const RunConfig& run, ExpandOptions& options);

}  // namespace pipevm::config
