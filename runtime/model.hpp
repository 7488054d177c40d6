// The model, split into pieces: the MLP, or the ViT (vit_model.hpp), whose
// "layers" are its blocks. A Piece is a contiguous run of layers: what one
// model chunk of one pipeline stage holds. It owns its parameters (or, for
// weights sharded over replicas, has each layer's whole weights bound while
// they are gathered), its weight gradients and the buffers of every
// micro-batch in flight (one "slot" each), so that the VM can run forwards
// and backwards of several micro-batches, a layer or the whole piece at a
// time, in any order a schedule gives. Every layer but the model's last is
// followed by a ReLU; the last feeds the loss. A ViT layer also keeps, per
// micro-batch, the stashes its unit asks for: from its forward to its
// backward-input, and from either to its backward-weight (the LayerNorms'
// gradients of the micro-batch among them, counted as gradients).
//
// Every buffer that comes and goes is taken from a BufferPool (a layer's
// weight gradients: from its place in the piece's gradient area, so that a
// chunk's gradients are one array to reduce) and counted in the pool's
// MemoryLedger while held, by the rules of docs/memory.md: a layer's input
// from its arrival until the layer's weight gradient (a ViT layer's: until
// its forward, as its stashes hold what its backward reads), the piece's
// output until the input half of its top layer's backward (longer while a
// send reads it), the gradient at the top of a layer until its weight gradient,
// the piece's input gradient until it is sent, a layer's weight gradient
// from its first backward until zero_grad().
//
// A memory policy (model_offload.cpp) keeps less of a micro-batch between its
// forward and its backward: a checkpointed forward keeps only the slot's
// input (and its output until it is sent), and a recomputation runs the
// forward again from it, leaving the slot as a forward does, bit for bit; an
// offload copies what the backward reads to host memory (HostCopies) and
// gives it back on the device when the copy is done, a reload brings it
// back.
//
// A hold (Hold and Drop of a program) keeps an activation or gradient past
// its last use, counted in its own category, until it is dropped or the
// step ends (end_holds); a held weight gradient is computed apart from the
// layer's accumulated one and added into it when dropped. A held buffer past
// its last use leaves its slot (it is kept in a list by slot, value and
// boundary or layer), so the slot can take a new micro-batch.
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
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "buffer_pool.hpp"
#include "data.hpp"
#include "host_copies.hpp"
#include "memory_ledger.hpp"
#include "model_config.hpp"
#include "model_shape.hpp"
#include "vit_model.hpp"

namespace pipevm::runtime {

// The model's description (kind, widths or ViT sizes, loss, seed) is the
// core's (model_config.hpp): reading a configuration needs no runtime.
using pipevm::describe;
using pipevm::Loss;
using pipevm::loss_from_name;
using pipevm::model_kind_from_name;
using pipevm::ModelConfig;
using pipevm::ModelKind;
using pipevm::name;
using pipevm::use_vit;
// What runs the model's products, for the run header: the MLP's OpenBLAS
// (gemm_backend()), or "pipevm's avx512 kernels" for the ViT (the set
// vit_kernels() chose).
std::string products_backend(const ModelConfig& config);

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
// `weight_then_bias` holds out * in + out floats. For the ViT, its unit's
// parameters (initialize_vit_unit).
void initialize_layer(std::span<float> weight_then_bias, const ModelConfig& config, int layer);

// One layer's share of a flat parameter or gradient array (a ViT unit's
// parameters are all in `weight` and `all`, its bias empty).
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

// Called after each layer's weight gradient: (global layer index, that
// layer's gradients: weight then bias).
using LayerHook = std::function<void(int, std::span<float>)>;

// Where what a slot's backward reads is (Piece::stash_state).
enum class StashState : std::uint8_t {
  on_device,   // after a forward or a recomputation (or nothing forwarded yet)
  input_only,  // after a checkpointed forward: its input, until recomputed
  offloading,  // an offload's copy is under way; still on the device
  on_host,     // offloaded: in host memory only
  reloading,   // a reload's copy is under way: on the device again when done
};

// What a hold names of a micro-batch in flight: the activation or the
// gradient at a boundary (the input of a layer, or one past the piece's
// last layer: its output), or a layer's weight gradient.
enum class HeldValue : std::uint8_t { activation, gradient, weight_gradient };

class Piece {
 public:
  // A piece with its own initialized weights. Its buffers come from `pool`
  // (and are counted in the pool's ledger, its weights too); null: a pool
  // and ledger of its own.
  Piece(const ModelConfig& config, LayerRange layers, BufferPool* pool = nullptr);
  // A piece without weights of its own: each layer's whole weights are bound
  // (bind_weights) while gathered from shards held elsewhere.
  struct BoundWeights {};
  Piece(const ModelConfig& config, LayerRange layers, BufferPool& pool, BoundWeights);
  Piece(Piece&&) = default;
  Piece& operator=(Piece&&) = delete;

  const ModelConfig& config() const { return config_; }
  LayerRange layers() const { return layers_; }
  int input_width() const;
  int output_width() const;
  bool is_first() const { return layers_.begin == 0; }
  bool is_last() const;
  Loss loss_kind() const { return config_.loss; }
  std::size_t offset_in_model() const { return offset_in_model_; }
  MemoryLedger& ledger() { return pool_->ledger(); }

  // Prepares `slots` micro-batches in flight of at most `rows` rows each and
  // frees every slot (their buffers come from the pool as they are used).
  void reserve(int slots, int rows);
  int slots() const { return static_cast<int>(slots_.size()); }
  int max_rows() const { return max_rows_; }

  // --- forward -------------------------------------------------------------
  // The slot's input (rows x input_width), taken for the caller to load or
  // receive into; the slot must hold nothing else.
  std::span<float> take_input(int slot, int rows);
  // Forward of one layer (a global index) of the slot, after the layer below.
  void forward_layer(int slot, int layer);
  void forward_all(int slot);
  // take_input, a copy of `input`, forward_all; returns the output.
  std::span<const float> forward(int slot, std::span<const float> input, int rows);
  // The slot's output, rows x output_width, until its last use.
  std::span<const float> output(int slot) const;

  // --- backward ------------------------------------------------------------
  // The gradient at the piece's top: on a piece that does not end the model,
  // taken for the caller to receive into; on the last, loss() makes it from
  // the output and `labels` (one per row), scaled by `scale` (the VM passes
  // 1 / global batch size), with the loss.
  std::span<float> take_output_gradient(int slot);
  LossResult loss(int slot, std::span<const std::uint8_t> labels, float scale);
  // The input half of one layer's backward (a global index), after the layer
  // above's: the gradient at the layer's bottom (none at the model's input).
  void backward_input_layer(int slot, int layer);
  // The weight half: accumulates (+=) the layer's weight and bias gradients,
  // after its input half; then calls on_layer_done.
  void backward_weight_layer(int slot, int layer, const LayerHook& on_layer_done = {});
  void backward_input_all(int slot);
  void backward_weight_all(int slot, const LayerHook& on_layer_done = {});
  // The whole backward's two halves as one call each: backward_input copies
  // `grad_output` into the top gradient (ignored on the last piece, where
  // loss() made it) and returns the input gradient (empty on the first piece).
  std::span<const float> backward_input(int slot, std::span<const float> grad_output);
  void backward_weight(int slot, const LayerHook& on_layer_done = {});
  // The gradient with respect to the piece's input, until sent.
  std::span<const float> input_gradient(int slot) const;

  // --- sends ---------------------------------------------------------------
  // A send reading the output: while one is in flight the output outlives
  // its last use (counted as a message until the send completes).
  void begin_output_send(int slot);
  void end_output_send(int slot);
  // The input gradient's only use is its send: a non-blocking one keeps it
  // as a message (begin), its completion gives it back (end; a blocking
  // send calls end alone).
  void begin_input_gradient_send(int slot);
  void end_input_gradient_send(int slot);

  // Gives back every buffer of a slot (a forward-only program's slots),
  // held ones too, and forgets its holds; waits for a copy of it under way
  // and gives back its host copy.
  void release(int slot);

  // --- memory policies (model_offload.cpp) ---------------------------------
  // forward_all that keeps only the slot's input (with it, recompute()
  // needs nothing else) and its output while a send may read it: on the
  // last piece, whose output nothing sends, not at all. A send of the
  // output is its last use (begin_output_send).
  void forward_checkpoint(int slot);
  // The forward again from the kept input, as forward_all runs it: the slot
  // holds what a forward leaves, bit for bit. Its output must not be in a
  // send still (that send completes first).
  void recompute(int slot);
  StashState stash_state(int slot) const;
  // Offload: copies what the slot's backward reads (every activation it
  // holds, a ViT unit's forward stashes) to a host buffer of `copies`'
  // pool; after the forward, before the backward. finish_offload waits for
  // the copy and gives the device's buffers back (the output, while a send
  // still reads it, as a message until the send completes).
  void start_offload(int slot, HostCopies& copies);
  void finish_offload(int slot);
  // Reload: takes the same buffers on the device again and copies into
  // them; finish_reload waits and gives the host buffer back.
  void start_reload(int slot);
  void finish_reload(int slot);

  // --- holds (docs/memory.md) ------------------------------------------------
  // `index` is a global index: for an activation or a gradient the boundary
  // (the input of layer `index`; layers().end: the output), for a weight
  // gradient the layer. hold() keeps the slot's value past its last use (it
  // may not exist yet). A held gradient at the model's input is computed by
  // the input half of layer 0's backward, which otherwise skips it. A held
  // weight gradient is computed apart (category gradients) by the weight
  // half, which then neither accumulates it nor calls on_layer_done.
  // Throws std::logic_error for a value held already.
  void hold(HeldValue value, int slot, int index);
  // Ends a hold: a value past its last use is given back now (or counted as
  // a message until a send that still reads it completes), else at its last
  // use; a weight gradient kept apart is added into the layer's accumulated
  // gradient (made if the layer has none) and given back. Throws
  // std::logic_error for a value not held.
  void drop(HeldValue value, int slot, int index);
  // A held value's buffer, in its slot or past its last use; empty if none.
  std::span<const float> held(HeldValue value, int slot, int index) const;
  // The step's end: gives back every buffer held past its last use and
  // forgets every hold; then throws std::logic_error if one of them was a
  // weight gradient kept apart (never added to the accumulated gradient).
  void end_holds();
  // Throws std::logic_error when a weight gradient of `layer` (negative:
  // of any layer; one this piece does not hold: none) is kept apart (made
  // while held, not yet dropped): `operation` (a reduction, a step) would
  // miss it.
  void require_no_held_weight_gradient(int layer, const char* operation) const;

  // --- parameters and gradients --------------------------------------------
  // Gives back every weight gradient.
  void zero_grad();
  // The own weights, flat (empty for a piece with bound weights).
  std::span<float> parameters() { return parameters_; }
  std::span<const float> parameters() const { return parameters_; }
  // Views of global layer `layer` (which this piece must hold): its whole
  // weights (empty while not bound), its gradients (empty until its first
  // weight gradient since zero_grad).
  LayerView layer_parameters(int layer);
  LayerView layer_gradients(int layer);
  bool has_gradients(int layer) const;
  // Floats of global layer `layer`'s parameters, and their offset in the piece.
  std::size_t layer_size(int layer) const;
  std::size_t layer_offset(int layer) const;
  // Bound weights: `weights` (layer_size floats) are the layer's whole
  // weights until unbind_weights.
  void bind_weights(int layer, std::span<float> weights);
  void unbind_weights(int layer);
  // The weight gradients, flat, as a copy (zeros for layers without).
  std::vector<float> gradients() const;
  // Gives back one layer's gradients.
  void drop_layer_gradients(int layer);
  // Every layer's gradients as one flat array (the piece's layout), when
  // every layer holds them; else empty.
  std::span<float> contiguous_gradients();
  // Replaces layer `layer`'s gradients (given or not) by `values`.
  void set_layer_gradients(int layer, std::span<const float> values);

 private:
  struct LayerShape {
    int inputs = 0;
    int outputs = 0;
    std::size_t parameters = 0;
    std::size_t parameter_offset = 0;  // in the piece's flat parameters
    VitStashSizes stash;               // floats per row (all 0 for the MLP)
  };
  // One micro-batch in flight. Boundary k (0 .. layers) is the input of local
  // layer k (k = layers: the piece's output); a[k] its activation, g[k] the
  // gradient there (g[0]: the piece's input gradient, g[layers]: its top).
  struct Slot {
    int rows = 0;
    int forward_next = 0;  // local layers forwarded so far
    int input_next = -1;   // the next local layer of each half of the backward
    int weight_next = -1;
    int output_sends = 0;
    bool output_kept = false;  // the output's last use is past: a send keeps it
    bool input_gradient_sending = false;
    std::vector<std::span<float>> a;
    std::vector<std::span<float>> g;
    // Per local layer, a ViT unit's stashes (vit_model.hpp).
    std::vector<std::span<float>> forward_for_input;
    std::vector<std::span<float>> forward_for_weight;
    std::vector<std::span<float>> gradients_for_weight;
    std::vector<std::span<float>> layernorm_gradients;
    // Per boundary k, the holds of a[k], g[k] and layer k's weight gradient.
    std::vector<std::uint8_t> holds;
    // Memory policies: where the stash is; an offloaded one's host copy,
    // the copy under way, the buffers it holds (in the order copied) and
    // the copy's parts.
    StashState stash = StashState::on_device;
    HostCopies* copies = nullptr;
    std::span<float> host;
    HostCopies::Ticket ticket = 0;
    std::vector<std::span<float>*> offloaded;
    std::vector<std::size_t> offloaded_floats;
    std::vector<HostCopies::Part> parts;
  };
  // A held value past its last use, out of its slot.
  struct Kept {
    int slot = 0;
    HeldValue value = HeldValue::activation;
    int local = 0;  // boundary or local layer
    std::span<float> buffer;
    int sends = 0;     // sends still reading it
    bool held = true;  // false: dropped, a message until its sends complete
  };

  void set_shapes();
  int local(int layer, const char* operation) const;
  const LayerShape& shape(int local_layer) const {
    return shapes_[static_cast<std::size_t>(local_layer)];
  }
  Slot& checked_slot(int slot, const char* operation);
  const Slot& checked_slot(int slot, const char* operation) const;
  std::span<const float> weight(int local_layer) const;           // outputs x inputs
  std::span<const float> unit_parameters(int local_layer) const;  // all of the layer's
  bool is_vit() const { return config_.kind == ModelKind::vit; }
  VitUnitBuffers vit_buffers(Slot& s, int local_layer);
  void give_back_stashes(Slot& s, int local_layer);
  void forward_mlp_layer(Slot& s, int local_layer);
  void backward_input_vit(int slot, Slot& s, int local_layer);
  std::span<float> take(MemoryCategory category, std::size_t floats, bool zeroed = false);
  void give_back(MemoryCategory category, std::span<float>& buffer);
  void give_back_output(int slot);
  // The value's last use: given back, or, while held, moved out of the slot
  // into kept_ (with the sends still reading it).
  void last_use(int slot, HeldValue value, int local, std::span<float>& buffer, int sends = 0);
  static bool is_held(const Slot& s, HeldValue value, int local);
  int held_local(HeldValue value, int index, const char* operation) const;
  std::vector<Kept>::iterator find_kept(int slot, HeldValue value, int local, bool held);
  // A send of a value kept past its last use completes.
  void end_kept_send(int slot, HeldValue value, int local, const char* operation);
  // Gives back the kept buffers of `slot` (every slot: -1); true when one
  // was a weight gradient kept apart.
  bool give_back_kept(int slot);
  void take_gradients(int local_layer);
  void give_back_gradients(int local_layer);
  // Memory policies: the stash's buffers in the slot, in a fixed order; a
  // copy under way waited for and the host copy given back (release).
  void list_stash(Slot& s);
  void drop_host_copy(Slot& s);
  // Throws std::logic_error when the slot's stash is not on the device.
  void require_stash_on_device(const Slot& s, int slot, const char* operation) const;

  ModelConfig config_;
  LayerRange layers_;
  std::size_t offset_in_model_ = 0;
  std::vector<LayerShape> shapes_;
  std::unique_ptr<MemoryLedger> own_ledger_;
  std::unique_ptr<BufferPool> own_pool_;
  BufferPool* pool_ = nullptr;
  std::vector<float> parameters_;            // own weights (empty when bound)
  std::vector<std::span<float>> weights_;    // per local layer: the whole weights, or empty
  std::vector<float> gradient_area_;         // every layer's place, allocated at first use
  std::vector<std::span<float>> gradients_;  // per local layer: its place while held, or empty
  int max_rows_ = 0;
  std::vector<Slot> slots_;
  std::vector<Kept> kept_;
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
