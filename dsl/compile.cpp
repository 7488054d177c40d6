// Reading schedule files, the schedule's header facts, and compile() =
// parse + expand.
#include <filesystem>

#include "ast.hpp"
#include "compile.hpp"
#include "quote.hpp"
#include "read_file.hpp"

namespace pipevm {

std::shared_ptr<const SourceFile> read_source(const std::string& path, Diagnostics& diagnostics) {
  std::string contents;
  std::string error;
  if (!read_input_file(path, kMaxScheduleBytes, "schedules", contents, error)) {
    diagnostics.report(DiagnosticKind::UnreadableFile, "cannot read " + quote(path) + ": " + error);
    return nullptr;
  }
  return std::make_shared<const SourceFile>(path, std::move(contents));
}

Placement placement_of(const Schedule& schedule) {
  return schedule.placement;
}

std::string name_of(const Schedule& schedule) {
  if (!schedule.name.empty()) return schedule.name;
  if (!schedule.file) return "";
  return std::filesystem::path(schedule.file->name()).stem().string();
}

const std::vector<DeclaredSweep>& declared_sweeps(const Schedule& schedule) {
  return schedule.sweeps;
}

std::optional<Config> declared_configuration(const Schedule& schedule) {
  if (schedule.sweeps.size() != 1) return std::nullopt;
  const DeclaredSweep& sweep = schedule.sweeps.front();
  const auto one = [](const ValueRange& range) { return range.first == range.last; };
  if (!one(sweep.stages) || !one(sweep.micro_batches) || !one(sweep.dp) || !one(sweep.chunks) ||
      sweep.stages.first < 1 || sweep.micro_batches.first < 1) {
    return std::nullopt;
  }
  return Config{sweep.stages.first, sweep.micro_batches.first, sweep.chunks.first, sweep.dp.first};
}

int implied_stages(const Schedule& schedule) {
  return schedule.flat_stages;
}

std::optional<Program> compile(std::shared_ptr<const SourceFile> file, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options) {
  const auto schedule = parse(std::move(file), diagnostics);
  if (!schedule) return std::nullopt;
  return expand(*schedule, config, diagnostics, options);
}

}  // namespace pipevm
