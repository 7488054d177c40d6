// The VM: the concrete semantics of a Program. Vm::run executes one rank's
// instruction stream once, which is one training step on one global batch,
// against a Machine: the rank's model pieces (one per chunk), their
// optimizers, their sharded weights, a pool of the buffers that come and go
// (counted in the Machine's memory ledger, sampled after every instruction:
// docs/memory.md), per-(chunk, micro-batch) labels, the Comm and the Batcher.
//
// The VM never prints. An instruction it cannot execute raises VmError with
// a diagnostic kind and the instruction's index (to_diagnostic gives it its
// source position); an optional observer sees every instruction's start and
// end time. Once the first step has run, a step allocates nothing.
// Not here: the epoch loop, evaluation and saving (train/trainer.hpp).
// The memory policies (FwdCheckpoint, Recompute, Offload, Reload and their
// waits) are vm_memory_policy.cpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm.hpp"
#include "data.hpp"
#include "dataflow.hpp"
#include "diagnostics.hpp"
#include "link.hpp"
#include "message_tags.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "program.hpp"

namespace pipevm {

class VmStep;

// Sees every executed instruction; `index` is its place in the rank's stream,
// times are steady-clock nanoseconds. Absent, the VM reads no clock.
class VmObserver {
 public:
  VmObserver() = default;
  VmObserver(const VmObserver&) = delete;
  VmObserver& operator=(const VmObserver&) = delete;
  virtual ~VmObserver() = default;
  virtual void on_instruction(int rank, std::size_t index, std::int64_t start_ns,
                              std::int64_t end_ns) = 0;
};

// An instruction the VM cannot execute, or a failure while executing it.
class VmError : public std::runtime_error {
 public:
  VmError(DiagnosticKind kind, const std::string& message, std::size_t instruction)
      : std::runtime_error(message), kind_(kind), instruction_(instruction) {}
  DiagnosticKind kind() const { return kind_; }
  // Index in the rank's stream.
  std::size_t instruction() const { return instruction_; }

 private:
  DiagnosticKind kind_;
  std::size_t instruction_;
};

// The error at the instruction's place in the schedule, with rank and stage.
Diagnostic to_diagnostic(const VmError& error, const Program& program, int rank);

// What one step computed on this rank (non-zero only where the loss is).
struct StepResult {
  double loss = 0.0;  // sum of the micro-batches' losses, each scaled by 1 / global batch
  int correct = 0;    // training rows predicted right
  int rows = 0;       // training rows whose loss this rank computed
};

struct MachineOptions {
  runtime::ModelConfig model;
  runtime::OptimizerConfig optimizer;
  int global_batch = 128;  // samples per step over all data-parallel replicas
  // The layers of each model piece (runtime::split_layers); empty: the
  // program's `cut` where it covers the model's layers, else the split by
  // multiply-adds. Every rank must be given the same.
  std::vector<runtime::LayerRange> split;
};

// The layers of each of the program's model pieces under `options`.
std::vector<runtime::LayerRange> model_split(const Program& program, const MachineOptions& options);

class Machine {
 public:
  // Builds the pieces this rank holds under `program`'s placement and
  // configuration. The comm's world must match the program's stages x dp.
  // Throws std::invalid_argument for a configuration the runtime cannot hold
  // (more pieces than layers, a batch not divisible by dp x micro-batches).
  Machine(const Program& program, int rank, runtime::Comm& comm, const MachineOptions& options);

  // The data the next steps read: global batch `batch` of `batcher`. Ranks
  // that load nothing may have no batcher.
  void set_batch(const runtime::Batcher* batcher, int batch) {
    batcher_ = batcher;
    batch_ = batch;
  }

  int rank() const { return rank_; }
  int stage() const { return stage_; }
  int dp_rank() const { return dp_rank_; }
  int micro_batch_rows() const { return rows_; }
  std::size_t chunk_count() const { return chunks_.size(); }
  runtime::Piece& piece(std::size_t chunk) { return chunks_[chunk].piece; }
  const runtime::Piece& piece(std::size_t chunk) const { return chunks_[chunk].piece; }
  runtime::Optimizer& optimizer(std::size_t chunk) { return chunks_[chunk].optimizer; }
  const runtime::Optimizer& optimizer(std::size_t chunk) const { return chunks_[chunk].optimizer; }
  PipelinePosition position(std::size_t chunk) const { return chunks_[chunk].where; }
  runtime::Comm& comm() { return comm_; }

  // The bytes this rank's buffers hold, by category, at the worst moment of
  // the steps run so far (moments: before a step and after each
  // instruction), and the most it held in host memory (offloaded stashes).
  const runtime::MemoryBytes& peak_bytes() const { return ledger_.peak(); }
  std::uint64_t peak_host_bytes() const { return ledger_.host_peak(); }
  const runtime::MemoryLedger& ledger() const { return ledger_; }

  // A chunk's whole parameters, flat (as Piece::parameters() of an unsharded
  // piece): its own weights, or, with sharded layers, gathered from the
  // shards' owners. Every member of the data-parallel group calls it
  // together for the same chunk (a collective when layers are sharded).
  std::vector<float> whole_parameters(std::size_t chunk);
  // Sets a chunk's parameters from a whole flat array (each rank keeps its
  // own shards of sharded layers).
  void set_parameters(std::size_t chunk, std::span<const float> whole);
  // The optimizer's floats of a chunk: its whole layers' and own shards'
  // (padded to equal shards), in layer order (what optimizer(chunk) steps).
  std::size_t own_floats(std::size_t chunk) const;

  // Gossip (programs with a topology). Waits for the exchange in flight, if
  // any, and mixes it in: the end of training.
  void finish_gossip();
  // Replaces every chunk's parameters by their mean over the stage's
  // data-parallel replicas (world-wide: every rank calls it).
  void global_average();
  // Evaluation: the global average in place of the parameters, then back.
  void swap_in_global_average();
  void restore_parameters();

 private:
  friend class VmStep;

  // One layer of a chunk. A sharded layer (the rank's stream gathers it) is
  // held as the rank's own shard: the floats [offset, offset + count) of the
  // layer's flat parameters (equal shards in dp_rank order, the last ones
  // shorter), with a whole copy from the pool while gathered; an unsharded
  // layer of a chunk with sharded layers is held whole here too. After a
  // reduce-scatter the layer's gradient is the own shard's sum (`reduced`).
  struct Layer {
    int index = 0;  // global
    bool sharded = false;
    std::size_t offset = 0;
    std::size_t count = 0;       // the own floats (the whole layer when not sharded)
    std::size_t stored = 0;      // floats held for them: ceil(P / members) when sharded
    std::size_t own_offset = 0;  // of the stored floats in the chunk's optimizer state
    std::vector<float> own;      // bound pieces: the own shard (padded), or the whole layer
    std::span<float> gathered;   // from the pool, while gathered
    std::span<float> reduced;    // from the pool: the own shard of the summed gradient
    std::vector<int> counts;     // per member of the group: its shard's floats
    std::vector<int> displacements;
  };

  struct Chunk {
    PipelinePosition where;
    runtime::Piece piece;
    runtime::Optimizer optimizer;
    std::vector<Layer> layers;
    bool bound = false;                // the piece's weights are bound (some layer is sharded)
    std::vector<std::uint8_t> labels;  // micro_batches x rows (last piece only)
    std::vector<std::uint16_t> flags;  // per micro-batch: dataflow::CellState bits
  };

  // A non-blocking point-to-point operation, or a host copy (Offload,
  // Reload: its request unused), the program has not waited for.
  struct PendingMessage {
    WaitDirection direction = WaitDirection::none;
    MessageKind kind = MessageKind::none;
    std::uint32_t micro_batch = 0;
    std::uint16_t chunk = 0;
    runtime::Comm::Request request = -1;
    std::size_t instruction = 0;
  };

  std::span<std::uint8_t> label_buffer(Chunk& chunk, std::uint32_t micro_batch);
  // Waits for a blocking Send of the micro-batch's output still posted (see
  // VmStep::send), if any.
  void complete_posted_send(Chunk& chunk, std::uint32_t micro_batch);
  // Waits for one posted Send and gives its output back.
  void finish_posted_send(const PendingMessage& message);

  // Sharded weights (vm_shards.cpp).
  // The layers of chunk `c` (whose piece holds `range`) and their shards.
  std::vector<Layer> layers_of(int chunk, runtime::LayerRange range) const;
  Layer& layer(Chunk& chunk, int index);
  void gather(Chunk& chunk, Layer& layer);
  void release(Chunk& chunk, Layer& layer);
  // Sums a layer's gradient over the data-parallel group keeping the own
  // shard's sum (a layer without a gradient contributes zeros).
  void reduce_scatter(Chunk& chunk, Layer& layer);
  // The optimizer step on every layer's own floats, then the gradients go.
  void step(bool shards_only);
  void drop_gradients();

  const Program* program_;
  runtime::ModelConfig model_;
  runtime::MemoryLedger ledger_;
  runtime::BufferPool pool_{ledger_};
  int rank_;
  int stage_;
  int dp_rank_;
  runtime::Comm& comm_;
  MessageTags tags_;
  int rows_;
  float loss_scale_;
  double loss_report_scale_ = 1.0;
  std::vector<Chunk> chunks_;
  std::vector<PendingMessage> pending_;
  // Blocking Sends of activations, posted; each completes before its
  // output's last use or at the end of the step (see VmStep::send).
  std::vector<PendingMessage> posted_sends_;
  // Per instruction of the rank's stream: the request a Wait there
  // completes (link.hpp's rule), kNoLink elsewhere.
  std::vector<std::uint32_t> wait_requests_;
  std::vector<runtime::Comm::Request> reductions_;  // BwdAllReduce's per-layer requests
  static constexpr runtime::Comm::Group kNoGroup = -1;
  runtime::Comm::Group mirror_group_ = kNoGroup;  // the holders of this rank's pieces (mirror)
  const runtime::Batcher* batcher_ = nullptr;
  int batch_ = 0;
  // Gossip: one group per round of the topology, the copies of the
  // parameters an exchange averages (per chunk), the exchange in flight.
  std::vector<runtime::Comm::Group> gossip_groups_;
  std::vector<int> gossip_sizes_;  // members of this rank's group, per round
  std::vector<std::vector<float>> gossip_buffers_;
  std::vector<runtime::Comm::Request> gossip_requests_;
  int gossip_round_ = -1;  // the round of the exchange in flight; -1: none
  long steps_run_ = 0;
  std::vector<std::vector<float>> saved_parameters_;

  void start_gossip(int round);
  bool wait_gossip();  // false when no exchange is in flight

  // Offloaded stashes (vm_memory_policy.cpp). Declared last, so destroyed
  // first: it finishes the copies under way (a step that failed may leave
  // one) while the pieces whose buffers they move still exist.
  runtime::HostCopies host_copies_{ledger_};
};

class Vm {
 public:
  // Executes `machine`'s rank's stream of `program` once. Throws VmError.
  static StepResult run(const Program& program, Machine& machine, VmObserver* observer = nullptr);
};

}  // namespace pipevm
