// The safetensors file format (8-byte little-endian header length, a JSON
// header naming every tensor's dtype, shape and byte range, then the data),
// F32 only, and the model's checkpoint in it: tensors layers.{i}.weight
// [out, in] and layers.{i}.bias [out] (the ViT's: vit_model.hpp's names). Files are written durably
// (a temporary name, fsync, rename; output_files.hpp), so a reader never sees half a file. Leaves
// out other dtypes and memory mapping.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vit_model.hpp"

namespace pipevm::runtime {

struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;  // product of shape floats
};

struct StoredTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// The bytes of the file. Throws std::runtime_error if a tensor's data does
// not match its shape.
std::string encode_safetensors(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
// Throws std::runtime_error if the file cannot be written or a tensor's data
// does not match its shape.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, std::string> metadata;  // the header's __metadata__
};
// A file's bytes; `path` (where they came from) appears in the messages. Throws
// std::runtime_error for a malformed file or a dtype other than F32.
SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& path);
// Throws std::runtime_error for an unreadable or malformed file or a dtype other than F32.
SafetensorsFile read_safetensors(const std::string& path);

// The whole model: `parameters` is its flat array (model.hpp's layout) for
// layer widths `sizes`. The metadata records the widths.
void save_model(const std::string& path, const std::vector<int>& sizes,
                std::span<const float> parameters);
// The flat array back; throws if a tensor is missing or has the wrong shape.
std::vector<float> load_model(const std::string& path, const std::vector<int>& sizes);

// The ViT's tensors (vit_model.hpp's names, each after `prefix`) as views
// of `parameters`, the whole model's flat array. Throws std::runtime_error
// if its size is not the model's.
std::vector<TensorToWrite> vit_tensors(const VitShape& shape, std::span<const float> parameters,
                                       const std::string& prefix = "");
// The metadata that records a ViT's sizes (kind=vit, image_side, patch, ...).
std::map<std::string, std::string> vit_metadata(const VitShape& shape);
// The whole ViT, its sizes in the metadata.
void save_vit_model(const std::string& path, const VitShape& shape,
                    std::span<const float> parameters);

}  // namespace pipevm::runtime
