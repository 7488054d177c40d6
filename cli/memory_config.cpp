// `--config` for check and simulate: the run configuration's model, as bytes.
#include "memory_config.hpp"

namespace pipevm::cli {

void add_memory_config_option(CLI::App& app, std::string& path) {
  app.add_option("--config", path,
                 "A `pipevm run` YAML file: the model (sizes, element_bytes, bias) whose layers "
                 "`layer L` operands name, the batch size and optimizer that the memory figures "
                 "(per_rank[].peak_bytes) count, the costs of simulate and the message and "
                 "all-reduce bytes of simulate --hosts")
      ->check(CLI::ExistingFile);
}

RunConfig read_memory_config(const std::string& path) {
  RunConfig run;
  if (!path.empty()) {
    apply_yaml_file(path, run);
    validate(run, ConfigUse::figures);
  }
  return run;
}

api::ModelBytes model_bytes(const RunConfig& run) {
  api::ModelBytes model;
  model.layer_widths = run.model.sizes;
  model.element_bytes = run.element_bytes;
  model.bias = run.bias;
  model.batch_size = run.batch_size;
  if (run.optimizer.kind == "adam") {
    model.optimizer_states = 2;
  } else {
    model.optimizer_states = run.optimizer.momentum != 0.0F ? 1 : 0;
  }
  if (run.model.kind == runtime::ModelKind::vit) {
    for (int unit = 0; unit < run.model.vit.blocks; ++unit) {
      model.layer_parameter_counts.push_back(
          runtime::vit_unit_parameter_count(run.model.vit, unit));
      const runtime::VitStashSizes stash = runtime::vit_stash_sizes(run.model.vit, unit);
      model.layer_stashes.push_back({stash.forward_for_input, stash.forward_for_weight,
                                     stash.gradients_for_weight, stash.layernorm_gradients});
    }
  }
  return model;
}

void expand_for_model(const RunConfig& run, ExpandOptions& options) {
  options.layer_widths = run.model.sizes;
}

}  // namespace pipevm::cli
