// Comm over Open MPI. MpiSession owns MPI_Init/MPI_Finalize; MpiComm renumbers
// the world by program rank (config/rank_layout.hpp says which MPI rank plays which)
// and splits it into a pipeline communicator (ranks of one dp_rank, ordered
// by stage) and a data-parallel communicator (ranks of one stage, ordered by
// dp_rank), with world rank = dp_rank * stages + stage, and further groups
// on demand (split: one MPI communicator each). Every MPI call is
// checked; failures become CommError with file:line and MPI_Error_string.
//
// The watchdog: with a timeout, every wait (a message, an all-reduce, a
// world-wide collective) tests its requests in a loop instead of blocking
// inside MPI, and one that has not completed after the timeout throws
// CommTimeout naming what it waited for: the peer's program rank, stage and
// host, or the group of a collective, and how long. A blocking MPI call
// could not be interrupted, so with a timeout (or napping waits) every
// collective is MPI's non-blocking one. The MPI headers stay in
// mpi_comm.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  // A wait of the calls below that has not completed after `seconds` throws
  // CommError; 0 (the default) waits for ever.
  void set_timeout(double seconds) { timeout_seconds_ = seconds; }

  // World-wide agreement before any Comm exists (e.g. on a configuration).
  bool all_ok(bool ok) const;
  // World-wide, before any Comm exists: world rank 0's bytes on every rank
  // (every rank passes a buffer of the same size).
  void broadcast_from_root(std::span<std::byte> data) const;
  // World-wide: the host each MPI rank runs on (MPI_Get_processor_name),
  // indexed by MPI rank.
  std::vector<std::string> host_names();
  // World-wide: every MPI rank's `mine`, indexed by MPI rank; `what` names
  // the exchange in a timeout's message.
  std::vector<std::string> all_gather_text(const std::string& mine, const char* what) const;
  // Ends every rank after printing `message` on this one; with a grace,
  // waits that long first, so that other ranks stuck in the same hang can
  // report theirs. A process that MPI_Abort cannot end (its host cut off)
  // ends itself a few seconds later.
  [[noreturn]] static void abort(std::string_view message, double grace_seconds = 0.0);
  // The grace after a timeout (CommTimeout).
  static constexpr double kWatchdogGraceSeconds = 2.0;

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::int64_t tag_upper_bound_ = 32767;
  double timeout_seconds_ = 0.0;
  std::string host_;  // this rank's, once host_names() ran
};

// How a rank waits for a message or collective: inside MPI (Open MPI spins,
// and yields only when it knows the node is oversubscribed), or by testing
// with short sleeps in between, which leaves the core to the rank it waits
// for when ranks share cores.
enum class WaitMode { spin, sleep };

struct MpiCommOptions {
  WaitMode wait = WaitMode::spin;
  // The watchdog: a wait that has not completed after this many seconds
  // throws CommError; 0 waits for ever (inside MPI, as without a watchdog).
  double timeout_seconds = 0.0;
  // The program rank this process plays (runtime::program_ranks); -1: its
  // MPI rank. Program rank 0 must be MPI rank 0.
  int rank = -1;
  // The host of each program rank, for the watchdog's messages; may be empty.
  std::vector<std::string> hosts;
};

class MpiComm final : public Comm {
 public:
  // `stages` must divide the world size; throws CommError when a tag of
  // `max_tag` would not fit MPI_TAG_UB.
  MpiComm(const MpiSession& session, int stages, std::int64_t max_tag, MpiCommOptions options = {});
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
  void allgather(std::span<const float> mine, std::span<float> all, std::span<const int> counts,
                 std::span<const int> displacements, Group group) override;
  void reduce_scatter_sum(std::span<float> data, std::span<const int> counts, Group group) override;
  void wait(Request request) override;
  void wait_all() override;
  void progress() override;
  int pending() const override;
  bool all_ok(bool ok) override;
  std::vector<std::byte> gather_to_root(std::span<const std::byte> mine,
                                        std::vector<std::size_t>& counts) override;
  void broadcast_from_root(std::span<std::byte> data) override;
  // After the watchdog fired, waits MpiSession::kWatchdogGraceSeconds before
  // MPI_Abort, so that the other ranks stuck in the same hang report too.
  [[noreturn]] void abort(std::string_view message) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pipevm::runtime
