// SARIF for GitHub code scanning (check_sarif.hpp). Field meanings: the
// OASIS SARIF 2.1.0 standard; which fields GitHub requires or shows: its
// "SARIF support for code scanning" page; checked by Microsoft's
// `sarif-multitool validate --rule-kind "Gh;Sarif"` (tests/check/sarif_test).
#include "check_sarif.hpp"

#include <array>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "check_output.hpp"
#include "version.hpp"

#ifndef PIPEVM_REPOSITORY_URL
#define PIPEVM_REPOSITORY_URL "https://github.com/pipevm/pipevm"
#endif

namespace pipevm::cli {

namespace {

struct RuleText {
  std::string_view name, short_text, full_text;
};

constexpr std::array kRules = {
#define PIPEVM_RULE(name, short_text, full_text) RuleText{#name, short_text, full_text},
#include "check_rules.def"
};

const RuleText* rule_text(DiagnosticKind kind) {
  for (const RuleText& r : kRules) {
    if (r.name == name(kind)) return &r;
  }
  return nullptr;
}

// SARIF plain-text messages treat [text](id) as links: literal brackets are
// escaped with a backslash (SARIF 2.1.0 section 3.11.6).
std::string escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 14695981039346656037ull) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string hex(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<std::size_t>(i)] = kDigits[value & 15];
  return out;
}

bool is_absolute(const std::string& path) {
  return !path.empty() && path.front() == '/';
}

// Relative to %SRCROOT% (the working directory) when the file lies under it.
nlohmann::json artifact_location(std::string path) {
  if (is_absolute(path)) {
    std::error_code error;
    const std::string root = std::filesystem::current_path(error).string() + "/";
    if (!error && path.rfind(root, 0) == 0) path = path.substr(root.size());
  }
  if (path.rfind("./", 0) == 0) path = path.substr(2);
  nlohmann::json a = {{"uri", file_uri(path)}};
  if (!is_absolute(path)) a["uriBaseId"] = "%SRCROOT%";
  return a;
}

// A region in characters, as the run's columnKind says.
nlohmann::json region(const Location& location) {
  const SourceFile& file = *location.file;
  const LineColumn begin = file.position(location.range.begin, ColumnUnit::characters);
  nlohmann::json r = {{"startLine", begin.line}, {"startColumn", begin.column}};
  if (location.range.end > location.range.begin) {
    const LineColumn end = file.position(location.range.end, ColumnUnit::characters);
    r["endLine"] = end.line;
    r["endColumn"] = end.column;
  }
  r["snippet"] = {{"text", std::string(file.line(begin.line))}};
  return r;
}

nlohmann::json physical_location(const Location& location) {
  return {{"physicalLocation",
           {{"artifactLocation", artifact_location(location.file->name())},
            {"region", region(location)}}}};
}

std::string rank_words(const Location& location) {
  if (location.rank < 0) return "";
  std::string s = "rank " + std::to_string(location.rank);
  if (location.stage >= 0 && location.stage != location.rank) {
    s += " (stage " + std::to_string(location.stage) + ")";
  }
  return s;
}

nlohmann::json rule_json(DiagnosticKind kind) {
  const RuleText* text = rule_text(kind);
  const std::string short_text =
      text ? std::string(text->short_text) : std::string(name(class_of(kind)));
  const std::string full_text = text ? std::string(text->full_text) : short_text + ".";
  const std::string uri = rule_help_uri(kind);
  return {{"id", code(kind)},
          {"name", std::string(name(kind))},
          {"shortDescription", {{"text", short_text}}},
          {"fullDescription", {{"text", full_text}}},
          {"help",
           {{"text", full_text + " See " + uri},
            {"markdown", "**" + code(kind) + " " + short_text + "** (" +
                             std::string(name(class_of(kind))) + ")\n\n" + full_text +
                             "\n\n[docs/checker.md#" + std::string(name(class_of(kind))) + "](" +
                             uri + ")"}}},
          {"helpUri", uri},
          {"defaultConfiguration", {{"level", "error"}}},
          {"properties",
           {{"class", std::string(name(class_of(kind)))},
            {"tags", nlohmann::json::array({"pipevm", std::string(name(class_of(kind)))})},
            {"precision", "very-high"},
            {"problem.severity", "error"}}}};
}

class SarifBuilder {
 public:
  void add(const FileReport& report) {
    for (const Finding& f : report.findings) results_.push_back(result(f, report));
    if (report.suppressed > 0) suppressed_ += report.suppressed;
    folded_ += report.folded();
  }

  nlohmann::json finish(const std::vector<std::string>& errors) {
    nlohmann::json rules = nlohmann::json::array();
    std::map<int, std::size_t> index;
    for (const auto& [number, kind] : kinds_) {
      index[number] = rules.size();
      rules.push_back(rule_json(kind));
    }
    for (nlohmann::json& r : results_) {
      r["ruleIndex"] = index.at(r["properties"]["code"].get<int>());
    }
    nlohmann::json notifications = nlohmann::json::array();
    for (const std::string& e : errors) {
      notifications.push_back({{"level", "error"}, {"message", {{"text", e}}}});
    }
    nlohmann::json invocation = {{"executionSuccessful", errors.empty()}};
    if (!notifications.empty()) invocation["toolExecutionNotifications"] = notifications;
    nlohmann::json driver = {{"name", "pipevm"},
                             {"fullName", "pipevm check"},
                             {"version", std::string(project_version())},
                             {"semanticVersion", std::string(project_version())},
                             {"informationUri", PIPEVM_REPOSITORY_URL},
                             {"rules", std::move(rules)}};
    nlohmann::json run = {
        {"tool", {{"driver", std::move(driver)}}},
        {"columnKind", "unicodeCodePoints"},
        {"originalUriBaseIds",
         {{"%SRCROOT%", {{"description", {{"text", "The directory pipevm check ran in."}}}}}}},
        {"invocations", nlohmann::json::array({std::move(invocation)})},
        {"results", std::move(results_)},
        {"properties", {{"folded", folded_}, {"suppressed", suppressed_}}}};
    return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
            {"version", "2.1.0"},
            {"runs", nlohmann::json::array({std::move(run)})}};
  }

 private:
  nlohmann::json result(const Finding& f, const FileReport& report) {
    const Diagnostic& d = f.diagnostic;
    kinds_.emplace(code_number(d.kind), d.kind);
    std::string text = escaped(d.message);
    const std::string who = rank_words(d.location);
    if (!who.empty()) text += " (" + who + ")";
    // Related locations, linked from the message; notes without a place stay in it.
    nlohmann::json related = nlohmann::json::array();
    std::string links;
    for (const Note& n : d.notes) {
      if (!n.location.file) {
        text += " Note: " + escaped(n.message) + ".";
        continue;
      }
      const std::size_t id = related.size() + 1;
      nlohmann::json r = physical_location(n.location);
      r["id"] = id;
      r["message"] = {{"text", escaped(n.message)}};
      related.push_back(std::move(r));
      const LineColumn p = n.location.file->position(n.location.range.begin);
      std::string label = rank_words(n.location);
      label = (label.empty() ? "line " : label + ", line ") + std::to_string(p.line);
      links +=
          (links.empty() ? "" : ", ") + std::string("[") + label + "](" + std::to_string(id) + ")";
    }
    if (!links.empty()) text += " See " + links + ".";
    const std::string folding = folding_text(f, report);
    if (!folding.empty()) text += " (" + escaped(folding) + ")";

    nlohmann::json properties = {{"code", code_number(d.kind)}, {"folded", f.folded}};
    if (f.config) {
      properties["configuration"] = {{"stages", f.config->stages},
                                     {"micro_batches", f.config->micro_batches},
                                     {"dp", f.config->dp},
                                     {"chunks", f.config->chunks}};
      properties["configurations"] = f.configurations;
    }
    if (d.location.rank >= 0) properties["rank"] = d.location.rank;
    if (d.location.stage >= 0) properties["stage"] = d.location.stage;
    if (!f.ranks.empty()) properties["ranks"] = f.ranks;

    nlohmann::json out = {{"ruleId", code(d.kind)},
                          {"level", name(d.severity)},
                          {"message", {{"text", text}}},
                          {"properties", std::move(properties)}};
    const SourceFile* file = d.location.file ? d.location.file.get() : report.file.get();
    Location where = d.location;
    if (!where.file) where.file = report.file;
    if (file != nullptr) {
      out["locations"] = nlohmann::json::array({physical_location(where)});
      // Stable across edits elsewhere in the file: the rule, the file and the
      // statement's text, not its line number.
      const LineColumn p = file->position(where.range.begin);
      std::uint64_t hash = fnv1a(code(d.kind));
      hash = fnv1a(file->name(), hash);
      hash = fnv1a(file->line(p.line), hash);
      out["partialFingerprints"] = {{"pipevmFinding/v1", hex(hash)}};
    }
    if (!related.empty()) out["relatedLocations"] = std::move(related);
    return out;
  }

  std::map<int, DiagnosticKind> kinds_;
  nlohmann::json results_ = nlohmann::json::array();
  std::size_t folded_ = 0, suppressed_ = 0;
};

}  // namespace

std::string file_uri(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = is_absolute(path) ? "file://" : "";
  for (const char c : path) {
    const auto b = static_cast<unsigned char>(c);
    const bool keep = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
                      b == '-' || b == '.' || b == '_' || b == '~' || b == '/';
    if (keep) {
      out += c;
    } else {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

std::string_view rule_short_description(DiagnosticKind kind) {
  const RuleText* r = rule_text(kind);
  return r ? r->short_text : name(class_of(kind));
}

std::string_view rule_full_description(DiagnosticKind kind) {
  const RuleText* r = rule_text(kind);
  return r ? r->full_text : name(class_of(kind));
}

std::string rule_help_uri(DiagnosticKind kind) {
  std::string c = code(kind);
  for (char& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::string(PIPEVM_REPOSITORY_URL) + "/blob/main/docs/checker.md#" + c;
}

nlohmann::json reports_to_sarif(const std::vector<FileReport>& reports,
                                const std::vector<std::string>& usage_errors) {
  SarifBuilder builder;
  std::vector<std::string> errors = usage_errors;
  for (const FileReport& r : reports) {
    if (!r.usage_error.empty()) {
      errors.push_back(r.name + ": " + r.usage_error);
      continue;
    }
    builder.add(r);
  }
  return builder.finish(errors);
}

}  // namespace pipevm::cli
