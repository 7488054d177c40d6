// Fuzz target `safetensors`: any bytes as a safetensors file (what `--load`
// and every checkpoint piece are read with, runtime/safetensors.hpp).
// Asserts:
//   - the only way to refuse a file is std::runtime_error, and its message
//     names the file;
//   - nothing is read past the file's end (ASan: the input is an exact-size
//     buffer);
//   - every accepted tensor holds exactly the product of its shape's
//     dimensions of floats (computed here without overflow);
//   - an accepted file re-encoded decodes to the same tensors and metadata;
//   - the accepted file cut short (any of a few lengths) is refused, or, if
//     the cut only drops bytes no tensor uses, decodes to the same tensors.
// Leaves out load_model's checks of the model's shape.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "safetensors.hpp"

namespace {

using pipevm::runtime::SafetensorsFile;

// The shape's element count, or false when it does not fit in 64 bits.
bool product(const std::vector<std::int64_t>& shape, std::uint64_t& count) {
  count = 1;
  for (const std::int64_t dimension : shape) {
    if (dimension < 0) return false;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dimension), &count)) return false;
  }
  return true;
}

bool same(const SafetensorsFile& a, const SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, tensor] : a.tensors) {
    const auto found = b.tensors.find(name);
    if (found == b.tensors.end() || found->second.shape != tensor.shape) return false;
    const auto& other = found->second.data;
    if (other.size() != tensor.data.size()) return false;
    // Bitwise: NaN payloads must survive too.
    if (!tensor.data.empty() &&
        std::memcmp(other.data(), tensor.data.data(), tensor.data.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

bool decode(std::string_view bytes, SafetensorsFile& file) {
  const std::string path = "fuzz.safetensors";
  try {
    file = pipevm::runtime::decode_safetensors(bytes, path);
    return true;
  } catch (const std::runtime_error& error) {
    FUZZ_ASSERT(std::string(error.what()).find(path) != std::string::npos,
                "a refusal names the file");
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  SafetensorsFile file;
  if (!decode(bytes, file)) return 0;

  std::vector<pipevm::runtime::TensorToWrite> tensors;
  for (const auto& [name, tensor] : file.tensors) {
    std::uint64_t count = 0;
    FUZZ_ASSERT(product(tensor.shape, count), "an accepted shape's product fits in 64 bits");
    FUZZ_ASSERT(count == tensor.data.size(), "a tensor holds its shape's product of floats");
    tensors.push_back({name, tensor.shape, tensor.data});
  }
  SafetensorsFile again;
  FUZZ_ASSERT(decode(pipevm::runtime::encode_safetensors(tensors, file.metadata), again),
              "a re-encoded file decodes");
  FUZZ_ASSERT(same(file, again), "a re-encoded file decodes to the same tensors");

  for (const std::size_t cut : {std::size_t{0}, std::size_t{7}, size / 2, size - 1}) {
    if (cut >= size) continue;
    SafetensorsFile shorter;
    if (decode(bytes.substr(0, cut), shorter)) {
      FUZZ_ASSERT(same(file, shorter), "a cut file is refused or loses nothing");
    }
  }
  return 0;
}
