// The steps of a run (run.cpp calls them in order) and what they share: one
// RunState, which each step fills its part of. A step returns the exit
// status when the run must stop there (every rank returns it), else
// nullopt. Internal to pipevm::train; front doors call run() (run.hpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoints.hpp"
#include "compile.hpp"
#include "data.hpp"
#include "mpi_comm.hpp"
#include "program.hpp"
#include "run.hpp"
#include "run_config.hpp"
#include "run_log.hpp"
#include "trace_recorder.hpp"
#include "trainer.hpp"

namespace pipevm::train {

// Where the ranks run: the program rank this process plays (`rank`) and the
// host of every program rank.
struct Placement {
  int rank = 0;
  std::vector<std::string> hosts;     // by program rank
  std::vector<std::string> lines;     // what rank 0 prints; empty on one host
  std::vector<std::string> warnings;  // rank 0's: hosts of one machine bound to one CPU
};

// World-wide agreement after a step that may fail on some ranks: true when
// `error` is empty on every rank. Otherwise the failing ranks log their
// error (rank 0 alone when it failed too: the ranks then mostly share the
// cause) and every rank returns false. `all_ok` is the world's agreement.
bool agree(const std::function<bool(bool)>& all_ok, int rank, const std::string& error,
           const RunLog& log);

struct RunState {
  RunState(const RunRequest& run_request, runtime::MpiSession& mpi, int& rank,
           const RunLog& run_log)
      : request(run_request), session(mpi), world_rank(rank), root(rank == 0), log(run_log) {}

  const RunRequest& request;
  runtime::MpiSession& session;
  int& world_rank;  // the MPI rank, then the program rank once placed
  const bool root;  // rank 0 in both numberings
  const RunLog& log;

  config::RunConfig config;
  int stages = 1;
  Placement placement;
  Config shape;
  std::shared_ptr<const SourceFile> source;
  Diagnostics diagnostics;  // of both compilations: printed only when one fails
  ExpandOptions expand_options;
  std::optional<Program> program;
  int pieces = 1;
  std::vector<LayerRange> split;
  SplitOrigin split_origin = SplitOrigin::rule;
  std::vector<double> layer_costs;
  runtime::RunIdentity identity;
  std::optional<Resumed> resumed;
  std::unique_ptr<runtime::DataSplit> data;
  std::unique_ptr<runtime::MpiComm> comm;
  std::unique_ptr<Trainer> trainer;
  std::optional<Checkpoints> checkpoints;
  std::vector<EpochReport> epochs;  // rank 0's

  // For failures every rank meets alike: rank 0 says it, all return.
  int everyone_fails(int status, const std::string& message) const;
  bool session_agrees(const std::string& error) const;
  void print_diagnostics(const std::vector<Diagnostic>& found) const;
};

using Stop = std::optional<int>;

// configure.cpp: the configuration, the world, where the ranks run, and
// whether the outputs can be written.
Stop load_config(RunState& run);
Stop place_and_check_outputs(RunState& run);
// schedule_steps.cpp: the schedule compiled, the model cut, the proof.
Stop compile_schedule(RunState& run);
Stop cut_model(RunState& run);
Stop check_schedule(RunState& run);
// resume_steps.cpp: the checkpoint read, the data loaded, the trainer made.
Stop read_checkpoint(RunState& run);
Stop load_rank_data(RunState& run);
Stop resume_or_init(RunState& run);
// epoch_steps.cpp: the header, the epochs, the recordings, the model.
void print_header(const RunState& run);
std::unique_ptr<TraceRecorder> start_recording(RunState& run);
void train_epochs(RunState& run, TraceRecorder* recorder);
bool write_recordings(RunState& run, TraceRecorder* recorder);
int finish_model(RunState& run, bool recorded);

}  // namespace pipevm::train
