// pipevm: the command line. `pipevm FILE` is `pipevm run FILE`.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "nearest_name.hpp"
#include "version.hpp"

namespace {

// Under mpiexec every rank parses the same words: rank 0 alone says what is wrong.
bool is_mpi_rank_zero() {
  const char* mpi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return mpi_rank == nullptr || std::string_view(mpi_rank) == "0";
}

// `pipevm WORD` where WORD is no command: it is `pipevm run WORD` when WORD is
// a file, or a path that names one; a bare word close to a command's name is
// a misspelt command, and a bare word that names nothing is neither.
std::optional<std::string> unknown_command(const std::string& word,
                                           const std::vector<pipevm::cli::Command>& commands) {
  std::error_code error;
  if (std::filesystem::exists(word, error)) return std::nullopt;
  std::vector<std::string_view> names;
  std::string listed;
  for (const pipevm::cli::Command& command : commands) {
    names.push_back(command.app->get_name());
    listed += (listed.empty() ? "" : ", ") + command.app->get_name();
  }
  const std::string_view nearest = pipevm::nearest_name(word, names);
  if (!nearest.empty()) {
    return "pipevm: unknown command '" + word + "'; did you mean '" + std::string(nearest) + "'?";
  }
  if (word.find('/') != std::string::npos || word.find('.') != std::string::npos)
    return std::nullopt;
  return "pipevm: '" + word + "' is neither a command (" + listed +
         ") nor a schedule file; see pipevm --help";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pipevm::cli;
  CLI::App app{
      "pipevm: pipeline-parallel training schedules as programs.\n"
      "Write a schedule as text, prove it free of deadlock, simulate it, train with it.\n"
      "  pipevm expand schedules/gpipe.pipe --stages 4 --micro-batches 8\n"
      "  pipevm check schedules/1f1b.pipe --stages 8 --micro-batches 16\n"
      "  pipevm simulate schedules/1f1b.pipe --stages 4 --micro-batches 8\n"
      "  mpirun -n 4 pipevm schedules/gpipe.pipe   (= pipevm run ...)",
      "pipevm"};
  app.set_version_flag("--version", "pipevm " + std::string(pipevm::project_version()) + " (commit " +
                                        std::string(pipevm::source_commit()) + ")");
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  const std::vector<Command> commands = {add_expand_command(app), add_check_command(app),
                                         add_simulate_command(app), add_synthesize_command(app), add_costs_command(app),
                                         add_run_command(app),
                                         add_lsp_command(app)};

  // `pipevm FILE ...` runs the file: insert the `run` subcommand.
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto is_command = [&](const std::string& word) {
    return std::any_of(commands.begin(), commands.end(),
                       [&](const Command& c) { return c.app->get_name() == word; });
  };
  if (!args.empty() && !args.front().empty() && args.front().front() != '-' &&
      !is_command(args.front())) {
    if (const std::optional<std::string> refusal = unknown_command(args.front(), commands)) {
      if (is_mpi_rank_zero()) std::cerr << *refusal << "\n";
      return 2;
    }
    args.insert(args.begin(), "run");
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments back to front

  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (!is_mpi_rank_zero()) return e.get_exit_code() == 0 ? 0 : 2;
    const std::vector<std::string> typed(argv + 1, argv + argc);
    if (e.get_exit_code() != 0 && !typed.empty() && typed.front() == "check") {
      print_check_usage_error(typed, e.what());
    }
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  std::cout << app.help();
  return 2;
}
