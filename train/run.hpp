// `pipevm run FILE` as a library call: train a model with a schedule on the
// MPI ranks mpiexec started. Every rank reads the configuration, compiles
// the schedule for the whole world and checks it; what depends only on the
// request and files fails the same way on every rank, so rank 0 says it
// once and all ranks return. A failure during training (one rank only)
// names its position in the schedule, then MPI_Abort brings every rank
// down: never a hang. A wait that makes no progress for --timeout seconds
// (the watchdog, runtime/mpi_comm.hpp) is such a failure.
//
// The run writes its log (a header, a line per epoch, a progress bar, the
// model digest) on rank 0, and its errors, to the streams of the RunLog
// the front door gives (cli/ gives stdout and stderr). Not here: the
// command line (cli/run_command.cpp), the steps (run.cpp lists them in
// order).
#pragma once

#include <string>

#include "run_log.hpp"
#include "run_overrides.hpp"

namespace pipevm::train {

// Exit codes: 0 trained, 1 the schedule or the training failed, 2 bad
// configuration, flags or input files.
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

struct RunRequest {
  std::string file;                // the schedule (.pipe)
  std::string config_file;         // a `pipevm run` YAML file; empty: none
  config::RunOverrides overrides;  // the flags that were given, over the file
  std::string resume;              // a checkpoint directory to continue from
  ProgressStyle progress = ProgressStyle::bar;  // cli/ chooses by the output (run_log.hpp)
  std::string wait = "spin";       // how MPI waits: spin or sleep
  std::string split = "measured";  // how the model is cut into pieces: measured or flops
  std::string trace;               // Chrome trace of one step of the first epoch
  std::string profile;             // measured costs for `pipevm simulate --costs`
  int profile_steps = 20;          // training steps --trace and --profile record
  std::string report;              // JSON: per-epoch figures and per-rank memory
  std::string topology;            // gossip: a built-in name or FILE.yaml
};

// Every rank calls it; the exit status, the same on every rank that returns.
int run(const RunRequest& request, const RunLog& log);

}  // namespace pipevm::train
