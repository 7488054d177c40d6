// Fuzz target `checkpoint`: what `pipevm run --resume` reads. The first
// byte chooses the file the rest of the input replaces in a real one-rank
// checkpoint (written once, at the first input, into a temporary directory):
//   even: DIR/manifest.json. Asserts that a manifest read_manifest accepts
//         has its position in range and names piece files inside DIR
//         (relative, no '..'), and that read_piece accepts a piece only when
//         the file's size and FNV-1a digest are the manifest's record.
//   odd:  the rank's piece (a safetensors file). With the real manifest, a
//         piece whose bytes differ from the real one is refused (truncated
//         or altered); with a manifest rewritten to record these bytes, the
//         piece is refused with CheckpointError or decodes to at most 1024
//         chunks (the VM then compares each array with its model's).
// Only CheckpointError may escape the readers. Leaves out write_checkpoint's
// side (tests/runtime/checkpoint_test.cpp) and the identity comparison.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "checkpoint.hpp"
#include "digest.hpp"
#include "fuzz_support.hpp"
#include "inprocess_comm.hpp"
#include "output_files.hpp"

namespace {

namespace fs = std::filesystem;
using pipevm::runtime::CheckpointError;
using pipevm::runtime::Manifest;

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  FUZZ_ASSERT(out.good(), "the fuzz target can write its files");
}

std::uint64_t digest_of(std::string_view bytes) {
  return pipevm::runtime::fnv1a_bytes(std::as_bytes(std::span<const char>(bytes)));
}

// A real checkpoint of one rank, and its files' original bytes.
struct Checkpoint {
  fs::path directory;
  std::string manifest;  // manifest.json as written
  fs::path piece;        // the piece's path
  std::string piece_bytes;

  Checkpoint() {
    char name[] = "/tmp/pipevm-fuzz-checkpoint-XXXXXX";
    FUZZ_ASSERT(mkdtemp(name) != nullptr, "a temporary directory");
    directory = name;
    pipevm::runtime::InProcessWorld world(1, 1);
    pipevm::runtime::InProcessComm comm(world, 0);
    pipevm::runtime::RankCheckpoint mine;
    mine.chunks.push_back(
        {{1.0F, 2.0F, 3.0F}, {0.5F, 0.25F, 0.125F}, {7, {{"m", {0.1F, 0.2F, 0.3F}}}}});
    mine.epoch_loss = 1.5;
    mine.epoch_correct = 3;
    mine.epoch_rows = 4;
    const auto result = pipevm::runtime::write_checkpoint(comm, directory.string(), {12, 1, 2, 10},
                                                          {{"schedule", "gpipe"}}, mine);
    FUZZ_ASSERT(result.committed, "the seed checkpoint is written");
    manifest =
        pipevm::runtime::read_whole_file((directory / pipevm::runtime::kManifestName).string());
    const Manifest read = pipevm::runtime::read_manifest(directory.string());
    piece = directory / read.pieces.at(0).file;
    piece_bytes = pipevm::runtime::read_whole_file(piece.string());
    // PIPEVM_FUZZ_WRITE_SEEDS=DIR: the two seeds of the corpus (docs/fuzzing.md).
    if (const char* seeds = std::getenv("PIPEVM_FUZZ_WRITE_SEEDS")) {
      write_file(fs::path(seeds) / "manifest", std::string(1, '\0') + manifest);
      write_file(fs::path(seeds) / "piece", std::string(1, '\1') + piece_bytes);
    }
  }
  ~Checkpoint() {
    std::error_code ignored;
    fs::remove_all(directory, ignored);
  }
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
};

const Checkpoint& checkpoint() {
  static const Checkpoint instance;
  return instance;
}

// read_manifest, or false when it refuses (with CheckpointError only).
bool read_manifest(const fs::path& directory, Manifest& manifest) {
  try {
    manifest = pipevm::runtime::read_manifest(directory.string());
    return true;
  } catch (const CheckpointError&) {
    return false;
  }
}

bool read_piece(const fs::path& directory, const Manifest& manifest, int rank,
                pipevm::runtime::RankCheckpoint& piece) {
  try {
    piece = pipevm::runtime::read_piece(directory.string(), manifest, rank);
    return true;
  } catch (const CheckpointError&) {
    return false;
  }
}

void fuzz_manifest(const Checkpoint& real, std::string_view text) {
  write_file(real.directory / pipevm::runtime::kManifestName, text);
  write_file(real.piece, real.piece_bytes);
  Manifest manifest;
  if (!read_manifest(real.directory, manifest)) return;
  const auto& at = manifest.position;
  FUZZ_ASSERT(at.step >= 0 && at.epoch >= 0 && at.step_in_epoch >= 0 &&
                  at.step_in_epoch <= at.steps_per_epoch,
              "an accepted position is in range");
  for (const pipevm::runtime::PieceRecord& record : manifest.pieces) {
    const fs::path file(record.file);
    FUZZ_ASSERT(file.is_relative(), "an accepted piece file is relative to the checkpoint");
    for (const fs::path& part : file) {
      FUZZ_ASSERT(part != "..", "an accepted piece file stays inside the checkpoint");
    }
    pipevm::runtime::RankCheckpoint piece;
    if (!read_piece(real.directory, manifest, record.rank, piece)) continue;
    // read_piece reads the last record of that rank: compare with it.
    const pipevm::runtime::PieceRecord* last = nullptr;
    for (const auto& other : manifest.pieces) {
      if (other.rank == record.rank) last = &other;
    }
    const std::string bytes =
        pipevm::runtime::read_whole_file((real.directory / last->file).string());
    FUZZ_ASSERT(bytes.size() == last->bytes && digest_of(bytes) == last->digest,
                "a piece is read only when its size and digest are the manifest's");
  }
}

void fuzz_piece(const Checkpoint& real, std::string_view bytes) {
  write_file(real.piece, bytes);
  write_file(real.directory / pipevm::runtime::kManifestName, real.manifest);
  Manifest manifest;
  FUZZ_ASSERT(read_manifest(real.directory, manifest), "the real manifest reads");
  pipevm::runtime::RankCheckpoint piece;
  if (bytes != real.piece_bytes) {
    FUZZ_ASSERT(!read_piece(real.directory, manifest, 0, piece),
                "a truncated or altered piece is refused");
  }
  // The same bytes recorded by the manifest: the piece's content is checked.
  nlohmann::json json = nlohmann::json::parse(real.manifest);
  json["pieces"][0]["bytes"] = bytes.size();
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx",
                static_cast<unsigned long long>(digest_of(bytes)));
  json["pieces"][0]["fnv1a64"] = std::string(digest);
  write_file(real.directory / pipevm::runtime::kManifestName, json.dump(2));
  FUZZ_ASSERT(read_manifest(real.directory, manifest), "the rewritten manifest reads");
  if (!read_piece(real.directory, manifest, 0, piece)) return;
  // The VM compares every array's size with its model's before using it.
  FUZZ_ASSERT(piece.chunks.size() <= 1024, "an accepted piece has a plausible chunk count");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Checkpoint& real = checkpoint();
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    fuzz_manifest(real, rest);
  } else {
    fuzz_piece(real, rest);
  }
  return 0;
}
