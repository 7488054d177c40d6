// Command-line pieces shared by the runtime benchmarks: comma-separated
// integer lists, flags, and a main() that reports an error and exits with 2.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <map>
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

// Parses argv: each flag of `with_value` takes the next argument, each of
// `switches` none. Throws std::runtime_error for anything else.
inline void parse_flags(
    int argc, char** argv,
    const std::map<std::string, std::function<void(const std::string&)>>& with_value,
    const std::map<std::string, std::function<void()>>& switches = {}) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (const auto s = switches.find(flag); s != switches.end()) {
      s->second();
      continue;
    }
    const auto v = with_value.find(flag);
    if (v == with_value.end()) throw std::runtime_error("unknown flag " + flag);
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
    v->second(argv[++i]);
  }
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
