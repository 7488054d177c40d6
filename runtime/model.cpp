// The MLP's split, initialisation, pieces and evaluation (see model.hpp).
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "layers.hpp"
#include "random.hpp"
#include "tensor.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

}  // namespace

std::string_view name(Loss loss) {
  switch (loss) {
    case Loss::cross_entropy:
      return "cross_entropy";
    case Loss::softmax_mse:
      return "softmax_mse";
  }
  return "?";
}

std::optional<Loss> loss_from_name(std::string_view text) {
  if (text == "cross_entropy") return Loss::cross_entropy;
  if (text == "softmax_mse") return Loss::softmax_mse;
  return std::nullopt;
}

void initialize_layer(std::span<float> weight_then_bias, const ModelConfig& config, int layer) {
  check_layer_widths(config.sizes);
  if (layer < 0 || layer >= layer_count(config.sizes)) {
    throw std::out_of_range("no layer " + std::to_string(layer));
  }
  const std::size_t in = to_size(config.sizes[to_size(layer)]);
  const std::size_t out = to_size(config.sizes[to_size(layer) + 1]);
  if (weight_then_bias.size() != out * in + out) {
    throw std::invalid_argument("initialize_layer: wrong parameter span size");
  }
  SplitMix64 random(config.seed, static_cast<std::uint64_t>(layer));
  const float bound = std::sqrt(6.0f / static_cast<float>(in));
  for (std::size_t i = 0; i < out * in; ++i) {
    weight_then_bias[i] = bound * (2.0f * random.uniform() - 1.0f);
  }
  std::fill(weight_then_bias.begin() + static_cast<std::ptrdiff_t>(out * in),
            weight_then_bias.end(), 0.0f);
}

Piece::Piece(const ModelConfig& config, LayerRange layers) : config_(config), layers_(layers) {
  check_layer_widths(config_.sizes);
  if (layers.begin < 0 || layers.begin >= layers.end || layers.end > layer_count(config_.sizes)) {
    throw std::invalid_argument("layer range [" + std::to_string(layers.begin) + ", " +
                                std::to_string(layers.end) + ") is not within the model's " +
                                std::to_string(layer_count(config_.sizes)) + " layers");
  }
  offset_in_model_ = parameter_count(config_.sizes, {0, layers.begin});
  std::size_t offset = 0;
  for (int layer = layers.begin; layer < layers.end; ++layer) {
    LayerShape layer_shape;
    layer_shape.inputs = config_.sizes[to_size(layer)];
    layer_shape.outputs = config_.sizes[to_size(layer) + 1];
    layer_shape.parameter_offset = offset;
    offset += parameter_count(config_.sizes, {layer, layer + 1});
    shapes_.push_back(layer_shape);
  }
  parameters_.resize(offset);
  gradients_.assign(offset, 0.0f);
  for (int layer = layers.begin; layer < layers.end; ++layer) {
    initialize_layer(view(parameters_, layer).all, config_, layer);
  }
}

int Piece::input_width() const {
  return shapes_.front().inputs;
}
int Piece::output_width() const {
  return shapes_.back().outputs;
}
bool Piece::is_last() const {
  return layers_.end == layer_count(config_.sizes);
}

LayerView Piece::view(std::vector<float>& array, int layer) {
  if (layer < layers_.begin || layer >= layers_.end) {
    throw std::out_of_range("layer " + std::to_string(layer) + " is not in this piece");
  }
  const LayerShape& s = shape(layer - layers_.begin);
  const std::size_t weights = to_size(s.outputs) * to_size(s.inputs);
  const std::span<float> all(array.data() + s.parameter_offset, weights + to_size(s.outputs));
  return LayerView{layer, s.inputs, s.outputs, all.first(weights), all.subspan(weights), all};
}

LayerView Piece::layer_parameters(int layer) {
  return view(parameters_, layer);
}
LayerView Piece::layer_gradients(int layer) {
  return view(gradients_, layer);
}

void Piece::reserve(int slots, int rows) {
  if (slots < 1 || rows < 1) throw std::invalid_argument("reserve needs slots >= 1 and rows >= 1");
  slots_ = slots;
  max_rows_ = rows;
  slot_states_.assign(to_size(slots), Slot{});
  // Every section of a slot is rows x width, one after the other.
  std::size_t activation_columns = to_size(input_width());
  std::size_t gradient_columns = 0;
  for (LayerShape& s : shapes_) {
    s.activation_offset = activation_columns * to_size(rows);
    s.gradient_offset = gradient_columns * to_size(rows);
    activation_columns += to_size(s.outputs);
    gradient_columns += to_size(s.outputs);
  }
  activation_stride_ = activation_columns * to_size(rows);
  gradient_stride_ = gradient_columns * to_size(rows);
  input_gradient_stride_ = is_first() ? 0 : to_size(input_width()) * to_size(rows);
  activation_stash_.assign(activation_stride_ * to_size(slots), 0.0f);
  gradient_stash_.assign(gradient_stride_ * to_size(slots), 0.0f);
  input_gradient_stash_.assign(input_gradient_stride_ * to_size(slots), 0.0f);
}

Piece::Slot& Piece::checked_slot(int slot, SlotState expected, const char* operation) {
  if (slot < 0 || slot >= slots_) {
    throw std::out_of_range(std::string(operation) + ": slot " + std::to_string(slot) +
                            " outside the " + std::to_string(slots_) + " reserved");
  }
  Slot& state = slot_states_[to_size(slot)];
  if (state.state != expected) {
    throw std::logic_error(std::string(operation) + ": slot " + std::to_string(slot) +
                           " is not in the state this step needs (out of order)");
  }
  return state;
}

std::span<float> Piece::activations(int slot) {
  return {activation_stash_.data() + activation_stride_ * to_size(slot), activation_stride_};
}
std::span<float> Piece::output_gradients(int slot) {
  return {gradient_stash_.data() + gradient_stride_ * to_size(slot), gradient_stride_};
}
std::span<float> Piece::input_gradient(int slot) {
  return {input_gradient_stash_.data() + input_gradient_stride_ * to_size(slot),
          input_gradient_stride_};
}

std::span<const float> Piece::forward(int slot, std::span<const float> input, int rows) {
  Slot& state = checked_slot(slot, SlotState::free, "forward");
  if (rows < 1 || rows > max_rows_) {
    throw std::invalid_argument("forward: " + std::to_string(rows) + " rows, reserved " +
                                std::to_string(max_rows_));
  }
  const std::size_t row_count = to_size(rows);
  if (input.size() != row_count * to_size(input_width())) {
    throw std::invalid_argument("forward: input of " + std::to_string(input.size()) +
                                " floats, expected rows x " + std::to_string(input_width()));
  }
  const std::span<float> stash = activations(slot);
  if (input.data() != stash.data()) std::copy(input.begin(), input.end(), stash.begin());
  const bool ends_model = is_last();
  std::size_t input_offset = 0;
  for (int local = 0; local < layers_.size(); ++local) {
    const LayerShape& s = shape(local);
    const LayerView parameters = view(parameters_, layers_.begin + local);
    const ConstMatrixMap layer_input(stash.data() + input_offset, rows, s.inputs);
    const MatrixMap layer_output(stash.data() + s.activation_offset, rows, s.outputs);
    linear_forward(layer_output, layer_input,
                   as_matrix(std::span<const float>(parameters.weight), s.outputs, s.inputs),
                   as_row_vector(std::span<const float>(parameters.bias)));
    if (!(ends_model && local == layers_.size() - 1))
      relu_forward(layer_output, as_const(layer_output));
    input_offset = s.activation_offset;
  }
  state.state = SlotState::forwarded;
  state.rows = rows;
  return output(slot);
}

std::span<float> Piece::input_buffer(int slot, int rows) {
  if (slot < 0 || slot >= slots_) throw std::out_of_range("input_buffer: no such slot");
  if (rows < 1 || rows > max_rows_) throw std::invalid_argument("input_buffer: rows out of range");
  return activations(slot).first(to_size(rows) * to_size(input_width()));
}

std::span<const float> Piece::output(int slot) const {
  if (slot < 0 || slot >= slots_) throw std::out_of_range("output: no such slot");
  const Slot& state = slot_states_[to_size(slot)];
  const std::size_t start = activation_stride_ * to_size(slot) + shapes_.back().activation_offset;
  return {activation_stash_.data() + start, to_size(state.rows) * to_size(output_width())};
}

LossResult Piece::loss(int slot, std::span<const std::uint8_t> labels, float scale) {
  if (!is_last()) throw std::logic_error("loss: this piece does not end the model");
  Slot& state = checked_slot(slot, SlotState::forwarded, "loss");
  if (labels.size() != to_size(state.rows)) {
    throw std::invalid_argument("loss: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(state.rows) + " rows");
  }
  const ConstMatrixMap logits = as_matrix(output(slot), state.rows, output_width());
  const MatrixMap d_logits(output_gradients(slot).data() + shapes_.back().gradient_offset,
                           state.rows, output_width());
  LossResult result;
  result.loss = config_.loss == Loss::cross_entropy
                    ? softmax_cross_entropy(d_logits, logits, labels, scale)
                    : softmax_mse(d_logits, logits, labels, scale);
  result.correct = count_correct(logits, labels);
  state.state = SlotState::loss_done;
  return result;
}

std::span<const float> Piece::backward_input(int slot, std::span<const float> grad_output) {
  Slot& state = checked_slot(slot, is_last() ? SlotState::loss_done : SlotState::forwarded,
                             is_last() ? "backward_input (after loss)" : "backward_input");
  const int rows = state.rows;
  const std::span<float> stash = activations(slot);
  const std::span<float> grads = output_gradients(slot);
  const auto activation = [&](int local) {
    return ConstMatrixMap(stash.data() + shape(local).activation_offset, rows,
                          shape(local).outputs);
  };
  const auto gradient = [&](int local) {
    return MatrixMap(grads.data() + shape(local).gradient_offset, rows, shape(local).outputs);
  };
  const auto weight = [&](int local) {
    const LayerView parameters = view(parameters_, layers_.begin + local);
    return as_matrix(std::span<const float>(parameters.weight), parameters.outputs,
                     parameters.inputs);
  };
  const int last = layers_.size() - 1;
  if (!is_last()) {
    if (grad_output.size() != to_size(rows) * to_size(output_width())) {
      throw std::invalid_argument("backward_input: output gradient of " +
                                  std::to_string(grad_output.size()) + " floats, expected rows x " +
                                  std::to_string(output_width()));
    }
    relu_backward(gradient(last), as_matrix(grad_output, rows, output_width()), activation(last));
  }
  for (int local = last; local > 0; --local) {
    const MatrixMap below = gradient(local - 1);
    linear_backward_input(below, as_const(gradient(local)), weight(local));
    relu_backward(below, as_const(below), activation(local - 1));
  }
  state.state = SlotState::input_grad_done;
  if (is_first()) return {};
  const std::span<float> result =
      input_gradient(slot).first(to_size(rows) * to_size(input_width()));
  linear_backward_input(as_matrix(result, rows, input_width()), as_const(gradient(0)), weight(0));
  return result;
}

void Piece::backward_weight(int slot,
                            const std::function<void(int, std::span<float>)>& on_layer_done) {
  Slot& state = checked_slot(slot, SlotState::input_grad_done, "backward_weight");
  const int rows = state.rows;
  const std::span<float> stash = activations(slot);
  const std::span<float> grads = output_gradients(slot);
  for (int local = layers_.size() - 1; local >= 0; --local) {
    const LayerShape& s = shape(local);
    const std::size_t input_offset = local == 0 ? 0 : shape(local - 1).activation_offset;
    const LayerView d = view(gradients_, layers_.begin + local);
    linear_backward_weight(as_matrix(d.weight, s.outputs, s.inputs), as_row_vector(d.bias),
                           ConstMatrixMap(grads.data() + s.gradient_offset, rows, s.outputs),
                           ConstMatrixMap(stash.data() + input_offset, rows, s.inputs));
    if (on_layer_done) on_layer_done(d.index, d.all);
  }
  state.state = SlotState::free;
}

void Piece::release(int slot) {
  if (slot < 0 || slot >= slots_) throw std::out_of_range("release: no such slot");
  slot_states_[to_size(slot)].state = SlotState::free;
}

void Piece::zero_grad() {
  std::fill(gradients_.begin(), gradients_.end(), 0.0f);
}

Evaluation evaluate(const Piece& model, const Dataset& data, int batch_rows) {
  if (!model.is_first() || !model.is_last()) {
    throw std::invalid_argument("evaluate needs a piece that holds the whole model");
  }
  if (data.features != model.input_width()) {
    throw std::invalid_argument("evaluate: the data has " + std::to_string(data.features) +
                                " features, the model takes " +
                                std::to_string(model.input_width()));
  }
  if (batch_rows < 1) throw std::invalid_argument("evaluate: batch_rows must be positive");
  const std::vector<int>& sizes = model.config().sizes;
  const int widest = *std::max_element(sizes.begin(), sizes.end());
  const std::size_t capacity = to_size(batch_rows) * to_size(widest);
  std::vector<float> current(capacity);
  std::vector<float> next(capacity);
  std::vector<float> d_logits(to_size(batch_rows) * to_size(sizes.back()));
  const std::span<const float> parameters = model.parameters();
  const int layers = layer_count(sizes);

  double loss_sum = 0.0;
  long correct = 0;
  for (int first = 0; first < data.samples; first += batch_rows) {
    const int rows = std::min(batch_rows, data.samples - first);
    const std::size_t pixel_begin = to_size(first) * to_size(data.features);
    to_inputs(std::span(data.pixels).subspan(pixel_begin, to_size(rows) * to_size(data.features)),
              std::span(current).first(to_size(rows) * to_size(data.features)));
    std::size_t offset = 0;
    for (int layer = 0; layer < layers; ++layer) {
      const int in = sizes[to_size(layer)];
      const int out = sizes[to_size(layer) + 1];
      const std::size_t weights = to_size(out) * to_size(in);
      const MatrixMap output(next.data(), rows, out);
      linear_forward(output, ConstMatrixMap(current.data(), rows, in),
                     as_matrix(parameters.subspan(offset, weights), out, in),
                     as_row_vector(parameters.subspan(offset + weights, to_size(out))));
      if (layer + 1 < layers) relu_forward(output, as_const(output));
      offset += weights + to_size(out);
      std::swap(current, next);
    }
    const ConstMatrixMap logits(current.data(), rows, sizes.back());
    const auto labels = std::span(data.labels).subspan(to_size(first), to_size(rows));
    const MatrixMap gradient(d_logits.data(), rows, sizes.back());
    const float batch_loss = model.loss_kind() == Loss::cross_entropy
                                 ? softmax_cross_entropy(gradient, logits, labels, 1.0f)
                                 : softmax_mse(gradient, logits, labels, 1.0f);
    loss_sum += static_cast<double>(batch_loss);
    correct += count_correct(logits, labels);
  }
  Evaluation result;
  result.samples = data.samples;
  if (data.samples > 0) {
    result.loss = loss_sum / data.samples;
    result.accuracy = static_cast<double>(correct) / data.samples;
  }
  return result;
}

}  // namespace pipevm::runtime
