// `pipevm lsp`: starts the Language Server Protocol server (lsp_server.hpp)
// on stdin and stdout. Editors start it; docs/editors.md says how.
#include <iostream>

#include "commands.hpp"
#include "lsp_server.hpp"

namespace pipevm::cli {

Command add_lsp_command(CLI::App& root) {
  Command command;
  command.app =
      root.add_subcommand("lsp", "Language server for .pipe files over stdin/stdout (for editors)");
  command.app->footer(
      "Publishes pipevm check's diagnostics for each open schedule's declared\n"
      "configurations, and shows an instruction's docs/isa.md row on hover.\n"
      "Exit status: 0 on `exit` after `shutdown`; 1 on `exit` without it, or when the input\n"
      "ends without `exit` (the protocol's rule).");
  command.run = [] {
    std::ios::sync_with_stdio(false);
    return run_lsp_server(std::cin, std::cout);
  };
  return command;
}

}  // namespace pipevm::cli
