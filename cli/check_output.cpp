// The text, gcc and JSON forms of `pipevm check`'s reports.
#include "check_output.hpp"

#include <ostream>

#include <nlohmann/json.hpp>

namespace pipevm::cli {

using api::annotated;
using api::folding_text;
using api::plural;

namespace {

void print_error_line(std::ostream& err, const FileReport& report) {
  if (!report.file) {
    err << "pipevm: error: " << report.usage_error << " [PV1015]\n";
  } else {
    err << "pipevm check: " << report.name << ": " << report.usage_error << '\n';
  }
}

nlohmann::json config_json(const Config& c) {
  return {
      {"stages", c.stages}, {"micro_batches", c.micro_batches}, {"dp", c.dp}, {"chunks", c.chunks}};
}

}  // namespace

void print_text_report(std::ostream& out, std::ostream& err, const FileReport& report, bool color) {
  if (!report.usage_error.empty()) {
    print_error_line(err, report);
    return;
  }
  for (const Finding& f : report.findings) {
    print_text(out, f.diagnostic, color);
    const std::string folding = folding_text(f, report);
    if (!folding.empty()) out << "  = " << folding << '\n';
  }
  if (report.suppressed > 0) {
    out << "(" << report.suppressed
        << " more diagnostics past the checker's limit per kind not shown)\n";
  }
  if (!report.sweep && report.checked == 1) {
    out << memory_to_text(report.memory);
  }
  out << report.name << ": ";
  const std::size_t errors = report.errors();
  const std::string checked = plural(report.checked, "configuration");
  if (report.failing == 0 && errors == 0) {
    out << "ok for " << checked;
  } else {
    out << plural(errors, "error");
    if (report.folded() > 0) out << " (" << report.folded() << " more folded into them)";
    if (report.sweep && report.checked > 0) {
      out << " in " << report.failing << " of " << checked;
    }
  }
  if (report.skipped > 0) out << " (" << report.skipped << " skipped: require fails)";
  out << ", " << plural(report.instructions, "instruction") << " checked\n";
}

void print_gcc_report(std::ostream& out, std::ostream& err, const FileReport& report) {
  if (!report.usage_error.empty()) {
    print_error_line(err, report);
    return;
  }
  for (const Finding& f : report.findings) print_gcc(out, annotated(f, report));
  if (report.suppressed > 0) {
    out << report.name << ":1:1: note: " << report.suppressed
        << " more diagnostics past the checker's limit per kind not shown\n";
  }
}

nlohmann::json reports_to_json(const std::vector<FileReport>& reports) {
  nlohmann::json files = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  std::size_t findings = 0, folded = 0;
  for (const FileReport& r : reports) {
    if (!r.usage_error.empty()) {
      errors.push_back({{"file", r.name}, {"message", r.usage_error}});
      continue;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const Finding& f : r.findings) {
      nlohmann::json j = to_json(f.diagnostic);
      if (f.config) {
        j["configuration"] = config_json(*f.config);
        j["configurations"] = f.configurations;
      }
      if (!f.ranks.empty()) j["ranks"] = f.ranks;
      j["folded"] = f.folded;
      list.push_back(std::move(j));
    }
    findings += r.findings.size();
    folded += r.folded();
    nlohmann::json file = {
        {"file", r.name},
        {"verdict", r.failing > 0 || r.errors() > 0 ? "error" : "ok"},
        {"configurations",
         {{"checked", r.checked}, {"failing", r.failing}, {"skipped", r.skipped}}},
        {"instructions", r.instructions},
        {"diagnostics", std::move(list)},
        {"folded", r.folded()},
        {"suppressed", r.suppressed}};
    if (!r.sweep && r.checked == 1) {
      file["memory"] = memory_to_json(r.memory);
      file["per_rank"] = bytes_to_json(r.bytes);
    }
    files.push_back(std::move(file));
  }
  return {{"version", 2},
          {"files", std::move(files)},
          {"errors", std::move(errors)},
          {"summary", {{"files", reports.size()}, {"diagnostics", findings}, {"folded", folded}}}};
}

nlohmann::json usage_error_json(const std::string& message) {
  return {{"version", 2},
          {"files", nlohmann::json::array()},
          {"errors", nlohmann::json::array({{{"message", message}}})}};
}

}  // namespace pipevm::cli
