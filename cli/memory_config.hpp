// The model whose bytes `check` and `simulate` count: the same `--config`
// YAML as `pipevm run` (model sizes and element size, batch size, optimizer),
// read into the library's ModelBytes (api/model_bytes.hpp). Without a file,
// the defaults of `pipevm run`. Not here: the stages, micro-batches and replicas,
// which stay flags of check and simulate.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "compile.hpp"
#include "model_bytes.hpp"
#include "program.hpp"
#include "run_config.hpp"

namespace pipevm::cli {

// Adds `--config FILE` to `app`, writing the path into `path`.
void add_memory_config_option(CLI::App& app, std::string& path);

// The run configuration of `path` (defaults when empty). Throws ConfigError.
RunConfig read_memory_config(const std::string& path);

// What of `run` the memory figures count.
api::ModelBytes model_bytes(const RunConfig& run);

// Expansion of the configuration's model: its layer widths give the
// built-in names layers, layer_begin and layer_end.
void expand_for_model(const RunConfig& run, ExpandOptions& options);

}  // namespace pipevm::cli
