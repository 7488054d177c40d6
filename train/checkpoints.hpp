// Checkpoints of a run: what a run is (its identity, which a checkpoint
// must match to be resumed), where its model was cut, reading this rank's
// piece to resume from, and writing one every epoch or every N steps.
// resume_or_init (resume_steps.cpp) is where a run resumes; a run under
// another layout would read its pieces here. Not here: the files' format
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

// What a run is, for the manifest: the schedule (name, digest of every
// rank's program), the world, the model and the training configuration, but
// not the epoch count (a resumed run may train longer).
runtime::RunIdentity run_identity(const config::RunConfig& config, const Program& program,
                                  const std::vector<runtime::LayerRange>& split);

// The cut of the model recorded in the checkpoint in `directory`
// ("model.split"): a resumed run must cut the model where the interrupted one
// did, since its pieces hold those layers, and a fresh measurement of the
// layers' costs may cut elsewhere. Throws runtime::CheckpointError.
std::vector<runtime::LayerRange> recorded_split(const std::string& directory, int layers);

struct Resumed {
  runtime::CheckpointPosition position;
  runtime::RankCheckpoint piece;
};
// World rank `rank`'s piece of the checkpoint in `directory`, made for a run
// of `identity`. Throws runtime::CheckpointError with a message for users.
Resumed read_resume(const std::string& directory, const runtime::RunIdentity& identity, int rank);

// Writes the checkpoints of a run when they are due: after every epoch, or
// after every `every_steps` steps (counted from the run's first step, across
// epochs). A checkpoint that fails is a warning (on the log); training goes
// on and the previous checkpoint stays the latest.
class Checkpoints {
 public:
  Checkpoints(std::string directory, int every_steps, runtime::RunIdentity identity,
              const RunLog& log)
      : directory_(std::move(directory)),
        every_steps_(every_steps),
        identity_(std::move(identity)),
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
  runtime::RunIdentity identity_;
  const RunLog& log_;
  std::optional<runtime::CheckpointPosition> latest_;
};

// "epoch 2, step 5/16 (37 steps)" — where a checkpoint stands, for the log.
std::string describe(const runtime::CheckpointPosition& position);

}  // namespace pipevm::train
