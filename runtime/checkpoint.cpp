// Checkpoint pieces (safetensors files), the manifest (JSON) and the
// world-wide commit (see checkpoint.hpp).
#include "checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "digest.hpp"
#include "json_integer.hpp"
#include "output_files.hpp"
#include "safetensors.hpp"

namespace pipevm::runtime {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestFormat = "pipevm checkpoint 1";
constexpr const char* kPieceFormat = "pipevm checkpoint piece 1";
constexpr const char* kStepPrefix = "step-";

std::string step_directory(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08" PRId64, kStepPrefix, step);
  return name;
}

std::string piece_file(std::int64_t step, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "/rank-%04d.safetensors", rank);
  return step_directory(step) + name;
}

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

std::string chunk_key(std::size_t chunk, const std::string& what) {
  return "chunk." + std::to_string(chunk) + "." + what;
}

std::string encode_piece(const RankCheckpoint& mine, const CheckpointPosition& position, int rank) {
  std::vector<TensorToWrite> tensors;
  std::map<std::string, std::string> metadata = {
      {"format", kPieceFormat},
      {"rank", std::to_string(rank)},
      {"step", std::to_string(position.step)},
      {"chunks", std::to_string(mine.chunks.size())},
      // The bits of the double, so that the sum continues exactly.
      {"epoch.loss", std::to_string(std::bit_cast<std::uint64_t>(mine.epoch_loss))},
      {"epoch.correct", std::to_string(mine.epoch_correct)},
      {"epoch.rows", std::to_string(mine.epoch_rows)}};
  const auto add = [&tensors](const std::string& name, const std::vector<float>& values) {
    tensors.push_back({name, {static_cast<std::int64_t>(values.size())}, values});
  };
  for (std::size_t c = 0; c < mine.chunks.size(); ++c) {
    const RankCheckpoint::Chunk& chunk = mine.chunks[c];
    add(chunk_key(c, "parameters"), chunk.parameters);
    add(chunk_key(c, "gradients"), chunk.gradients);
    std::string names;
    for (const auto& [name, values] : chunk.optimizer.arrays) {
      add(chunk_key(c, "optimizer." + name), values);
      names += (names.empty() ? "" : ",") + name;
    }
    metadata[chunk_key(c, "optimizer.steps")] = std::to_string(chunk.optimizer.steps);
    metadata[chunk_key(c, "optimizer.arrays")] = names;
  }
  return encode_safetensors(tensors, metadata);
}

template <typename Integer>
Integer to_integer(const std::string& text, const std::string& what, const std::string& path) {
  Integer value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw CheckpointError(path + ": " + what + " is not an integer ('" + text + "')");
  }
  return value;
}

RankCheckpoint decode_piece(const SafetensorsFile& file, const std::string& path) {
  const auto meta = [&](const std::string& key) -> const std::string& {
    const auto found = file.metadata.find(key);
    if (found == file.metadata.end()) {
      throw CheckpointError(path + ": the piece has no '" + key + "' in its metadata");
    }
    return found->second;
  };
  const auto tensor = [&](const std::string& name) -> const std::vector<float>& {
    const auto found = file.tensors.find(name);
    if (found == file.tensors.end()) throw CheckpointError(path + ": no tensor " + name);
    return found->second.data;
  };
  RankCheckpoint piece;
  const auto chunks = to_integer<std::size_t>(meta("chunks"), "chunks", path);
  if (chunks > 1024) throw CheckpointError(path + ": implausible chunk count");
  for (std::size_t c = 0; c < chunks; ++c) {
    RankCheckpoint::Chunk chunk;
    chunk.parameters = tensor(chunk_key(c, "parameters"));
    chunk.gradients = tensor(chunk_key(c, "gradients"));
    chunk.optimizer.steps =
        to_integer<std::int64_t>(meta(chunk_key(c, "optimizer.steps")), "optimizer steps", path);
    const std::string& names = meta(chunk_key(c, "optimizer.arrays"));
    for (std::size_t begin = 0; begin < names.size();) {
      const std::size_t end = std::min(names.find(',', begin), names.size());
      const std::string name = names.substr(begin, end - begin);
      chunk.optimizer.arrays.emplace_back(name, tensor(chunk_key(c, "optimizer." + name)));
      begin = end + 1;
    }
    piece.chunks.push_back(std::move(chunk));
  }
  piece.epoch_loss =
      std::bit_cast<double>(to_integer<std::uint64_t>(meta("epoch.loss"), "epoch.loss", path));
  piece.epoch_correct = to_integer<std::int64_t>(meta("epoch.correct"), "epoch.correct", path);
  piece.epoch_rows = to_integer<std::int64_t>(meta("epoch.rows"), "epoch.rows", path);
  return piece;
}

std::string encode_manifest(const Manifest& manifest) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const PieceRecord& piece : manifest.pieces) {
    pieces.push_back({{"rank", piece.rank},
                      {"file", piece.file},
                      {"bytes", piece.bytes},
                      {"fnv1a64", hex(piece.digest)}});
  }
  const CheckpointPosition& at = manifest.position;
  const nlohmann::json json = {{"format", kManifestFormat},
                               {"position",
                                {{"step", at.step},
                                 {"epoch", at.epoch},
                                 {"step_in_epoch", at.step_in_epoch},
                                 {"steps_per_epoch", at.steps_per_epoch}}},
                               {"made_for", manifest.made_for},
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

// What each rank tells world rank 0 after writing its piece.
struct PieceReport {
  std::uint64_t written = 0;
  std::uint64_t bytes = 0;
  std::uint64_t digest = 0;
};

}  // namespace

CheckpointResult write_checkpoint(Comm& comm, const std::string& directory,
                                  const CheckpointPosition& position, const RunIdentity& identity,
                                  const RankCheckpoint& mine) {
  const int rank = comm.world_rank();
  const std::string file = piece_file(position.step, rank);
  PieceReport report;
  std::string error;
  try {
    const std::string bytes = encode_piece(mine, position, rank);
    const std::string step_path = directory + "/" + step_directory(position.step);
    std::error_code made;
    fs::create_directory(step_path, made);
    if (made) throw FileError("cannot create " + step_path + ": " + made.message());
    write_file_durably(directory + "/" + file, std::as_bytes(std::span<const char>(bytes)));
    report = {1, bytes.size(), fnv1a_bytes(std::as_bytes(std::span<const char>(bytes)))};
  } catch (const std::exception& failure) {
    error = failure.what();
  }

  std::vector<std::size_t> counts;
  const std::vector<std::byte> gathered =
      comm.gather_to_root(std::as_bytes(std::span<const PieceReport>(&report, 1)), counts);
  std::string commit_error;
  if (rank == 0) {
    Manifest manifest{position, identity, {}};
    std::string failed;
    for (int r = 0; r < comm.world_size(); ++r) {
      PieceReport piece;
      std::memcpy(&piece, gathered.data() + static_cast<std::size_t>(r) * sizeof piece,
                  sizeof piece);
      if (piece.written == 0) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
      manifest.pieces.push_back({r, piece_file(position.step, r), piece.bytes, piece.digest});
    }
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
    if (json.at("format") != kManifestFormat) {
      throw CheckpointError(path + ": format '" + json.at("format").dump() + "', expected '" +
                            kManifestFormat + "'");
    }
    // A number out of its type's range (1e30 for an int) is refused, not converted.
    const auto integer = [&]<typename T>(const nlohmann::json& object, const char* key, T) {
      const std::optional<T> number = json_integer<T>(object.at(key));
      if (!number) throw CheckpointError(path + ": '" + key + "' is not an integer in range");
      return *number;
    };
    const nlohmann::json& at = json.at("position");
    manifest.position = {integer(at, "step", std::int64_t{}), integer(at, "epoch", int{}),
                         integer(at, "step_in_epoch", int{}), integer(at, "steps_per_epoch", int{})};
    manifest.made_for = json.at("made_for").get<RunIdentity>();
    for (const nlohmann::json& piece : json.at("pieces")) {
      manifest.pieces.push_back({integer(piece, "rank", int{}), piece.at("file").get<std::string>(),
                                 integer(piece, "bytes", std::uint64_t{}),
                                 std::stoull(piece.at("fnv1a64").get<std::string>(), nullptr, 16)});
    }
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

RankCheckpoint read_piece(const std::string& directory, const Manifest& manifest, int rank) {
  const PieceRecord* record = nullptr;
  for (const PieceRecord& piece : manifest.pieces) {
    if (piece.rank == rank) record = &piece;
  }
  if (record == nullptr) {
    throw CheckpointError(directory + "/" + kManifestName + " has no piece for rank " +
                          std::to_string(rank));
  }
  const std::string path = directory + "/" + record->file;
  std::string bytes;
  try {
    bytes = read_whole_file(path);
  } catch (const FileError& error) {
    throw CheckpointError(std::string("a piece of the checkpoint is missing: ") + error.what());
  }
  if (bytes.size() != record->bytes) {
    throw CheckpointError(path + " has " + std::to_string(bytes.size()) +
                          " bytes, the manifest records " + std::to_string(record->bytes) +
                          ": the piece was truncated or replaced");
  }
  const std::uint64_t digest = fnv1a_bytes(std::as_bytes(std::span<const char>(bytes)));
  if (digest != record->digest) {
    throw CheckpointError(path + ": its FNV-1a digest " + hex(digest) + " is not the manifest's " +
                          hex(record->digest) + ": the piece changed after the checkpoint");
  }
  SafetensorsFile file;
  try {
    file = decode_safetensors(bytes, path);
  } catch (const std::runtime_error& error) {
    throw CheckpointError(error.what());
  }
  const auto meta = [&](const char* key) {
    const auto found = file.metadata.find(key);
    return found == file.metadata.end() ? std::string() : found->second;
  };
  if (meta("format") != kPieceFormat || meta("rank") != std::to_string(rank) ||
      meta("step") != std::to_string(manifest.position.step)) {
    throw CheckpointError(path + ": not rank " + std::to_string(rank) + "'s piece of step " +
                          std::to_string(manifest.position.step));
  }
  return decode_piece(file, path);
}

}  // namespace pipevm::runtime
