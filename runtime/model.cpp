// The model's split, initialisation, pieces and evaluation (see model.hpp):
// the MLP's layers here, the ViT's units through vit_model.hpp.
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "layers.hpp"
#include "random.hpp"
#include "tensor.hpp"
#include "vit_kernels.hpp"

namespace pipevm::runtime {
namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

}  // namespace

std::string products_backend(const ModelConfig& config) {
  if (config.kind == ModelKind::mlp) return gemm_backend();
  return std::string("pipevm's ") + vit_kernels().name + " kernels";
}

void initialize_layer(std::span<float> weight_then_bias, const ModelConfig& config, int layer) {
  if (config.kind == ModelKind::vit) {
    initialize_vit_unit(weight_then_bias, config.vit, config.seed, layer);
    return;
  }
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

Piece::Piece(const ModelConfig& config, LayerRange layers, BufferPool& pool, BoundWeights)
    : config_(config), layers_(layers), pool_(&pool) {
  set_shapes();
}

Piece::Piece(const ModelConfig& config, LayerRange layers, BufferPool* pool)
    : config_(config), layers_(layers), pool_(pool) {
  if (pool_ == nullptr) {
    own_ledger_ = std::make_unique<MemoryLedger>();
    own_pool_ = std::make_unique<BufferPool>(*own_ledger_);
    pool_ = own_pool_.get();
  }
  set_shapes();
  std::size_t count = 0;
  for (int layer = layers.begin; layer < layers.end; ++layer) count += layer_size(layer);
  parameters_.resize(count);
  pool_->ledger().add(MemoryCategory::weights, parameters_.size() * sizeof(float));
  for (int layer = layers.begin; layer < layers.end; ++layer) {
    const std::span<float> all =
        std::span<float>(parameters_).subspan(layer_offset(layer), layer_size(layer));
    initialize_layer(all, config_, layer);
    weights_[to_size(layer - layers.begin)] = all;
  }
}

void Piece::set_shapes() {
  check_layer_widths(config_.sizes);
  if (layers_.begin < 0 || layers_.begin >= layers_.end ||
      layers_.end > layer_count(config_.sizes)) {
    throw std::invalid_argument("layer range [" + std::to_string(layers_.begin) + ", " +
                                std::to_string(layers_.end) + ") is not within the model's " +
                                std::to_string(layer_count(config_.sizes)) + " layers");
  }
  if (is_vit() && config_.sizes != vit_layer_widths(config_.vit)) {
    throw std::invalid_argument("a ViT's layer widths are its units' (use_vit)");
  }
  offset_in_model_ = parameter_count(config_, {0, layers_.begin});
  std::size_t offset = 0;
  for (int layer = layers_.begin; layer < layers_.end; ++layer) {
    LayerShape layer_shape;
    layer_shape.inputs = config_.sizes[to_size(layer)];
    layer_shape.outputs = config_.sizes[to_size(layer) + 1];
    layer_shape.parameters = parameter_count(config_, {layer, layer + 1});
    layer_shape.parameter_offset = offset;
    if (is_vit()) layer_shape.stash = vit_stash_sizes(config_.vit, layer);
    offset += layer_shape.parameters;
    shapes_.push_back(layer_shape);
  }
  weights_.assign(shapes_.size(), {});
  gradients_.assign(shapes_.size(), {});
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

int Piece::local(int layer, const char* operation) const {
  if (layer < layers_.begin || layer >= layers_.end) {
    throw std::out_of_range(std::string(operation) + ": layer " + std::to_string(layer) +
                            " is not in this piece");
  }
  return layer - layers_.begin;
}

std::size_t Piece::layer_size(int layer) const {
  return shape(local(layer, "layer_size")).parameters;
}

std::size_t Piece::layer_offset(int layer) const {
  return shape(local(layer, "layer_offset")).parameter_offset;
}

namespace {
LayerView view_of(std::span<float> all, int layer, int inputs, int outputs, bool whole) {
  if (all.empty()) return LayerView{layer, inputs, outputs, {}, {}, {}};
  if (whole) return LayerView{layer, inputs, outputs, all, {}, all};
  const std::size_t weights = to_size(outputs) * to_size(inputs);
  return LayerView{layer, inputs, outputs, all.first(weights), all.subspan(weights), all};
}
}  // namespace

LayerView Piece::layer_parameters(int layer) {
  const int l = local(layer, "layer_parameters");
  return view_of(weights_[to_size(l)], layer, shape(l).inputs, shape(l).outputs, is_vit());
}

LayerView Piece::layer_gradients(int layer) {
  const int l = local(layer, "layer_gradients");
  return view_of(gradients_[to_size(l)], layer, shape(l).inputs, shape(l).outputs, is_vit());
}

bool Piece::has_gradients(int layer) const {
  return !gradients_[to_size(local(layer, "has_gradients"))].empty();
}

void Piece::bind_weights(int layer, std::span<float> weights) {
  if (weights.size() != layer_size(layer)) {
    throw std::invalid_argument("bind_weights: " + std::to_string(weights.size()) +
                                " floats for a layer of " + std::to_string(layer_size(layer)));
  }
  weights_[to_size(local(layer, "bind_weights"))] = weights;
}

void Piece::unbind_weights(int layer) {
  weights_[to_size(local(layer, "unbind_weights"))] = {};
}

std::span<const float> Piece::unit_parameters(int local_layer) const {
  const std::span<const float> all = weights_[to_size(local_layer)];
  if (all.empty()) {
    throw std::logic_error("layer " + std::to_string(layers_.begin + local_layer) +
                           " computes with weights that are not gathered");
  }
  return all;
}

std::span<const float> Piece::weight(int local_layer) const {
  return unit_parameters(local_layer)
      .first(to_size(shape(local_layer).outputs) * to_size(shape(local_layer).inputs));
}

VitUnitBuffers Piece::vit_buffers(Slot& s, int local_layer) {
  const std::size_t k = to_size(local_layer);
  return VitUnitBuffers{s.rows,
                        s.a[k],
                        s.a[k + 1],
                        s.forward_for_input[k],
                        s.forward_for_weight[k],
                        s.gradients_for_weight[k],
                        s.layernorm_gradients[k]};
}

void Piece::give_back_stashes(Slot& s, int local_layer) {
  const std::size_t k = to_size(local_layer);
  give_back(MemoryCategory::activations, s.forward_for_input[k]);
  give_back(MemoryCategory::activations, s.forward_for_weight[k]);
  give_back(MemoryCategory::activation_gradients, s.gradients_for_weight[k]);
  give_back(MemoryCategory::gradients, s.layernorm_gradients[k]);
}

std::span<float> Piece::take(MemoryCategory category, std::size_t floats, bool zeroed) {
  return pool_->take(category, floats, zeroed);
}

void Piece::give_back(MemoryCategory category, std::span<float>& buffer) {
  pool_->give_back(category, buffer);
  buffer = {};
}

void Piece::reserve(int slots, int rows) {
  if (slots < 1 || rows < 1) throw std::invalid_argument("reserve needs slots >= 1 and rows >= 1");
  for (int slot = 0; slot < static_cast<int>(slots_.size()); ++slot) release(slot);
  give_back_kept(-1);
  max_rows_ = rows;
  Slot empty;
  empty.a.assign(shapes_.size() + 1, {});
  empty.g.assign(shapes_.size() + 1, {});
  empty.holds.assign(shapes_.size() + 1, 0);
  empty.forward_for_input.assign(shapes_.size(), {});
  empty.forward_for_weight.assign(shapes_.size(), {});
  empty.gradients_for_weight.assign(shapes_.size(), {});
  empty.layernorm_gradients.assign(shapes_.size(), {});
  const std::size_t stash_buffers = 3 * shapes_.size() + 1;
  empty.offloaded.reserve(stash_buffers);
  empty.offloaded_floats.reserve(stash_buffers);
  empty.parts.reserve(stash_buffers);
  slots_.assign(to_size(slots), empty);
}

Piece::Slot& Piece::checked_slot(int slot, const char* operation) {
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) {
    throw std::out_of_range(std::string(operation) + ": slot " + std::to_string(slot) +
                            " outside the " + std::to_string(slots_.size()) + " reserved");
  }
  return slots_[to_size(slot)];
}

const Piece::Slot& Piece::checked_slot(int slot, const char* operation) const {
  if (slot < 0 || slot >= static_cast<int>(slots_.size())) {
    throw std::out_of_range(std::string(operation) + ": slot " + std::to_string(slot) +
                            " outside the " + std::to_string(slots_.size()) + " reserved");
  }
  return slots_[to_size(slot)];
}

std::span<float> Piece::take_input(int slot, int rows) {
  Slot& s = checked_slot(slot, "take_input");
  if (rows < 1 || rows > max_rows_) {
    throw std::invalid_argument("take_input: " + std::to_string(rows) + " rows, reserved " +
                                std::to_string(max_rows_));
  }
  if (!s.a.front().empty() || !s.g.front().empty() || s.forward_next != 0 || s.input_next >= 0) {
    throw std::logic_error("take_input: slot " + std::to_string(slot) +
                           " is still in use (out of order)");
  }
  s.rows = rows;
  s.a.front() = take(MemoryCategory::activations, to_size(rows) * to_size(input_width()));
  return s.a.front();
}

void Piece::forward_layer(int slot, int layer) {
  Slot& s = checked_slot(slot, "forward");
  const int l = local(layer, "forward");
  const std::size_t k = to_size(l);
  if (s.a[k].empty() || s.forward_next != l) {
    throw std::logic_error("forward: layer " + std::to_string(layer) + " of slot " +
                           std::to_string(slot) + " is not the next to forward (out of order)");
  }
  const LayerShape& sh = shape(l);
  s.a[k + 1] = take(MemoryCategory::activations, to_size(s.rows) * to_size(sh.outputs));
  if (is_vit()) {
    s.forward_for_input[k] =
        take(MemoryCategory::activations, to_size(s.rows) * sh.stash.forward_for_input);
    s.forward_for_weight[k] =
        take(MemoryCategory::activations, to_size(s.rows) * sh.stash.forward_for_weight);
    vit_unit_forward(config_.vit, layer, unit_parameters(l), vit_buffers(s, l));
    // The unit's stashes hold all its backward reads: this was its input's
    // last use, but for the input a checkpointed forward keeps.
    if (l > 0 || s.stash != StashState::input_only) {
      last_use(slot, HeldValue::activation, l, s.a[k]);
    }
  } else {
    forward_mlp_layer(s, l);
  }
  s.forward_next = l + 1;
  if (s.forward_next == static_cast<int>(shapes_.size())) {
    s.input_next = s.weight_next = s.forward_next - 1;
  }
}

void Piece::forward_mlp_layer(Slot& s, int l) {
  const LayerShape& sh = shape(l);
  const std::size_t k = to_size(l);
  const MatrixMap out(s.a[k + 1].data(), s.rows, sh.outputs);
  const std::span<float> all = weights_[k];
  linear_forward(
      out, ConstMatrixMap(s.a[k].data(), s.rows, sh.inputs),
      as_matrix(weight(l), sh.outputs, sh.inputs),
      as_row_vector(std::span<const float>(all).subspan(to_size(sh.outputs) * to_size(sh.inputs))));
  if (!(is_last() && l + 1 == static_cast<int>(shapes_.size()))) relu_forward(out, as_const(out));
}

void Piece::forward_all(int slot) {
  for (int layer = layers_.begin; layer < layers_.end; ++layer) forward_layer(slot, layer);
}

std::span<const float> Piece::forward(int slot, std::span<const float> input, int rows) {
  const std::span<float> in = take_input(slot, rows);
  if (input.size() != in.size()) {
    give_back(MemoryCategory::activations, slots_[to_size(slot)].a.front());
    throw std::invalid_argument("forward: input of " + std::to_string(input.size()) +
                                " floats, expected rows x " + std::to_string(input_width()));
  }
  std::copy(input.begin(), input.end(), in.begin());
  forward_all(slot);
  return output(slot);
}

std::span<const float> Piece::output(int slot) const {
  const Slot& s = checked_slot(slot, "output");
  return s.a.back();
}

std::span<float> Piece::take_output_gradient(int slot) {
  Slot& s = checked_slot(slot, "take_output_gradient");
  if (is_last()) throw std::logic_error("take_output_gradient: the last piece makes it (loss)");
  if (!s.g.back().empty()) {
    throw std::logic_error("take_output_gradient: slot " + std::to_string(slot) +
                           " holds one already");
  }
  s.g.back() =
      take(MemoryCategory::activation_gradients, to_size(max_rows_) * to_size(output_width()));
  return s.g.back();
}

LossResult Piece::loss(int slot, std::span<const std::uint8_t> labels, float scale) {
  if (!is_last()) throw std::logic_error("loss: this piece does not end the model");
  Slot& s = checked_slot(slot, "loss");
  if (s.forward_next != static_cast<int>(shapes_.size()) || !s.g.back().empty() ||
      s.input_next != s.forward_next - 1) {
    throw std::logic_error("loss: slot " + std::to_string(slot) +
                           " is not in the state this step needs (out of order)");
  }
  if (labels.size() != to_size(s.rows)) {
    throw std::invalid_argument("loss: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(s.rows) + " rows");
  }
  s.g.back() =
      take(MemoryCategory::activation_gradients, to_size(s.rows) * to_size(output_width()));
  const ConstMatrixMap logits(s.a.back().data(), s.rows, output_width());
  const MatrixMap d_logits(s.g.back().data(), s.rows, output_width());
  LossResult result;
  result.loss = config_.loss == Loss::cross_entropy
                    ? softmax_cross_entropy(d_logits, logits, labels, scale)
                    : softmax_mse(d_logits, logits, labels, scale);
  result.correct = count_correct(logits, labels);
  return result;
}

void Piece::give_back_output(int slot) {
  Slot& s = slots_[to_size(slot)];
  const int top = static_cast<int>(shapes_.size());
  if (is_held(s, HeldValue::activation, top)) {
    // Kept in activations, even while a send reads it.
    last_use(slot, HeldValue::activation, top, s.a.back(), s.output_sends);
    s.output_sends = 0;
    return;
  }
  if (s.output_sends > 0) {
    // A send still reads it: a message from now until the send completes.
    pool_->ledger().move(MemoryCategory::activations, MemoryCategory::messages,
                         s.a.back().size_bytes());
    s.output_kept = true;
    return;
  }
  give_back(MemoryCategory::activations, s.a.back());
}

void Piece::backward_input_layer(int slot, int layer) {
  Slot& s = checked_slot(slot, "backward_input");
  const int l = local(layer, "backward_input");
  require_stash_on_device(s, slot, "backward_input");
  const int top = static_cast<int>(shapes_.size()) - 1;
  if (s.forward_next != top + 1 || s.input_next != l || s.g[to_size(l) + 1].empty()) {
    throw std::logic_error("backward_input: layer " + std::to_string(layer) + " of slot " +
                           std::to_string(slot) + " is not the next backward (out of order)");
  }
  if (is_vit()) {
    backward_input_vit(slot, s, l);
    s.input_next = l - 1;
    return;
  }
  const LayerShape& sh = shape(l);
  const std::size_t k = to_size(l);
  const MatrixMap d_out(s.g[k + 1].data(), s.rows, sh.outputs);
  if (l == top) {
    // The top gradient is with respect to the output; the piece's own ReLU
    // (if the model goes on) turns it into the gradient of the last layer's
    // pre-activation, in place. The output's last use.
    if (!is_last()) {
      relu_backward(d_out, as_const(d_out), ConstMatrixMap(s.a[k + 1].data(), s.rows, sh.outputs));
    }
    give_back_output(slot);
  }
  if (l > 0) {
    // The gradient of the layer below's pre-activation.
    s.g[k] = take(MemoryCategory::activation_gradients, to_size(s.rows) * to_size(sh.inputs));
    const MatrixMap below(s.g[k].data(), s.rows, sh.inputs);
    linear_backward_input(below, as_const(d_out), as_matrix(weight(l), sh.outputs, sh.inputs));
    relu_backward(below, as_const(below), ConstMatrixMap(s.a[k].data(), s.rows, sh.inputs));
  } else if (!is_first() || is_held(s, HeldValue::gradient, 0)) {
    // The piece's input gradient (the previous piece applies its own ReLU);
    // on the model's first piece nothing uses it: computed only for a hold,
    // and at once past its last use.
    s.g[0] = take(MemoryCategory::activation_gradients, to_size(s.rows) * to_size(sh.inputs));
    linear_backward_input(MatrixMap(s.g[0].data(), s.rows, sh.inputs), as_const(d_out),
                          as_matrix(weight(l), sh.outputs, sh.inputs));
    if (is_first()) last_use(slot, HeldValue::gradient, 0, s.g[0]);
  }
  s.input_next = l - 1;
}

// A ViT unit's input half: its gradient stash is made here, its forward-only
// stash given back; the gradient at its input is made where the MLP's would be.
void Piece::backward_input_vit(int slot, Slot& s, int l) {
  const LayerShape& sh = shape(l);
  const std::size_t k = to_size(l);
  s.gradients_for_weight[k] =
      take(MemoryCategory::activation_gradients, to_size(s.rows) * sh.stash.gradients_for_weight);
  s.layernorm_gradients[k] = take(MemoryCategory::gradients, sh.stash.layernorm_gradients);
  const bool input_gradient = l > 0 || !is_first() || is_held(s, HeldValue::gradient, 0);
  if (input_gradient) {
    s.g[k] = take(MemoryCategory::activation_gradients, to_size(s.rows) * to_size(sh.inputs));
  }
  vit_unit_backward_input(config_.vit, layers_.begin + l, unit_parameters(l), vit_buffers(s, l),
                          s.g[k + 1], s.g[k]);
  give_back(MemoryCategory::activations, s.forward_for_input[k]);
  if (l == static_cast<int>(shapes_.size()) - 1) give_back_output(slot);
  if (l == 0 && is_first() && input_gradient) last_use(slot, HeldValue::gradient, 0, s.g[0]);
}

void Piece::backward_weight_layer(int slot, int layer, const LayerHook& on_layer_done) {
  Slot& s = checked_slot(slot, "backward_weight");
  const int l = local(layer, "backward_weight");
  require_stash_on_device(s, slot, "backward_weight");
  if (s.weight_next != l || s.input_next >= l) {
    throw std::logic_error("backward_weight: layer " + std::to_string(layer) + " of slot " +
                           std::to_string(slot) + " is not the next (BwdWeight before BwdInput?)");
  }
  const LayerShape& sh = shape(l);
  const std::size_t k = to_size(l);
  // A held weight gradient goes apart from the accumulated one, from zero.
  const bool apart = is_held(s, HeldValue::weight_gradient, l);
  std::span<float>& grads = gradients_[k];
  std::span<float> into;
  if (apart) {
    into = take(MemoryCategory::gradients, layer_size(layer), true);
  } else {
    if (grads.empty()) take_gradients(l);
    into = grads;
  }
  if (is_vit()) {
    vit_unit_backward_weight(config_.vit, layer, into, vit_buffers(s, l), s.g[k + 1]);
    give_back_stashes(s, l);
  } else {
    const LayerView d = view_of(into, layer, sh.inputs, sh.outputs, false);
    linear_backward_weight(as_matrix(d.weight, sh.outputs, sh.inputs), as_row_vector(d.bias),
                           ConstMatrixMap(s.g[k + 1].data(), s.rows, sh.outputs),
                           ConstMatrixMap(s.a[k].data(), s.rows, sh.inputs));
    last_use(slot, HeldValue::activation, l, s.a[k]);
  }
  last_use(slot, HeldValue::gradient, l + 1, s.g[k + 1]);
  s.weight_next = l - 1;
  if (l == 0) s.forward_next = 0;  // the slot may take a new input once the rest is back
  if (apart) {
    last_use(slot, HeldValue::weight_gradient, l, into);
    return;
  }
  if (on_layer_done) on_layer_done(layer, grads);
}

void Piece::backward_input_all(int slot) {
  for (int layer = layers_.end - 1; layer >= layers_.begin; --layer) {
    backward_input_layer(slot, layer);
  }
}

void Piece::backward_weight_all(int slot, const LayerHook& on_layer_done) {
  for (int layer = layers_.end - 1; layer >= layers_.begin; --layer) {
    backward_weight_layer(slot, layer, on_layer_done);
  }
}

std::span<const float> Piece::backward_input(int slot, std::span<const float> grad_output) {
  if (!is_last()) {
    const Slot& s = checked_slot(slot, "backward_input");
    if (s.forward_next != static_cast<int>(shapes_.size())) {
      throw std::logic_error("backward_input: slot " + std::to_string(slot) +
                             " is not forwarded (out of order)");
    }
    if (grad_output.size() != to_size(s.rows) * to_size(output_width())) {
      throw std::invalid_argument("backward_input: output gradient of " +
                                  std::to_string(grad_output.size()) + " floats, expected rows x " +
                                  std::to_string(output_width()));
    }
    const std::span<float> top = take_output_gradient(slot);
    std::copy(grad_output.begin(), grad_output.end(), top.begin());
  } else if (checked_slot(slot, "backward_input (after loss)").g.back().empty()) {
    throw std::logic_error("backward_input (after loss): slot " + std::to_string(slot) +
                           " has no loss gradient (out of order)");
  }
  backward_input_all(slot);
  return input_gradient(slot);
}

void Piece::backward_weight(int slot, const LayerHook& on_layer_done) {
  backward_weight_all(slot, on_layer_done);
}

std::span<const float> Piece::input_gradient(int slot) const {
  const Slot& s = checked_slot(slot, "input_gradient");
  return s.g.front();
}

void Piece::begin_output_send(int slot) {
  Slot& s = checked_slot(slot, "begin_output_send");
  if (s.a.back().empty()) throw std::logic_error("begin_output_send: no output to send");
  ++s.output_sends;
  if (s.stash == StashState::input_only && !s.output_kept) {
    // A checkpointed forward's output has no other use: a message from now.
    pool_->ledger().move(MemoryCategory::activations, MemoryCategory::messages,
                         s.a.back().size_bytes());
    s.output_kept = true;
  }
}

void Piece::end_output_send(int slot) {
  Slot& s = checked_slot(slot, "end_output_send");
  if (s.output_sends == 0) {
    end_kept_send(slot, HeldValue::activation, static_cast<int>(shapes_.size()), "end_output_send");
    return;
  }
  if (--s.output_sends > 0 || !s.output_kept) return;
  give_back(MemoryCategory::messages, s.a.back());
  s.output_kept = false;
}

void Piece::begin_input_gradient_send(int slot) {
  Slot& s = checked_slot(slot, "begin_input_gradient_send");
  if (s.g.front().empty() || s.input_gradient_sending) {
    throw std::logic_error("begin_input_gradient_send: no input gradient to send");
  }
  if (is_held(s, HeldValue::gradient, 0)) {
    // The send is its last use; held, it stays an activation gradient.
    last_use(slot, HeldValue::gradient, 0, s.g.front(), 1);
    return;
  }
  pool_->ledger().move(MemoryCategory::activation_gradients, MemoryCategory::messages,
                       s.g.front().size_bytes());
  s.input_gradient_sending = true;
}

void Piece::end_input_gradient_send(int slot) {
  Slot& s = checked_slot(slot, "end_input_gradient_send");
  if (s.input_gradient_sending) {
    give_back(MemoryCategory::messages, s.g.front());
    s.input_gradient_sending = false;
  } else if (!s.g.front().empty()) {
    // A blocking send: its last use.
    last_use(slot, HeldValue::gradient, 0, s.g.front());
  } else {
    end_kept_send(slot, HeldValue::gradient, 0, "end_input_gradient_send");
  }
}

void Piece::release(int slot) {
  Slot& s = checked_slot(slot, "release");
  for (std::size_t k = 0; k < s.a.size(); ++k) {
    const bool kept = k + 1 == s.a.size() && s.output_kept;
    give_back(kept ? MemoryCategory::messages : MemoryCategory::activations, s.a[k]);
  }
  for (std::size_t k = 0; k < s.g.size(); ++k) {
    const bool sending = k == 0 && s.input_gradient_sending;
    give_back(sending ? MemoryCategory::messages : MemoryCategory::activation_gradients, s.g[k]);
  }
  drop_host_copy(s);
  for (int l = 0; l < static_cast<int>(shapes_.size()); ++l) give_back_stashes(s, l);
  s.rows = 0;
  s.forward_next = 0;
  s.input_next = s.weight_next = -1;
  s.output_sends = 0;
  s.output_kept = s.input_gradient_sending = false;
  std::fill(s.holds.begin(), s.holds.end(), 0);
  give_back_kept(slot);
}

void Piece::zero_grad() {
  require_no_held_weight_gradient(-1, "zero_grad");
  for (int l = 0; l < static_cast<int>(gradients_.size()); ++l) give_back_gradients(l);
}

void Piece::drop_layer_gradients(int layer) {
  require_no_held_weight_gradient(layer, "drop_layer_gradients");
  give_back_gradients(local(layer, "drop_layer_gradients"));
}

// A layer's gradients live in its place of the piece's gradient area, one
// region for all its layers, so that a chunk's gradients reduce in one call
// (contiguous_gradients); each is counted in the ledger while it holds one,
// as a pool buffer would be.
void Piece::take_gradients(int local_layer) {
  if (gradient_area_.empty()) {
    std::size_t floats = 0;
    for (int layer = layers_.begin; layer < layers_.end; ++layer) floats += layer_size(layer);
    gradient_area_.resize(floats);
  }
  const int layer = layers_.begin + local_layer;
  const std::span<float> slot =
      std::span<float>(gradient_area_).subspan(layer_offset(layer), layer_size(layer));
  std::fill(slot.begin(), slot.end(), 0.0F);
  pool_->ledger().add(MemoryCategory::gradients, slot.size_bytes());
  gradients_[to_size(local_layer)] = slot;
}

void Piece::give_back_gradients(int local_layer) {
  std::span<float>& grads = gradients_[to_size(local_layer)];
  if (grads.empty()) return;
  pool_->ledger().remove(MemoryCategory::gradients, grads.size_bytes());
  grads = {};
}

std::span<float> Piece::contiguous_gradients() {
  const bool all = std::none_of(gradients_.begin(), gradients_.end(),
                                [](std::span<float> grads) { return grads.empty(); });
  return all ? std::span<float>(gradient_area_) : std::span<float>{};
}

std::vector<float> Piece::gradients() const {
  std::vector<float> flat;
  for (int layer = layers_.begin; layer < layers_.end; ++layer) {
    const std::span<const float> grads = gradients_[to_size(layer - layers_.begin)];
    if (grads.empty()) {
      flat.resize(flat.size() + layer_size(layer), 0.0F);
    } else {
      flat.insert(flat.end(), grads.begin(), grads.end());
    }
  }
  return flat;
}

void Piece::set_layer_gradients(int layer, std::span<const float> values) {
  std::span<float>& grads = gradients_[to_size(local(layer, "set_layer_gradients"))];
  if (values.size() != layer_size(layer)) {
    throw std::invalid_argument("set_layer_gradients: " + std::to_string(values.size()) +
                                " floats for a layer of " + std::to_string(layer_size(layer)));
  }
  if (grads.empty()) take_gradients(local(layer, "set_layer_gradients"));
  std::copy(values.begin(), values.end(), grads.begin());
}

namespace {

// The whole model's forward over batches of up to `batch_rows` inputs, with
// its scratch allocated once (evaluation is not a hot path).
class WholeForward {
 public:
  WholeForward(const Piece& model, int batch_rows) : model_(model) {
    const ModelConfig& config = model.config();
    const std::vector<int>& sizes = config.sizes;
    const int widest = *std::max_element(sizes.begin(), sizes.end());
    current_.resize(to_size(batch_rows) * to_size(widest));
    next_.resize(current_.size());
    if (config.kind == ModelKind::vit) {
      for (int unit = 0; unit < config.vit.blocks; ++unit) {
        const VitStashSizes stash = vit_stash_sizes(config.vit, unit);
        stash_size_ = std::max({stash_size_, stash.forward_for_input, stash.forward_for_weight});
      }
      forward_for_input_.resize(to_size(batch_rows) * stash_size_);
      forward_for_weight_.resize(forward_for_input_.size());
    }
  }
  // The inputs' place: rows x input width floats to fill before logits().
  std::span<float> inputs(int rows) {
    return std::span(current_).first(to_size(rows) * to_size(model_.input_width()));
  }
  // rows x classes logits of the inputs.
  ConstMatrixMap logits(int rows) {
    const ModelConfig& config = model_.config();
    const std::vector<int>& sizes = config.sizes;
    const std::span<const float> parameters = model_.parameters();
    const int layers = layer_count(sizes);
    std::size_t offset = 0;
    for (int layer = 0; layer < layers; ++layer) {
      const int in = sizes[to_size(layer)];
      const int out = sizes[to_size(layer) + 1];
      if (config.kind == ModelKind::vit) {
        const std::size_t count = parameter_count(config, {layer, layer + 1});
        const std::size_t stash = to_size(rows) * stash_size_;
        vit_unit_forward(config.vit, layer, parameters.subspan(offset, count),
                         VitUnitBuffers{rows,
                                        std::span(current_).first(to_size(rows) * to_size(in)),
                                        std::span(next_).first(to_size(rows) * to_size(out)),
                                        std::span(forward_for_input_).first(stash),
                                        std::span(forward_for_weight_).first(stash),
                                        {},
                                        {}});
        offset += count;
      } else {
        const std::size_t weights = to_size(out) * to_size(in);
        const MatrixMap output(next_.data(), rows, out);
        linear_forward(output, ConstMatrixMap(current_.data(), rows, in),
                       as_matrix(parameters.subspan(offset, weights), out, in),
                       as_row_vector(parameters.subspan(offset + weights, to_size(out))));
        if (layer + 1 < layers) relu_forward(output, as_const(output));
        offset += weights + to_size(out);
      }
      std::swap(current_, next_);
    }
    return ConstMatrixMap(current_.data(), rows, sizes.back());
  }

 private:
  const Piece& model_;
  std::vector<float> current_;
  std::vector<float> next_;
  std::size_t stash_size_ = 0;  // the ViT's largest forward stash, floats per row
  std::vector<float> forward_for_input_;
  std::vector<float> forward_for_weight_;
};

}  // namespace

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
  const int classes = model.output_width();
  WholeForward forward(model, batch_rows);
  std::vector<float> d_logits(to_size(batch_rows) * to_size(classes));

  double loss_sum = 0.0;
  long correct = 0;
  for (int first = 0; first < data.samples; first += batch_rows) {
    const int rows = std::min(batch_rows, data.samples - first);
    const std::size_t pixel_begin = to_size(first) * to_size(data.features);
    to_inputs(std::span(data.pixels).subspan(pixel_begin, to_size(rows) * to_size(data.features)),
              forward.inputs(rows));
    const ConstMatrixMap logits = forward.logits(rows);
    const auto labels = std::span(data.labels).subspan(to_size(first), to_size(rows));
    const MatrixMap gradient(d_logits.data(), rows, classes);
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
