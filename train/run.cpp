// A run, top to bottom (run.hpp). train() is its steps, in order, over one
// RunState (steps.hpp):
//
//   configure.cpp       load_config              flags > YAML > the schedule's declared
//                                                configuration; the stages the world leaves
//                       place_and_check_outputs  which program rank this process plays
//                                                (--layout), every output writable
//   schedule_steps.cpp  compile_schedule         the schedule for the whole world
//                       cut_model                the layers of each piece (measured or flops)
//                       check_schedule           the checker's proof: a failing schedule
//                                                never starts
//   resume_steps.cpp    read_checkpoint          the manifest, when resuming
//                       load_rank_data           only what this rank reads
//                       resume_or_init           the communicator and the trainer, from the
//                                                checkpoint's slices when resuming
//   epoch_steps.cpp     print_header, start_recording, train_epochs, write_recordings,
//                       finish_model
//
// One training step, from there down: train_epochs calls Trainer::train_epoch
// (trainer.cpp), which sets each step's batch and calls Vm::run
// (interpreter/vm/vm.cpp); the VM executes the rank's stream instruction by
// instruction (VmStep::execute), each a call into the model's pieces
// (runtime/model.cpp) or the Comm. Outputs (--save, --trace, --profile, the
// checkpoint directory) are checked before the schedule is compiled or data
// loaded. Which MPI process plays which program rank is --layout's choice
// (config/rank_layout.hpp): from place_and_check_outputs on, `world_rank` is
// the program rank.
#include "run.hpp"

#include <sstream>

#include "steps.hpp"

namespace pipevm::train {

namespace {

int train(const RunRequest& request, runtime::MpiSession& session, int& world_rank,
          const RunLog& log) {
  RunState run(request, session, world_rank, log);
  for (Stop (*step)(RunState&) :
       {load_config, place_and_check_outputs, compile_schedule, cut_model, check_schedule,
        read_checkpoint, load_rank_data, resume_or_init}) {
    if (const Stop stop = step(run)) return *stop;
  }
  print_header(run);
  const std::unique_ptr<TraceRecorder> recorder = start_recording(run);
  train_epochs(run, recorder.get());
  const bool recorded = write_recordings(run, recorder.get());
  return finish_model(run, recorded);
}

}  // namespace

int run(const RunRequest& request, const RunLog& log) {
  runtime::MpiSession session(nullptr, nullptr);
  int rank = session.world_rank();  // the program rank, once placed
  try {
    return train(request, session, rank, log);
  } catch (const runtime::CommError& error) {
    // Outside the VM: at start-up, between steps (the epoch's report, a
    // checkpoint) or at the end. Inside it, train_epochs aborts with the
    // instruction's place.
    const bool timeout = dynamic_cast<const runtime::CommTimeout*>(&error) != nullptr;
    runtime::MpiSession::abort(
        "pipevm run: error: rank " + std::to_string(rank) + ": " + error.what(),
        timeout ? runtime::MpiSession::kWatchdogGraceSeconds : 0.0);
  }
}

bool agree(const std::function<bool(bool)>& all_ok, int rank, const std::string& error,
           const RunLog& log) {
  const bool root_ok = all_ok(rank != 0 || error.empty());
  if (all_ok(error.empty())) return true;
  if (!error.empty() && (rank == 0 || root_ok)) {
    std::istringstream lines(error);
    for (std::string line; std::getline(lines, line);) {
      log.error((rank == 0 ? "" : "rank " + std::to_string(rank) + ": ") + line);
    }
  }
  return false;
}

int RunState::everyone_fails(int status, const std::string& message) const {
  if (root) log.error(message);
  return status;
}

bool RunState::session_agrees(const std::string& error) const {
  return agree([&](bool ok) { return session.all_ok(ok); }, world_rank, error, log);
}

void RunState::print_diagnostics(const std::vector<Diagnostic>& found) const {
  if (root) log.diagnostics(found);
}

}  // namespace pipevm::train
