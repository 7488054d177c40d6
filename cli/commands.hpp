// The subcommands of the pipevm executable. Each adds itself to the root
// CLI11 app and returns the function to run when it was chosen; that function
// returns the process exit code (0 ok, 1 findings or program errors,
// 2 unreadable input or usage).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace pipevm::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_expand_command(CLI::App& root);
Command add_check_command(CLI::App& root);
Command add_simulate_command(CLI::App& root);
Command add_synthesize_command(CLI::App& root);
Command add_costs_command(CLI::App& root);
Command add_run_command(CLI::App& root);
Command add_lsp_command(CLI::App& root);

// When `pipevm check --format json|sarif` fails on its arguments, prints the
// machine-readable error on stdout and returns true (`arguments` as typed).
bool print_check_usage_error(const std::vector<std::string>& arguments, const std::string& message);

}  // namespace pipevm::cli
