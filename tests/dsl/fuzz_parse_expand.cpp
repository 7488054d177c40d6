// libFuzzer target: any bytes through parse and expand. Built only with
// -DPIPEVM_BUILD_FUZZ=ON and clang (preset `fuzz`); run e.g.
//   fuzz_parse_expand -max_total_time=60 -max_len=4096 corpus/ ../schedules/
// Finds crashes, sanitizer reports, hangs and stack overflows; every input
// must end in a Program or in diagnostics.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "compile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipevm::Diagnostics diagnostics;
  const auto file = std::make_shared<const pipevm::SourceFile>("fuzz.pipe", text);
  const auto schedule = pipevm::parse(file, diagnostics);
  if (!schedule) {
    if (!diagnostics.has_errors()) __builtin_trap();  // a failed parse must say why
    return 0;
  }
  pipevm::ExpandOptions options;
  options.max_instructions = 2'000;
  for (const auto& [stages, micro_batches, chunks] :
       {std::tuple{4, 8, 1}, std::tuple{1, 1, 2}, std::tuple{3, 5, 2}}) {
    pipevm::Config config;
    config.stages = stages;
    config.micro_batches = micro_batches;
    config.chunks = chunks;
    pipevm::Diagnostics expansion;
    const auto program = pipevm::expand(*schedule, config, expansion, options);
    if (!program && !expansion.has_errors()) __builtin_trap();
    if (program && program->ranks() != config.ranks()) __builtin_trap();
  }
  return 0;
}
