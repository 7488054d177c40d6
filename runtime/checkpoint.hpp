// Layout-free checkpoints of a training run. The state is kept per model
// layer, not per rank: each layer's parameters and optimizer state (Adam's
// moments, SGD's velocity, the step count), cut into slices of the layer's
// flat floats. A rank writes the slices it is responsible for (one file,
// none when it has nothing to write); once every rank has written, world
// rank 0 writes the manifest, which commits them. A checkpoint directory
// DIR holds
//
//   DIR/manifest.json                          the latest complete checkpoint
//   DIR/step-00000120/rank-0000.safetensors    the slices world rank 0 wrote
//
// The manifest records where training stands, what must not change to
// resume (made_for: model, optimizer, data, global batch, seeds), the
// layout that wrote it (schedule, stages, dp, chunks, ...: free to change),
// each rank's sums over the epoch so far, and each file with its size,
// FNV-1a digest and slices. A reader asks for the slices it needs under its
// own layout and reads only the files that hold part of them. Every file is
// written durably (output_files.hpp); a step directory the manifest does not
// name is a checkpoint cut short, never read and removed at the next commit.
// Leaves out: which rank writes what (train/), keeping more than the latest
// checkpoint, writing in the background while training goes on.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm.hpp"
#include "optimizer.hpp"

namespace pipevm::runtime {

// A checkpoint that cannot be used; the message names the file and why.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kManifestName = "manifest.json";

// Where training stands between two steps.
struct CheckpointPosition {
  std::int64_t step = 0;    // steps taken since the run began
  int epoch = 0;            // the epoch the next step belongs to
  int step_in_epoch = 0;    // steps of that epoch already taken
  int steps_per_epoch = 0;  // of the run that wrote it
};

// The floats [begin, end) of model layer `layer`'s flat parameters.
struct LayerSlice {
  int layer = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool operator==(const LayerSlice&) const = default;
};

// A slice's parameters and optimizer state (its arrays over the slice's
// floats, and the optimizer's step count).
struct SliceState {
  LayerSlice where;
  std::vector<float> parameters;
  Optimizer::State optimizer;
};

// A rank's sums over the steps of the current epoch taken so far, so that
// the epoch's report after a resume is the one an uninterrupted run prints.
struct EpochSums {
  double loss = 0.0;
  std::int64_t correct = 0;
  std::int64_t rows = 0;
};

// One rank's share of a checkpoint.
struct RankCheckpoint {
  std::vector<SliceState> slices;  // what this rank writes: possibly none
  EpochSums epoch;
};

// Key by key ("model.sizes", "training.lr", "schedule", "world.dp", ...).
using RunIdentity = std::map<std::string, std::string>;

// What a checkpoint records about its run: `made_for` must be the resuming
// run's too; `layout` says how the run was laid out, and may change.
struct RunRecord {
  RunIdentity made_for;
  RunIdentity layout;
};

struct PieceRecord {
  int rank = 0;
  std::string file;  // relative to the checkpoint directory
  std::uint64_t bytes = 0;
  std::uint64_t digest = 0;        // FNV-1a 64 of the file's bytes
  std::vector<LayerSlice> slices;  // what the file holds
};

struct Manifest {
  CheckpointPosition position;
  RunRecord run;
  std::vector<EpochSums> epoch_sums;  // per world rank of the run that wrote it
  std::vector<PieceRecord> pieces;    // in rank order; ranks that wrote nothing have none
};

struct CheckpointResult {
  bool committed = false;  // the same on every rank
  // This rank's own failure; on world rank 0 also why nothing was committed.
  std::string error;
};

// World-wide: every rank calls it after the same step. Writes this rank's
// slices under `directory` (which must exist), then world rank 0 commits the
// manifest once every rank has written and removes every other step
// directory. When nothing is committed, the previous checkpoint stays the
// latest. Never throws: a rank that failed still takes part, so that no
// rank waits for it.
CheckpointResult write_checkpoint(Comm& comm, const std::string& directory,
                                  const CheckpointPosition& position, const RunRecord& run,
                                  const RankCheckpoint& mine);

// Whether `directory` holds a committed checkpoint (a manifest).
bool has_checkpoint(const std::string& directory);

// The committed manifest of `directory`. Throws CheckpointError when there
// is none, it is malformed, or of another format (today's "pipevm
// checkpoint 1" is refused with how to go on from it).
Manifest read_manifest(const std::string& directory);

// Empty when `now` is the run `made_for` describes; else a message naming
// every key whose value differs.
std::string identity_mismatch(const RunIdentity& made_for, const RunIdentity& now);

// The state of each of the `wanted` slices, in their order, assembled from
// the files of the manifest's checkpoint that hold part of them (and only
// those are read), once each file's size, digest, rank and step match the
// manifest. Throws CheckpointError, also when a wanted float is missing or
// held twice, or the files disagree about the optimizer.
std::vector<SliceState> read_slices(const std::string& directory, const Manifest& manifest,
                                    std::span<const LayerSlice> wanted);

}  // namespace pipevm::runtime
