// Command-line pieces shared by the runtime benchmarks: comma-separated
// integer lists and a main() that reports an error and exits with 2.
#pragma once

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipevm::bench {

// "784,128,10" -> {784, 128, 10}; every value must be positive.
inline std::vector<int> parse_int_list(const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    values.push_back(std::stoi(text.substr(start, comma - start)));
    if (values.back() < 1) throw std::runtime_error("list values must be positive: " + text);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

// Runs `body` and turns an exception into "program: message" and exit code 2.
template <typename Body>
int run_reporting_errors(const char* program, Body body) {
  try {
    return body();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program, error.what());
    return 2;
  }
}

}  // namespace pipevm::bench
