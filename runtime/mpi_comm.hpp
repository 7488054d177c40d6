// Comm over Open MPI. MpiSession owns MPI_Init/MPI_Finalize; MpiComm splits
// the world into a pipeline communicator (ranks of one dp_rank, ordered by
// stage) and a data-parallel communicator (ranks of one stage, ordered by
// dp_rank), with world rank = dp_rank * stages + stage, and further groups
// on demand (split: one MPI communicator each). Every MPI call is
// checked; failures become CommError with file:line and MPI_Error_string.
// The MPI headers stay in mpi_comm.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "comm.hpp"

namespace pipevm::runtime {

// MPI for the life of the process: initialises on construction, finalises
// on destruction (unless the process aborted first).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // The largest tag a point-to-point message may carry (MPI_TAG_UB).
  std::int64_t tag_upper_bound() const { return tag_upper_bound_; }

  // World-wide agreement before any Comm exists (e.g. on a configuration).
  bool all_ok(bool ok) const;
  // World-wide, before any Comm exists: world rank 0's bytes on every rank
  // (every rank passes a buffer of the same size).
  void broadcast_from_root(std::span<std::byte> data) const;
  // Ends every rank after printing `message` on this one.
  [[noreturn]] static void abort(std::string_view message);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::int64_t tag_upper_bound_ = 32767;
};

// How a rank waits for a message or collective: inside MPI (Open MPI spins,
// and yields only when it knows the node is oversubscribed), or by testing
// with short sleeps in between, which leaves the core to the rank it waits
// for when ranks share cores.
enum class WaitMode { spin, sleep };

class MpiComm final : public Comm {
 public:
  // `stages` must divide the world size; throws CommError when a tag of
  // `max_tag` would not fit MPI_TAG_UB.
  MpiComm(const MpiSession& session, int stages, std::int64_t max_tag,
          WaitMode wait = WaitMode::spin);
  ~MpiComm() override;

  int world_rank() const override;
  int world_size() const override;
  int stages() const override;
  int dp() const override;

  void send(int peer_stage, int tag, std::span<const float> data) override;
  void recv(int peer_stage, int tag, std::span<float> data) override;
  Request isend(int peer_stage, int tag, std::span<const float> data) override;
  Request irecv(int peer_stage, int tag, std::span<float> data) override;
  Group split(int color, int key) override;
  using Comm::allreduce_sum;
  void allreduce_sum(std::span<float> data, Group group) override;
  using Comm::iallreduce_sum;
  Request iallreduce_sum(std::span<float> data, Group group) override;
  void wait(Request request) override;
  void wait_all() override;
  void progress() override;
  int pending() const override;
  bool all_ok(bool ok) override;
  std::vector<std::byte> gather_to_root(std::span<const std::byte> mine,
                                        std::vector<std::size_t>& counts) override;
  void broadcast_from_root(std::span<std::byte> data) override;
  [[noreturn]] void abort(std::string_view message) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pipevm::runtime
