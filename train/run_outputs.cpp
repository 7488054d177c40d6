// Output checks and the report of `pipevm run` (see run_outputs.hpp).
#include "run_outputs.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint.hpp"
#include "output_files.hpp"

namespace pipevm::train {

namespace {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error_a;
  std::error_code error_b;
  const fs::path path_a = fs::weakly_canonical(a, error_a);
  const fs::path path_b = fs::weakly_canonical(b, error_b);
  return !error_a && !error_b && path_a == path_b;
}

}  // namespace

std::string check_outputs(const RunOutputs& outputs, bool root) {
  std::vector<std::string> problems;
  if (root) {
    const std::pair<const char*, const std::string*> files[] = {{"--save", &outputs.save},
                                                                {"--trace", &outputs.trace},
                                                                {"--profile", &outputs.profile},
                                                                {"--report", &outputs.report}};
    for (std::size_t i = 0; i < std::size(files); ++i) {
      const auto& [flag, path] = files[i];
      if (path->empty()) continue;
      if (const auto why = runtime::why_not_writable_file(*path)) {
        problems.push_back(std::string(flag) + " " + *path + ": " + *why);
      }
      for (std::size_t j = 0; j < i; ++j) {
        if (!files[j].second->empty() && same_file(*files[j].second, *path)) {
          problems.push_back(std::string(files[j].first) + " and " + flag + " name the same file " +
                             *path);
        }
      }
    }
  }
  if (!outputs.checkpoint.empty()) {
    const std::string& directory = outputs.checkpoint;
    if (const auto why = runtime::why_not_writable_directory(directory)) {
      problems.push_back("--checkpoint " + directory + ": " + *why);
    } else if (runtime::has_checkpoint(directory) &&
               (outputs.resume.empty() || !same_file(outputs.resume, directory))) {
      problems.push_back("--checkpoint " + directory +
                         " already holds a checkpoint; continue it with --resume " + directory +
                         ", or choose another directory");
    }
  }
  std::string text;
  for (const std::string& problem : problems) text += (text.empty() ? "" : "\n") + problem;
  return text;
}

bool write_run_report(const std::string& path, runtime::Comm& comm, const Program& program,
                      const Machine& machine, const std::vector<EpochReport>& epochs,
                      std::string& error) {
  // Each rank's device peak by category, then its host peak.
  std::array<std::uint64_t, runtime::kMemoryCategories + 1> mine{};
  const runtime::MemoryBytes& peak = machine.peak_bytes();
  std::copy(peak.bytes.begin(), peak.bytes.end(), mine.begin());
  mine.back() = machine.peak_host_bytes();
  std::vector<std::size_t> counts;
  const std::vector<std::byte> all = comm.gather_to_root(std::as_bytes(std::span(mine)), counts);
  if (comm.world_rank() != 0) return true;
  const Config& c = program.config;
  nlohmann::json report = {{"schedule", program.name},
                           {"configuration",
                            {{"stages", c.stages},
                             {"micro_batches", c.micro_batches},
                             {"dp", c.dp},
                             {"chunks", c.chunks}}}};
  nlohmann::json per_epoch = nlohmann::json::array();
  for (const EpochReport& e : epochs) {
    nlohmann::json entry = {{"epoch", e.epoch + 1},
                            {"loss", e.train_loss},
                            {"train_accuracy", e.train_accuracy},
                            {"seconds", e.train_seconds}};
    entry["test_accuracy"] = e.test_accuracy ? nlohmann::json(*e.test_accuracy) : nlohmann::json();
    per_epoch.push_back(entry);
  }
  report["epochs"] = per_epoch;
  nlohmann::json per_rank = nlohmann::json::array();
  const std::size_t record = sizeof(mine);
  for (std::size_t rank = 0; rank * record + record <= all.size(); ++rank) {
    runtime::MemoryBytes bytes;
    std::memcpy(bytes.bytes.data(), all.data() + rank * record, sizeof(bytes.bytes));
    std::uint64_t host_peak = 0;
    std::memcpy(&host_peak, all.data() + rank * record + sizeof(bytes.bytes), sizeof(host_peak));
    using runtime::MemoryCategory;
    per_rank.push_back({{"rank", rank},
                        {"stage", stage_of(c, static_cast<int>(rank))},
                        {"peak_bytes", bytes.total()},
                        {"weights", bytes[MemoryCategory::weights]},
                        {"gradients", bytes[MemoryCategory::gradients]},
                        {"optimizer", bytes[MemoryCategory::optimizer]},
                        {"activations", bytes[MemoryCategory::activations]},
                        {"activation_gradients", bytes[MemoryCategory::activation_gradients]},
                        {"messages", bytes[MemoryCategory::messages]},
                        {"host", bytes[MemoryCategory::host]},
                        {"peak_host_bytes", host_peak},
                        {"total", bytes.total()}});
  }
  report["per_rank"] = per_rank;
  const std::string text = report.dump(2) + "\n";
  try {
    runtime::write_file_durably(path, std::as_bytes(std::span(text)));
  } catch (const runtime::FileError& e) {
    error = "--report " + path + ": " + e.what();
    return false;
  }
  return true;
}

}  // namespace pipevm::train
