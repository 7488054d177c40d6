// The buffer pool (buffer_pool.hpp).
#include "buffer_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace pipevm::runtime {

std::span<float> BufferPool::take(MemoryCategory category, std::size_t floats, bool zeroed) {
  if (floats == 0) return {};
  auto waiting = std::find_if(waiting_.begin(), waiting_.end(),
                              [floats](const Waiting& w) { return w.floats == floats; });
  float* buffer = nullptr;
  if (waiting != waiting_.end() && !waiting->buffers.empty()) {
    buffer = waiting->buffers.back();
    waiting->buffers.pop_back();
  } else {
    if (waiting == waiting_.end()) {
      waiting_.push_back({floats, 0, {}});
      waiting = waiting_.end() - 1;
    }
    owned_.push_back(std::make_unique<float[]>(floats));
    buffer = owned_.back().get();
    allocated_bytes_ += floats * sizeof(float);
    // Room for every buffer of this size to wait at once: giving back
    // never allocates.
    waiting->buffers.reserve(++waiting->allocated);
  }
  const std::span<float> out(buffer, floats);
  if (zeroed) std::fill(out.begin(), out.end(), 0.0F);
  ledger_.add(category, floats * sizeof(float));
  return out;
}

void BufferPool::give_back(MemoryCategory category, std::span<float> buffer) {
  if (buffer.empty()) return;
  ledger_.remove(category, buffer.size_bytes());
  auto waiting = std::find_if(waiting_.begin(), waiting_.end(),
                              [&](const Waiting& w) { return w.floats == buffer.size(); });
  if (waiting == waiting_.end()) {
    throw std::logic_error("buffer pool: given back a buffer of a size it never handed out");
  }
  waiting->buffers.push_back(buffer.data());
}

}  // namespace pipevm::runtime
