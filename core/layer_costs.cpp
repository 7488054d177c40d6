// Per-layer costs and cuts (layer_costs.hpp).
#include "layer_costs.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace pipevm {

PieceCost piece_cost(const std::vector<LayerCost>& layers, LayerRange range) {
  PieceCost piece;
  for (int l = range.begin; l < range.end; ++l) {
    const LayerCost& layer = layers.at(static_cast<std::size_t>(l));
    piece.fwd += layer.fwd;
    piece.bwd_input += layer.bwd_input;
    piece.bwd_weight += layer.bwd_weight;
    piece.activation_bytes += layer.activation_bytes;
    piece.weight_activation_bytes += layer.weight_activation_bytes;
    piece.parameter_bytes += layer.parameter_bytes;
  }
  const bool last = range.end >= static_cast<int>(layers.size());
  if (range.size() > 0 && !last) piece.output_bytes = layers[static_cast<std::size_t>(range.end - 1)].output_bytes;
  return piece;
}

namespace {

std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::vector<LayerRange>> parse_cut(std::string_view text, int layers, std::string& error) {
  std::vector<LayerRange> cut;
  int next = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view piece = text.substr(start, comma - start);
    const std::string which = "piece " + std::to_string(cut.size()) + " (`" + std::string(piece) + "`)";
    const std::size_t dash = piece.find('-');
    const auto first = whole_number(piece.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : whole_number(piece.substr(dash + 1));
    if (!first || !last) {
      error = which + " is not a layer `L` or a range `A-B` of layer numbers";
      return std::nullopt;
    }
    if (*first != next) {
      error = which + " starts at layer " + std::to_string(*first) + ", not at " + std::to_string(next) +
              ": the pieces must cover the layers in order, each once";
      return std::nullopt;
    }
    if (*last < *first) {
      error = which + " is empty: its last layer comes before its first";
      return std::nullopt;
    }
    if (*last >= layers) {
      error = which + " reaches layer " + std::to_string(*last) + " but the model has " +
              std::to_string(layers) + " layers (0-" + std::to_string(layers - 1) + ")";
      return std::nullopt;
    }
    cut.push_back({*first, *last + 1});
    next = *last + 1;
    start = comma + 1;
  }
  if (next != layers) {
    error = "the cut ends at layer " + std::to_string(next - 1) + " but the model has " + std::to_string(layers) +
            " layers: the last piece must end at layer " + std::to_string(layers - 1);
    return std::nullopt;
  }
  return cut;
}

std::string cut_text(const std::vector<LayerRange>& cut) {
  std::string text;
  for (const LayerRange& piece : cut) {
    if (!text.empty()) text += ',';
    text += std::to_string(piece.begin);
    if (piece.size() > 1) text += '-' + std::to_string(piece.end - 1);
  }
  return text;
}

std::vector<LayerRange> even_cut(int layers, int pieces) {
  if (pieces < 1 || pieces > layers) {
    throw std::invalid_argument("cannot cut " + std::to_string(layers) + " layers into " + std::to_string(pieces) +
                                " non-empty pieces");
  }
  std::vector<LayerRange> cut;
  int begin = 0;
  for (int p = 0; p < pieces; ++p) {
    const int size = layers / pieces + (p < layers % pieces ? 1 : 0);
    cut.push_back({begin, begin + size});
    begin += size;
  }
  return cut;
}

}  // namespace pipevm
