// Reading schedule files, the schedule's header facts, and compile() =
// parse + expand.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "ast.hpp"
#include "compile.hpp"
#include "quote.hpp"

namespace pipevm {

std::shared_ptr<const SourceFile> read_source(const std::string& path, Diagnostics& diagnostics) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diagnostics.report(DiagnosticKind::UnreadableFile,
                       "cannot read '" + path + "': " + std::strerror(errno));
    return nullptr;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    diagnostics.report(DiagnosticKind::UnreadableFile, "cannot read '" + path + "'");
    return nullptr;
  }
  std::string contents = std::move(text).str();
  // Source offsets are 32-bit.
  if (contents.size() >= std::numeric_limits<std::uint32_t>::max()) {
    diagnostics.report(DiagnosticKind::UnreadableFile,
                       quote(path) + " is too large (4 GiB or more)");
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

std::optional<Program> compile(std::shared_ptr<const SourceFile> file, const Config& config,
                               Diagnostics& diagnostics, const ExpandOptions& options) {
  const auto schedule = parse(std::move(file), diagnostics);
  if (!schedule) return std::nullopt;
  return expand(*schedule, config, diagnostics, options);
}

}  // namespace pipevm
