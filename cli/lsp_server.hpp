// `pipevm lsp`: a Language Server Protocol server for .pipe schedules. It
// speaks JSON-RPC 2.0 framed by Content-Length headers (LSP 3.17, "Base
// Protocol") over a pair of streams, normally stdin and stdout. On
// textDocument/didOpen and didChange (full text) it checks the document for
// its declared configurations (api/check_run.hpp) and publishes the findings as
// diagnostics, with UTF-16 columns and related information for the notes;
// on textDocument/hover over an instruction it answers with that
// instruction's row of docs/isa.md. Nothing else (no completion, no
// formatting, no incremental sync).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace pipevm::cli {

// Reads one framed message; nullopt at the end of the input or on a broken
// frame.
std::optional<std::string> read_lsp_message(std::istream& in);
// Writes one framed message and flushes.
void write_lsp_message(std::ostream& out, const nlohmann::json& message);

class LspServer {
 public:
  explicit LspServer(std::ostream& out) : out_(out) {}
  // Handles one message. False once the client has sent `exit`.
  bool handle(const nlohmann::json& message);
  // The exit status the protocol asks for: 0 after shutdown, else 1.
  int exit_status() const { return shutdown_ ? 0 : 1; }

 private:
  void reply(const nlohmann::json& id, nlohmann::json result);
  void reply_error(const nlohmann::json& id, int code, const std::string& message);
  void publish(const std::string& uri);
  // The hover of a position (0-based line, UTF-16 character) in an open document.
  nlohmann::json hover(const std::string& uri, int line, int character) const;

  std::ostream& out_;
  std::map<std::string, std::string> documents_;  // uri -> text
  bool shutdown_ = false;
};

// The server over stdin and stdout until `exit` or the end of the input.
int run_lsp_server(std::istream& in, std::ostream& out);

}  // namespace pipevm::cli
