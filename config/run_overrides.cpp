// The precedence of a run's configuration (run_overrides.hpp).
#include "run_overrides.hpp"

namespace pipevm::config {

namespace {

template <typename T>
void take(const std::optional<T>& flag, T& value) {
  if (flag) value = *flag;
}

// --model: a kind's name, or the MLP's widths.
void apply_model_flag(const std::string& text, ModelConfig& model) {
  if (model_kind_from_name(text)) {
    set_model_kind(text, model);
    return;
  }
  set_model_kind("mlp", model);
  model.sizes = parse_widths(text);
}

}  // namespace

RunConfig resolve_run_config(const std::optional<Config>& declared, const std::string& config_file,
                             const RunOverrides& flags) {
  RunConfig config;
  if (declared) {
    config.micro_batches = declared->micro_batches;
    config.chunks = declared->chunks;
    config.dp = declared->dp;
  }
  if (!config_file.empty()) apply_yaml_file(config_file, config);
  take(flags.dp, config.dp);
  take(flags.micro_batches, config.micro_batches);
  take(flags.batch_size, config.batch_size);
  take(flags.epochs, config.epochs);
  take(flags.lr, config.optimizer.lr);
  take(flags.optimizer, config.optimizer.kind);
  take(flags.seed, config.seed);
  take(flags.data, config.data);
  take(flags.chunks, config.chunks);
  if (flags.loss) config.model.loss = parse_loss(*flags.loss);
  if (flags.model) apply_model_flag(*flags.model, config.model);
  take(flags.save, config.save);
  take(flags.checkpoint, config.checkpoint);
  take(flags.checkpoint_every, config.checkpoint_every);
  take(flags.layout, config.layout);
  take(flags.timeout, config.timeout);
  if (flags.checkpoint_every && config.checkpoint.empty()) {
    throw ConfigError(
        "--checkpoint-every needs a directory (--checkpoint DIR, or "
        "checkpoint.directory in the configuration)");
  }
  validate(config);
  return config;
}

}  // namespace pipevm::config
