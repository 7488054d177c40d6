// The model's shape, as far as a schedule cares: its layer widths, input
// first, and the one rule that cuts the layers into the pieces a placement
// asks for. The checker (message sizes), the simulator and the runtime
// (which layers each rank holds) all use it, so they cannot disagree. What
// the layers compute is runtime/'s (model.hpp).
#include "model_shape.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace pipevm {

namespace {

std::size_t to_size(int value) { return static_cast<std::size_t>(value); }

std::size_t layer_parameter_count(const std::vector<int>& sizes, int layer) {
  const std::size_t in = to_size(sizes[to_size(layer)]);
  const std::size_t out = to_size(sizes[to_size(layer) + 1]);
  return out * in + out;
}

}  // namespace

const std::vector<int>& default_layer_widths() {
  static const std::vector<int> widths = {784, 128, 127, 126, 125, 124, 123, 10};
  return widths;
}

void check_layer_widths(const std::vector<int>& sizes) {
  if (sizes.size() < 2) throw std::invalid_argument("a model needs at least two layer widths");
  for (const int width : sizes) {
    if (width < 1) throw std::invalid_argument("layer widths must be positive");
  }
}

int layer_count(const std::vector<int>& sizes) {
  return sizes.empty() ? 0 : static_cast<int>(sizes.size()) - 1;
}

std::size_t parameter_count(const std::vector<int>& sizes, LayerRange layers) {
  std::size_t count = 0;
  for (int layer = layers.begin; layer < layers.end; ++layer) {
    count += layer_parameter_count(sizes, layer);
  }
  return count;
}

std::vector<LayerRange> split_layers(const std::vector<int>& sizes, int pieces) {
  return split_layers(sizes, pieces, {});
}

std::vector<LayerRange> split_layers(const std::vector<int>& sizes, int pieces,
                                     const std::vector<double>& layer_costs) {
  check_layer_widths(sizes);
  const int layers = layer_count(sizes);
  if (pieces < 1 || pieces > layers) {
    throw std::invalid_argument("cannot split " + std::to_string(layers) + " layers into " +
                                std::to_string(pieces) + " pieces");
  }
  if (!layer_costs.empty() && layer_costs.size() != to_size(layers)) {
    throw std::invalid_argument("split_layers: one cost per layer expected");
  }
  // prefix[i]: cost of layers [0, i).
  std::vector<double> prefix(to_size(layers) + 1, 0.0);
  for (int layer = 0; layer < layers; ++layer) {
    const double multiply_adds =
        static_cast<double>(sizes[to_size(layer)]) * static_cast<double>(sizes[to_size(layer) + 1]);
    const double cost =
        layer_costs.empty() ? multiply_adds * (layer == 0 ? 2 : 3) : layer_costs[to_size(layer)];
    prefix[to_size(layer) + 1] = prefix[to_size(layer)] + cost;
  }
  const auto cost = [&](int begin, int end) {
    return prefix[to_size(end)] - prefix[to_size(begin)];
  };
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  const std::size_t columns = to_size(layers) + 1;
  const auto at = [columns](int parts, int end) { return to_size(parts) * columns + to_size(end); };

  // Pass 1: the smallest possible largest part, over prefixes.
  // Zero parts cover the empty prefix at no cost and nothing else at all.
  const auto solved = [&](const std::vector<double>& table, int parts, int end) {
    if (parts == 0) return end == 0 ? 0.0 : kInfinity;
    return table[at(parts, end)];
  };
  std::vector<double> largest(to_size(pieces + 1) * columns, kInfinity);
  for (int parts = 1; parts <= pieces; ++parts) {
    for (int end = parts; end <= layers; ++end) {
      for (int begin = parts - 1; begin < end; ++begin) {
        const double candidate = std::max(solved(largest, parts - 1, begin), cost(begin, end));
        largest[at(parts, end)] = std::min(largest[at(parts, end)], candidate);
      }
    }
  }
  const double bound = largest[at(pieces, layers)];

  // Pass 2: under that bound, the smallest sum of squared part costs; the
  // strict comparison keeps the earliest split point among equals.
  std::vector<double> squares(largest.size(), kInfinity);
  std::vector<int> split_from(largest.size(), 0);
  for (int parts = 1; parts <= pieces; ++parts) {
    for (int end = parts; end <= layers; ++end) {
      for (int begin = parts - 1; begin < end; ++begin) {
        const double part = cost(begin, end);
        const double before = solved(squares, parts - 1, begin);
        if (part > bound || before == kInfinity) continue;
        const double candidate = before + part * part;
        if (candidate < squares[at(parts, end)]) {
          squares[at(parts, end)] = candidate;
          split_from[at(parts, end)] = begin;
        }
      }
    }
  }
  std::vector<LayerRange> ranges(to_size(pieces));
  int end = layers;
  for (int parts = pieces; parts >= 1; --parts) {
    const int begin = split_from[at(parts, end)];
    ranges[to_size(parts - 1)] = LayerRange{begin, end};
    end = begin;
  }
  return ranges;
}

std::vector<int> piece_boundary_widths(const std::vector<int>& sizes, int pieces) {
  if (sizes.size() < 2 || pieces < 1 || pieces > layer_count(sizes)) return {};
  return piece_boundary_widths(sizes, split_layers(sizes, pieces));
}

std::vector<int> piece_boundary_widths(const std::vector<int>& sizes,
                                       const std::vector<LayerRange>& split) {
  std::vector<int> widths;
  for (const LayerRange& piece : split) widths.push_back(sizes.at(to_size(piece.begin)));
  widths.push_back(sizes.back());
  return widths;
}

}  // namespace pipevm
