// Timing each layer's share of a training step (see layer_times.hpp).
#include "layer_times.hpp"

#include <algorithm>
#include <ctime>
#include <span>

#include "layers.hpp"
#include "random.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

double thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = random.uniform() - 0.5f;
  return values;
}

// One layer's buffers and the work of one micro-batch through it.
struct LayerWork {
  int rows, in, out;
  bool first, last;
  std::vector<float> x, weight, bias, y, d_y, d_x, d_weight, d_bias;
  Optimizer optimizer;

  LayerWork(int rows_, int in_, int out_, bool first_, bool last_, const OptimizerConfig& config)
      : rows(rows_),
        in(in_),
        out(out_),
        first(first_),
        last(last_),
        x(random_values(to_size(rows_) * to_size(in_), 1)),
        weight(random_values(to_size(out_) * to_size(in_) + to_size(out_), 2)),
        bias(random_values(to_size(out_), 3)),
        y(to_size(rows_) * to_size(out_)),
        d_y(random_values(to_size(rows_) * to_size(out_), 4)),
        d_x(to_size(rows_) * to_size(in_)),
        d_weight(weight.size()),
        d_bias(to_size(out_)),
        optimizer(config, weight.size()) {}

  void micro_batch() {
    const MatrixMap output = as_matrix(std::span(y), rows, out);
    const ConstMatrixMap weights = as_matrix(std::span<const float>(weight), out, in);
    linear_forward(output, as_matrix(std::span<const float>(x), rows, in), weights,
                   as_row_vector(std::span<const float>(bias)));
    const MatrixMap gradient = as_matrix(std::span(d_y), rows, out);
    if (!last) {
      relu_forward(output, as_const(output));
      relu_backward(gradient, as_const(gradient), as_const(output));
    }
    if (!first) {
      linear_backward_input(as_matrix(std::span(d_x), rows, in), as_const(gradient), weights);
    }
    linear_backward_weight(
        as_matrix(std::span(d_weight).first(to_size(out) * to_size(in)), out, in),
        as_row_vector(std::span(d_bias)), as_const(gradient),
        as_matrix(std::span<const float>(x), rows, in));
  }

  void step() { optimizer.step(weight, d_weight); }
};

std::vector<double> median_of_rounds(std::vector<std::vector<double>>& seconds, int rounds) {
  std::vector<double> costs;
  for (std::vector<double>& times : seconds) {
    std::nth_element(times.begin(), times.begin() + rounds / 2, times.end());
    costs.push_back(times[to_size(rounds / 2)]);
  }
  return costs;
}

// The ViT's units, timed as a whole-model Piece runs them (forward, both
// backward halves; the optimizer step is elementwise and small beside them).
std::vector<double> measure_vit_unit_costs(const ModelConfig& model, int rows, int micro_batches) {
  const int layers = layer_count(model.sizes);
  Piece piece(model, LayerRange{0, layers});
  piece.reserve(1, rows);
  const std::vector<float> pixels = random_values(to_size(rows) * to_size(model.sizes.front()), 1);
  const std::vector<std::uint8_t> labels(to_size(rows), 0);
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> seconds(to_size(layers));
  for (int round = 0; round <= kRounds; ++round) {  // round 0 allocates and faults pages
    std::vector<double> step(to_size(layers), 0.0);
    for (int mb = 0; mb < micro_batches; ++mb) {
      const std::span<float> input = piece.take_input(0, rows);
      std::copy(pixels.begin(), pixels.end(), input.begin());
      for (int layer = 0; layer < layers; ++layer) {
        const double start = thread_seconds();
        piece.forward_layer(0, layer);
        step[to_size(layer)] += thread_seconds() - start;
      }
      piece.loss(0, labels, 1.0f);
      for (int layer = layers - 1; layer >= 0; --layer) {
        const double start = thread_seconds();
        piece.backward_input_layer(0, layer);
        piece.backward_weight_layer(0, layer);
        step[to_size(layer)] += thread_seconds() - start;
      }
    }
    piece.zero_grad();
    if (round == 0) continue;
    for (int layer = 0; layer < layers; ++layer) {
      seconds[to_size(layer)].push_back(step[to_size(layer)]);
    }
  }
  return median_of_rounds(seconds, kRounds);
}

}  // namespace

std::vector<double> measure_layer_costs(const ModelConfig& model, const OptimizerConfig& optimizer,
                                        int rows, int micro_batches) {
  if (model.kind == ModelKind::vit) return measure_vit_unit_costs(model, rows, micro_batches);
  const int layers = layer_count(model.sizes);
  std::vector<LayerWork> work;
  work.reserve(to_size(layers));
  for (int layer = 0; layer < layers; ++layer) {
    work.emplace_back(rows, model.sizes[to_size(layer)], model.sizes[to_size(layer) + 1],
                      layer == 0, layer == layers - 1, optimizer);
  }
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> seconds(to_size(layers));
  for (LayerWork& layer : work) layer.micro_batch();  // first calls allocate and fault pages
  for (int round = 0; round < kRounds; ++round) {
    for (int layer = 0; layer < layers; ++layer) {
      LayerWork& w = work[to_size(layer)];
      const double start = thread_seconds();
      for (int mb = 0; mb < micro_batches; ++mb) w.micro_batch();
      w.step();
      seconds[to_size(layer)].push_back(thread_seconds() - start);
    }
  }
  return median_of_rounds(seconds, kRounds);
}

}  // namespace pipevm::runtime
