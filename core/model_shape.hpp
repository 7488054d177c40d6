// The model's shape, as far as a schedule cares: layer widths (input first)
// and the one rule that cuts the layers into contiguous pieces. The checker
// sizes messages with it, the simulator links with it and the runtime
// builds each rank's pieces with it. Not here: what a layer computes
// (runtime/model.hpp).
#pragma once

#include <cstddef>
#include <vector>

namespace pipevm {

// The MLP pipevm trains by default: 784-128-127-126-125-124-123-10.
const std::vector<int>& default_layer_widths();

// Global layer indices [begin, end).
struct LayerRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  friend bool operator==(const LayerRange&, const LayerRange&) = default;
};

// Throws std::invalid_argument unless there are two or more widths, all positive.
void check_layer_widths(const std::vector<int>& sizes);
int layer_count(const std::vector<int>& sizes);
// Floats (weights and biases) of the layers in `layers`. The offset of layer
// `i` in the whole model's flat array is parameter_count(sizes, {0, i}).
std::size_t parameter_count(const std::vector<int>& sizes, LayerRange layers);

// Contiguous split of the layers into `pieces` non-empty parts, balanced by
// compute: a layer costs in * out multiply-adds per sample for its forward and
// as much for its weight gradient, plus as much again for its input gradient
// on every layer but the first (nothing needs the model input's gradient).
// The split minimises the largest part's cost; among splits with the same
// largest cost, the sum of squared part costs (the most even spread); among
// those, the one whose split points come first. A pure function of
// (sizes, pieces). Throws std::invalid_argument if pieces < 1 or pieces > layers.
std::vector<LayerRange> split_layers(const std::vector<int>& sizes, int pieces);
// The same split under other costs, one per layer (e.g. measured times,
// runtime/layer_times.hpp); empty `layer_costs` means the multiply-add model above.
std::vector<LayerRange> split_layers(const std::vector<int>& sizes, int pieces,
                                     const std::vector<double>& layer_costs);

// The width of the values crossing each piece boundary of that split:
// pieces + 1 numbers, piece p reading widths[p] and writing widths[p + 1].
// Empty when the model cannot be cut into that many pieces.
std::vector<int> piece_boundary_widths(const std::vector<int>& sizes, int pieces);
// The same for a given split (e.g. one balanced on measured layer times).
std::vector<int> piece_boundary_widths(const std::vector<int>& sizes,
                                       const std::vector<LayerRange>& split);

}  // namespace pipevm
