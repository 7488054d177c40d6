// `pipevm lsp` driven by a client that speaks the real protocol: the server
// is started as a process, and JSON-RPC messages framed by Content-Length
// headers go to its stdin and come from its stdout (LSP 3.17 base
// protocol). Deadlines are generous (the machine is shared); the time to
// the first diagnostics is printed, not asserted.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;

class LspClient {
 public:
  LspClient() {
    int to_server[2];
    int from_server[2];
    if (pipe(to_server) != 0 || pipe(from_server) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_server[0], STDIN_FILENO);
      dup2(from_server[1], STDOUT_FILENO);
      close(to_server[1]);
      close(from_server[0]);
      const std::string binary = std::string(PIPEVM_BINARY_DIR) + "/pipevm";
      execl(binary.c_str(), binary.c_str(), "lsp", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_server[0]);
    close(from_server[1]);
    in_ = to_server[1];
    out_ = from_server[0];
  }
  ~LspClient() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void send(const nlohmann::json& message) {
    const std::string body = message.dump();
    const std::string frame = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(write(in_, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  }
  void request(int id, const std::string& method, nlohmann::json params) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  }
  void notify(const std::string& method, nlohmann::json params) {
    send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
  }

  // The next message, or nullopt past the deadline.
  std::optional<nlohmann::json> receive(int seconds = 60) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (true) {
      const auto header_end = buffer_.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        const auto at = buffer_.find("Content-Length: ");
        const std::size_t length = std::stoul(buffer_.substr(at + 16));
        if (buffer_.size() >= header_end + 4 + length) {
          const std::string body = buffer_.substr(header_end + 4, length);
          buffer_.erase(0, header_end + 4 + length);
          return nlohmann::json::parse(body);
        }
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // Skips messages until one with `method` (a notification) or `id` (a reply).
  std::optional<nlohmann::json> wait_for(const std::string& method, int id = -1) {
    while (auto m = receive()) {
      if (!method.empty() && m->value("method", "") == method) return m;
      if (id >= 0 && m->contains("id") && (*m)["id"] == id) return m;
    }
    return std::nullopt;
  }
  int exit_status() {
    close(in_);
    in_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  bool waited_ = false;
  std::string buffer_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* const kUri = "file:///tmp/blocking%201f1b.pipe";

TEST(lsp, diagnostics_on_open_and_change_hover_and_shutdown) {
  LspClient client;
  client.request(
      1, "initialize",
      {{"processId", nullptr}, {"rootUri", nullptr}, {"capabilities", nlohmann::json::object()}});
  const auto init = client.wait_for("", 1);
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ((*init)["result"]["capabilities"]["hoverProvider"], true);
  client.notify("initialized", nlohmann::json::object());

  // The blocking 1F1B, declaring the configuration it is checked for.
  std::string text =
      slurp(std::string(PIPEVM_SOURCE_DIR) + "/tests/check/corpus/buffering_1f1b_blocking.pipe");
  text.replace(text.find("schedule 1f1b-blocking\n"), 23,
               "schedule 1f1b-blocking\ncheck stages 4 micro_batches 8\n");
  const auto opened = Clock::now();
  client.notify(
      "textDocument/didOpen",
      {{"textDocument", {{"uri", kUri}, {"languageId", "pipe"}, {"version", 1}, {"text", text}}}});
  const auto published = client.wait_for("textDocument/publishDiagnostics");
  ASSERT_TRUE(published.has_value());
  std::cout << "first diagnostics after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - opened).count()
            << " ms\n";
  const auto& diagnostics = (*published)["params"]["diagnostics"];
  ASSERT_FALSE(diagnostics.empty());
  EXPECT_EQ((*published)["params"]["uri"], kUri);
  bool on_a_send = false;
  std::istringstream lines(text);
  std::vector<std::string> by_line;
  for (std::string line; std::getline(lines, line);) by_line.push_back(line);
  for (const auto& d : diagnostics) {
    EXPECT_EQ(d["severity"], 1);
    EXPECT_EQ(d["source"], "pipevm");
    const std::size_t line = d["range"]["start"]["line"];
    ASSERT_LT(line, by_line.size());
    if (by_line[line].find("Send") != std::string::npos) on_a_send = true;
  }
  EXPECT_TRUE(on_a_send) << diagnostics.dump(1);
  EXPECT_TRUE(diagnostics[0].contains("relatedInformation")) << diagnostics.dump(1);

  // A change that fixes it: ISend and a WaitAll before the step.
  std::string fixed = text;
  for (auto at = fixed.find("{ Send "); at != std::string::npos; at = fixed.find("{ Send ", at)) {
    fixed.replace(at, 7, "{ ISend ");
  }
  fixed.replace(fixed.find("OptimizerStep"), 13, "WaitAll\nOptimizerStep");
  client.notify("textDocument/didChange",
                {{"textDocument", {{"uri", kUri}, {"version", 2}}},
                 {"contentChanges", nlohmann::json::array({{{"text", fixed}}})}});
  const auto cleared = client.wait_for("textDocument/publishDiagnostics");
  ASSERT_TRUE(cleared.has_value());
  EXPECT_TRUE((*cleared)["params"]["diagnostics"].empty()) << cleared->dump(1);

  // Hover on `Fwd` (line of "    Fwd mb", character 5).
  std::size_t fwd_line = 0;
  std::istringstream again(fixed);
  std::size_t n = 0;
  for (std::string line; std::getline(again, line); ++n) {
    if (line.find("    Fwd mb") == 0) fwd_line = n;
  }
  client.request(
      2, "textDocument/hover",
      {{"textDocument", {{"uri", kUri}}}, {"position", {{"line", fwd_line}, {"character", 5}}}});
  const auto hover = client.wait_for("", 2);
  ASSERT_TRUE(hover.has_value());
  const std::string value = (*hover)["result"]["contents"]["value"];
  EXPECT_NE(value.find("Forward pass"), std::string::npos) << value;

  client.request(3, "shutdown", nullptr);
  ASSERT_TRUE(client.wait_for("", 3).has_value());
  client.notify("exit", nullptr);
  EXPECT_EQ(client.exit_status(), 0);
}

TEST(lsp, columns_are_utf16_code_units) {
  LspClient client;
  client.request(1, "initialize", {{"capabilities", nlohmann::json::object()}});
  ASSERT_TRUE(client.wait_for("", 1).has_value());
  // U+1F600 is two UTF-16 units (four bytes); the error is on `x` after it.
  client.notify(
      "textDocument/didOpen",
      {{"textDocument",
        {{"uri", "file:///tmp/u.pipe"},
         {"languageId", "pipe"},
         {"version", 1},
         {"text", "check stages 1 micro_batches 1\nrequire 1 == 1 : \"\xf0\x9f\x98\x80\" x\n"}}}});
  const auto published = client.wait_for("textDocument/publishDiagnostics");
  ASSERT_TRUE(published.has_value());
  const auto& d = (*published)["params"]["diagnostics"];
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0]["range"]["start"]["line"], 1);
  EXPECT_EQ(d[0]["range"]["start"]["character"], 22);  // 17 + '"' + 2 units + '"' + ' '
  client.request(2, "shutdown", nullptr);
  ASSERT_TRUE(client.wait_for("", 2).has_value());
  client.notify("exit", nullptr);
  EXPECT_EQ(client.exit_status(), 0);
}

}  // namespace
