// The copy thread of host_copies.hpp.
#include "host_copies.hpp"

#include <algorithm>

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

}  // namespace pipevm::runtime
