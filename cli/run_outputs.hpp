// What `pipevm run` writes besides its log, and when: every output is
// checked before anything long starts (check_outputs), a resumed run reads
// and checks its checkpoint (read_resume), and Checkpoints writes one every
// epoch or every N steps during training.
// Not here: the formats of the files (runtime/checkpoint.hpp,
// runtime/safetensors.hpp), the epoch loop (train/trainer.hpp).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "model.hpp"
#include "program.hpp"
#include "run_config.hpp"
#include "trainer.hpp"

namespace pipevm::cli {

struct RunOutputs {
  std::string save;        // written by world rank 0
  std::string trace;       // written by world rank 0
  std::string profile;     // written by world rank 0
  std::string checkpoint;  // every rank writes its piece there
  std::string resume;      // every rank reads its piece there
  std::string report;      // written by world rank 0
};

// What keeps this rank from writing its outputs, one line per problem
// ("--save PATH: reason"); empty when nothing does. World rank 0 checks
// --save, --trace, --profile and --report; every rank checks the checkpoint directory
// (creating it when missing), which must not hold a checkpoint unless the run
// resumes from it.
std::string check_outputs(const RunOutputs& outputs, bool root);

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
// epochs). A checkpoint that fails is a warning; training goes on and the
// previous checkpoint stays the latest.
class Checkpoints {
 public:
  Checkpoints(std::string directory, int every_steps, runtime::RunIdentity identity)
      : directory_(std::move(directory)),
        every_steps_(every_steps),
        identity_(std::move(identity)) {}

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
  std::optional<runtime::CheckpointPosition> latest_;
};

// World-wide: writes `path` on world rank 0, a JSON object with the
// schedule and its configuration, per epoch the training loss and accuracy,
// the test accuracy and the seconds of training, and per rank the peak of
// its buffers by category as the runtime's ledger counted them (the
// per_rank objects of `pipevm simulate --format json`, plus "total").
// False, with `error` set on rank 0, when the file cannot be written.
bool write_run_report(const std::string& path, runtime::Comm& comm, const Program& program,
                      const Machine& machine, const std::vector<EpochReport>& epochs,
                      std::string& error);

// "epoch 2, step 5/16 (37 steps)" — where a checkpoint stands, for the log.
std::string describe(const runtime::CheckpointPosition& position);

}  // namespace pipevm::cli
