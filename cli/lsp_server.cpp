// The LSP server's framing and message handling (lsp_server.hpp).
#include "lsp_server.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <istream>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>

#include "check_output.hpp"
#include "check_run.hpp"
#include "check_sarif.hpp"
#include "isa_doc.hpp"
#include "read_file.hpp"
#include "version.hpp"


namespace pipevm::cli {

namespace {

// JSON-RPC error codes (LSP 3.17).
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidRequest = -32600;
constexpr int kInvalidParams = -32602;

// A frame longer than this is refused as broken: a document is at most a
// schedule's size limit, and the margin is for JSON's escapes.
constexpr std::size_t kMaxMessageBytes = 4 * kMaxScheduleBytes;

// file:///a/b%20c.pipe -> /a/b c.pipe; other URIs as they are.
std::string path_of(const std::string& uri) {
  if (uri.rfind("file://", 0) != 0) return uri;
  std::string out;
  for (std::size_t i = 7; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      out += static_cast<char>(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out;
}

nlohmann::json position(const SourceFile& file, std::uint32_t offset) {
  const LineColumn p = file.position(offset, ColumnUnit::utf16);
  return {{"line", p.line - 1}, {"character", p.column - 1}};
}

nlohmann::json range(const Location& location) {
  const SourceFile& file = *location.file;
  const std::uint32_t end = std::max(location.range.end, location.range.begin);
  return {{"start", position(file, location.range.begin)}, {"end", position(file, end)}};
}

// The byte offset of an LSP position (UTF-16 character on a 0-based line).
std::size_t offset_of(const std::string& text, int line, int character) {
  std::size_t i = 0;
  for (int l = 0; l < line && i < text.size(); ++i) {
    if (text[i] == '\n') ++l;
  }
  for (int units = 0; units < character && i < text.size() && text[i] != '\n';) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80    ? 1
                               : lead >= 0xF0 ? 4
                               : lead >= 0xE0 ? 3
                               : lead >= 0xC0 ? 2
                                              : 1;
    units += length == 4 ? 2 : 1;
    i += length;
  }
  return std::min(i, text.size());
}

// A Position's line or character: LSP's uinteger, within int here;
// nullopt for anything else (a float such as 1e300, a negative number).
std::optional<int> position_part(const nlohmann::json& position, const char* key) {
  const nlohmann::json& value = position.at(key);
  if (!value.is_number_unsigned() ||
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  return value.get<int>();
}

std::string isa_row(const std::string& opcode) {
  static const std::string doc = isa_markdown();
  const std::string start = "| `" + opcode;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(start, 0) == 0 && line.size() > start.size() &&
        (line[start.size()] == ' ' || line[start.size()] == '`')) {
      return line;
    }
  }
  return "";
}

}  // namespace

std::optional<std::string> read_lsp_message(std::istream& in) {
  std::size_t length = 0;
  bool has_length = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (!has_length) return std::nullopt;
      // Read as it comes: a header that promises more than the input holds
      // costs no more memory than the input.
      std::string body;
      char chunk[1 << 16];
      while (body.size() < length) {
        const std::size_t want = std::min(sizeof chunk, length - body.size());
        if (!in.read(chunk, static_cast<std::streamsize>(want))) return std::nullopt;
        body.append(chunk, want);
      }
      return body;
    }
    const std::string key = "Content-Length:";
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0) {
      std::size_t at = key.size();
      while (at < line.size() && line[at] == ' ') ++at;
      const char* end = line.data() + line.size();
      const auto [stop, error] = std::from_chars(line.data() + at, end, length);
      // Digits only, and not over the limit: a length that is not believed
      // cannot be skipped, so the frame is broken.
      if (error != std::errc{} || stop != end || length > kMaxMessageBytes) return std::nullopt;
      has_length = true;
    }
  }
  return std::nullopt;
}

void write_lsp_message(std::ostream& out, const nlohmann::json& message) {
  const std::string body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out << "Content-Length: " << body.size() << "\r\n\r\n" << body;
  out.flush();
}

void LspServer::reply(const nlohmann::json& id, nlohmann::json result) {
  write_lsp_message(out_, {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
}

void LspServer::reply_error(const nlohmann::json& id, int code, const std::string& message) {
  write_lsp_message(
      out_, {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

void LspServer::publish(const std::string& uri) {
  nlohmann::json diagnostics = nlohmann::json::array();
  const auto document = documents_.find(uri);
  if (document != documents_.end()) {
    const auto file = std::make_shared<const SourceFile>(path_of(uri), document->second);
    static const api::SweepRequest kDeclared;  // the file's own `check` lines, default model
    const FileReport report = api::check_file(file, kDeclared);
    if (!report.usage_error.empty()) {
      diagnostics.push_back({{"range", range(Location{file, {0, 0}, -1, -1})},
                             {"severity", 2},
                             {"source", "pipevm"},
                             {"message", report.usage_error}});
    }
    for (const Finding& f : report.findings) {
      const Diagnostic& d = f.diagnostic;
      const Location where = d.location.file ? d.location : Location{file, {0, 0}, -1, -1};
      std::string message = d.message;
      if (d.location.rank >= 0) message += " (rank " + std::to_string(d.location.rank) + ")";
      const std::string folding = folding_text(f, report);
      if (!folding.empty()) message += " [" + folding + "]";
      nlohmann::json related = nlohmann::json::array();
      for (const Note& n : d.notes) {
        if (!n.location.file) {
          message += "\n" + n.message;
          continue;
        }
        std::string note = n.message;
        if (n.location.rank >= 0) note += " (rank " + std::to_string(n.location.rank) + ")";
        related.push_back(
            {{"location", {{"uri", uri}, {"range", range(n.location)}}}, {"message", note}});
      }
      nlohmann::json item = {{"range", range(where)},
                             {"severity", d.severity == Severity::error     ? 1
                                          : d.severity == Severity::warning ? 2
                                                                            : 3},
                             {"code", code(d.kind)},
                             {"codeDescription", {{"href", rule_help_uri(d.kind)}}},
                             {"source", "pipevm"},
                             {"message", message}};
      if (!related.empty()) item["relatedInformation"] = std::move(related);
      diagnostics.push_back(std::move(item));
    }
  }
  write_lsp_message(out_, {{"jsonrpc", "2.0"},
                           {"method", "textDocument/publishDiagnostics"},
                           {"params", {{"uri", uri}, {"diagnostics", std::move(diagnostics)}}}});
}

nlohmann::json LspServer::hover(const std::string& uri, int line, int character) const {
  const auto document = documents_.find(uri);
  if (document == documents_.end()) return nullptr;
  const std::string& text = document->second;
  const std::size_t at = offset_of(text, line, character);
  const auto word_char = [&](std::size_t i) {
    return i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
  };
  std::size_t begin = at, end = at;
  while (begin > 0 && word_char(begin - 1)) --begin;
  while (word_char(end)) ++end;
  if (begin == end) return nullptr;
  const std::string word = text.substr(begin, end - begin);
  const std::string row = isa_row(word);
  if (row.empty()) return nullptr;
  return {{"contents", {{"kind", "markdown"}, {"value", "```\n" + row + "\n```\n(docs/isa.md)"}}}};
}

bool LspServer::handle(const nlohmann::json& message) {
  if (!message.is_object()) {
    // JSON-RPC 2.0: what is not a request object is answered as one with id null.
    reply_error(nullptr, kInvalidRequest, "a message is a JSON object");
    return true;
  }
  const auto method_at = message.find("method");
  const std::string method = method_at != message.end() && method_at->is_string()
                                 ? method_at->get<std::string>()
                                 : std::string();
  // A request has an id and is answered exactly once; a notification never.
  const bool request = message.contains("id");
  const nlohmann::json id = request ? message.at("id") : nlohmann::json();
  const nlohmann::json params = message.value("params", nlohmann::json::object());
  try {
    nlohmann::json result;  // null for the methods that have nothing to say
    if (method == "initialize") {
      result = {
          {"capabilities",
           {{"textDocumentSync", {{"openClose", true}, {"change", 1}}}, {"hoverProvider", true}}},
          {"serverInfo", {{"name", "pipevm"}, {"version", std::string(project_version())}}}};
    } else if (method == "shutdown") {
      shutdown_ = true;
    } else if (method == "exit") {
      return false;
    } else if (method == "textDocument/didOpen") {
      const auto& document = params.at("textDocument");
      const std::string uri = document.at("uri");
      documents_[uri] = document.at("text");
      publish(uri);
    } else if (method == "textDocument/didChange") {
      const std::string uri = params.at("textDocument").at("uri");
      const auto& changes = params.at("contentChanges");
      if (!changes.empty()) documents_[uri] = changes.back().at("text");
      publish(uri);
    } else if (method == "textDocument/didClose") {
      const std::string uri = params.at("textDocument").at("uri");
      documents_.erase(uri);
      publish(uri);
    } else if (method == "textDocument/hover") {
      const auto line = position_part(params.at("position"), "line");
      const auto character = position_part(params.at("position"), "character");
      if (!line || !character) {
        if (request) reply_error(id, kInvalidParams, "a position is two unsigned integers");
        return true;
      }
      result = hover(params.at("textDocument").at("uri").get<std::string>(), *line, *character);
    } else {
      if (request) reply_error(id, kMethodNotFound, "pipevm lsp does not handle " + method);
      return true;
    }
    if (request) reply(id, std::move(result));
  } catch (const nlohmann::json::exception& e) {
    if (request) reply_error(id, kInvalidRequest, std::string("bad parameters: ") + e.what());
  }
  return true;
}

int run_lsp_server(std::istream& in, std::ostream& out) {
  LspServer server(out);
  while (const auto body = read_lsp_message(in)) {
    const nlohmann::json message = nlohmann::json::parse(*body, nullptr, false);
    if (message.is_discarded()) {
      write_lsp_message(out, {{"jsonrpc", "2.0"},
                              {"id", nullptr},
                              {"error", {{"code", -32700}, {"message", "parse error"}}}});
      continue;
    }
    if (!server.handle(message)) return server.exit_status();
  }
  return 1;  // the input ended without `exit`
}

}  // namespace pipevm::cli
