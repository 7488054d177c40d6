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

// A whole-model Piece that times each layer's passes on synthetic values.
class PassTimer {
 public:
  PassTimer(const ModelConfig& model, int rows)
      : layers_(layer_count(model.sizes)),
        rows_(rows),
        piece_(model, LayerRange{0, layers_}),
        pixels_(random_values(to_size(rows) * to_size(model.sizes.front()), 1)),
        labels_(to_size(rows), 0) {
    piece_.reserve(1, rows);
  }
  int layers() const { return layers_; }

  // One micro-batch forward and back: each layer's seconds added to
  // `passes[layer]` (forward, input half, weight half).
  void micro_batch(std::vector<LayerPassSeconds>& passes) {
    const std::span<float> input = piece_.take_input(0, rows_);
    std::copy(pixels_.begin(), pixels_.end(), input.begin());
    for (int layer = 0; layer < layers_; ++layer) {
      const double start = thread_seconds();
      piece_.forward_layer(0, layer);
      passes[to_size(layer)].fwd += thread_seconds() - start;
    }
    piece_.loss(0, labels_, 1.0f);
    for (int layer = layers_ - 1; layer >= 0; --layer) {
      const double start = thread_seconds();
      piece_.backward_input_layer(0, layer);
      const double middle = thread_seconds();
      piece_.backward_weight_layer(0, layer);
      passes[to_size(layer)].bwd_input += middle - start;
      passes[to_size(layer)].bwd_weight += thread_seconds() - middle;
    }
  }
  void zero_grad() { piece_.zero_grad(); }

 private:
  int layers_;
  int rows_;
  Piece piece_;
  std::vector<float> pixels_;
  std::vector<std::uint8_t> labels_;
};

constexpr int kRounds = 5;

// The ViT's units, timed as a whole-model Piece runs them (forward, both
// backward halves; the optimizer step is elementwise and small beside them).
std::vector<double> measure_vit_unit_costs(const ModelConfig& model, int rows, int micro_batches) {
  PassTimer timer(model, rows);
  std::vector<std::vector<double>> seconds(to_size(timer.layers()));
  for (int round = 0; round <= kRounds; ++round) {  // round 0 allocates and faults pages
    std::vector<LayerPassSeconds> step(to_size(timer.layers()));
    for (int mb = 0; mb < micro_batches; ++mb) timer.micro_batch(step);
    timer.zero_grad();
    if (round == 0) continue;
    for (int layer = 0; layer < timer.layers(); ++layer) {
      const LayerPassSeconds& pass = step[to_size(layer)];
      seconds[to_size(layer)].push_back(pass.fwd + pass.bwd_input + pass.bwd_weight);
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

std::vector<LayerPassSeconds> measure_layer_passes(const ModelConfig& model, int rows) {
  PassTimer timer(model, rows);
  const auto layers = to_size(timer.layers());
  std::vector<std::vector<double>> fwd(layers), bwd_input(layers), bwd_weight(layers);
  for (int round = 0; round <= kRounds; ++round) {  // round 0 allocates and faults pages
    std::vector<LayerPassSeconds> passes(layers);
    timer.micro_batch(passes);
    timer.zero_grad();
    if (round == 0) continue;
    for (std::size_t layer = 0; layer < layers; ++layer) {
      fwd[layer].push_back(passes[layer].fwd);
      bwd_input[layer].push_back(passes[layer].bwd_input);
      bwd_weight[layer].push_back(passes[layer].bwd_weight);
    }
  }
  const std::vector<double> f = median_of_rounds(fwd, kRounds);
  const std::vector<double> i = median_of_rounds(bwd_input, kRounds);
  const std::vector<double> w = median_of_rounds(bwd_weight, kRounds);
  std::vector<LayerPassSeconds> medians;
  for (std::size_t layer = 0; layer < layers; ++layer) medians.push_back({f[layer], i[layer], w[layer]});
  return medians;
}

}  // namespace pipevm::runtime
