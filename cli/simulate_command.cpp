// `pipevm simulate`: placeholder until its issue lands.
#include <iostream>

#include "commands.hpp"

namespace pipevm::cli {

Command add_simulate_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("simulate", "(not implemented yet)");
  command.run = [] {
    std::cerr << "pipevm simulate: not implemented yet\n";
    return 2;
  };
  return command;
}

}  // namespace pipevm::cli
