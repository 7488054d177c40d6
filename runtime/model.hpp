// The MLP, split into pieces. A Piece is a contiguous run of layers: what one
// model chunk of one pipeline stage holds. It owns its parameters, their
// gradients and the stash of every micro-batch in flight (one "slot" each),
// so that the VM can run forwards and backwards of several micro-batches in
// any order a schedule gives. Every layer but the model's last is followed by
// a ReLU; the last feeds the loss.
//
// Flat layout: a piece's parameters are its layers in order, each layer's
// weight ([out, in], row-major) then its bias. The whole model's array is the
// concatenation of its pieces' arrays, so a piece's parameters are the slice
// [offset_in_model(), offset_in_model() + parameters().size()) of the whole.
//
// Leaves out: communication (the VM moves the spans), the optimizer, data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "data.hpp"
#include "model_shape.hpp"

namespace pipevm::runtime {

enum class Loss { cross_entropy, softmax_mse };
std::string_view name(Loss loss);
std::optional<Loss> loss_from_name(std::string_view name);

struct ModelConfig {
  std::vector<int> sizes = default_layer_widths();  // layer widths, input first
  Loss loss = Loss::cross_entropy;
  std::uint64_t seed = 0;
};

// The layer widths, the split into pieces and parameter counts are the
// core's (model_shape.hpp): one rule for the checker and the runtime.
using pipevm::check_layer_widths;
using pipevm::layer_count;
using pipevm::LayerRange;
using pipevm::parameter_count;
using pipevm::split_layers;

// Initial weight and bias of global layer `layer`: He-uniform weights
// (bound sqrt(6 / in)) and zero biases, drawn from a generator seeded by
// (config.seed, layer) alone, so no split changes them.
// `weight_then_bias` holds out * in + out floats.
void initialize_layer(std::span<float> weight_then_bias, const ModelConfig& config, int layer);

// One layer's share of a flat parameter or gradient array.
struct LayerView {
  int index = 0;  // global layer index
  int inputs = 0;
  int outputs = 0;
  std::span<float> weight;  // outputs x inputs, row-major
  std::span<float> bias;    // outputs
  std::span<float> all;     // weight then bias, contiguous
};

struct LossResult {
  float loss = 0.0f;  // scaled sum of the per-sample losses of the slot
  int correct = 0;    // rows whose prediction is the label
};

class Piece {
 public:
  Piece(const ModelConfig& config, LayerRange layers);

  const ModelConfig& config() const { return config_; }
  LayerRange layers() const { return layers_; }
  int input_width() const;
  int output_width() const;
  bool is_first() const { return layers_.begin == 0; }
  bool is_last() const;
  Loss loss_kind() const { return config_.loss; }
  std::size_t offset_in_model() const { return offset_in_model_; }

  // Prepares stash storage for `slots` micro-batches in flight of at most
  // `rows` rows each and frees every slot. After this, forward, loss and
  // both backward halves allocate nothing.
  void reserve(int slots, int rows);
  int slots() const { return slots_; }
  int max_rows() const { return max_rows_; }

  // Forward of a micro-batch into free slot `slot`: `input` is rows x
  // input_width, row-major. Copies the input (the caller may reuse its buffer
  // at once) unless it is the slot's own input_buffer, and stashes what
  // backward needs. Returns the output, rows x output_width, valid until the
  // next forward into the same slot.
  std::span<const float> forward(int slot, std::span<const float> input, int rows);
  // Where slot `slot` keeps its input (rows x input_width), for a caller that
  // writes the input there itself (the VM loads and receives into it) and so
  // saves forward's copy. Written only while the slot is free.
  std::span<float> input_buffer(int slot, int rows);
  std::span<const float> output(int slot) const;

  // Last piece only: loss of the slot's output against `labels` (one per
  // row); writes d(loss)/d(output) as the slot's output gradient. `scale`
  // multiplies both (the VM passes 1 / global batch size).
  LossResult loss(int slot, std::span<const std::uint8_t> labels, float scale);

  // Gradient with respect to the piece's input (rows x input_width), given
  // the gradient with respect to its output (ignored on the last piece, which
  // uses the gradient loss() wrote). Keeps what backward_weight needs. On the
  // first piece nothing needs the input gradient: it is not computed and the
  // result is empty. Valid until the next forward into the same slot.
  std::span<const float> backward_input(int slot, std::span<const float> grad_output);

  // Accumulates (+=) the slot's weight and bias gradients, last layer first,
  // and frees the slot. After each layer, calls on_layer_done(global layer
  // index, that layer's gradients: weight then bias) — the hook BwdAllReduce
  // uses to start the layer's all-reduce while earlier layers compute.
  void backward_weight(int slot,
                       const std::function<void(int, std::span<float>)>& on_layer_done = {});

  // Frees a forwarded slot without a backward (forward-only programs).
  void release(int slot);

  void zero_grad();
  std::span<float> parameters() { return parameters_; }
  std::span<const float> parameters() const { return parameters_; }
  std::span<float> gradients() { return gradients_; }
  std::span<const float> gradients() const { return gradients_; }
  // Views of global layer `layer` (which this piece must hold).
  LayerView layer_parameters(int layer);
  LayerView layer_gradients(int layer);

 private:
  enum class SlotState : std::uint8_t { free, forwarded, loss_done, input_grad_done };
  struct Slot {
    SlotState state = SlotState::free;
    int rows = 0;
  };
  struct LayerShape {
    int inputs = 0;
    int outputs = 0;
    std::size_t parameter_offset = 0;   // in parameters_ / gradients_
    std::size_t activation_offset = 0;  // of the layer's output in a slot's activations
    std::size_t gradient_offset = 0;    // of the layer's output gradient in a slot's gradients
  };

  LayerView view(std::vector<float>& array, int layer);
  const LayerShape& shape(int local_layer) const {
    return shapes_[static_cast<std::size_t>(local_layer)];
  }
  Slot& checked_slot(int slot, SlotState expected, const char* operation);
  std::span<float> activations(int slot);
  std::span<float> output_gradients(int slot);
  std::span<float> input_gradient(int slot);

  ModelConfig config_;
  LayerRange layers_;
  std::size_t offset_in_model_ = 0;
  std::vector<LayerShape> shapes_;
  std::vector<float> parameters_;
  std::vector<float> gradients_;

  int slots_ = 0;
  int max_rows_ = 0;
  std::vector<Slot> slot_states_;
  // Per slot: the copied input, then every layer's output (post-ReLU).
  std::size_t activation_stride_ = 0;
  std::vector<float> activation_stash_;
  // Per slot: every layer's output gradient (pre-ReLU).
  std::size_t gradient_stride_ = 0;
  std::vector<float> gradient_stash_;
  // Per slot: the gradient with respect to the piece's input (not on the first piece).
  std::size_t input_gradient_stride_ = 0;
  std::vector<float> input_gradient_stash_;
};

// Forward of the whole model over a dataset, in batches of `batch_rows`.
struct Evaluation {
  double loss = 0.0;      // mean per-sample loss
  double accuracy = 0.0;  // fraction of samples predicted right
  int samples = 0;
};
// `model` must hold every layer. Allocates its own scratch (not a hot path).
Evaluation evaluate(const Piece& model, const Dataset& data, int batch_rows = 1000);

}  // namespace pipevm::runtime
