// `pipevm run`: placeholder until its issue lands.
#include <iostream>

#include "commands.hpp"

namespace pipevm::cli {

Command add_run_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("run", "(not implemented yet)");
  command.run = [] {
    std::cerr << "pipevm run: not implemented yet\n";
    return 2;
  };
  return command;
}

}  // namespace pipevm::cli
