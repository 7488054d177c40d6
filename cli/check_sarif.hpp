// `pipevm check --format sarif`: one SARIF 2.1.0 log, one run, for every
// file of the run, shaped for GitHub code scanning: rules with short and
// full descriptions, help (text and markdown) and a helpUri into
// docs/checker.md; file URIs relative to %SRCROOT% and percent-encoded;
// partialFingerprints; configuration, ranks and stage in properties;
// messages that link their related locations; files that could not be
// checked as tool execution notifications (executionSuccessful false).
// The rule texts are check_rules.def.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "check_output.hpp"

namespace pipevm::cli {

// `usage_errors`: what stopped the run before any file was read.
nlohmann::json reports_to_sarif(const std::vector<FileReport>& reports,
                                const std::vector<std::string>& usage_errors = {});

// A file name as a URI reference: relative paths percent-encoded (RFC 3986
// unreserved characters and '/' kept), absolute ones as file:/// URIs.
std::string file_uri(const std::string& path);

// The rule's short and full description (check_rules.def).
std::string_view rule_short_description(DiagnosticKind kind);
std::string_view rule_full_description(DiagnosticKind kind);
// Where the rule is documented: docs/checker.md#pv2001 under the
// repository's URL (PIPEVM_REPOSITORY_URL at configure time).
std::string rule_help_uri(DiagnosticKind kind);

}  // namespace pipevm::cli
