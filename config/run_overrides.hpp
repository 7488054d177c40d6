// Which value `pipevm run` takes when several say one: a flag, else the
// configuration file (`--config`), else the schedule's own declared
// configuration (its one `check` line: micro-batches, chunks, dp), else
// the defaults. The flags arrive as RunOverrides, each absent unless given;
// the command line binds its options to them (cli/run_command.cpp).
// Throws ConfigError, never prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "program.hpp"
#include "run_config.hpp"

namespace pipevm::config {

struct RunOverrides {
  std::optional<int> dp, micro_batches, batch_size, epochs, chunks, checkpoint_every;
  std::optional<float> lr;
  std::optional<std::string> optimizer, data, save, checkpoint, layout;
  std::optional<std::string> loss;   // cross-entropy or softmax-mse (parse_loss)
  std::optional<std::string> model;  // vit, mlp, or the MLP's widths "784,128,10"
  std::optional<std::uint64_t> seed;
  std::optional<double> timeout;
};

// The configuration of a run: `declared` (the schedule's, if it declares
// one), the YAML file at `config_file` (none when empty) and `flags` on
// top, in that order, validated for running. Throws ConfigError.
RunConfig resolve_run_config(const std::optional<Config>& declared, const std::string& config_file,
                             const RunOverrides& flags);

}  // namespace pipevm::config
