// The shared configuration options.
#include "options.hpp"

#include "number_checks.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace pipevm::cli {

void add_config_options(CLI::App& app, Config& config, bool required) {
  app.add_option("--stages,-p", config.stages, "Pipeline stages P (ranks per pipeline)")
      ->check(in_range(1, kMaxStages))
      ->required(required);
  app.add_option("--micro-batches,-m", config.micro_batches, "Micro-batches M per step")
      ->check(in_range(1, kMaxMicroBatches))
      ->required(required);
  app.add_option("--dp", config.dp, "Data-parallel replicas D (world = D * P ranks)")
      ->check(in_range(1, kMaxDp))
      ->capture_default_str();
  app.add_option("--chunks,-v", config.chunks, "Model chunks per rank V")
      ->check(in_range(1, kMaxChunks))
      ->capture_default_str();
}

void add_memory_config_option(CLI::App& app, std::string& path) {
  app.add_option("--config", path,
                 "A `pipevm run` YAML file: the model (sizes, element_bytes, bias) whose layers "
                 "`layer L` operands name, the batch size and optimizer that the memory figures "
                 "(per_rank[].peak_bytes) count, the costs of simulate and the message and "
                 "all-reduce bytes of simulate --hosts")
      ->check(CLI::ExistingFile);
}

api::ConfigRequest config_request(const CLI::App& app, const Config& config) {
  api::ConfigRequest request;
  if (app.count("--stages") > 0) request.stages = config.stages;
  if (app.count("--micro-batches") > 0) request.micro_batches = config.micro_batches;
  if (app.count("--dp") > 0) request.dp = config.dp;
  if (app.count("--chunks") > 0) request.chunks = config.chunks;
  return request;
}

bool can_write(const std::string& path, std::string& error) {
  std::error_code ignored;
  const bool existed = std::filesystem::exists(path, ignored);
  errno = 0;
  std::ofstream probe(path, std::ios::app);
  if (probe) {
    probe.close();
    if (!existed) std::filesystem::remove(path, ignored);
    return true;
  }
  error = "cannot write " + path + (errno != 0 ? ": " + std::string(std::strerror(errno)) : "");
  return false;
}

api::ProgramInput load_program(const CLI::App& app, const std::string& path, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options) {
  api::ProgramInput input =
      api::load_program(path, config_request(app, config), diagnostics, options);
  if (!input.usage_error.empty()) {
    std::cerr << "pipevm " << app.get_name() << ": " << input.usage_error << '\n';
  }
  return input;
}

}  // namespace pipevm::cli
