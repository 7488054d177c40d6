// pipevm: the command line. `pipevm FILE` is `pipevm run FILE`.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "version.hpp"

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
    args.insert(args.begin(), "run");
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments back to front

  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // Under mpiexec every rank parses the same words: rank 0 alone says what is wrong.
    const char* mpi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (mpi_rank != nullptr && std::string_view(mpi_rank) != "0") {
      return e.get_exit_code() == 0 ? 0 : 2;
    }
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
