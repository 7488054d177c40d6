// What the checkpoint's writer (checkpoint.cpp) and its slice reader
// (checkpoint_slices.cpp) must spell alike: the formats, the names of the
// files and of a piece's tensors and metadata, and the text of digests.
// Internal to runtime_files. Leaves out the files' layout (checkpoint.hpp).
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pipevm::runtime::checkpoint_names {

inline constexpr const char* kManifestFormat = "pipevm checkpoint 2";
inline constexpr const char* kOldManifestFormat = "pipevm checkpoint 1";
inline constexpr const char* kPieceFormat = "pipevm checkpoint piece 2";
inline constexpr const char* kStepPrefix = "step-";

inline std::string step_directory(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08" PRId64, kStepPrefix, step);
  return name;
}

inline std::string piece_file(std::int64_t step, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "/rank-%04d.safetensors", rank);
  return step_directory(step) + name;
}

inline std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

// "layer.3.parameters", "layer.3.optimizer.first_moment", "layer.3.begin", ...
inline std::string layer_key(int layer, const std::string& what) {
  return "layer." + std::to_string(layer) + "." + what;
}

}  // namespace pipevm::runtime::checkpoint_names
