// Where expand and simulate get their Program: a .pipe schedule expanded
// for the configuration on the command line (or the one it declares, which
// run reads too), or a PyTorch table (.csv, pytorch/torch_csv.hpp) that
// carries its own configuration.
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

// The one configuration a .pipe schedule declares (`check stages N
// micro_batches M ...`, compile.hpp's declared_configuration); empty when
// the file declares none or several, or cannot be read or parsed.
std::optional<Config> declared_configuration_of(const std::string& path);

}  // namespace pipevm::cli
