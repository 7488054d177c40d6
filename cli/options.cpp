// The shared configuration options.
#include "options.hpp"

namespace pipevm::cli {

void add_config_options(CLI::App& app, Config& config, bool required) {
  app.add_option("--stages,-p", config.stages, "Pipeline stages P (ranks per pipeline)")
      ->check(CLI::Range(1, kMaxStages))
      ->required(required);
  app.add_option("--micro-batches,-m", config.micro_batches, "Micro-batches M per step")
      ->check(CLI::Range(1, 1 << 30))
      ->required(required);
  app.add_option("--dp", config.dp, "Data-parallel replicas D (world = D * P ranks)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--chunks,-v", config.chunks, "Model chunks per rank V")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
}

}  // namespace pipevm::cli
