// Host memory for offloaded stashes, and the thread that moves them: an
// Offload's copy from the device's buffers to a host buffer, a Reload's
// back, each queued and run on a copy thread of its own while the rank
// computes; a wait returns once its copy, and every copy queued before it,
// is done. Host buffers come from a pool of their own, counted in the
// rank's ledger under MemoryCategory::host (they are not device memory).
//
// The rank's main thread does everything else: it takes and gives back the
// buffers (the pools are single-threaded), queues and waits. The copy
// thread only copies, between buffers the program leaves alone until the
// wait (the checker proves it: check_memory_policy.cpp). It starts with the
// first copy, so a run without offloads has none; after the first step
// nothing here allocates.
//
// Leaves out: which buffers make up a stash (Piece, model_offload.cpp),
// pinned memory and devices other than the CPU's (a "device" here is the
// rank's own heap, so a copy is a memcpy on another core).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "buffer_pool.hpp"
#include "memory_ledger.hpp"

namespace pipevm::runtime {

class HostCopies {
 public:
  explicit HostCopies(MemoryLedger& ledger) : pool_(ledger) {}
  HostCopies(const HostCopies&) = delete;
  HostCopies& operator=(const HostCopies&) = delete;
  // Waits for the copies queued, then ends the thread.
  ~HostCopies();

  // Host buffers: take(MemoryCategory::host, ...), give_back(MemoryCategory::host, ...).
  BufferPool& pool() { return pool_; }

  // One contiguous stretch of one copy.
  struct Part {
    const float* from = nullptr;
    float* to = nullptr;
    std::size_t floats = 0;
  };
  using Ticket = std::uint64_t;
  // Queues a copy of every part, after every copy queued before; `parts`
  // must stay as they are until wait(ticket) returns.
  Ticket start(std::span<const Part> parts);
  // Returns once copy `ticket` and those before it are done.
  void wait(Ticket ticket);

 private:
  void run();

  BufferPool pool_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable done_;
  std::vector<std::span<const Part>> jobs_;  // queued; jobs_[next_job_] is the oldest not done
  std::size_t next_job_ = 0;
  Ticket started_ = 0;   // copies queued so far (a ticket is its copy's number)
  Ticket finished_ = 0;  // copies done so far
  bool stopping_ = false;
  std::thread thread_;
};

// `pipevm run --profile`'s host link: for each size (floats), the median
// time of `rounds` copies to host memory through a HostCopies of its own,
// from start to the end of wait, after one untimed; microseconds.
std::vector<double> time_host_copies(std::span<const std::size_t> floats, int rounds);

}  // namespace pipevm::runtime
