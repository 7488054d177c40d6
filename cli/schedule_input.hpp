// Where expand and simulate get their Program: a .pipe schedule expanded
// for the configuration on the command line, or a PyTorch table (.csv,
// pytorch/torch_csv.hpp) that carries its own configuration.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "compile.hpp"

namespace pipevm::cli {

struct ProgramInput {
  std::optional<Program> program;
  int status = 0;  // when there is no program: 1 errors in it, 2 unreadable or usage
};

// `app` is the subcommand, asked which configuration options were given.
// Diagnostics go to `diagnostics`; usage errors are printed to stderr
// prefixed with "pipevm COMMAND: ".
ProgramInput load_program(const CLI::App& app, const std::string& path, const Config& config,
                          Diagnostics& diagnostics, const ExpandOptions& options = {});

}  // namespace pipevm::cli
