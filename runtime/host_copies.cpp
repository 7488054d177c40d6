// The copy thread of host_copies.hpp.
#include "host_copies.hpp"

#include <algorithm>
#include <chrono>

#include "median.hpp"

namespace pipevm::runtime {

HostCopies::~HostCopies() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  if (thread_.joinable()) thread_.join();
}

HostCopies::Ticket HostCopies::start(std::span<const Part> parts) {
  Ticket ticket = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    // Every copy queued so far is done: the queue starts over in its room.
    if (next_job_ == jobs_.size()) {
      jobs_.clear();
      next_job_ = 0;
    }
    jobs_.push_back(parts);
    ticket = ++started_;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  queued_.notify_one();
  return ticket;
}

void HostCopies::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= ticket; });
}

void HostCopies::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return stopping_ || next_job_ < jobs_.size(); });
    if (next_job_ == jobs_.size()) return;  // stopping, and nothing left to copy
    const std::span<const Part> parts = jobs_[next_job_];
    lock.unlock();
    for (const Part& part : parts) std::copy_n(part.from, part.floats, part.to);
    lock.lock();
    ++next_job_;
    ++finished_;
    done_.notify_all();
  }
}

std::vector<double> time_host_copies(std::span<const std::size_t> floats, int rounds) {
  MemoryLedger ledger;
  HostCopies copies(ledger);
  std::vector<double> medians;
  for (const std::size_t size : floats) {
    const std::vector<float> device(size, 1.0F);
    const std::span<float> host = copies.pool().take(MemoryCategory::host, size);
    const HostCopies::Part part{device.data(), host.data(), size};
    std::vector<double> times;
    for (int round = 0; round <= rounds; ++round) {
      const auto start = std::chrono::steady_clock::now();
      copies.wait(copies.start(std::span(&part, 1)));
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      if (round > 0) times.push_back(took.count());
    }
    copies.pool().give_back(MemoryCategory::host, host);
    medians.push_back(median(std::move(times)));
  }
  return medians;
}

}  // namespace pipevm::runtime
