// Checkpoints of a run: what a run is (what a checkpoint must match to be
// resumed, and the layout, which may change), reading what this rank needs
// to resume from, and writing one every epoch or every N steps.
// resume_or_init (resume_steps.cpp) is where a run resumes. Not here: the files' format
// (runtime/checkpoint.hpp), checking the directory is writable
// (run_outputs.hpp).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "program.hpp"
#include "run_config.hpp"
#include "run_log.hpp"
#include "trainer.hpp"

namespace pipevm::train {

// What a run is, for the manifest: what must not change to resume it
// (made_for: the model, optimizer, data, global batch and seeds) and how it
// is laid out (layout: the schedule and the digest of every rank's program,
// stages, dp, chunks, placement, micro-batches, the cut of the model and the
// number of hosts), which a resumed run may change. Not the epoch count (a
// resumed run may train longer).
runtime::RunRecord run_record(const config::RunConfig& config, const Program& program,
                              const std::vector<runtime::LayerRange>& split,
                              const std::vector<std::string>& hosts);

// "1f1b x 2 stages x dp 1" (with "x 2 chunks" where ranks hold several).
std::string describe_layout(const runtime::RunIdentity& layout);

// The checkpoint in `directory`, once the run it was made for is `now`'s.
// Throws runtime::CheckpointError with a message for users.
runtime::Manifest read_resume(const std::string& directory, const runtime::RunIdentity& now);

// What a resumed rank needs: the slices its trainer holds, read from the
// checkpoint, and its sums over the epoch so far (its own when the world
// has the checkpoint's size, else the world's total on rank 0).
struct Resumed {
  std::vector<runtime::SliceState> slices;
  runtime::EpochSums sums;
};
Resumed read_rank_state(const std::string& directory, const runtime::Manifest& manifest,
                        const Trainer& trainer, int rank, int world);

// Writes the checkpoints of a run when they are due: after every epoch, or
// after every `every_steps` steps (counted from the run's first step, across
// epochs). A checkpoint that fails is a warning (on the log); training goes
// on and the previous checkpoint stays the latest.
class Checkpoints {
 public:
  Checkpoints(std::string directory, int every_steps, runtime::RunRecord record,
              const RunLog& log)
      : directory_(std::move(directory)),
        every_steps_(every_steps),
        record_(std::move(record)),
        log_(log) {}

  // World-wide, after each step of an epoch (`done` of `total`).
  void after_step(Trainer& trainer, runtime::Comm& comm, int done, int total);
  // World-wide, after each epoch's report.
  void after_epoch(Trainer& trainer, runtime::Comm& comm);

  const std::string& directory() const { return directory_; }
  // The latest checkpoint this run committed.
  const std::optional<runtime::CheckpointPosition>& latest() const { return latest_; }

 private:
  void write(Trainer& trainer, runtime::Comm& comm);

  std::string directory_;
  int every_steps_;
  runtime::RunRecord record_;
  const RunLog& log_;
  std::optional<runtime::CheckpointPosition> latest_;
};

// "epoch 2, step 5/16 (37 steps)" — where a checkpoint stands, for the log.
std::string describe(const runtime::CheckpointPosition& position);

}  // namespace pipevm::train
