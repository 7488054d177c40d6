// Helpers shared by the dsl tests: compile text, list a rank's stream.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compile.hpp"

namespace pipevm::test {

inline Config config(int stages, int micro_batches, int chunks = 1, int dp = 1) {
  Config c;
  c.stages = stages;
  c.micro_batches = micro_batches;
  c.chunks = chunks;
  c.dp = dp;
  return c;
}

inline std::shared_ptr<const SourceFile> source(std::string text, std::string name = "test.pipe") {
  return std::make_shared<const SourceFile>(std::move(name), std::move(text));
}

inline std::optional<Program> compile_text(std::string text, const Config& c, Diagnostics& d,
                                           const ExpandOptions& options = {}) {
  return compile(source(std::move(text)), c, d, options);
}

inline std::optional<Program> compile_file(const std::string& relative, const Config& c,
                                           Diagnostics& d, const ExpandOptions& options = {}) {
  const auto file = read_source(std::string(PIPEVM_SOURCE_DIR) + "/" + relative, d);
  if (!file) return std::nullopt;
  return compile(file, c, d, options);
}

// One rank's stream, disassembled.
inline std::vector<std::string> stream(const Program& p, int rank) {
  std::vector<std::string> out;
  for (const Instruction& in : p.rank(rank)) out.push_back(disassemble(in));
  return out;
}

// The codes of the errors, in order ("PV1003").
inline std::vector<std::string> codes(const Diagnostics& d) {
  std::vector<std::string> out;
  for (const Diagnostic& x : d.all()) out.push_back(code(x.kind));
  return out;
}

}  // namespace pipevm::test
