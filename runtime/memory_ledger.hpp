// The runtime's own account of the bytes its buffers hold: every buffer of
// the model, its gradients, its optimizer state and its activations is added
// where it is taken and removed where it is given back (BufferPool does both
// for the buffers that come and go; the weights and optimizer state are
// added once, when they are allocated). sample() records a moment; the peak
// keeps the first moment with the largest total (the device's: every
// category but host), by category, and apart from it the most host bytes
// of any moment (stashes an Offload moved to host memory). The VM samples
// after every instruction, so the peak is measured at the moments the
// checker and the simulator count (core/memory_bytes.hpp), by the same rules
// (docs/memory.md). Not counted: labels, the data set, evaluation copies,
// MPI's internal buffers, Eigen's temporaries.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pipevm::runtime {

enum class MemoryCategory : std::uint8_t {
  weights,
  gradients,
  optimizer,
  activations,
  activation_gradients,
  messages,
  host,  // in host memory (offloaded stashes), not on the device: not in total()
};
inline constexpr std::size_t kMemoryCategories = 7;
std::string_view name(MemoryCategory category);

struct MemoryBytes {
  std::array<std::uint64_t, kMemoryCategories> bytes{};
  std::uint64_t operator[](MemoryCategory c) const { return bytes[static_cast<std::size_t>(c)]; }
  // The device's bytes: every category but host.
  std::uint64_t total() const;
  friend bool operator==(const MemoryBytes&, const MemoryBytes&) = default;
};

class MemoryLedger {
 public:
  void add(MemoryCategory category, std::size_t bytes);
  // Throws std::logic_error when more is removed than the category holds.
  void remove(MemoryCategory category, std::size_t bytes);
  void move(MemoryCategory from, MemoryCategory to, std::size_t bytes) {
    remove(from, bytes);
    add(to, bytes);
  }

  // Records this moment: the peak is the first moment with the largest total.
  void sample();
  const MemoryBytes& current() const { return current_; }
  const MemoryBytes& peak() const { return peak_; }
  // The most host bytes of any moment sampled.
  std::uint64_t host_peak() const { return host_peak_; }

 private:
  MemoryBytes current_;
  MemoryBytes peak_;
  std::uint64_t host_peak_ = 0;
};

}  // namespace pipevm::runtime
