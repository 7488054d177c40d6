// Simulated runs side by side, and peak bytes in words (simulate_compare.hpp).
#include "simulate_compare.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace pipevm::api {

namespace {

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", fraction * 100);
  return text;
}

std::uint64_t largest(const std::vector<RankBytes>& bytes) {
  std::uint64_t most = 0;
  for (const RankBytes& rank : bytes) most = std::max(most, rank.total());
  return most;
}

std::string configuration(const Program& program) {
  const Config& c = program.config;
  std::string text = "p" + std::to_string(c.stages) + " m" + std::to_string(c.micro_batches);
  if (c.chunks > 1) text += " v" + std::to_string(c.chunks);
  if (c.dp > 1) text += " dp" + std::to_string(c.dp);
  return text;
}

}  // namespace

std::string bytes_text(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.3g %s", value, kUnits[unit]);
  }
  return text;
}

std::string peak_bytes_line(const std::vector<RankBytes>& bytes) {
  if (bytes.empty()) return "";
  std::string line = "peak bytes per rank (as `pipevm check` counts them):";
  for (const RankBytes& rank : bytes) {
    line += " " + std::to_string(rank.rank) + ": " + bytes_text(rank.total()) +
            (&rank == &bytes.back() ? "" : ",");
  }
  return line + "\n";
}

std::string comparison_text(const std::vector<ComparedRun>& runs) {
  std::size_t name_width = 8;
  for (const ComparedRun& r : runs) name_width = std::max(name_width, r.file.size());
  std::ostringstream out;
  char row[512];
  std::snprintf(row, sizeof row, "%-*s  %-14s %10s %8s %12s  %s\n", static_cast<int>(name_width),
                "schedule", "configuration", "makespan", "bubble", "peak bytes",
                "peak bytes per rank");
  out << row;
  for (const ComparedRun& r : runs) {
    std::string per_rank;
    for (const RankBytes& rank : r.run.bytes) {
      per_rank += (per_rank.empty() ? "" : " ") + bytes_text(rank.total());
    }
    std::snprintf(row, sizeof row, "%-*s  %-14s %10s %8s %12s  %s\n", static_cast<int>(name_width),
                  r.file.c_str(), configuration(r.run.program).c_str(),
                  format_time(r.run.simulation.timeline.makespan).c_str(),
                  percent(r.run.simulation.bubble_fraction).c_str(),
                  r.run.bytes.empty() ? "-" : bytes_text(largest(r.run.bytes)).c_str(),
                  per_rank.c_str());
    out << row;
  }
  return out.str();
}

nlohmann::json comparison_json(const std::vector<ComparedRun>& runs) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ComparedRun& r : runs) {
    const Config& c = r.run.program.config;
    nlohmann::json peaks = nlohmann::json::array();
    for (const RankBytes& rank : r.run.bytes) peaks.push_back(rank.total());
    rows.push_back({{"file", r.file},
                    {"stages", c.stages},
                    {"micro_batches", c.micro_batches},
                    {"chunks", c.chunks},
                    {"dp", c.dp},
                    {"makespan", r.run.simulation.timeline.makespan},
                    {"bubble_fraction", r.run.simulation.bubble_fraction},
                    {"peak_bytes", peaks}});
  }
  return rows;
}

}  // namespace pipevm::api
