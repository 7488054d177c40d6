// The schedule's steps of a run (steps.hpp): compiled for the whole world,
// the model cut into its pieces, and the checker's proof before any rank
// starts.
#include <span>

#include "check.hpp"
#include "layer_costs.hpp"
#include "layer_times.hpp"
#include "steps.hpp"
#include "topology_file.hpp"

namespace pipevm::train {

// The schedule compiled for the whole world (the checker needs every
// rank's stream), and the model pieces it needs.
Stop compile_schedule(RunState& run) {
  Diagnostics& diagnostics = run.diagnostics;
  run.source = read_source(run.request.file, diagnostics);
  if (std::string error;
      !config::topology_option(run.request.topology, run.expand_options, error)) {
    return run.everyone_fails(kExitUsage, error);
  }
  run.expand_options.layer_widths = run.config.model.sizes;
  if (run.source) run.program = compile(run.source, run.shape, diagnostics, run.expand_options);
  if (!run.program || diagnostics.has_errors()) {
    run.print_diagnostics(diagnostics.all());
    return run.source ? kExitFailed : kExitUsage;
  }
  run.pieces = model_pieces(run.program->placement, run.shape);
  const int layers = runtime::layer_count(run.config.model.sizes);
  if (run.pieces > layers) {
    return run.everyone_fails(
        kExitUsage, "the schedule cuts the model into " + std::to_string(run.pieces) + " pieces (" +
                        std::to_string(run.stages) + " stages), more than the " +
                        std::to_string(layers) + " layer(s) of the model " +
                        runtime::describe(run.config.model));
  }
  return std::nullopt;
}

// The program's `cut` as the run's split, unless the run resumes (its
// checkpoint's cut wins); refused when it does not cover the model's layers.
Stop declared_cut(RunState& run) {
  const std::vector<LayerRange>& cut = run.program->cut;
  if (cut.empty() || !run.request.resume.empty()) return std::nullopt;
  const int layers = runtime::layer_count(run.config.model.sizes);
  if (cut.back().end != layers) {
    return run.everyone_fails(
        kExitUsage, "the program's cut " + cut_text(cut) + " covers " + std::to_string(cut.back().end) +
                        " layers, but the model " + runtime::describe(run.config.model) + " has " +
                        std::to_string(layers) + ": write a cut of layers 0-" + std::to_string(layers - 1) +
                        " (or remove the `cut` line to let run choose one); it does not start");
  }
  run.split = cut;
  run.split_origin = SplitOrigin::program;
  return std::nullopt;
}

// Where the model is cut: as the program's `cut` declares, else by each
// layer's time measured on rank 0 (every rank must cut it alike), or by
// multiply-adds; a resumed run where its checkpoint's run did. Every layer
// computes the same bits whatever the cut, so the trained weights do not
// depend on it. The schedule is compiled again when its `layer L`
// operands named another cut.
Stop cut_model(RunState& run) {
  const config::RunConfig& config = run.config;
  const int layers = runtime::layer_count(config.model.sizes);
  if (const Stop stop = declared_cut(run)) return stop;
  if (!run.request.resume.empty()) {
    run.split_origin = SplitOrigin::checkpoint;
    std::string resume_error;
    try {
      run.split = recorded_split(run.request.resume, layers);
      if (static_cast<int>(run.split.size()) != run.pieces) {
        resume_error = "--resume " + run.request.resume + ": the checkpoint's model is cut into " +
                       std::to_string(run.split.size()) + " pieces, this schedule needs " +
                       std::to_string(run.pieces);
      }
    } catch (const runtime::CheckpointError& error) {
      resume_error = error.what();
    }
    if (!run.session_agrees(resume_error)) return kExitUsage;
  }
  if (run.split.empty() && run.pieces > 1 && run.request.split == "measured") {
    run.layer_costs.assign(static_cast<std::size_t>(layers), 0.0);
    if (run.root) {
      const int rows = config.batch_size / (config.dp * config.micro_batches);
      run.layer_costs =
          runtime::measure_layer_costs(config.model, config.optimizer, rows, config.micro_batches);
    }
    run.session.broadcast_from_root(std::as_writable_bytes(std::span<double>(run.layer_costs)));
  }
  if (run.split.empty()) {
    run.split = runtime::split_layers(config.model.sizes, run.pieces, run.layer_costs);
  }
  if (run.program->layer_split != run.split) {
    // `layer L` operands and layer_begin/layer_end name the layers of this cut.
    run.expand_options.split = run.split;
    run.program = compile(run.source, run.shape, run.diagnostics, run.expand_options);
    if (!run.program) {
      run.print_diagnostics(run.diagnostics.all());
      return kExitFailed;
    }
  }
  return std::nullopt;
}

// The checker's proof, before any rank starts.
Stop check_schedule(RunState& run) {
  CheckOptions check_options;
  check_options.layer_widths = run.config.model.sizes;
  check_options.split = run.split;
  const CheckResult checked = check(*run.program, check_options);
  if (checked.ok()) return std::nullopt;
  run.print_diagnostics(checked.diagnostics);
  return run.everyone_fails(kExitFailed, "the schedule fails the checker for " +
                                             std::to_string(run.stages) + " stages x " +
                                             std::to_string(run.config.dp) + " dp, " +
                                             std::to_string(run.config.micro_batches) +
                                             " micro-batches; it does not start");
}

}  // namespace pipevm::train
