// Fuzz target `checkpoint`: what `pipevm run --resume` reads. The first
// byte chooses the file the rest of the input replaces in a real one-rank
// checkpoint (written once, at the first input, into a temporary directory;
// two slices of two layers with Adam's arrays):
//   even: DIR/manifest.json. Asserts that a manifest read_manifest accepts
//         has its position in range, names piece files inside DIR
//         (relative, no '..') and slices with begin < end, and that
//         read_slices accepts only when every piece it needed has the
//         manifest's size and FNV-1a digest, and then gives exactly the
//         floats asked for, with one array per optimizer array.
//   odd:  the rank's piece (a safetensors file). With the real manifest, a
//         piece whose bytes differ from the real one is refused (truncated
//         or altered); with a manifest rewritten to record these bytes, the
//         piece is refused with CheckpointError or gives exactly the floats
//         asked for.
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
#include <vector>

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

// What the seed checkpoint holds, and what the reader asks for.
const std::vector<pipevm::runtime::LayerSlice> kWanted = {{0, 0, 3}, {1, 0, 2}};

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
    for (const pipevm::runtime::LayerSlice& where : kWanted) {
      pipevm::runtime::SliceState slice{where, {}, {7, {{"m", {}}, {"v", {}}}}};
      for (std::uint64_t i = where.begin; i < where.end; ++i) {
        slice.parameters.push_back(static_cast<float>(i) + 0.5F);
        slice.optimizer.arrays[0].second.push_back(0.25F);
        slice.optimizer.arrays[1].second.push_back(0.125F);
      }
      mine.slices.push_back(std::move(slice));
    }
    mine.epoch = {1.5, 3, 4};
    const auto result = pipevm::runtime::write_checkpoint(
        comm, directory.string(), {12, 1, 2, 10}, {{{"model.sizes", "3-2"}}, {}}, mine);
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

bool read_slices(const fs::path& directory, const Manifest& manifest,
                 std::vector<pipevm::runtime::SliceState>& slices) {
  try {
    slices = pipevm::runtime::read_slices(directory.string(), manifest, kWanted);
    return true;
  } catch (const CheckpointError&) {
    return false;
  }
}

// What an accepted read must give: the floats asked for, each array whole.
void assert_usable(const std::vector<pipevm::runtime::SliceState>& slices) {
  FUZZ_ASSERT(slices.size() == kWanted.size(), "one slice per slice asked for");
  for (std::size_t i = 0; i < slices.size(); ++i) {
    FUZZ_ASSERT(slices[i].where == kWanted[i] &&
                    slices[i].parameters.size() == kWanted[i].size(),
                "an accepted slice holds exactly the floats asked for");
    for (const auto& [name, values] : slices[i].optimizer.arrays) {
      FUZZ_ASSERT(values.size() == kWanted[i].size(), "each optimizer array covers the slice");
    }
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
    for (const pipevm::runtime::LayerSlice& slice : record.slices) {
      FUZZ_ASSERT(slice.begin < slice.end, "an accepted slice is not empty");
    }
  }
  std::vector<pipevm::runtime::SliceState> slices;
  if (!read_slices(real.directory, manifest, slices)) return;
  assert_usable(slices);
  for (const pipevm::runtime::PieceRecord& record : manifest.pieces) {
    bool needed = false;
    for (const auto& held : record.slices) {
      for (const auto& wanted : kWanted) {
        needed = needed || (held.layer == wanted.layer && held.begin < wanted.end &&
                            wanted.begin < held.end);
      }
    }
    if (!needed) continue;
    const std::string bytes =
        pipevm::runtime::read_whole_file((real.directory / record.file).string());
    FUZZ_ASSERT(bytes.size() == record.bytes && digest_of(bytes) == record.digest,
                "a piece is read only when its size and digest are the manifest's");
  }
}

void fuzz_piece(const Checkpoint& real, std::string_view bytes) {
  write_file(real.piece, bytes);
  write_file(real.directory / pipevm::runtime::kManifestName, real.manifest);
  Manifest manifest;
  FUZZ_ASSERT(read_manifest(real.directory, manifest), "the real manifest reads");
  std::vector<pipevm::runtime::SliceState> slices;
  if (bytes != real.piece_bytes) {
    FUZZ_ASSERT(!read_slices(real.directory, manifest, slices),
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
  if (!read_slices(real.directory, manifest, slices)) return;
  assert_usable(slices);
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
