// How `pipevm check` prints its reports (api/check_findings.hpp), one per input
// file, all in one document: text (findings with source excerpts, what was
// folded into each, a summary line per file), gcc (one line per finding and
// note, quickfix-ready), JSON (one object for the whole run). SARIF is
// check_sarif.hpp's. A file that could not be checked (unreadable, no
// configuration) is a line on stderr in text and gcc, an entry of "errors"
// in JSON.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "check_findings.hpp"

namespace pipevm::cli {

using api::FileReport;
using api::Finding;

// One file's findings and summary as text (`color`: ANSI colours).
void print_text_report(std::ostream& out, std::ostream& err, const FileReport& report, bool color);
// One file's findings as gcc-style lines.
void print_gcc_report(std::ostream& out, std::ostream& err, const FileReport& report);
// The whole run: {"version": 2, "files": [...], "errors": [...], "summary": {...}}.
nlohmann::json reports_to_json(const std::vector<FileReport>& reports);
// An error that stops the run before any file is checked (exit 2), in the
// chosen format: {"errors": [{"message": ...}]} for JSON.
nlohmann::json usage_error_json(const std::string& message);

}  // namespace pipevm::cli
