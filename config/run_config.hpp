// The configuration of `pipevm run`: defaults, a YAML file (`--config`) on
// top, command-line flags on top of that. The YAML has five sections, every
// key optional, unknown keys an error:
//
//   model:    {kind: mlp | vit, sizes: [784, 128, ..., 10] (the MLP's),
//              image_side: 28, patch: 7, width: 64, blocks: 4, heads: 4, hidden: 256
//              (the ViT's), loss: cross-entropy | softmax-mse, seed: 0,
//              element_bytes: 4, bias: true (these two: memory figures of check and
//              simulate only; run computes in float with biases)}
//   data:     {source: fashion-mnist | synthetic | DIR, synthetic_train: N, synthetic_test: N}
//   training: {epochs, batch_size, micro_batches, optimizer: adam | sgd, lr, momentum, seed}
//   parallel: {dp, chunks, layout: mpi | pp-inner | dp-inner, timeout: SECONDS}
//   checkpoint: {directory: DIR, every_steps: N}   (0: every epoch)
//   costs:    {fwd: 1, allreduce: 0.3, ...}  (simulate's cost keys; run ignores them)
//
// Functions throw ConfigError; none prints. Not here: which of flags, file
// and schedule wins (run_overrides.hpp), validation against the world size
// or the schedule (train/), what the memory figures take of it
// (model_bytes.hpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_config.hpp"

namespace pipevm::config {

// A configuration file that cannot be used; the message names file:line:col.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One key of the `costs` section, checked where costs are composed (cost_inputs.hpp).
struct CostSetting {
  std::string key;
  double value = 0;
  std::string where;  // file:line:col, for messages
};

struct RunConfig {
  ModelConfig model;
  int element_bytes = 4;  // bytes per number in memory figures; the runtime computes in float
  bool bias = true;       // layers with biases; memory figures only (run needs them)
  std::vector<CostSetting> costs;      // the `costs` section, in file order
  std::string data = "fashion-mnist";  // fashion-mnist, synthetic, or a directory of IDX files
  int synthetic_train = 4096;
  int synthetic_test = 1024;
  int epochs = 5;  // the default run reaches ~86% test accuracy on Fashion-MNIST
  int batch_size = 128;
  int micro_batches = 4;
  OptimizerConfig optimizer;  // Adam, lr 1e-3
  std::uint64_t seed = 0;     // shuffling of the training set
  int dp = 1;
  int chunks = 1;
  std::string layout = "mpi";  // which dimension stays inside a host (rank_layout.hpp)
  double timeout = 300.0;      // the watchdog: seconds a wait may last; 0: for ever
  std::string save;            // --save FILE.safetensors
  std::string checkpoint;      // a directory: checkpoints are written there
  int checkpoint_every = 0;    // steps between checkpoints; 0: after every epoch
};

// Applies the YAML file at `path` onto `config`. Throws ConfigError.
void apply_yaml_file(const std::string& path, RunConfig& config);
// Same, from text (`name` appears in messages).
void apply_yaml_text(const std::string& text, const std::string& name, RunConfig& config);

// A loss given as cross-entropy, cross_entropy, softmax-mse or softmax_mse.
Loss parse_loss(const std::string& text);

// Makes `model` the MLP (its widths stay, or return to the default after a
// ViT) or the ViT of model.vit's sizes. Throws ConfigError for another kind
// or sizes that make no ViT.
void set_model_kind(const std::string& kind, ModelConfig& model);
// Layer widths written as on the command line, input first: "784,256,10".
// Throws ConfigError naming the bad part.
std::vector<int> parse_widths(const std::string& text);

// What a configuration is read for: running, or counting the memory and
// time of check and simulate (which take models run cannot train: wider
// outputs, no biases).
enum class ConfigUse { run, figures };

// Throws ConfigError when a value is out of its range (sizes, counts, lr...).
void validate(const RunConfig& config, ConfigUse use = ConfigUse::run);

// The defaults with the YAML file at `path` on top (the defaults alone when
// `path` is empty), validated for `use`. Throws ConfigError.
RunConfig read_run_config(const std::string& path, ConfigUse use);
// The same from text (`name` appears in messages).
RunConfig read_run_config_text(const std::string& text, const std::string& name, ConfigUse use);

}  // namespace pipevm::config
