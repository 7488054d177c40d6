// Training with the VM: the epoch loop around Vm::run, shared by `pipevm run`
// (over MpiComm) and the tests (over InProcessComm). Every rank of the world
// constructs a Trainer and calls the same functions in the same order; the
// collectives inside keep them together.
//
// Test accuracy is measured on world rank 0: the trained pieces are gathered
// there into one whole-model Piece, which runs the test set (rank 0 always
// holds data: it runs the model's first piece). Data-parallel replicas are
// compared by a digest of their parameters.
//
// A Trainer knows where training stands (position()) and gives or takes
// this rank's share of a layout-free checkpoint (runtime/checkpoint.hpp):
// slices of layers' weights and optimizer state, and the epoch's sums so far. The data position
// is (epoch, step): the Batcher draws each epoch's order from the seed and
// the epoch alone, so no generator state needs keeping.
// Not here: configuration files, printing, MPI start-up (run.hpp and its steps).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "data.hpp"
#include "program.hpp"
#include "vm.hpp"

namespace pipevm {

struct TrainingOptions {
  MachineOptions machine;
  std::uint64_t shuffle_seed = 0;
  // Stop each epoch after this many steps (tests); -1: the whole epoch.
  int max_steps_per_epoch = -1;
  // Evaluate on the test set after each epoch (world rank 0 needs test data).
  bool evaluate = true;
};

struct EpochReport {
  int epoch = 0;
  int steps = 0;
  double train_loss = 0.0;      // mean per-sample training loss over the epoch
  double train_accuracy = 0.0;  // fraction of training rows predicted right
  std::optional<double> test_accuracy;
  double train_seconds = 0.0;  // the steps only, without evaluation
  double samples_per_second = 0.0;
};

// True when `rank`'s stream loads inputs or targets.
bool needs_data(const Program& program, int rank);
// True when `rank`'s stream loads inputs (so it needs the training pixels,
// not only the labels).
bool loads_inputs(const Program& program, int rank);

class Trainer {
 public:
  // `data` may be null on ranks that need none (world rank 0 always needs it).
  // Throws std::invalid_argument for a configuration the runtime cannot hold.
  Trainer(const Program& program, runtime::Comm& comm, const TrainingOptions& options,
          const runtime::DataSplit* data);

  // One epoch of steps: from where training stands when `epoch` is the
  // epoch of position() (mid-epoch after resume()), else from its first step.
  // `on_step(done, total)` is called after every step on every rank, once
  // position() counts it. Afterwards position() is the start of epoch + 1.
  // Throws VmError when an instruction fails.
  EpochReport train_epoch(int epoch, const std::function<void(int, int)>& on_step = {},
                          VmObserver* observer = nullptr);

  // Where training stands between two steps.
  runtime::CheckpointPosition position() const;
  // This rank's share of a layout-free checkpoint at position(): of every
  // layer its chunks hold, the floats this rank writes (each layer's floats
  // are cut into dp equal slices, one per replica, the shard rule of
  // sharded layers; under mirror placement lane 0 writes), with their
  // optimizer state, and its sums over the epoch so far. Throws
  // std::logic_error for a gossip program (its replicas differ).
  runtime::RankCheckpoint checkpoint();
  // The slices of the model this rank needs to resume: what its chunks hold.
  std::vector<runtime::LayerSlice> resume_slices() const;
  // Continues from `slices` (read for resume_slices(), in its order) of a
  // checkpoint taken at `position`, with `sums` as this rank's sums over the
  // epoch so far. Throws std::invalid_argument when they do not fit this
  // rank's chunks or the position this run's epochs (the Trainer is then
  // unusable).
  void resume(std::span<const runtime::SliceState> slices,
              const runtime::CheckpointPosition& position, const runtime::EpochSums& sums);

  // The whole model's flat parameter array on world rank 0, empty elsewhere.
  std::vector<float> gather_parameters();
  // FNV-1a (64-bit) of this rank's whole parameters, chunk after chunk
  // (world-wide when weights are sharded).
  std::uint64_t local_digest();
  // World-wide: every data-parallel replica of every stage holds the same bits.
  bool replicas_agree();
  // Gossip: completes the exchange in flight, then replaces every replica's
  // parameters by the replicas' global average (the model gossip ends with).
  void finish_gossip() {
    machine_.finish_gossip();
    machine_.global_average();
  }

  int steps_per_epoch() const { return steps_per_epoch_; }
  Machine& machine() { return machine_; }

 private:
  const Program& program_;
  runtime::Comm& comm_;
  TrainingOptions options_;
  const runtime::DataSplit* data_;
  Machine machine_;
  std::unique_ptr<runtime::Batcher> batcher_;
  int steps_per_epoch_ = 0;
  std::unique_ptr<runtime::Piece> whole_model_;  // world rank 0, for evaluation
  int epoch_ = 0;                                // the epoch the next step belongs to
  int step_ = 0;                                 // steps of epoch_ taken
  StepResult sums_;                              // this rank's sums over those steps
};

// FNV-1a (64-bit) of the bytes of `values`.
std::uint64_t fnv1a(std::span<const float> values, std::uint64_t hash = 0xcbf29ce484222325ULL);

}  // namespace pipevm
