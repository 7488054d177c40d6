// The steps of a run that train and end it (steps.hpp): rank 0's header,
// the epochs (a line each; Trainer::train_epoch runs their steps), the
// trace, profile and report, and the trained model's digest and file.
#include <chrono>
#include <cinttypes>

#include "layers.hpp"
#include "link_costs.hpp"
#include "run_outputs.hpp"
#include "safetensors.hpp"
#include "steps.hpp"

namespace pipevm::train {

// Rank 0's header: the run, the cut, the hosts, checkpoints and resuming.
void print_header(const RunState& run) {
  if (!run.root) return;
  const config::RunConfig& config = run.config;
  std::FILE* out = run.log.out();
  std::fprintf(
      out,
      "pipevm run: %s, %d stage(s) x %d dp, %d micro-batches of %d, model %s (%s), %s lr %g, "
      "data %s (%d train, %d test)\n",
      run.program->name.c_str(), run.stages, config.dp, config.micro_batches,
      run.trainer->machine().micro_batch_rows(), runtime::describe(config.model).c_str(),
      std::string(runtime::name(config.model.loss)).c_str(), config.optimizer.kind.c_str(),
      static_cast<double>(config.optimizer.lr), config.data.c_str(), run.data->train.samples,
      run.data->test.samples);
  std::fprintf(out, "pipevm run: GEMMs on %s; %s\n",
               runtime::products_backend(config.model).c_str(),
               describe_split(run.split, run.layer_costs, run.split_origin).c_str());
  for (const std::string& line : run.placement.lines) std::fprintf(out, "%s\n", line.c_str());
  for (const std::string& warning : run.placement.warnings) {
    run.log.warning(warning + " [" + std::string(code(DiagnosticKind::SharedCpu)) + "]");
  }
  if (run.checkpoints) {
    const std::string when = config.checkpoint_every > 0
                                 ? "every " + std::to_string(config.checkpoint_every) + " steps"
                                 : "after every epoch";
    std::fprintf(out, "checkpoints into %s %s\n", config.checkpoint.c_str(), when.c_str());
  }
  if (!run.request.resume.empty()) {
    std::fprintf(out, "resumed from %s at %s\n", run.request.resume.c_str(),
                 describe(run.trainer->position()).c_str());
  }
  std::fflush(out);
}

// The recorder of --trace and --profile (null without them). A message's
// cost: a blocking receive in the run mostly waits for its sender, so the
// profile times messages apart, before the first step.
std::unique_ptr<TraceRecorder> start_recording(RunState& run) {
  const RunRequest& request = run.request;
  if (request.trace.empty() && request.profile.empty()) return nullptr;
  auto recorder = std::make_unique<TraceRecorder>(run.trainer->steps_per_epoch() > 1 ? 1 : 0,
                                                  request.profile_steps);
  if (!request.profile.empty()) {
    recorder->set_measured_links(measure_links(*run.comm, run.placement.hosts,
                                               run.config.model.sizes, run.split,
                                               run.trainer->machine().micro_batch_rows()));
  }
  return recorder;
}

// The epochs, a line each on rank 0; a failure inside brings every rank down.
void train_epochs(RunState& run, TraceRecorder* recorder) {
  const config::RunConfig& config = run.config;
  Trainer& trainer = *run.trainer;
  ProgressBar bar(run.log.out(), run.root && run.request.progress);
  const auto start = std::chrono::steady_clock::now();
  const int first_epoch = trainer.position().epoch;
  try {
    for (int epoch = first_epoch; epoch < config.epochs; ++epoch) {
      const EpochReport report = trainer.train_epoch(
          epoch,
          [&](int done, int total) {
            bar.show(epoch + 1, config.epochs, done, total);
            if (run.checkpoints) run.checkpoints->after_step(trainer, *run.comm, done, total);
          },
          epoch == first_epoch ? recorder : nullptr);
      bar.clear();
      if (run.checkpoints) run.checkpoints->after_epoch(trainer, *run.comm);
      if (!run.root) continue;
      run.epochs.push_back(report);
      run.log.epoch(
          report, config.epochs,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  } catch (const VmError& error) {
    std::ostringstream message;
    print_text(message, to_diagnostic(error, *run.program, run.world_rank));
    run.comm->abort(message.str());
  } catch (const std::exception& error) {
    // Between steps: the epoch's report, a checkpoint.
    run.comm->abort("pipevm run: error: rank " + std::to_string(run.world_rank) + " at " +
                    describe(trainer.position()) + ": " + error.what());
  }
}

// World-wide (no rank may return before their collectives): the trace and
// profile, the report with every rank's memory peak; false when one fails.
bool write_recordings(RunState& run, TraceRecorder* recorder) {
  bool recorded = true;
  if (recorder != nullptr) {
    std::string error;
    recorded =
        recorder->write(*run.comm, *run.program, run.request.trace, run.request.profile, error);
    if (!recorded) run.log.error(error);
  }
  if (!run.request.report.empty()) {
    std::string error;
    if (!write_run_report(run.request.report, *run.comm, *run.program, run.trainer->machine(),
                          run.epochs, error)) {
      run.log.error(error);
      recorded = false;
    }
  }
  return recorded;
}

// The trained model: gossip's final average, the replicas compared, the
// digest and latest checkpoint printed, the weights saved.
int finish_model(RunState& run, bool recorded) {
  const config::RunConfig& config = run.config;
  Trainer& trainer = *run.trainer;
  if (run.program->topology) trainer.finish_gossip();
  const bool replicas_agree = trainer.replicas_agree();
  const std::vector<float> model = trainer.gather_parameters();
  if (!replicas_agree) {
    return run.everyone_fails(kExitFailed, "the data-parallel replicas hold different weights");
  }
  if (!run.root) return recorded ? 0 : kExitFailed;
  std::fprintf(run.log.out(), "model digest fnv1a64 %016" PRIx64 " (%zu parameters%s)\n",
               fnv1a(model), model.size(),
               config.dp > 1 ? ", data-parallel replicas identical" : "");
  if (run.checkpoints && run.checkpoints->latest()) {
    std::fprintf(run.log.out(), "latest checkpoint %s at %s\n",
                 run.checkpoints->directory().c_str(),
                 describe(*run.checkpoints->latest()).c_str());
  }
  if (!config.save.empty()) {
    try {
      if (config.model.kind == runtime::ModelKind::vit) {
        runtime::save_vit_model(config.save, config.model.vit, model);
      } else {
        runtime::save_model(config.save, config.model.sizes, model);
      }
      std::fprintf(run.log.out(), "saved %s\n", config.save.c_str());
    } catch (const std::exception& error) {
      run.log.error(error.what());
      return kExitFailed;
    }
  }
  return recorded ? 0 : kExitFailed;
}

}  // namespace pipevm::train
