// Fuzz target `lsp`: the `pipevm lsp` server's frame loop
// (cli/lsp_server.hpp, run_lsp_server) driven in-process by the fuzzer's
// bytes. The first byte chooses how the rest is read:
//   - even: the rest is what the client writes to the server's stdin,
//     frames and all (Content-Length headers, then JSON-RPC bodies);
//   - odd: the rest is a document's text (a .pipe file, or a PyTorch .csv
//     table when bit 1 is set) in a well-formed session: initialize,
//     didOpen of the text, a hover at a position the first byte gives,
//     didChange to the text's first half, didClose, shutdown, exit.
// Asserts, beyond "no crash and no sanitizer report" (the server never
// dies: no exception escapes the loop):
//   - everything the server writes is a sequence of well-formed frames,
//     each one JSON-RPC 2.0 object: a response (an id and exactly one of
//     result and error) or a publishDiagnostics notification;
//   - the server answers every frame it reads up to `exit`, in order: an
//     unreadable body or a body that is not an object gets an error with id
//     null, a request (a message with an id) one response with its id, a
//     notification none;
//   - it exits with 0 after `shutdown` and 1 otherwise;
//   - in a session, each document change is answered by one set of
//     diagnostics for that document, every range inside the document (UTF-16
//     columns), and closing the document clears them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lsp_server.hpp"

namespace {

using nlohmann::json;

std::string dumped(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string frame(const json& message) {
  const std::string body = dumped(message);
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The server's output split into its messages; each frame must be exactly
// "Content-Length: N\r\n\r\n" and N bytes of JSON.
std::vector<json> written_messages(const std::string& out) {
  std::vector<json> messages;
  const std::string header = "Content-Length: ";
  std::size_t at = 0;
  while (at < out.size()) {
    FUZZ_ASSERT(out.compare(at, header.size(), header) == 0, "a frame starts with its length");
    at += header.size();
    const std::size_t end = out.find("\r\n\r\n", at);
    FUZZ_ASSERT(end != std::string::npos, "a frame's header ends with an empty line");
    std::size_t length = 0;
    for (std::size_t i = at; i < end; ++i) {
      FUZZ_ASSERT(out[i] >= '0' && out[i] <= '9', "a frame's length is a number");
      length = length * 10 + static_cast<std::size_t>(out[i] - '0');
    }
    at = end + 4;
    FUZZ_ASSERT(length <= out.size() - at, "a frame holds as many bytes as it says");
    json message = json::parse(out.substr(at, length), nullptr, false);
    FUZZ_ASSERT(!message.is_discarded(), "a frame's body is JSON");
    at += length;
    FUZZ_ASSERT(message.is_object() && message.value("jsonrpc", "") == "2.0",
                "every message is a JSON-RPC 2.0 object");
    messages.push_back(std::move(message));
  }
  return messages;
}

bool is_response(const json& message) {
  return message.contains("id") && !message.contains("method");
}

void expect_well_formed(const json& message) {
  if (is_response(message)) {
    FUZZ_ASSERT(message.contains("result") != message.contains("error"),
                "a response has a result or an error");
    if (message.contains("error")) {
      FUZZ_ASSERT(message["error"].is_object() && message["error"]["code"].is_number_integer() &&
                      message["error"]["message"].is_string(),
                  "an error has a code and a message");
    }
    return;
  }
  FUZZ_ASSERT(message.value("method", "") == "textDocument/publishDiagnostics" &&
                  message["params"]["uri"].is_string() &&
                  message["params"]["diagnostics"].is_array(),
              "the server only answers and publishes diagnostics");
}

// The ids the server must answer, in order, for the frames of `input` up
// to `exit` (null for a body it cannot take as a message); whether `exit`
// came and whether `shutdown` came before it.
struct Expected {
  std::vector<json> ids;
  bool exited = false;
  bool shut_down = false;
};

Expected expected_answers(const std::string& input) {
  Expected expected;
  std::istringstream in(input);
  while (const auto body = pipevm::cli::read_lsp_message(in)) {
    const json message = json::parse(*body, nullptr, false);
    if (message.is_discarded() || !message.is_object()) {
      expected.ids.push_back(nullptr);
      continue;
    }
    const json method = message.value("method", json());
    if (method == "exit") {
      expected.exited = true;
      break;
    }
    if (method == "shutdown") expected.shut_down = true;
    if (message.contains("id")) expected.ids.push_back(message["id"]);
  }
  return expected;
}

// The messages the server writes for `input`, checked against the protocol.
std::vector<json> serve(const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  const int status = pipevm::cli::run_lsp_server(in, out);
  const std::vector<json> messages = written_messages(out.str());
  std::vector<json> answered;
  for (const json& message : messages) {
    expect_well_formed(message);
    if (is_response(message)) answered.push_back(message["id"]);
  }
  const Expected expected = expected_answers(input);
  FUZZ_ASSERT(answered == expected.ids, "every frame up to exit is answered once, in order");
  FUZZ_ASSERT(status == (expected.exited && expected.shut_down ? 0 : 1),
              "the exit status is 0 after shutdown, 1 otherwise");
  return messages;
}

// UTF-16 code units of each line of `text` (valid UTF-8), '\r' included.
std::vector<std::size_t> line_widths(const std::string& text) {
  std::vector<std::size_t> widths{0};
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\n') {
      widths.push_back(0);
    } else if ((byte & 0xC0) != 0x80) {
      widths.back() += byte >= 0xF0 ? 2 : 1;
    }
  }
  return widths;
}

void expect_inside(const json& position, const std::vector<std::size_t>& widths) {
  const int line = position["line"].get<int>();
  const int character = position["character"].get<int>();
  FUZZ_ASSERT(line >= 0 && static_cast<std::size_t>(line) < widths.size() && character >= 0 &&
                  static_cast<std::size_t>(character) <= widths[static_cast<std::size_t>(line)],
              "a diagnostic's position is inside the document");
}

void expect_diagnostics_of(const json& message, const std::string& uri, const std::string& text) {
  FUZZ_ASSERT(message.value("method", "") == "textDocument/publishDiagnostics" &&
                  message["params"]["uri"] == uri,
              "a change is answered with the document's diagnostics");
  const std::vector<std::size_t> widths = line_widths(text);
  for (const json& d : message["params"]["diagnostics"]) {
    const json& range = d["range"];
    expect_inside(range["start"], widths);
    expect_inside(range["end"], widths);
    const auto start =
        std::make_pair(range["start"]["line"].get<int>(), range["start"]["character"].get<int>());
    const auto end =
        std::make_pair(range["end"]["line"].get<int>(), range["end"]["character"].get<int>());
    FUZZ_ASSERT(start <= end, "a diagnostic's range does not end before it starts");
    FUZZ_ASSERT(d["message"].is_string() && d["severity"].is_number_integer() &&
                    d["severity"] >= 1 && d["severity"] <= 4,
                "a diagnostic has a message and a severity");
    for (const json& related : d.value("relatedInformation", json::array())) {
      FUZZ_ASSERT(related["location"]["uri"] == uri, "related information is in the document");
      expect_inside(related["location"]["range"]["start"], widths);
      expect_inside(related["location"]["range"]["end"], widths);
    }
  }
}

void session(std::uint8_t selector, const std::string& raw_text) {
  // What the server sees: the text as JSON carries it (bad UTF-8 replaced).
  const std::string text = json::parse(dumped(json(raw_text))).get<std::string>();
  const std::string half =
      json::parse(dumped(json(raw_text.substr(0, raw_text.size() / 2)))).get<std::string>();
  const std::string uri = (selector & 2) != 0 ? "file:///fuzz.csv" : "file:///fuzz.pipe";
  const json document = {{"uri", uri}};
  const json hover_at = {{"line", (selector >> 2) % 8}, {"character", (selector >> 5) * 3}};
  std::string input;
  input +=
      frame({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", json::object()}});
  input += frame({{"jsonrpc", "2.0"}, {"method", "initialized"}, {"params", json::object()}});
  input +=
      frame({{"jsonrpc", "2.0"},
             {"method", "textDocument/didOpen"},
             {"params",
              {{"textDocument",
                {{"uri", uri}, {"languageId", "pipe"}, {"version", 1}, {"text", raw_text}}}}}});
  input += frame({{"jsonrpc", "2.0"},
                  {"id", 2},
                  {"method", "textDocument/hover"},
                  {"params", {{"textDocument", document}, {"position", hover_at}}}});
  input += frame(
      {{"jsonrpc", "2.0"},
       {"method", "textDocument/didChange"},
       {"params",
        {{"textDocument", {{"uri", uri}, {"version", 2}}},
         {"contentChanges", json::array({{{"text", raw_text.substr(0, raw_text.size() / 2)}}})}}}});
  input += frame({{"jsonrpc", "2.0"},
                  {"method", "textDocument/didClose"},
                  {"params", {{"textDocument", document}}}});
  input += frame({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "shutdown"}});
  input += frame({{"jsonrpc", "2.0"}, {"method", "exit"}});

  const std::vector<json> messages = serve(input);
  // initialize, didOpen's diagnostics, hover, didChange's, didClose's, shutdown.
  FUZZ_ASSERT(messages.size() == 6, "a session gets six messages");
  FUZZ_ASSERT(messages[0]["result"]["capabilities"].is_object(), "initialize answers capabilities");
  expect_diagnostics_of(messages[1], uri, text);
  FUZZ_ASSERT(messages[2]["result"].is_null() || messages[2]["result"]["contents"].is_object(),
              "hover answers contents or null");
  expect_diagnostics_of(messages[3], uri, half);
  expect_diagnostics_of(messages[4], uri, "");
  FUZZ_ASSERT(messages[4]["params"]["diagnostics"].empty(), "closing a document clears it");
  FUZZ_ASSERT(messages[5]["result"].is_null(), "shutdown answers null");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    serve(rest);
  } else {
    session(data[0], rest);
  }
  return 0;
}
