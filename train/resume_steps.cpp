// The steps of a run that make its trainer (steps.hpp): this rank's piece
// of the checkpoint read when resuming, the data loaded, the communicator
// and the trainer made, from the checkpoint's state when resuming.
// resume_or_init is where a run continues from a checkpoint.
#include <stdexcept>

#include "data.hpp"
#include "message_tags.hpp"
#include "steps.hpp"
#include "tensor.hpp"

namespace pipevm::train {

namespace {

// The data this rank needs, or the reason it cannot have it.
runtime::DataSplit load_data(const config::RunConfig& config, runtime::DataParts parts) {
  runtime::DataSplit data;
  if (config.data == "synthetic") {
    data = runtime::synthetic(config.synthetic_train, config.synthetic_test,
                              config.model.sizes.front(), config.model.sizes.back(),
                              config.model.seed + 1);
  } else {
    const std::string directory =
        config.data == "fashion-mnist" ? runtime::kFashionMnistDirectory : config.data;
    data = runtime::load_directory(directory, 0.15, parts);
  }
  if (data.train.features != config.model.sizes.front()) {
    throw std::runtime_error("the data has " + std::to_string(data.train.features) +
                             " features per sample, the model's input width is " +
                             std::to_string(config.model.sizes.front()));
  }
  if (data.train.classes > config.model.sizes.back()) {
    throw std::runtime_error("the data has " + std::to_string(data.train.classes) +
                             " classes, the model's output width is only " +
                             std::to_string(config.model.sizes.back()));
  }
  return data;
}

}  // namespace

// Resuming: every rank reads and checks its piece before the data loads.
Stop read_checkpoint(RunState& run) {
  run.identity = run_identity(run.config, *run.program, run.split);
  if (run.request.resume.empty()) return std::nullopt;
  std::string resume_error;
  try {
    run.resumed = read_resume(run.request.resume, run.identity, run.world_rank);
  } catch (const runtime::CheckpointError& error) {
    resume_error = error.what();
  }
  if (!run.session_agrees(resume_error)) return kExitUsage;
  const int done = run.resumed->position.epoch;
  if (done >= run.config.epochs) {
    return run.everyone_fails(
        kExitUsage, "checkpoint " + run.request.resume + " completed " + std::to_string(done) +
                        (done == 1 ? " epoch" : " epochs") + " and --epochs is " +
                        std::to_string(run.config.epochs) +
                        ": nothing to train; raise --epochs (e.g. --epochs " +
                        std::to_string(done + 1) + ") to continue");
  }
  return std::nullopt;
}

// Data: only ranks that load inputs or targets (and rank 0, which
// evaluates), and of it only what they read: the training pixels where
// inputs are loaded, the test set on rank 0.
Stop load_rank_data(RunState& run) {
  std::string data_error;
  if (run.root || needs_data(*run.program, run.world_rank)) {
    runtime::DataParts parts;
    parts.train_pixels = run.root || loads_inputs(*run.program, run.world_rank);
    parts.test = run.root;
    try {
      run.data = std::make_unique<runtime::DataSplit>(load_data(run.config, parts));
    } catch (const std::exception& error) {
      data_error = error.what();
    }
  }
  if (!run.session_agrees(data_error)) return kExitUsage;
  return std::nullopt;
}

// The communicator and the trainer, from the checkpoint's state when
// resuming, and the checkpoints to write.
Stop resume_or_init(RunState& run) {
  const config::RunConfig& config = run.config;
  runtime::tune_eigen_for_one_core();
  TrainingOptions options;
  options.machine.model = config.model;
  options.machine.optimizer = config.optimizer;
  options.machine.global_batch = config.batch_size;
  options.machine.split = run.split;
  options.shuffle_seed = config.seed;
  try {
    runtime::MpiCommOptions comm_options;
    comm_options.wait =
        run.request.wait == "spin" ? runtime::WaitMode::spin : runtime::WaitMode::sleep;
    comm_options.timeout_seconds = config.timeout;
    comm_options.rank = run.world_rank;
    comm_options.hosts = run.placement.hosts;
    run.comm = std::make_unique<runtime::MpiComm>(
        run.session, run.stages, MessageTags(run.program->placement, run.shape).max_tag(),
        comm_options);
    run.trainer = std::make_unique<Trainer>(*run.program, *run.comm, options, run.data.get());
  } catch (const std::exception& error) {
    return run.everyone_fails(kExitUsage, error.what());
  }
  if (run.resumed) {
    std::string resume_error;
    try {
      run.trainer->resume(run.resumed->piece, run.resumed->position);
    } catch (const std::invalid_argument& error) {
      resume_error = "--resume " + run.request.resume + ": " + error.what();
    }
    if (!agree([&](bool ok) { return run.comm->all_ok(ok); }, run.world_rank, resume_error,
               run.log)) {
      return kExitUsage;
    }
    run.resumed.reset();  // the piece's copy of the weights is no longer needed
  }
  if (!config.checkpoint.empty()) {
    run.checkpoints.emplace(config.checkpoint, config.checkpoint_every, run.identity, run.log);
  }
  return std::nullopt;
}

}  // namespace pipevm::train
