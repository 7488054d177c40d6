// Where expand and simulate get their Program: a .pipe schedule expanded
// for the configuration asked for (or the one it declares), or a PyTorch
// table (.csv, pytorch/torch_csv.hpp) that carries its own configuration.
// Returns values: what went wrong is in the diagnostics or `usage_error`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compile.hpp"

namespace pipevm::api {

// The values a configuration may take; stages are 16-bit peers in instructions.
inline constexpr int kMaxStages = 32767;
inline constexpr int kMaxMicroBatches = 1 << 30;
inline constexpr int kMaxDp = 1 << 20;
inline constexpr int kMaxChunks = 65535;

// The configuration asked for; an absent value was not given.
struct ConfigRequest {
  std::optional<int> stages, micro_batches, dp, chunks;

  bool any() const { return stages || micro_batches || dp || chunks; }
};

struct ProgramInput {
  std::optional<Program> program;
  int status = 0;           // when there is no program: 1 errors in it, 2 unreadable or usage
  std::string usage_error;  // status 2 without a diagnostic: why the request cannot be met
};

// Reads the file at `path` (a .csv path is a PyTorch table).
ProgramInput load_program(const std::string& path, const ConfigRequest& request,
                          Diagnostics& diagnostics, const ExpandOptions& options = {});
// The same for a file already read; `table`: a PyTorch table whatever its name.
ProgramInput load_program(const std::shared_ptr<const SourceFile>& file,
                          const ConfigRequest& request, Diagnostics& diagnostics,
                          const ExpandOptions& options = {}, bool table = false);

// The one configuration a .pipe schedule declares (`check stages N
// micro_batches M ...`, compile.hpp's declared_configuration), which `run`
// takes when neither flags nor its configuration file set one; empty when
// the file declares none or several, or cannot be read or parsed.
std::optional<Config> declared_configuration_of(const std::string& path);
// The stage count a flat program's `stage N { ... }` blocks fix
// (compile.hpp's implied_stages); 0 for a program written for any count, or
// a file that cannot be read or parsed.
int implied_stages_of(const std::string& path);
// The costs a program's header records (a line starting
// kCostsHeaderPrefix, as `pipevm synthesize` writes), in `--cost` syntax;
// empty when it records none.
std::string recorded_cost_flags(const SourceFile& file);
// Whether the file starts with the header `pipevm synthesize` writes: one
// that records no costs was made with costs no flag says (per stage or
// per layer), and its figures are not the defaults'.
bool synthesized_header(const SourceFile& file);

}  // namespace pipevm::api
