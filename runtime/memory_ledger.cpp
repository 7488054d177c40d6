// The memory ledger (memory_ledger.hpp).
#include "memory_ledger.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace pipevm::runtime {

std::string_view name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::weights:
      return "weights";
    case MemoryCategory::gradients:
      return "gradients";
    case MemoryCategory::optimizer:
      return "optimizer";
    case MemoryCategory::activations:
      return "activations";
    case MemoryCategory::activation_gradients:
      return "activation_gradients";
    case MemoryCategory::messages:
      return "messages";
    case MemoryCategory::host:
      return "host";
  }
  return "?";
}

std::uint64_t MemoryBytes::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0}) -
         (*this)[MemoryCategory::host];
}

void MemoryLedger::add(MemoryCategory category, std::size_t bytes) {
  current_.bytes[static_cast<std::size_t>(category)] += bytes;
}

void MemoryLedger::remove(MemoryCategory category, std::size_t bytes) {
  std::uint64_t& held = current_.bytes[static_cast<std::size_t>(category)];
  if (bytes > held) {
    throw std::logic_error("memory ledger: " + std::string(name(category)) + " gives back " +
                           std::to_string(bytes) + " bytes but holds " + std::to_string(held));
  }
  held -= bytes;
}

void MemoryLedger::sample() {
  if (current_.total() > peak_.total() || peak_.total() == 0) peak_ = current_;
  host_peak_ = std::max(host_peak_, current_[MemoryCategory::host]);
}

}  // namespace pipevm::runtime
