// Reading the slices a resumed rank needs out of a checkpoint's pieces
// (checkpoint.hpp): which files hold part of them, each file checked
// against the manifest (size, digest, rank, step) and read once, and the
// wanted floats assembled from the overlaps. Leaves out the manifest itself
// (checkpoint.cpp) and which slices a rank wants (train/).
#include <algorithm>
#include <charconv>
#include <map>

#include "checkpoint.hpp"
#include "checkpoint_names.hpp"
#include "digest.hpp"
#include "output_files.hpp"
#include "safetensors.hpp"

namespace pipevm::runtime {
namespace {

using namespace checkpoint_names;

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

bool overlap(const LayerSlice& a, const LayerSlice& b) {
  return a.layer == b.layer && a.begin < b.end && b.begin < a.end;
}

// The piece of `record`, once its size, digest, rank and step are the manifest's.
SafetensorsFile read_piece_file(const std::string& directory, const Manifest& manifest,
                                const PieceRecord& record) {
  const std::string path = directory + "/" + record.file;
  std::string bytes;
  try {
    bytes = read_whole_file(path);
  } catch (const FileError& error) {
    throw CheckpointError(std::string("a piece of the checkpoint is missing: ") + error.what());
  }
  if (bytes.size() != record.bytes) {
    throw CheckpointError(path + " has " + std::to_string(bytes.size()) +
                          " bytes, the manifest records " + std::to_string(record.bytes) +
                          ": the piece was truncated or replaced");
  }
  const std::uint64_t digest = fnv1a_bytes(std::as_bytes(std::span<const char>(bytes)));
  if (digest != record.digest) {
    throw CheckpointError(path + ": its FNV-1a digest " + hex(digest) + " is not the manifest's " +
                          hex(record.digest) + ": the piece changed after the checkpoint");
  }
  SafetensorsFile file;
  try {
    file = decode_safetensors(bytes, path);
  } catch (const std::runtime_error& error) {
    throw CheckpointError(error.what());
  }
  const auto meta = [&](const std::string& key) {
    const auto found = file.metadata.find(key);
    return found == file.metadata.end() ? std::string() : found->second;
  };
  if (meta("format") != kPieceFormat || meta("rank") != std::to_string(record.rank) ||
      meta("step") != std::to_string(manifest.position.step)) {
    throw CheckpointError(path + ": not rank " + std::to_string(record.rank) +
                          "'s piece of step " + std::to_string(manifest.position.step));
  }
  return file;
}

// A slice of a piece file, as the manifest records it: its tensors checked
// against the record (begin, sizes, optimizer arrays).
SliceState slice_of(const SafetensorsFile& file, const LayerSlice& where, const std::string& path) {
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
    if (found->second.data.size() != where.size()) {
      throw CheckpointError(path + ": tensor " + name + " holds " +
                            std::to_string(found->second.data.size()) +
                            " floats, the manifest's slice " + std::to_string(where.size()));
    }
    return found->second.data;
  };
  const int layer = where.layer;
  if (to_integer<std::uint64_t>(meta(layer_key(layer, "begin")), "a slice's begin", path) !=
      where.begin) {
    throw CheckpointError(path + ": layer " + std::to_string(layer) +
                          " does not begin where the manifest says");
  }
  SliceState slice{where, tensor(layer_key(layer, "parameters")), {}};
  slice.optimizer.steps = to_integer<std::int64_t>(meta(layer_key(layer, "optimizer.steps")),
                                                   "the optimizer's steps", path);
  const std::string& names = meta(layer_key(layer, "optimizer.arrays"));
  for (std::size_t begin = 0; begin < names.size();) {
    const std::size_t end = std::min(names.find(',', begin), names.size());
    const std::string name = names.substr(begin, end - begin);
    slice.optimizer.arrays.emplace_back(name, tensor(layer_key(layer, "optimizer." + name)));
    begin = end + 1;
  }
  return slice;
}

std::string describe(const LayerSlice& slice) {
  return "floats [" + std::to_string(slice.begin) + ", " + std::to_string(slice.end) +
         ") of layer " + std::to_string(slice.layer);
}

}  // namespace

std::vector<SliceState> read_slices(const std::string& directory, const Manifest& manifest,
                                    std::span<const LayerSlice> wanted) {
  std::vector<SliceState> out;
  std::vector<std::vector<bool>> covered;
  for (const LayerSlice& slice : wanted) {
    out.push_back({slice, std::vector<float>(slice.size()), {}});
    covered.emplace_back(slice.size(), false);
  }
  bool first_slice = true;
  for (const PieceRecord& record : manifest.pieces) {
    const bool needed = std::any_of(record.slices.begin(), record.slices.end(), [&](auto& held) {
      return std::any_of(wanted.begin(), wanted.end(),
                         [&](const LayerSlice& w) { return overlap(held, w); });
    });
    if (!needed) continue;
    const std::string path = directory + "/" + record.file;
    const SafetensorsFile file = read_piece_file(directory, manifest, record);
    for (const LayerSlice& held : record.slices) {
      for (std::size_t w = 0; w < wanted.size(); ++w) {
        if (!overlap(held, wanted[w])) continue;
        const SliceState source = slice_of(file, held, path);
        SliceState& target = out[w];
        if (first_slice) {
          target.optimizer.steps = source.optimizer.steps;
          for (const auto& [name, values] : source.optimizer.arrays) {
            target.optimizer.arrays.emplace_back(name, std::vector<float>());
          }
          for (SliceState& other : out) {
            other.optimizer = target.optimizer;
            for (auto& [name, values] : other.optimizer.arrays) values.resize(other.where.size());
          }
          first_slice = false;
        }
        bool agrees = source.optimizer.steps == target.optimizer.steps &&
                      source.optimizer.arrays.size() == target.optimizer.arrays.size();
        for (std::size_t a = 0; agrees && a < source.optimizer.arrays.size(); ++a) {
          agrees = source.optimizer.arrays[a].first == target.optimizer.arrays[a].first;
        }
        if (!agrees) {
          throw CheckpointError(path + ": the optimizer's state of layer " +
                                std::to_string(held.layer) +
                                " (its step count or arrays) is not the other pieces'");
        }
        const std::uint64_t begin = std::max(held.begin, wanted[w].begin);
        const std::uint64_t end = std::min(held.end, wanted[w].end);
        const std::uint64_t from = begin - held.begin;
        const std::uint64_t to = begin - wanted[w].begin;
        for (std::uint64_t i = 0; i < end - begin; ++i) {
          if (covered[w][to + i]) {
            throw CheckpointError(path + ": " + describe({held.layer, begin + i, begin + i + 1}) +
                                  " is held by two pieces");
          }
          covered[w][to + i] = true;
        }
        const auto copy = [&](const std::vector<float>& values, std::vector<float>& into) {
          std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(from), end - begin,
                      into.begin() + static_cast<std::ptrdiff_t>(to));
        };
        copy(source.parameters, target.parameters);
        for (std::size_t a = 0; a < source.optimizer.arrays.size(); ++a) {
          copy(source.optimizer.arrays[a].second, target.optimizer.arrays[a].second);
        }
      }
    }
  }
  for (std::size_t w = 0; w < wanted.size(); ++w) {
    const auto gap = std::find(covered[w].begin(), covered[w].end(), false);
    if (gap != covered[w].end()) {
      const std::uint64_t at = wanted[w].begin + static_cast<std::uint64_t>(gap - covered[w].begin());
      throw CheckpointError(directory + "/" + kManifestName + ": no piece holds " +
                            describe({wanted[w].layer, at, at + 1}) +
                            " (is the model another one?)");
    }
  }
  return out;
}

}  // namespace pipevm::runtime
