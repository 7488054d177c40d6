// The steps of a run that make its trainer (steps.hpp): the checkpoint's
// manifest read when resuming, the data loaded, the communicator
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

// Resuming: every rank reads and checks the manifest before the data loads
// (the slices it needs are read once its trainer says which they are).
Stop read_checkpoint(RunState& run) {
  run.record = run_record(run.config, *run.program, run.split, run.placement.hosts);
  if (run.request.resume.empty()) return std::nullopt;
  std::string resume_error;
  try {
    run.resumed_from = read_resume(run.request.resume, run.record.made_for);
  } catch (const runtime::CheckpointError& error) {
    resume_error = error.what();
  }
  if (!run.session_agrees(resume_error)) return kExitUsage;
  const int done = run.resumed_from->position.epoch;
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
// resuming (the slices of the layers this rank holds, whatever layout
// wrote them), and the checkpoints to write.
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
  if (run.resumed_from) {
    std::string resume_error;
    try {
      const Resumed mine = read_rank_state(run.request.resume, *run.resumed_from, *run.trainer,
                                           run.world_rank, run.comm->world_size());
      run.trainer->resume(mine.slices, run.resumed_from->position, mine.sums);
    } catch (const runtime::CheckpointError& error) {
      resume_error = error.what();
    } catch (const std::invalid_argument& error) {
      resume_error = "--resume " + run.request.resume + ": " + error.what();
    }
    if (!agree([&](bool ok) { return run.comm->all_ok(ok); }, run.world_rank, resume_error,
               run.log)) {
      return kExitUsage;
    }
  }
  if (!config.checkpoint.empty() && run.program->topology) {
    return run.everyone_fails(kExitUsage,
                              "--checkpoint " + config.checkpoint +
                                  ": a gossip schedule's replicas hold different weights, which "
                                  "a checkpoint (one copy of each layer) cannot keep");
  }
  if (!config.checkpoint.empty()) {
    run.checkpoints.emplace(config.checkpoint, config.checkpoint_every, run.record, run.log);
  }
  return std::nullopt;
}

}  // namespace pipevm::train
