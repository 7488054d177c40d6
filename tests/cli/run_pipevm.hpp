// Runs the built pipevm executable from the source directory, as a user
// would, with its stdout and stderr kept apart and a time limit, so that a
// command that blocks fails its test instead of hanging it.
#pragma once

#include <algorithm>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace pipevm::testing {

struct PipevmRun {
  int status = -1;  // the exit status; 124 when the time limit stopped it
  std::string out;
  std::string err;
};

// Under AddressSanitizer pipevm runs several times slower: its time limits
// stretch by this much.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerSlowdown = 4;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

// `pipevm ARGS` (ARGS as the shell reads them), stopped after `seconds`
// (times kSanitizerSlowdown).
inline PipevmRun run_pipevm(const std::string& args, int seconds = 30) {
  seconds *= kSanitizerSlowdown;
  const std::filesystem::path err_file = std::filesystem::temp_directory_path() /
                                         ("pipevm-run-stderr-" + std::to_string(getpid()) + ".txt");
  const std::string command = "cd '" PIPEVM_SOURCE_DIR "' && timeout " + std::to_string(seconds) +
                              " '" PIPEVM_BINARY_DIR "/pipevm' " + args + " 2>'" +
                              err_file.string() + "'";
  PipevmRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    run.out.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_file);
  std::ostringstream text;
  text << err.rdbuf();
  run.err = text.str();
  std::filesystem::remove(err_file);
  return run;
}

// How many lines `text` holds (newlines counted).
inline std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace pipevm::testing
