// Checkpoints of a training run. Every rank writes its own piece (its
// chunks' weights, gradients and optimizer state, and its sums over the
// epoch so far); once every piece is on disk, world rank 0 writes the
// manifest, which commits them. A checkpoint directory DIR holds
//
//   DIR/manifest.json                          the latest complete checkpoint
//   DIR/step-00000120/rank-0000.safetensors    one piece per world rank
//
// The manifest records where training stands (steps taken, epoch, step in
// the epoch), what the run is (RunIdentity: schedule, configuration, world,
// model) and each piece's file, size and FNV-1a digest. Every file is
// written durably (output_files.hpp). A step directory the manifest does not
// name is not a checkpoint (a run cut short while writing it): readers never
// look at it, and the next commit removes it with the older checkpoints.
// Leaves out: keeping more than the latest checkpoint, writing in the
// background while training goes on.
#pragma once

#include <cstdint>
#include <map>
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

// One rank's share of a checkpoint.
struct RankCheckpoint {
  struct Chunk {
    std::vector<float> parameters;
    std::vector<float> gradients;
    Optimizer::State optimizer;
  };
  std::vector<Chunk> chunks;  // in the rank's chunk order
  // This rank's sums over the epoch's steps taken so far, so that the
  // epoch's report after a resume is the one an uninterrupted run prints.
  double epoch_loss = 0.0;
  std::int64_t epoch_correct = 0;
  std::int64_t epoch_rows = 0;
};

// What a run is, key by key ("schedule", "model.sizes", "world.dp", ...): a
// checkpoint resumes only a run whose identity is the one it was made for.
using RunIdentity = std::map<std::string, std::string>;

struct PieceRecord {
  int rank = 0;
  std::string file;  // relative to the checkpoint directory
  std::uint64_t bytes = 0;
  std::uint64_t digest = 0;  // FNV-1a 64 of the file's bytes
};

struct Manifest {
  CheckpointPosition position;
  RunIdentity made_for;
  std::vector<PieceRecord> pieces;  // one per world rank, in rank order
};

struct CheckpointResult {
  bool committed = false;  // the same on every rank
  // This rank's own failure; on world rank 0 also why nothing was committed.
  std::string error;
};

// World-wide: every rank calls it after the same step. Writes this rank's
// piece under `directory` (which must exist), then world rank 0 commits the
// manifest once every rank's piece is on disk and removes every other step
// directory. When nothing is committed, the previous checkpoint stays the
// latest. Never throws: a rank that failed still takes part, so that no
// rank waits for it.
CheckpointResult write_checkpoint(Comm& comm, const std::string& directory,
                                  const CheckpointPosition& position, const RunIdentity& identity,
                                  const RankCheckpoint& mine);

// Whether `directory` holds a committed checkpoint (a manifest).
bool has_checkpoint(const std::string& directory);

// The committed manifest of `directory`. Throws CheckpointError when there
// is none or it is malformed.
Manifest read_manifest(const std::string& directory);

// Empty when `now` is the run `made_for` describes; else a message naming
// every key whose value differs.
std::string identity_mismatch(const RunIdentity& made_for, const RunIdentity& now);

// World rank `rank`'s piece of the manifest's checkpoint, once its size,
// digest, rank and step match the manifest. Throws CheckpointError.
RankCheckpoint read_piece(const std::string& directory, const Manifest& manifest, int rank);

}  // namespace pipevm::runtime
