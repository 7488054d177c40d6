// What every Comm offers on top of its primitives.
#include "comm.hpp"

#include <cstring>

namespace pipevm::runtime {

std::vector<float> gather_floats_to_root(Comm& comm, std::span<const float> mine,
                                         std::vector<std::size_t>& counts) {
  const std::vector<std::byte> bytes = comm.gather_to_root(std::as_bytes(mine), counts);
  std::vector<float> floats(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(floats.data(), bytes.data(), floats.size() * sizeof(float));
  for (std::size_t& count : counts) count /= sizeof(float);
  return floats;
}

}  // namespace pipevm::runtime
