// MpiComm: the Comm interface over Open MPI (see mpi_comm.hpp). Requests live
// in a pool that grows to the largest number pending at once and is then
// reused, so a steady-state step allocates nothing.
#include "mpi_comm.hpp"

#include <mpi.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace pipevm::runtime {

namespace {

[[noreturn]] void throw_mpi_error(int status, const char* expression, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw CommError(std::string(file) + ":" + std::to_string(line) + ": " + expression +
                  " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace

#define PIPEVM_MPI_CHECK(expr)                                       \
  do {                                                               \
    const int pipevm_mpi_status = (expr);                            \
    if (pipevm_mpi_status != MPI_SUCCESS) {                          \
      throw_mpi_error(pipevm_mpi_status, #expr, __FILE__, __LINE__); \
    }                                                                \
  } while (false)

namespace {

int to_count(std::size_t size) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw CommError("message of " + std::to_string(size) + " elements exceeds MPI's int count");
  }
  return static_cast<int>(size);
}

// Completes `count` requests. With `sleep`, after a short spin it tests with
// growing sleeps in between instead of spinning inside MPI: a rank that
// spins keeps its core (and, under the kernel's fair scheduler, spends its
// share of it) while the rank it waits for may be queued behind it, which is
// the common case with more ranks than cores or on a busy machine.
void complete_requests(MPI_Request* requests, int count, bool sleep) {
  if (!sleep) {
    PIPEVM_MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return;
  }
  constexpr auto spin = std::chrono::microseconds(20);
  constexpr long longest_nap_ns = 50'000;
  const auto start = std::chrono::steady_clock::now();
  long nap_ns = 2'000;
  int done = 0;
  PIPEVM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
  while (!done) {
    if (std::chrono::steady_clock::now() - start > spin) {
      const timespec nap{0, nap_ns};
      nanosleep(&nap, nullptr);
      nap_ns = std::min(2 * nap_ns, longest_nap_ns);
    }
    PIPEVM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
  }
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  PIPEVM_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) PIPEVM_MPI_CHECK(MPI_Init(argc, argv));
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PIPEVM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  PIPEVM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  void* value = nullptr;
  int found = 0;
  PIPEVM_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found));
  if (found && value != nullptr) tag_upper_bound_ = *static_cast<int*>(value);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiSession::all_ok(bool ok) const {
  int mine = ok ? 1 : 0;
  int all = 0;
  PIPEVM_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  return all != 0;
}

void MpiSession::broadcast_from_root(std::span<std::byte> data) const {
  PIPEVM_MPI_CHECK(MPI_Bcast(data.data(), to_count(data.size()), MPI_BYTE, 0, MPI_COMM_WORLD));
}

void MpiSession::abort(std::string_view message) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

struct MpiComm::State {
  int world_rank = 0;
  int world_size = 1;
  int stages = 1;
  MPI_Comm pipeline = MPI_COMM_NULL;
  std::vector<MPI_Comm> groups;  // Group g; 0 is the data-parallel group
  std::vector<MPI_Request> requests;  // slot i is request id i; MPI_REQUEST_NULL when free
  std::vector<int> free_slots;
  int active = 0;
  bool sleep_while_waiting = false;

  Request take_slot() {
    if (free_slots.empty()) {
      const std::size_t grown = requests.empty() ? 16 : requests.size() * 2;
      for (std::size_t i = grown; i-- > requests.size();) free_slots.push_back(static_cast<int>(i));
      requests.resize(grown, MPI_REQUEST_NULL);
    }
    const int slot = free_slots.back();
    free_slots.pop_back();
    ++active;
    return slot;
  }
  void release_slot(int slot) {
    free_slots.push_back(slot);
    --active;
  }
};

MpiComm::MpiComm(const MpiSession& session, int stages, std::int64_t max_tag, WaitMode wait)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.sleep_while_waiting = wait == WaitMode::sleep;
  // Naps of a few microseconds, not the default 50 us of timer slack.
  if (s.sleep_while_waiting) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  s.world_rank = session.world_rank();
  s.world_size = session.world_size();
  s.stages = stages;
  if (stages <= 0 || s.world_size % stages != 0) {
    throw CommError("the world size " + std::to_string(s.world_size) +
                    " is not a multiple of the stage count " + std::to_string(stages));
  }
  if (max_tag > session.tag_upper_bound()) {
    throw CommError("this configuration needs message tags up to " + std::to_string(max_tag) +
                    ", more than this MPI allows (MPI_TAG_UB = " +
                    std::to_string(session.tag_upper_bound()) + "); use fewer micro-batches");
  }
  const int stage = s.world_rank % stages;
  const int dp_rank = s.world_rank / stages;
  PIPEVM_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, dp_rank, stage, &s.pipeline));
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(s.pipeline, MPI_ERRORS_RETURN));
  if (split(stage, dp_rank) != kDataParallel) throw CommError("the data-parallel group is not group 0");
}

MpiComm::~MpiComm() {
  State& s = *state_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (s.pipeline != MPI_COMM_NULL) MPI_Comm_free(&s.pipeline);
  for (MPI_Comm& group : s.groups) MPI_Comm_free(&group);
}

int MpiComm::world_rank() const {
  return state_->world_rank;
}
int MpiComm::world_size() const {
  return state_->world_size;
}
int MpiComm::stages() const {
  return state_->stages;
}
int MpiComm::dp() const {
  return state_->world_size / state_->stages;
}

void MpiComm::send(int peer_stage, int tag, std::span<const float> data) {
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             state_->pipeline, &request));
  complete_requests(&request, 1, state_->sleep_while_waiting);
}

void MpiComm::recv(int peer_stage, int tag, std::span<float> data) {
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             state_->pipeline, &request));
  complete_requests(&request, 1, state_->sleep_while_waiting);
}

Comm::Request MpiComm::isend(int peer_stage, int tag, std::span<const float> data) {
  const Request id = state_->take_slot();
  PIPEVM_MPI_CHECK(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             state_->pipeline, &state_->requests[static_cast<std::size_t>(id)]));
  return id;
}

Comm::Request MpiComm::irecv(int peer_stage, int tag, std::span<float> data) {
  const Request id = state_->take_slot();
  PIPEVM_MPI_CHECK(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             state_->pipeline, &state_->requests[static_cast<std::size_t>(id)]));
  return id;
}

Comm::Group MpiComm::split(int color, int key) {
  State& s = *state_;
  MPI_Comm group = MPI_COMM_NULL;
  PIPEVM_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &group));
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  s.groups.push_back(group);
  return static_cast<Group>(s.groups.size() - 1);
}

void MpiComm::allreduce_sum(std::span<float> data, Group group) {
  State& s = *state_;
  if (group < 0 || static_cast<std::size_t>(group) >= s.groups.size()) {
    throw CommError("no group " + std::to_string(group));
  }
  MPI_Comm comm = s.groups[static_cast<std::size_t>(group)];
  int members = 1;
  PIPEVM_MPI_CHECK(MPI_Comm_size(comm, &members));
  if (members == 1) return;
  // The blocking collective, even when waits nap: Open MPI's tuned
  // MPI_Allreduce took 2-3x less time than MPI_Iallreduce + wait on 724 KB.
  PIPEVM_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, data.data(), to_count(data.size()), MPI_FLOAT, MPI_SUM, comm));
}

Comm::Request MpiComm::iallreduce_sum(std::span<float> data, Group group) {
  if (group < 0 || static_cast<std::size_t>(group) >= state_->groups.size()) {
    throw CommError("no group " + std::to_string(group));
  }
  MPI_Comm comm = state_->groups[static_cast<std::size_t>(group)];
  int members = 1;
  PIPEVM_MPI_CHECK(MPI_Comm_size(comm, &members));
  const Request id = state_->take_slot();
  if (members == 1) return id;  // its slot stays MPI_REQUEST_NULL: waiting is a no-op
  PIPEVM_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data(), to_count(data.size()), MPI_FLOAT,
                                  MPI_SUM, comm, &state_->requests[static_cast<std::size_t>(id)]));
  return id;
}

void MpiComm::wait(Request request) {
  State& s = *state_;
  if (request < 0 || static_cast<std::size_t>(request) >= s.requests.size()) {
    throw CommError("wait on an unknown request " + std::to_string(request));
  }
  complete_requests(&s.requests[static_cast<std::size_t>(request)], 1, s.sleep_while_waiting);
  s.release_slot(request);
}

void MpiComm::wait_all() {
  State& s = *state_;
  if (s.active == 0) return;
  complete_requests(s.requests.data(), to_count(s.requests.size()), s.sleep_while_waiting);
  // Every slot is free again; rebuild the free list without reallocating.
  s.free_slots.clear();
  for (std::size_t i = s.requests.size(); i-- > 0;) s.free_slots.push_back(static_cast<int>(i));
  s.active = 0;
}

void MpiComm::progress() {
  State& s = *state_;
  if (s.active == 0) return;
  // Testall modifies no request unless all are complete; then they become
  // MPI_REQUEST_NULL and their later wait returns at once.
  int done = 0;
  PIPEVM_MPI_CHECK(
      MPI_Testall(to_count(s.requests.size()), s.requests.data(), &done, MPI_STATUSES_IGNORE));
}

int MpiComm::pending() const {
  return state_->active;
}

bool MpiComm::all_ok(bool ok) {
  int mine = ok ? 1 : 0;
  int all = 0;
  PIPEVM_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  return all != 0;
}

std::vector<std::byte> MpiComm::gather_to_root(std::span<const std::byte> mine,
                                               std::vector<std::size_t>& counts) {
  const State& s = *state_;
  const bool root = s.world_rank == 0;
  int my_count = to_count(mine.size());
  std::vector<int> int_counts(root ? static_cast<std::size_t>(s.world_size) : 0);
  PIPEVM_MPI_CHECK(
      MPI_Gather(&my_count, 1, MPI_INT, int_counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::vector<int> displacements(int_counts.size());
  std::size_t total = 0;
  counts.assign(int_counts.size(), 0);
  for (std::size_t r = 0; r < int_counts.size(); ++r) {
    displacements[r] = to_count(total);
    counts[r] = static_cast<std::size_t>(int_counts[r]);
    total += counts[r];
  }
  std::vector<std::byte> all(total);
  PIPEVM_MPI_CHECK(MPI_Gatherv(mine.data(), my_count, MPI_BYTE, all.data(), int_counts.data(),
                               displacements.data(), MPI_BYTE, 0, MPI_COMM_WORLD));
  return all;
}

void MpiComm::broadcast_from_root(std::span<std::byte> data) {
  PIPEVM_MPI_CHECK(MPI_Bcast(data.data(), to_count(data.size()), MPI_BYTE, 0, MPI_COMM_WORLD));
}

void MpiComm::abort(std::string_view message) {
  MpiSession::abort(message);
}

}  // namespace pipevm::runtime
