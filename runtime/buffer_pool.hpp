// Float buffers that come and go during a training step (activations,
// gradients between layers, weight gradients, gathered weights): take() hands
// out a buffer of exactly the size asked, given back with give_back(); each
// is counted in the MemoryLedger under its category while it is out. A given
// back buffer waits for the next take() of its size, so once the first step
// has run, a step allocates nothing, and the pool holds what the step holds
// at once, not a buffer per use. Single-threaded, like the rest of a rank.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "memory_ledger.hpp"

namespace pipevm::runtime {

class BufferPool {
 public:
  explicit BufferPool(MemoryLedger& ledger) : ledger_(ledger) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  MemoryLedger& ledger() { return ledger_; }

  // A buffer of `floats` floats (uninitialized unless `zeroed`), counted
  // under `category`. Empty for 0 floats.
  std::span<float> take(MemoryCategory category, std::size_t floats, bool zeroed = false);
  // Gives back a buffer take() handed out under `category`; empty is a no-op.
  void give_back(MemoryCategory category, std::span<float> buffer);

  // Bytes of every buffer the pool has ever allocated (in use or waiting).
  std::size_t allocated_bytes() const { return allocated_bytes_; }

 private:
  struct Waiting {
    std::size_t floats = 0;
    std::size_t allocated = 0;  // buffers of this size
    std::vector<float*> buffers;
  };
  MemoryLedger& ledger_;
  std::vector<std::unique_ptr<float[]>> owned_;
  std::vector<Waiting> waiting_;  // by size
  std::size_t allocated_bytes_ = 0;
};

}  // namespace pipevm::runtime
