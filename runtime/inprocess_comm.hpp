// Comm between threads of one process, so that pipeline and data-parallel
// runs can be tested without mpirun. An InProcessWorld holds the shared
// state of `stages * dp` ranks: mailboxes keyed by (source, destination, tag)
// in which messages keep their order as MPI's do, and one rendezvous per
// group for collectives (summed in member order, so every member gets the
// same bits). Sends are eager (copied into the mailbox); receives and
// collectives block with a timeout, so a broken test fails instead of hanging.
// abort() on any rank wakes every other rank with a CommError.
// Not here: rendezvous semantics for sends (the checker proves those).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "comm.hpp"

namespace pipevm::runtime {

class InProcessWorld {
 public:
  InProcessWorld(int stages, int dp,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(60'000));
  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;
  ~InProcessWorld();

  int stages() const;
  int dp() const;

  struct State;
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class InProcessComm final : public Comm {
 public:
  InProcessComm(InProcessWorld& world, int world_rank);
  ~InProcessComm() override;

  int world_rank() const override { return world_rank_; }
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
  void progress() override {}
  int pending() const override;
  bool all_ok(bool ok) override;
  std::vector<std::byte> gather_to_root(std::span<const std::byte> mine,
                                        std::vector<std::size_t>& counts) override;
  void broadcast_from_root(std::span<std::byte> data) override;
  [[noreturn]] void abort(std::string_view message) override;

 private:
  struct PendingReceive;
  struct GroupMembership;
  // Throws CommError for a group this rank never split.
  const GroupMembership& membership_of(Group group) const;
  InProcessWorld& world_;
  int world_rank_;
  std::vector<PendingReceive> requests_;  // slot i is request id i
  std::vector<int> free_slots_;
  std::vector<GroupMembership> groups_;  // Group g is groups_[g]; 0 is the data-parallel group
  int active_ = 0;

  Request take_slot();
  void complete(Request request);
};

// Runs `body` on one thread per rank of a stages x dp world and waits for all.
// The first exception thrown by any rank is rethrown here (after the others
// were woken and finished).
void run_in_process(int stages, int dp, const std::function<void(Comm&)>& body);

}  // namespace pipevm::runtime
