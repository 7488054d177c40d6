// Diagnostic codes, classes and the text, gcc and JSON printers.
#include "diagnostics.hpp"

#include <algorithm>
#include <array>
#include <ostream>

#include <nlohmann/json.hpp>

namespace pipevm {

namespace {

struct KindInfo {
  std::string_view name;
  int code;
  DiagnosticClass cls;
};

constexpr std::array kKinds = {
#define PIPEVM_DIAGNOSTIC(name, code, cls) KindInfo{#name, code, DiagnosticClass::cls},
#include "diagnostic_kinds.def"
};

const KindInfo& kind_info(DiagnosticKind kind) { return kKinds[static_cast<std::size_t>(kind)]; }

std::string position_prefix(const Location& location) {
  if (!location.file) return "pipevm";
  const LineColumn p = location.file->position(location.range.begin, ColumnUnit::characters);
  return location.file->name() + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

void print_excerpt(std::ostream& out, const Location& location, bool color) {
  if (!location.file) return;
  const SourceFile& file = *location.file;
  const LineColumn p = file.position(location.range.begin);
  const std::string_view line = file.line(p.line);
  const std::string number = std::to_string(p.line);
  out << ' ' << number << " | " << line << '\n';
  out << ' ' << std::string(number.size(), ' ') << " | ";
  // Keep tabs so the caret lines up under the source.
  // One blank per character: UTF-8 continuation bytes take no column.
  for (std::uint32_t i = 0; i + 1 < p.column && i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;
    out << (line[i] == '\t' ? '\t' : ' ');
  }
  const std::uint32_t end_column =
      location.range.end > location.range.begin
          ? std::min<std::uint32_t>(p.column + (location.range.end - location.range.begin),
                                    static_cast<std::uint32_t>(line.size()) + 1)
          : p.column + 1;
  const std::uint32_t width = std::max<std::uint32_t>(1, end_column - p.column);
  if (color) out << "\033[1;32m";
  out << '^' << std::string(width - 1, '~');
  if (color) out << "\033[0m";
  out << '\n';
}

std::string rank_suffix(const Location& location) {
  if (location.rank < 0) return "";
  std::string s = " (rank " + std::to_string(location.rank);
  if (location.stage >= 0 && location.stage != location.rank) {
    s += ", stage " + std::to_string(location.stage);
  }
  return s + ")";
}

}  // namespace

int code_number(DiagnosticKind kind) { return kind_info(kind).code; }
std::string code(DiagnosticKind kind) { return "PV" + std::to_string(code_number(kind)); }
DiagnosticClass class_of(DiagnosticKind kind) { return kind_info(kind).cls; }

std::string_view help(DiagnosticKind kind) {
  struct KindHelp {
    DiagnosticKind kind;
    std::string_view text;
  };
  static constexpr std::array kHelp = {
#define PIPEVM_HELP(name, text) KindHelp{DiagnosticKind::name, text},
#include "diagnostic_help.def"
#undef PIPEVM_HELP
  };
  const auto* found = std::find_if(kHelp.begin(), kHelp.end(),
                                   [kind](const KindHelp& row) { return row.kind == kind; });
  return found == kHelp.end() ? std::string_view() : found->text;
}
std::string_view name(DiagnosticKind kind) { return kind_info(kind).name; }

std::string_view name(DiagnosticClass cls) {
  switch (cls) {
    case DiagnosticClass::parse: return "parse";
    case DiagnosticClass::require: return "require";
    case DiagnosticClass::deadlock: return "deadlock";
    case DiagnosticClass::buffering_hazard: return "buffering-hazard";
    case DiagnosticClass::unmatched: return "unmatched";
    case DiagnosticClass::wrong_peer: return "wrong-peer";
    case DiagnosticClass::size_mismatch: return "size-mismatch";
    case DiagnosticClass::collective_order: return "collective-order";
    case DiagnosticClass::collective_missing: return "collective-missing";
    case DiagnosticClass::nonblocking_misuse: return "nonblocking-misuse";
    case DiagnosticClass::dataflow: return "dataflow";
    case DiagnosticClass::topology: return "topology";
    case DiagnosticClass::runtime: return "runtime";
  }
  return "?";
}

std::string_view name(Severity severity) {
  switch (severity) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::note: return "note";
  }
  return "?";
}

Diagnostic& Diagnostics::report(DiagnosticKind kind, std::string message, Location location) {
  Diagnostic d;
  d.kind = kind;
  d.message = std::move(message);
  d.location = std::move(location);
  return report(std::move(d));
}

Diagnostic& Diagnostics::report(Diagnostic diagnostic) {
  diagnostics_.push_back(std::move(diagnostic));
  return diagnostics_.back();
}

bool Diagnostics::has_errors() const {
  return std::any_of(diagnostics_.begin(), diagnostics_.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::error; });
}

void print_text(std::ostream& out, const Diagnostic& d, bool color) {
  const char* bold = color ? "\033[1m" : "";
  const char* red = color ? "\033[1;31m" : "";
  const char* cyan = color ? "\033[1;36m" : "";
  const char* reset = color ? "\033[0m" : "";
  out << bold << position_prefix(d.location) << ": " << reset << red << name(d.severity) << reset
      << bold << ": " << d.message << rank_suffix(d.location) << " [" << code(d.kind) << ']'
      << reset << '\n';
  print_excerpt(out, d.location, color);
  for (const Note& n : d.notes) {
    out << bold << position_prefix(n.location) << ": " << reset << cyan << "note" << reset
        << ": " << n.message << rank_suffix(n.location) << '\n';
    print_excerpt(out, n.location, color);
  }
  if (const std::string_view fix = help(d.kind); !fix.empty()) {
    out << bold << "help" << reset << ": " << fix << '\n';
  }
}

void print_gcc(std::ostream& out, const Diagnostic& d) {
  out << position_prefix(d.location) << ": " << name(d.severity) << ": " << d.message
      << rank_suffix(d.location) << " [" << code(d.kind) << "]\n";
  for (const Note& n : d.notes) {
    out << position_prefix(n.location) << ": note: " << n.message << rank_suffix(n.location)
        << '\n';
  }
}

namespace {
void add_location(nlohmann::json& j, const Location& location) {
  if (location.file) {
    const LineColumn p = location.file->position(location.range.begin, ColumnUnit::characters);
    j["file"] = location.file->name();
    j["line"] = p.line;
    j["column"] = p.column;
  }
  if (location.rank >= 0) j["rank"] = location.rank;
  if (location.stage >= 0) j["stage"] = location.stage;
}
}  // namespace

nlohmann::json to_json(const Diagnostic& d) {
  nlohmann::json j;
  j["code"] = code(d.kind);
  j["class"] = name(class_of(d.kind));
  j["severity"] = name(d.severity);
  j["message"] = d.message;
  if (const std::string_view fix = help(d.kind); !fix.empty()) j["help"] = fix;
  add_location(j, d.location);
  nlohmann::json notes = nlohmann::json::array();
  for (const Note& n : d.notes) {
    nlohmann::json jn;
    jn["message"] = n.message;
    add_location(jn, n.location);
    notes.push_back(std::move(jn));
  }
  j["notes"] = std::move(notes);
  return j;
}

}  // namespace pipevm
