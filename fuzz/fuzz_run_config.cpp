// Fuzz target `run_config`: any bytes as `pipevm run --config FILE` (the
// YAML of config/run_config.hpp), then validate(). Asserts:
//   - the only way to refuse a file is ConfigError (anything else escaping
//     would end `pipevm run` with an uncaught exception, not a message);
//   - a refusal of the file names it ("fuzz.yaml..." starts the message);
//   - reading is deterministic: the same text read twice gives the same
//     configuration;
//   - a configuration validate() accepts has a finite positive learning
//     rate and a finite momentum, and every count positive.
// Leaves out flags on top of the file and checks against the world size.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "fuzz_support.hpp"
#include "run_config.hpp"

namespace {

using pipevm::config::ConfigError;
using pipevm::config::RunConfig;

auto fields(const RunConfig& c) {
  return std::tie(c.model.sizes, c.model.loss, c.model.seed, c.data, c.synthetic_train,
                  c.synthetic_test, c.epochs, c.batch_size, c.micro_batches, c.optimizer.kind,
                  c.seed, c.dp, c.chunks, c.checkpoint, c.checkpoint_every);
}

// Reads the text; empty when it is refused (the message checked).
bool read(const std::string& text, RunConfig& config) {
  const std::string name = "fuzz.yaml";
  try {
    pipevm::config::apply_yaml_text(text, name, config);
    return true;
  } catch (const ConfigError& error) {
    FUZZ_ASSERT(std::string(error.what()).rfind(name, 0) == 0, "a refusal names the file");
    return false;
  }
}

bool same_float(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  RunConfig first;
  RunConfig second;
  const bool read_first = read(text, first);
  const bool read_second = read(text, second);
  FUZZ_ASSERT(read_first == read_second, "the same file is accepted or refused twice");
  if (!read_first) return 0;
  FUZZ_ASSERT(fields(first) == fields(second), "the same file gives the same configuration");
  FUZZ_ASSERT(same_float(first.optimizer.lr, second.optimizer.lr) &&
                  same_float(first.optimizer.momentum, second.optimizer.momentum),
              "the same file gives the same optimizer");
  try {
    pipevm::config::validate(first);
  } catch (const ConfigError&) {
    return 0;
  }
  FUZZ_ASSERT(std::isfinite(first.optimizer.lr) && first.optimizer.lr > 0,
              "an accepted learning rate is finite and positive");
  FUZZ_ASSERT(std::isfinite(first.optimizer.momentum), "an accepted momentum is finite");
  FUZZ_ASSERT(first.epochs > 0 && first.batch_size > 0 && first.micro_batches > 0 && first.dp > 0 &&
                  first.chunks > 0,
              "accepted counts are positive");
  return 0;
}
