// `pipevm check`: placeholder until its issue lands.
#include <iostream>

#include "commands.hpp"

namespace pipevm::cli {

Command add_check_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("check", "(not implemented yet)");
  command.run = [] {
    std::cerr << "pipevm check: not implemented yet\n";
    return 2;
  };
  return command;
}

}  // namespace pipevm::cli
