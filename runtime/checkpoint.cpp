// Writing a checkpoint's pieces (safetensors files), the manifest (JSON)
// and the world-wide commit; reading the manifest back (checkpoint.hpp).
// Reading the slices is checkpoint_slices.cpp's.
#include "checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "checkpoint_names.hpp"
#include "digest.hpp"
#include "json_integer.hpp"
#include "output_files.hpp"
#include "safetensors.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;
using namespace checkpoint_names;

std::string encode_piece(const RankCheckpoint& mine, const CheckpointPosition& position, int rank) {
  std::vector<TensorToWrite> tensors;
  std::map<std::string, std::string> metadata = {{"format", kPieceFormat},
                                                 {"rank", std::to_string(rank)},
                                                 {"step", std::to_string(position.step)}};
  const auto add = [&tensors](const std::string& name, const std::vector<float>& values) {
    tensors.push_back({name, {static_cast<std::int64_t>(values.size())}, values});
  };
  for (const SliceState& slice : mine.slices) {
    const int layer = slice.where.layer;
    add(layer_key(layer, "parameters"), slice.parameters);
    std::string names;
    for (const auto& [name, values] : slice.optimizer.arrays) {
      add(layer_key(layer, "optimizer." + name), values);
      names += (names.empty() ? "" : ",") + name;
    }
    metadata[layer_key(layer, "begin")] = std::to_string(slice.where.begin);
    metadata[layer_key(layer, "optimizer.steps")] = std::to_string(slice.optimizer.steps);
    metadata[layer_key(layer, "optimizer.arrays")] = names;
  }
  return encode_safetensors(tensors, metadata);
}

nlohmann::json encode_slices(const std::vector<LayerSlice>& slices) {
  nlohmann::json list = nlohmann::json::array();
  for (const LayerSlice& slice : slices) list.push_back({slice.layer, slice.begin, slice.end});
  return list;
}

std::string encode_manifest(const Manifest& manifest) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const PieceRecord& piece : manifest.pieces) {
    pieces.push_back({{"rank", piece.rank},
                      {"file", piece.file},
                      {"bytes", piece.bytes},
                      {"fnv1a64", hex(piece.digest)},
                      {"slices", encode_slices(piece.slices)}});
  }
  nlohmann::json sums = nlohmann::json::array();
  for (const EpochSums& rank : manifest.epoch_sums) {
    // The bits of the double, so that the sum continues exactly.
    sums.push_back({{"loss_bits", hex(std::bit_cast<std::uint64_t>(rank.loss))},
                    {"correct", rank.correct},
                    {"rows", rank.rows}});
  }
  const CheckpointPosition& at = manifest.position;
  const nlohmann::json json = {{"format", kManifestFormat},
                               {"position",
                                {{"step", at.step},
                                 {"epoch", at.epoch},
                                 {"step_in_epoch", at.step_in_epoch},
                                 {"steps_per_epoch", at.steps_per_epoch}}},
                               {"made_for", manifest.run.made_for},
                               {"layout", manifest.run.layout},
                               {"epoch_sums", sums},
                               {"pieces", pieces}};
  return json.dump(2) + "\n";
}

// Removes what no reader of the manifest looks at: other step directories,
// files in the committed one that are not its pieces, manifests cut short.
// Best effort: what stays is ignored and removed at the next commit.
void remove_uncommitted(const std::string& directory, const Manifest& manifest) {
  const std::string committed = step_directory(manifest.position.step);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    const bool stale_step = name.starts_with(kStepPrefix) && name != committed;
    const bool stale_manifest = name.starts_with(std::string(kManifestName) + ".tmp.");
    if (stale_step || stale_manifest) fs::remove_all(entry.path(), error);
  }
  for (const auto& entry : fs::directory_iterator(fs::path(directory) / committed, error)) {
    const std::string file = committed + "/" + entry.path().filename().string();
    bool recorded = false;
    for (const PieceRecord& piece : manifest.pieces) recorded = recorded || piece.file == file;
    if (!recorded) fs::remove_all(entry.path(), error);
  }
}

// What each rank tells world rank 0 after writing its slices; the slices
// follow it as (layer, begin, end) triples.
struct PieceReport {
  std::uint64_t written = 0;  // 1: the rank did its part (maybe no file)
  std::uint64_t has_file = 0;
  std::uint64_t bytes = 0;
  std::uint64_t digest = 0;
  std::uint64_t loss_bits = 0;
  std::int64_t correct = 0;
  std::int64_t rows = 0;
};

std::vector<std::byte> encode_report(const PieceReport& report, const RankCheckpoint& mine) {
  std::vector<std::uint64_t> slices;
  for (const SliceState& slice : mine.slices) {
    slices.insert(slices.end(), {static_cast<std::uint64_t>(slice.where.layer), slice.where.begin,
                                 slice.where.end});
  }
  std::vector<std::byte> bytes(sizeof report + slices.size() * sizeof(std::uint64_t));
  std::memcpy(bytes.data(), &report, sizeof report);
  if (!slices.empty()) {
    std::memcpy(bytes.data() + sizeof report, slices.data(), slices.size() * sizeof(std::uint64_t));
  }
  return bytes;
}

// World rank 0: the manifest from every rank's report, or why it cannot be.
Manifest collect_reports(const std::vector<std::byte>& gathered,
                         const std::vector<std::size_t>& counts,
                         const CheckpointPosition& position, const RunRecord& run,
                         std::string& failed) {
  Manifest manifest{position, run, {}, {}};
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    PieceReport report;
    std::memcpy(&report, gathered.data() + at, sizeof report);
    std::vector<std::uint64_t> triples((counts[r] - sizeof report) / sizeof(std::uint64_t));
    if (!triples.empty()) {
      std::memcpy(triples.data(), gathered.data() + at + sizeof report,
                  triples.size() * sizeof(std::uint64_t));
    }
    at += counts[r];
    const int rank = static_cast<int>(r);
    if (report.written == 0) failed += (failed.empty() ? "" : ", ") + std::to_string(rank);
    manifest.epoch_sums.push_back(
        {std::bit_cast<double>(report.loss_bits), report.correct, report.rows});
    if (report.has_file == 0) continue;
    PieceRecord piece{rank, piece_file(position.step, rank), report.bytes, report.digest, {}};
    for (std::size_t i = 0; i + 2 < triples.size(); i += 3) {
      piece.slices.push_back({static_cast<int>(triples[i]), triples[i + 1], triples[i + 2]});
    }
    manifest.pieces.push_back(std::move(piece));
  }
  return manifest;
}

}  // namespace

CheckpointResult write_checkpoint(Comm& comm, const std::string& directory,
                                  const CheckpointPosition& position, const RunRecord& run,
                                  const RankCheckpoint& mine) {
  const int rank = comm.world_rank();
  PieceReport report;
  report.loss_bits = std::bit_cast<std::uint64_t>(mine.epoch.loss);
  report.correct = mine.epoch.correct;
  report.rows = mine.epoch.rows;
  std::string error;
  try {
    if (!mine.slices.empty()) {
      const std::string bytes = encode_piece(mine, position, rank);
      const std::string step_path = directory + "/" + step_directory(position.step);
      std::error_code made;
      fs::create_directory(step_path, made);
      if (made) throw FileError("cannot create " + step_path + ": " + made.message());
      write_file_durably(directory + "/" + piece_file(position.step, rank),
                         std::as_bytes(std::span<const char>(bytes)));
      report.has_file = 1;
      report.bytes = bytes.size();
      report.digest = fnv1a_bytes(std::as_bytes(std::span<const char>(bytes)));
    }
    report.written = 1;
  } catch (const std::exception& failure) {
    error = failure.what();
  }

  std::vector<std::size_t> counts;
  const std::vector<std::byte> gathered = comm.gather_to_root(encode_report(report, mine), counts);
  std::string commit_error;
  if (rank == 0) {
    std::string failed;
    const Manifest manifest = collect_reports(gathered, counts, position, run, failed);
    if (!failed.empty()) {
      commit_error = "rank(s) " + failed + " could not write their piece";
    } else {
      try {
        sync_directory(directory);  // the step directory's entry
        const std::string text = encode_manifest(manifest);
        write_file_durably(directory + "/" + kManifestName,
                           std::as_bytes(std::span<const char>(text)));
        remove_uncommitted(directory, manifest);
      } catch (const std::exception& failure) {
        commit_error = std::string("the manifest: ") + failure.what();
      }
    }
  }
  const bool committed = comm.all_ok(commit_error.empty());
  if (rank == 0 && !commit_error.empty()) error += (error.empty() ? "" : "; ") + commit_error;
  return {committed, error};
}

bool has_checkpoint(const std::string& directory) {
  std::error_code error;
  return fs::exists(fs::path(directory) / kManifestName, error);
}

namespace {

// The manifest's fields, or CheckpointError naming `path`.
Manifest decode_manifest(const nlohmann::json& json, const std::string& path) {
  // A number out of its type's range (1e30 for an int) is refused, not converted.
  const auto integer = [&]<typename T>(const nlohmann::json& value, const char* what, T) {
    const std::optional<T> number = json_integer<T>(value);
    if (!number) throw CheckpointError(path + ": '" + what + "' is not an integer in range");
    return *number;
  };
  Manifest manifest;
  const nlohmann::json& at = json.at("position");
  manifest.position = {integer(at.at("step"), "step", std::int64_t{}),
                       integer(at.at("epoch"), "epoch", int{}),
                       integer(at.at("step_in_epoch"), "step_in_epoch", int{}),
                       integer(at.at("steps_per_epoch"), "steps_per_epoch", int{})};
  manifest.run.made_for = json.at("made_for").get<RunIdentity>();
  manifest.run.layout = json.at("layout").get<RunIdentity>();
  for (const nlohmann::json& sums : json.at("epoch_sums")) {
    const std::string bits = sums.at("loss_bits").get<std::string>();
    if (bits.size() != 16 || bits.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw CheckpointError(path + ": 'loss_bits' is not 16 hexadecimal digits");
    }
    manifest.epoch_sums.push_back({std::bit_cast<double>(std::stoull(bits, nullptr, 16)),
                                   integer(sums.at("correct"), "correct", std::int64_t{}),
                                   integer(sums.at("rows"), "rows", std::int64_t{})});
  }
  for (const nlohmann::json& piece : json.at("pieces")) {
    const std::string digest = piece.at("fnv1a64").get<std::string>();
    if (digest.empty() || digest.size() > 16 ||
        digest.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw CheckpointError(path + ": 'fnv1a64' is not a 64-bit hexadecimal digest");
    }
    PieceRecord record{integer(piece.at("rank"), "rank", int{}), piece.at("file").get<std::string>(),
                       integer(piece.at("bytes"), "bytes", std::uint64_t{}),
                       std::stoull(digest, nullptr, 16), {}};
    for (const nlohmann::json& slice : piece.at("slices")) {
      const LayerSlice where{integer(slice.at(0), "slices", int{}),
                             integer(slice.at(1), "slices", std::uint64_t{}),
                             integer(slice.at(2), "slices", std::uint64_t{})};
      if (slice.size() != 3 || where.layer < 0 || where.begin >= where.end) {
        throw CheckpointError(path + ": a slice of " + record.file +
                              " is not [layer, begin, end] with begin < end");
      }
      record.slices.push_back(where);
    }
    manifest.pieces.push_back(std::move(record));
  }
  return manifest;
}

}  // namespace

Manifest read_manifest(const std::string& directory) {
  const std::string path = directory + "/" + kManifestName;
  if (!has_checkpoint(directory)) {
    throw CheckpointError(directory + " holds no checkpoint: it has no " + kManifestName +
                          " (pieces without a manifest are a checkpoint cut short, never used)");
  }
  std::string text;
  try {
    text = read_whole_file(path);
  } catch (const FileError& error) {
    throw CheckpointError(error.what());
  }
  Manifest manifest;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    if (json.at("format") == kOldManifestFormat) {
      throw CheckpointError(
          path + ": a checkpoint in the format '" + kOldManifestFormat +
          "' (one piece per rank, readable only under the layout that wrote it); this pipevm "
          "reads '" + kManifestFormat + "' only. There is no converter: finish that run with "
          "the pipevm that wrote it, under its own layout, or start this run afresh with "
          "--checkpoint in a new directory");
    }
    if (json.at("format") != kManifestFormat) {
      throw CheckpointError(path + ": format " + json.at("format").dump() + ", expected '" +
                            kManifestFormat + "'");
    }
    manifest = decode_manifest(json, path);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    throw CheckpointError(path + ": not a pipevm checkpoint manifest (" + error.what() + ")");
  }
  // A piece is a file of the checkpoint: an altered manifest must not make
  // --resume read a file elsewhere (an absolute path, or one through '..').
  for (const PieceRecord& piece : manifest.pieces) {
    const fs::path file(piece.file);
    const bool inside =
        !file.empty() && file.is_relative() &&
        std::none_of(file.begin(), file.end(), [](const fs::path& part) { return part == ".."; });
    if (!inside) {
      throw CheckpointError(path + ": piece file '" + piece.file +
                            "' is not inside the checkpoint directory");
    }
  }
  const CheckpointPosition& at = manifest.position;
  if (at.step < 0 || at.epoch < 0 || at.step_in_epoch < 0 || at.steps_per_epoch < 0 ||
      at.step_in_epoch > at.steps_per_epoch) {
    throw CheckpointError(path + ": the position of the checkpoint is out of range");
  }
  return manifest;
}

std::string identity_mismatch(const RunIdentity& made_for, const RunIdentity& now) {
  std::string differences;
  const auto differ = [&](const std::string& key, const std::string& then,
                          const std::string& current) {
    differences +=
        (differences.empty() ? "" : "; ") + key + " " + then + " (this run: " + current + ")";
  };
  for (const auto& [key, value] : made_for) {
    const auto found = now.find(key);
    if (found == now.end()) {
      differ(key, value, "none");
    } else if (found->second != value) {
      differ(key, value, found->second);
    }
  }
  for (const auto& [key, value] : now) {
    if (!made_for.contains(key)) differ(key, "none", value);
  }
  return differences.empty() ? "" : "the checkpoint was made for " + differences;
}

}  // namespace pipevm::runtime
