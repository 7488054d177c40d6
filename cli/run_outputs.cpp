// Output checks, the run's identity, resuming, the checkpoint schedule and
// the report of `pipevm run` (see run_outputs.hpp).
#include "run_outputs.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "digest.hpp"
#include "output_files.hpp"
#include "shortest_text.hpp"

namespace pipevm::cli {

namespace {

namespace fs = std::filesystem;

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error_a;
  std::error_code error_b;
  const fs::path path_a = fs::weakly_canonical(a, error_a);
  const fs::path path_b = fs::weakly_canonical(b, error_b);
  return !error_a && !error_b && path_a == path_b;
}

// "0-1|2-6": the layers of each piece, in order.
std::string split_key(const std::vector<runtime::LayerRange>& split) {
  std::string key;
  for (const runtime::LayerRange& piece : split) {
    key += (key.empty() ? "" : "|") + std::to_string(piece.begin) + "-" +
           std::to_string(piece.end - 1);
  }
  return key;
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

std::vector<runtime::LayerRange> recorded_split(const std::string& directory, int layers) {
  const runtime::Manifest manifest = runtime::read_manifest(directory);
  const auto found = manifest.made_for.find("model.split");
  const std::string key = found == manifest.made_for.end() ? "" : found->second;
  std::vector<runtime::LayerRange> split;
  const char* at = key.data();
  const char* const end = key.data() + key.size();
  // Pieces must be contiguous, cover every layer and be written as split_key writes them.
  while (at < end) {
    runtime::LayerRange piece;
    int last = -1;
    auto parsed = std::from_chars(at, end, piece.begin);
    if (parsed.ec == std::errc{} && parsed.ptr < end && *parsed.ptr == '-') {
      parsed = std::from_chars(parsed.ptr + 1, end, last);
    } else {
      parsed.ec = std::errc::invalid_argument;
    }
    piece.end = last + 1;
    const int expected_begin = split.empty() ? 0 : split.back().end;
    if (parsed.ec != std::errc{} || piece.begin != expected_begin || piece.end <= piece.begin ||
        (parsed.ptr < end && *parsed.ptr != '|')) {
      split.clear();
      break;
    }
    split.push_back(piece);
    at = parsed.ptr < end ? parsed.ptr + 1 : end;
  }
  if (split.empty() || split.back().end != layers) {
    throw runtime::CheckpointError("--resume " + directory +
                                   ": the manifest does not say how the model of " +
                                   std::to_string(layers) + " layers was cut (model.split '" +
                                   key + "')");
  }
  return split;
}

runtime::RunIdentity run_identity(const RunConfig& config, const Program& program,
                                  const std::vector<runtime::LayerRange>& split) {
  std::uint64_t digest = runtime::kFnv1aBasis;
  for (int rank = 0; rank < program.ranks(); ++rank) {
    const std::string text = disassemble_rank(program, rank);
    digest = runtime::fnv1a_bytes(std::as_bytes(std::span<const char>(text)), digest);
  }
  const std::string sizes = runtime::describe(config.model);
  const runtime::OptimizerConfig& optimizer = config.optimizer;
  runtime::RunIdentity identity = {{"schedule", program.name},
                                   {"schedule.program_fnv1a64", hex(digest)},
                                   {"world.ranks", std::to_string(program.config.ranks())},
                                   {"world.stages", std::to_string(program.config.stages)},
                                   {"world.dp", std::to_string(program.config.dp)},
                                   {"world.chunks", std::to_string(program.config.chunks)},
                                   {"world.placement", std::string(name(program.placement))},
                                   {"model.sizes", sizes},
                                   {"model.loss", std::string(runtime::name(config.model.loss))},
                                   {"model.seed", std::to_string(config.model.seed)},
                                   {"model.split", split_key(split)},
                                   {"data.source", config.data},
                                   {"training.batch_size", std::to_string(config.batch_size)},
                                   {"training.micro_batches", std::to_string(config.micro_batches)},
                                   {"training.seed", std::to_string(config.seed)},
                                   {"training.optimizer", optimizer.kind},
                                   {"training.lr", shortest_text(optimizer.lr)},
                                   {"training.momentum", shortest_text(optimizer.momentum)},
                                   {"training.beta1", shortest_text(optimizer.beta1)},
                                   {"training.beta2", shortest_text(optimizer.beta2)},
                                   {"training.eps", shortest_text(optimizer.eps)}};
  if (config.data == "synthetic") {
    identity["data.synthetic_train"] = std::to_string(config.synthetic_train);
    identity["data.synthetic_test"] = std::to_string(config.synthetic_test);
  }
  return identity;
}

Resumed read_resume(const std::string& directory, const runtime::RunIdentity& identity, int rank) {
  const runtime::Manifest manifest = runtime::read_manifest(directory);
  const std::string mismatch = runtime::identity_mismatch(manifest.made_for, identity);
  if (!mismatch.empty()) {
    throw runtime::CheckpointError("--resume " + directory + ": " + mismatch);
  }
  return {manifest.position, runtime::read_piece(directory, manifest, rank)};
}

void Checkpoints::after_step(Trainer& trainer, runtime::Comm& comm, int done, int total) {
  // The last step of an epoch is checkpointed after the epoch's report.
  if (every_steps_ > 0 && done < total && trainer.position().step % every_steps_ == 0) {
    write(trainer, comm);
  }
}

void Checkpoints::after_epoch(Trainer& trainer, runtime::Comm& comm) {
  if (every_steps_ == 0 || trainer.position().step % every_steps_ == 0) write(trainer, comm);
}

void Checkpoints::write(Trainer& trainer, runtime::Comm& comm) {
  const runtime::CheckpointPosition position = trainer.position();
  const runtime::CheckpointResult result =
      runtime::write_checkpoint(comm, directory_, position, identity_, trainer.checkpoint());
  if (result.committed) latest_ = position;
  if (!result.error.empty()) {
    std::cerr << "pipevm run: warning: "
              << (comm.world_rank() == 0 ? "" : "rank " + std::to_string(comm.world_rank()) + ": ")
              << "no checkpoint at " << describe(position) << " in " << directory_ << ": "
              << result.error << "\n";
  }
}

std::string describe(const runtime::CheckpointPosition& position) {
  return "epoch " + std::to_string(position.epoch + 1) + ", step " +
         std::to_string(position.step_in_epoch) + "/" + std::to_string(position.steps_per_epoch) +
         " (" + std::to_string(position.step) + " steps in all)";
}

}  // namespace pipevm::cli
