// Measured cost of each layer of a model, for cutting it into pipeline
// stages by time rather than by multiply-adds: the first layer's GEMMs (784
// wide) run faster per FLOP than the 128-wide ones, and every layer but the
// last adds its bias, ReLU and their gradients, so a split by multiply-adds
// left the second stage of the default model 60% of the work. Timed on this
// process's CPU clock with the runtime's own layer functions on synthetic
// values (the ViT: its units in a Piece of its own). Leaves out communication and the loss (the last piece's few
// columns), which no split can move.
#pragma once

#include <vector>

#include "model.hpp"
#include "optimizer.hpp"

namespace pipevm::runtime {

// Seconds of one training step per layer: `micro_batches` forwards and
// backwards of `rows` rows (no input gradient for the first layer), plus the
// layer's optimizer step. The median of a few rounds, each timing every
// layer in turn; takes a few milliseconds for the default model.
std::vector<double> measure_layer_costs(const ModelConfig& model, const OptimizerConfig& optimizer,
                                        int rows, int micro_batches);

}  // namespace pipevm::runtime
