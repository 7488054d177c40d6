// Diagnostics: what went wrong, where, and at which other places. Raising a
// diagnostic is separate from printing it: the front end, the checker and the
// VM hand Diagnostic values to a Diagnostics sink; the command line prints
// them as text with a source excerpt and caret, as gcc-style one-liners, or
// as JSON.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "source.hpp"

namespace pipevm {

enum class DiagnosticKind : std::uint16_t {
#define PIPEVM_DIAGNOSTIC(name, code, cls) name,
#include "diagnostic_kinds.def"
};

enum class DiagnosticClass : std::uint8_t {
  parse,
  require,
  deadlock,
  buffering_hazard,
  unmatched,
  wrong_peer,
  size_mismatch,
  collective_order,
  collective_missing,
  nonblocking_misuse,
  dataflow,
  topology,
  runtime,
};

enum class Severity : std::uint8_t { error, warning, note };

int code_number(DiagnosticKind kind);
std::string code(DiagnosticKind kind);  // "PV2001"
DiagnosticClass class_of(DiagnosticKind kind);
// The known fix of `kind` (diagnostic_help.def), printed under it as
// `help:`; empty when its docs give none.
std::string_view help(DiagnosticKind kind);
std::string_view name(DiagnosticKind kind);  // "Deadlock"
std::string_view name(DiagnosticClass cls);  // "buffering-hazard"
std::string_view name(Severity severity);

// A place in a schedule file, with the rank it concerns when there is one.
struct Location {
  std::shared_ptr<const SourceFile> file;  // null: no position (e.g. a usage error)
  SourceRange range;
  int rank = -1;
  int stage = -1;
};

struct Note {
  std::string message;
  Location location;
};

struct Diagnostic {
  DiagnosticKind kind = DiagnosticKind::SyntaxError;
  Severity severity = Severity::error;
  std::string message;
  Location location;
  std::vector<Note> notes;
};

// Collects diagnostics in the order they are raised.
class Diagnostics {
 public:
  Diagnostic& report(DiagnosticKind kind, std::string message, Location location = {});
  Diagnostic& report(Diagnostic diagnostic);

  const std::vector<Diagnostic>& all() const { return diagnostics_; }
  bool has_errors() const;
  std::size_t size() const { return diagnostics_.size(); }
  bool empty() const { return diagnostics_.empty(); }
  void clear() { diagnostics_.clear(); }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// Human text: "file:line:col: error: message [PV2001]", the source line, a
// caret under the range, then each note the same way.
void print_text(std::ostream& out, const Diagnostic& diagnostic, bool color = false);
// One line per diagnostic and per note: "file:line:col: error: message [PV2001]".
void print_gcc(std::ostream& out, const Diagnostic& diagnostic);
// {"code", "class", "severity", "message", "file", "line", "column", "rank",
//  "stage", "notes": [{"message", "file", "line", "column", "rank"}]}
nlohmann::json to_json(const Diagnostic& diagnostic);

}  // namespace pipevm
