// What `pipevm run` writes besides its log and checkpoints, and when: every
// output is checked before anything long starts (check_outputs), and the
// report of the run's figures and memory is written at its end.
// Not here: the formats of the files (runtime/checkpoint.hpp,
// runtime/safetensors.hpp), checkpoints (checkpoints.hpp), the epoch loop
// (trainer.hpp).
#pragma once

#include <string>
#include <vector>

#include "comm.hpp"
#include "program.hpp"
#include "trainer.hpp"

namespace pipevm::train {

struct RunOutputs {
  std::string save;        // written by world rank 0
  std::string trace;       // written by world rank 0
  std::string profile;     // written by world rank 0
  std::string checkpoint;  // every rank writes its slices there
  std::string resume;      // every rank reads the slices it needs there
  std::string report;      // written by world rank 0
};

// What keeps this rank from writing its outputs, one line per problem
// ("--save PATH: reason"); empty when nothing does. World rank 0 checks
// --save, --trace, --profile and --report; every rank checks the checkpoint directory
// (creating it when missing), which must not hold a checkpoint unless the run
// resumes from it.
std::string check_outputs(const RunOutputs& outputs, bool root);

// World-wide: writes `path` on world rank 0, a JSON object with the
// schedule and its configuration, per epoch the training loss and accuracy,
// the test accuracy and the seconds of training, and per rank the peak of
// its buffers by category as the runtime's ledger counted them (the
// per_rank objects of `pipevm simulate --format json`, plus "total").
// False, with `error` set on rank 0, when the file cannot be written.
bool write_run_report(const std::string& path, runtime::Comm& comm, const Program& program,
                      const Machine& machine, const std::vector<EpochReport>& epochs,
                      std::string& error);

}  // namespace pipevm::train
