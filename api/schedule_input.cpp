// Reading a schedule for expand and simulate, by its file's kind.
#include "schedule_input.hpp"

#include <sstream>

#include "costs.hpp"
#include "torch_csv.hpp"

namespace pipevm::api {

namespace {

ProgramInput usage(std::string message) {
  ProgramInput input;
  input.status = 2;
  input.usage_error = std::move(message);
  return input;
}

}  // namespace

ProgramInput load_program(const std::string& path, const ConfigRequest& request,
                          Diagnostics& diagnostics, const ExpandOptions& options) {
  const bool csv = pytorch::is_csv_path(path);
  if (csv && request.any()) {
    return usage(
        "a PyTorch table (.csv) gives its own stages, micro-batches and chunks: drop "
        "--stages, --micro-batches, --dp and --chunks");
  }
  const auto file = read_source(path, diagnostics);
  if (!file) {
    ProgramInput input;
    input.status = 2;
    return input;
  }
  return load_program(file, request, diagnostics, options, csv);
}

ProgramInput load_program(const std::shared_ptr<const SourceFile>& file,
                          const ConfigRequest& request, Diagnostics& diagnostics,
                          const ExpandOptions& options, bool table) {
  ProgramInput input;
  if (table || pytorch::is_csv_path(file->name())) {
    if (request.any()) {
      return usage(
          "a PyTorch table (.csv) gives its own stages, micro-batches and chunks: drop "
          "--stages, --micro-batches, --dp and --chunks");
    }
    input.program = pytorch::load_csv(file, diagnostics);
    if (!input.program) input.status = 1;
    return input;
  }
  const auto schedule = parse(file, diagnostics);
  if (!schedule) {
    input.status = 1;
    return input;
  }
  Config chosen;
  if (request.stages && request.micro_batches) {
    chosen.stages = *request.stages;
    chosen.micro_batches = *request.micro_batches;
    chosen.dp = request.dp.value_or(1);
    chosen.chunks = request.chunks.value_or(1);
  } else {
    // Without them, the one configuration the schedule declares.
    const std::optional<Config> declared = declared_configuration(*schedule);
    if (!declared || request.any()) {
      return usage(
          "--stages and --micro-batches are required for a .pipe schedule that does not "
          "declare exactly one configuration (`check stages N micro_batches M`)");
    }
    chosen = *declared;
  }
  input.program = expand(*schedule, chosen, diagnostics, options);
  if (!input.program) input.status = 1;
  return input;
}

std::optional<Config> declared_configuration_of(const std::string& path) {
  Diagnostics ignored;
  const auto file = read_source(path, ignored);
  if (!file) return std::nullopt;
  const auto schedule = parse(file, ignored);
  if (!schedule) return std::nullopt;
  return declared_configuration(*schedule);
}

std::string recorded_cost_flags(const SourceFile& file) {
  std::istringstream text(file.text());
  for (std::string line; std::getline(text, line) && line.rfind('#', 0) == 0;) {
    if (line.rfind(kCostsHeaderPrefix, 0) == 0) return line.substr(kCostsHeaderPrefix.size());
  }
  return "";
}

bool synthesized_header(const SourceFile& file) {
  return file.text().rfind(kSynthesizedHeaderLine, 0) == 0;
}

int implied_stages_of(const std::string& path) {
  Diagnostics ignored;
  const auto file = read_source(path, ignored);
  if (!file) return 0;
  const auto schedule = parse(file, ignored);
  return schedule ? implied_stages(*schedule) : 0;
}

}  // namespace pipevm::api
