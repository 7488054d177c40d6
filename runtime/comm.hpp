// Communication for one rank of a pipeline x data-parallel world: every
// message and collective the VM and `pipevm run` need, behind one interface.
// Two implementations: MpiComm (runtime/mpi_comm.hpp, Open MPI) and
// InProcessComm (runtime/inprocess_comm.hpp, threads of one process, for
// tests without mpirun).
//
// Point-to-point messages name their peer by pipeline stage (within the
// rank's own pipeline) and carry a tag (the VM's message_tags.hpp); they
// move floats between caller-owned buffers, so a steady-state step
// allocates nothing. Collectives run over a group: the data-parallel group
// (the ranks of the same stage), any group split from the world (split),
// or, for start-up, checks and saving, the whole world. Sharded weights
// and gradients move with an all-gather and a reduce-scatter over a group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pipevm::runtime {

// A communication failure, or another rank brought the world down.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A wait that made no progress within the watchdog's timeout (MpiComm).
class CommTimeout : public CommError {
 public:
  using CommError::CommError;
};

class Comm {
 public:
  // A pending non-blocking operation; complete it with wait() or wait_all().
  using Request = int;
  // A set of ranks that run collectives together.
  using Group = int;
  // The ranks of this rank's stage, in dp_rank order.
  static constexpr Group kDataParallel = 0;

  Comm() = default;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  virtual ~Comm() = default;

  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  virtual int stages() const = 0;
  virtual int dp() const = 0;
  int stage() const { return world_rank() % stages(); }
  int dp_rank() const { return world_rank() / stages(); }

  // Blocking point-to-point within the rank's pipeline.
  virtual void send(int peer_stage, int tag, std::span<const float> data) = 0;
  virtual void recv(int peer_stage, int tag, std::span<float> data) = 0;

  // Non-blocking point-to-point: the buffer must stay untouched (send) or
  // unread (receive) until the request completes.
  virtual Request isend(int peer_stage, int tag, std::span<const float> data) = 0;
  virtual Request irecv(int peer_stage, int tag, std::span<float> data) = 0;

  // World-wide (every rank calls it, in the same order): the ranks passing
  // the same `color` form one group, ordered by `key`; returns this rank's.
  virtual Group split(int color, int key) = 0;
  // Sum over `group`, in place; every member passes the same size.
  virtual void allreduce_sum(std::span<float> data, Group group) = 0;
  void allreduce_sum(std::span<float> data) { allreduce_sum(data, kDataParallel); }
  // Sum over the data-parallel group, in place; the buffer must stay
  // untouched until the request completes.
  Request iallreduce_sum(std::span<float> data) { return iallreduce_sum(data, kDataParallel); }
  // Sum over `group`, in place, not blocking (gossip's exchanges).
  virtual Request iallreduce_sum(std::span<float> data, Group group) = 0;
  // Every member's `mine` into `all`, member m's `counts[m]` floats at
  // `displacements[m]` (the caller keeps both arrays, so a step allocates
  // nothing); `mine` has this member's count.
  virtual void allgather(std::span<const float> mine, std::span<float> all,
                         std::span<const int> counts, std::span<const int> displacements,
                         Group group) = 0;
  // The sum of `data` over `group` (every member passes the same size, the
  // sum of `counts`), cut into consecutive blocks of counts[m] floats: this
  // member's block ends in the first counts[member] floats of `data`.
  virtual void reduce_scatter_sum(std::span<float> data, std::span<const int> counts,
                                  Group group) = 0;

  virtual void wait(Request request) = 0;
  // Completes every request of this rank still pending.
  virtual void wait_all() = 0;
  // Lets pending operations advance (MPI progresses only inside MPI calls);
  // never blocks.
  virtual void progress() = 0;
  // How many requests are still pending.
  virtual int pending() const = 0;

  // World-wide: true when `ok` holds on every rank (an agreement, so that all
  // ranks take the same branch after a step that may fail on some).
  virtual bool all_ok(bool ok) = 0;
  // World-wide: concatenation of every rank's bytes in world-rank order, on
  // world rank 0 only (empty elsewhere); `counts` gets each rank's size there.
  virtual std::vector<std::byte> gather_to_root(std::span<const std::byte> mine,
                                                std::vector<std::size_t>& counts) = 0;
  // World-wide: the same bytes on every rank, taken from world rank 0's `data`
  // (whose size every rank must already agree on).
  virtual void broadcast_from_root(std::span<std::byte> data) = 0;

  // Brings every rank down after printing `message` (MPI), or wakes every
  // thread with a CommError (in-process). Does not return.
  [[noreturn]] virtual void abort(std::string_view message) = 0;
};

// The floats of every rank, gathered to world rank 0 in rank order.
std::vector<float> gather_floats_to_root(Comm& comm, std::span<const float> mine,
                                         std::vector<std::size_t>& counts);

}  // namespace pipevm::runtime
