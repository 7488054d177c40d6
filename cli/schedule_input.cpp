// Reading a schedule for expand and simulate, by its file's kind.
#include "schedule_input.hpp"

#include <iostream>

#include "torch_csv.hpp"

namespace pipevm::cli {

ProgramInput load_program(const CLI::App& app, const std::string& path, const Config& config,
                          Diagnostics& diagnostics, const ExpandOptions& options) {
  ProgramInput input;
  const bool csv = pytorch::is_csv_path(path);
  const bool named = app.count("--stages") + app.count("--micro-batches") + app.count("--dp") +
                         app.count("--chunks") >
                     0;
  if (csv && named) {
    std::cerr << "pipevm " << app.get_name()
              << ": a PyTorch table (.csv) gives its own stages, micro-batches and chunks: drop "
                 "--stages, --micro-batches, --dp and --chunks\n";
    input.status = 2;
    return input;
  }
  const auto file = read_source(path, diagnostics);
  if (!file) {
    input.status = 2;
    return input;
  }
  if (csv) {
    input.program = pytorch::load_csv(file, diagnostics);
    if (!input.program) input.status = 1;
    return input;
  }
  const auto schedule = parse(file, diagnostics);
  if (!schedule) {
    input.status = 1;
    return input;
  }
  Config chosen = config;
  if (app.count("--stages") == 0 || app.count("--micro-batches") == 0) {
    // Without them, the one configuration the schedule declares.
    const std::optional<Config> declared = declared_configuration(*schedule);
    if (!declared || named) {
      std::cerr << "pipevm " << app.get_name()
                << ": --stages and --micro-batches are required for a .pipe schedule that does "
                   "not declare exactly one configuration (`check stages N micro_batches M`)\n";
      input.status = 2;
      return input;
    }
    chosen = *declared;
  }
  input.program = expand(*schedule, chosen, diagnostics, options);
  if (!input.program) input.status = 1;
  return input;
}

std::optional<Config> declared_configuration_of(const std::string& path) {
  Diagnostics ignored;
  const auto file = read_source(path, ignored);
  if (!file) return std::nullopt;
  const auto schedule = parse(file, ignored);
  if (!schedule) return std::nullopt;
  return declared_configuration(*schedule);
}

}  // namespace pipevm::cli
