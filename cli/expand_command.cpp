// `pipevm expand`: placeholder until the front end lands.
#include <iostream>

#include "commands.hpp"

namespace pipevm::cli {

Command add_expand_command(CLI::App& root) {
  Command command;
  command.app = root.add_subcommand("expand", "(not implemented yet)");
  command.run = [] {
    std::cerr << "pipevm expand: not implemented yet\n";
    return 2;
  };
  return command;
}

}  // namespace pipevm::cli
