// Reading and writing safetensors files of F32 tensors, and the model
// checkpoint on top (see safetensors.hpp).
#include "safetensors.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "json_integer.hpp"
#include "output_files.hpp"

namespace pipevm::runtime {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies floats as they are in memory");

constexpr std::size_t kHeaderLengthBytes = 8;
constexpr std::uint64_t kLargestHeader = 100U << 20;  // the format's own limit is 100 MB

// The number of floats of a shape; empty for a negative dimension or a
// product whose bytes do not fit in size_t (a header could claim [2^32,
// 2^32] with no data: the product must not wrap around to a small count).
std::optional<std::size_t> element_count(const std::vector<std::int64_t>& shape) {
  std::size_t count = 1;
  for (const std::int64_t dimension : shape) {
    if (dimension < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, static_cast<std::size_t>(dimension), &count)) {
      return std::nullopt;
    }
  }
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(float)) return std::nullopt;
  return count;
}

std::string layer_name(std::size_t layer, const char* part) {
  return "layers." + std::to_string(layer) + "." + part;
}

}  // namespace

std::string encode_safetensors(const std::vector<TensorToWrite>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    if (element_count(tensor.shape) != std::optional<std::size_t>(tensor.data.size())) {
      throw std::runtime_error("safetensors: tensor " + tensor.name + " has " +
                               std::to_string(tensor.data.size()) +
                               " floats, its shape says otherwise");
    }
    if (tensor.name == "__metadata__" || header.contains(tensor.name)) {
      throw std::runtime_error("safetensors: duplicate or reserved tensor name " + tensor.name);
    }
    const std::size_t bytes = tensor.data.size() * sizeof(float);
    header[tensor.name] = {
        {"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  // The format allows trailing spaces; padding to 8 bytes aligns the data.
  header_text.append(
      (kHeaderLengthBytes - header_text.size() % kHeaderLengthBytes) % kHeaderLengthBytes, ' ');

  std::string bytes;
  bytes.reserve(kHeaderLengthBytes + header_text.size() + offset);
  const std::uint64_t length = header_text.size();
  bytes.append(reinterpret_cast<const char*>(&length), sizeof length);
  bytes += header_text;
  for (const TensorToWrite& tensor : tensors) {
    bytes.append(reinterpret_cast<const char*>(tensor.data.data()),
                 tensor.data.size() * sizeof(float));
  }
  return bytes;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string bytes = encode_safetensors(tensors, metadata);
  write_file_durably(path, std::as_bytes(std::span<const char>(bytes)));
}

SafetensorsFile read_safetensors(const std::string& path) {
  return decode_safetensors(read_whole_file(path), path);
}

SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& path) {
  const auto malformed = [&path](const std::string& why) {
    return std::runtime_error(path + ": not a safetensors file (" + why + ")");
  };
  if (bytes.size() < kHeaderLengthBytes) throw malformed("shorter than its header length");
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), sizeof header_length);
  if (header_length > kLargestHeader || header_length > bytes.size() - kHeaderLengthBytes) {
    throw malformed("header length beyond the file");
  }
  const std::size_t data_begin = kHeaderLengthBytes + static_cast<std::size_t>(header_length);
  const std::size_t data_size = bytes.size() - data_begin;

  // An array of integers, each within its type's range (a shape of [2^63]
  // or [1e30] is refused, not converted).
  const auto integers = [&malformed](const nlohmann::json& array, const std::string& what,
                                     auto& out) {
    if (!array.is_array()) throw malformed(what + " is not an array");
    for (const nlohmann::json& value : array) {
      const auto number = json_integer<typename std::decay_t<decltype(out)>::value_type>(value);
      if (!number) throw malformed(what + " holds a value that is not an integer in range");
      out.push_back(*number);
    }
  };
  SafetensorsFile file;
  try {
    const nlohmann::json header =
        nlohmann::json::parse(bytes.begin() + kHeaderLengthBytes,
                              bytes.begin() + static_cast<std::ptrdiff_t>(data_begin));
    if (!header.is_object()) throw malformed("header is not a JSON object");
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        file.metadata = entry.get<std::map<std::string, std::string>>();
        continue;
      }
      const auto dtype = entry.at("dtype").get<std::string>();
      if (dtype != "F32") throw malformed("tensor " + name + " has dtype " + dtype + ", not F32");
      StoredTensor tensor;
      integers(entry.at("shape"), "tensor " + name + "'s shape", tensor.shape);
      std::vector<std::size_t> offsets;
      integers(entry.at("data_offsets"), "tensor " + name + "'s data_offsets", offsets);
      const std::optional<std::size_t> elements = element_count(tensor.shape);
      if (!elements) throw malformed("tensor " + name + " has a negative or too large shape");
      const std::size_t count = *elements;
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != count * sizeof(float)) {
        throw malformed("tensor " + name + " has bad data offsets");
      }
      tensor.data.resize(count);
      // An empty tensor's data() may be null, which memcpy must not get.
      if (count > 0) {
        std::memcpy(tensor.data.data(), bytes.data() + data_begin + offsets[0],
                    count * sizeof(float));
      }
      file.tensors.emplace(name, std::move(tensor));
    }
  } catch (const nlohmann::json::exception& error) {
    throw malformed(error.what());
  }
  return file;
}

void save_model(const std::string& path, const std::vector<int>& sizes,
                std::span<const float> parameters) {
  std::vector<TensorToWrite> tensors;
  std::size_t offset = 0;
  for (std::size_t layer = 0; layer + 1 < sizes.size(); ++layer) {
    const auto in = static_cast<std::size_t>(sizes[layer]);
    const auto out = static_cast<std::size_t>(sizes[layer + 1]);
    if (offset + out * in + out > parameters.size()) {
      throw std::runtime_error("save_model: fewer parameters than the layer widths need");
    }
    tensors.push_back({layer_name(layer, "weight"),
                       {static_cast<std::int64_t>(out), static_cast<std::int64_t>(in)},
                       parameters.subspan(offset, out * in)});
    tensors.push_back({layer_name(layer, "bias"),
                       {static_cast<std::int64_t>(out)},
                       parameters.subspan(offset + out * in, out)});
    offset += out * in + out;
  }
  if (offset != parameters.size()) {
    throw std::runtime_error("save_model: more parameters than the layer widths need");
  }
  std::ostringstream widths;
  for (std::size_t i = 0; i < sizes.size(); ++i) widths << (i ? "," : "") << sizes[i];
  write_safetensors(path, tensors,
                    {{"format", "pt"}, {"producer", "pipevm"}, {"sizes", widths.str()}});
}

std::vector<float> load_model(const std::string& path, const std::vector<int>& sizes) {
  const SafetensorsFile file = read_safetensors(path);
  std::vector<float> parameters;
  for (std::size_t layer = 0; layer + 1 < sizes.size(); ++layer) {
    const std::int64_t in = sizes[layer];
    const std::int64_t out = sizes[layer + 1];
    const auto append = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
      const auto found = file.tensors.find(name);
      if (found == file.tensors.end()) throw std::runtime_error(path + ": no tensor " + name);
      if (found->second.shape != shape) {
        throw std::runtime_error(path + ": tensor " + name + " has the wrong shape");
      }
      parameters.insert(parameters.end(), found->second.data.begin(), found->second.data.end());
    };
    append(layer_name(layer, "weight"), {out, in});
    append(layer_name(layer, "bias"), {out});
  }
  return parameters;
}

std::vector<TensorToWrite> vit_tensors(const VitShape& shape, std::span<const float> parameters,
                                       const std::string& prefix) {
  std::vector<TensorToWrite> tensors;
  std::size_t unit_offset = 0;
  for (int unit = 0; unit < shape.blocks; ++unit) {
    for (const VitTensor& tensor : vit_unit_tensors(shape, unit)) {
      if (unit_offset + tensor.offset + tensor.size > parameters.size()) {
        throw std::runtime_error("vit_tensors: fewer parameters than the ViT has");
      }
      tensors.push_back({prefix + tensor.name, tensor.shape,
                         parameters.subspan(unit_offset + tensor.offset, tensor.size)});
    }
    unit_offset += vit_unit_parameter_count(shape, unit);
  }
  if (unit_offset != parameters.size()) {
    throw std::runtime_error("vit_tensors: more parameters than the ViT has");
  }
  return tensors;
}

std::map<std::string, std::string> vit_metadata(const VitShape& shape) {
  return {{"format", "pt"},
          {"producer", "pipevm"},
          {"kind", "vit"},
          {"image_side", std::to_string(shape.image_side)},
          {"patch", std::to_string(shape.patch)},
          {"width", std::to_string(shape.width)},
          {"blocks", std::to_string(shape.blocks)},
          {"heads", std::to_string(shape.heads)},
          {"hidden", std::to_string(shape.hidden)},
          {"classes", std::to_string(shape.classes)}};
}

void save_vit_model(const std::string& path, const VitShape& shape,
                    std::span<const float> parameters) {
  write_safetensors(path, vit_tensors(shape, parameters), vit_metadata(shape));
}

}  // namespace pipevm::runtime
