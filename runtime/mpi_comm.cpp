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
#include <cstring>
#include <limits>
#include <string>
#include <thread>

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

using Clock = std::chrono::steady_clock;

int to_count(std::size_t size) {
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw CommError("message of " + std::to_string(size) + " elements exceeds MPI's int count");
  }
  return static_cast<int>(size);
}

int members_of(MPI_Comm comm) {
  int members = 1;
  PIPEVM_MPI_CHECK(MPI_Comm_size(comm, &members));
  return members;
}

// How a rank waits: napping or not, and for how long at most (0: for ever).
struct Waiting {
  bool sleep = false;
  double timeout_seconds = 0.0;
};

// Completes `count` requests; false (with the seconds waited) when the
// timeout passed first, the requests left pending. Without a timeout a
// spinning wait is MPI_Waitall. Otherwise it tests in a loop, reading the
// clock in between; with `sleep`, after a short spin it naps with growing
// sleeps instead of spinning inside MPI: a rank that spins keeps its core
// (and, under the kernel's fair scheduler, spends its share of it) while the
// rank it waits for may be queued behind it, which is the common case with
// more ranks than cores or on a busy machine.
bool complete_requests(MPI_Request* requests, int count, const Waiting& how, double& waited) {
  const bool limited = how.timeout_seconds > 0.0;
  if (!how.sleep && !limited) {
    PIPEVM_MPI_CHECK(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return true;
  }
  int done = 0;
  PIPEVM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
  if (done) return true;
  constexpr auto spin = std::chrono::microseconds(20);
  constexpr long longest_nap_ns = 50'000;
  const auto limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(how.timeout_seconds));
  const auto start = Clock::now();
  long nap_ns = 2'000;
  while (true) {
    const auto elapsed = Clock::now() - start;
    if (limited && elapsed > limit) {
      waited = std::chrono::duration<double>(elapsed).count();
      return false;
    }
    if (how.sleep && elapsed > spin) {
      const timespec nap{0, nap_ns};
      nanosleep(&nap, nullptr);
      nap_ns = std::min(2 * nap_ns, longest_nap_ns);
    }
    PIPEVM_MPI_CHECK(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return true;
  }
}

std::string seconds_text(double seconds, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, seconds);
  return text;
}

// "no progress for 5.0 s (timeout 5 s) on host h1: waiting WHAT"
[[noreturn]] void throw_timeout(double waited, double timeout, const std::string& host,
                                const std::string& what) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", timeout);
  throw CommTimeout("no progress for " + seconds_text(waited, 1) + " s (timeout " + limit + " s)" +
                    (host.empty() ? "" : " on host " + host) + ": waiting " + what);
}

// Completes a world-wide operation of the session (before any Comm exists).
void complete_session_request(MPI_Request& request, double timeout, const std::string& host,
                              const char* what) {
  double waited = 0.0;
  if (!complete_requests(&request, 1, {false, timeout}, waited)) {
    throw_timeout(waited, timeout, host, what);
  }
}

// Open MPI's non-blocking all-reduce (libnbc) reduces in place along a
// binomial tree and broadcasts back: twice the time of the blocking
// MPI_Allreduce on 724 KB between two ranks. Reduce-scatter + allgather
// (its algorithm 3) takes what the blocking one does. A choice the user
// made (mpirun --mca, or the environment) stands.
void prefer_fast_nonblocking_allreduce() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
}

// Open MPI's TCP transport (between hosts) moves a large message by an
// emulated RDMA put that the receiver drives with requests on the one
// connection between the two ranks. Two ranks that send each other large
// messages at once (1F1B's activations and gradients, an all-reduce's
// halves) then take turns, as if the requests waited behind the data going
// the other way: on a rate-limited link an exchange of 131 KB each way took
// twice a one-way transfer, and 0.98x without the put (Open MPI 4.1.4's
// other default flags kept; bench/RESULTS.md, "multihost: simulated vs
// measured"). A choice the user made stands.
void prefer_full_duplex_tcp() {
  setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum,hetero-rdma", 0);
}

// The same transport sends the first 64 KiB of a message at once and the
// rest only from inside the sender's later MPI calls, once the receiver has
// answered (rendezvous): a pipeline stage that sends and then computes holds
// its message back for the whole compute. Between two hosts at 1 Gbit/s,
// 1F1B's steps took 20% longer than the simulator's (which moves a message
// while its ranks compute), and within 4% with messages up to 4 MiB sent at
// once (bench/RESULTS.md, "each rank on a core of its own"). The cost: a
// message that arrives before its receive is posted is buffered whole at
// the receiver. Shared memory (ranks of one host) is not affected. A choice
// the user made stands.
void prefer_eager_tcp_messages() {
  setenv("OMPI_MCA_btl_tcp_eager_limit", "4194304", 0);
  setenv("OMPI_MCA_btl_tcp_max_send_size", "4194304", 0);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  PIPEVM_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    prefer_fast_nonblocking_allreduce();
    prefer_full_duplex_tcp();
    prefer_eager_tcp_messages();
    PIPEVM_MPI_CHECK(MPI_Init(argc, argv));
  }
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PIPEVM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  PIPEVM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  void* value = nullptr;
  int found = 0;
  PIPEVM_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found));
  if (found && value != nullptr) tag_upper_bound_ = *static_cast<int*>(value);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  PIPEVM_MPI_CHECK(MPI_Get_processor_name(host, &length));
  host_.assign(host, static_cast<std::size_t>(length));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiSession::all_ok(bool ok) const {
  int mine = ok ? 1 : 0;
  int all = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &request));
  complete_session_request(request, timeout_seconds_, host_,
                           "in a world-wide agreement of all ranks at start-up");
  return all != 0;
}

void MpiSession::broadcast_from_root(std::span<std::byte> data) const {
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(
      MPI_Ibcast(data.data(), to_count(data.size()), MPI_BYTE, 0, MPI_COMM_WORLD, &request));
  complete_session_request(request, timeout_seconds_, host_,
                           "in a world-wide broadcast from MPI rank 0 at start-up");
}

std::vector<std::string> MpiSession::host_names() {
  return all_gather_text(host_, "in the world-wide exchange of host names at start-up");
}

std::vector<std::string> MpiSession::all_gather_text(const std::string& mine,
                                                     const char* what) const {
  const int length = to_count(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(world_size_));
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(
      MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD, &request));
  complete_session_request(request, timeout_seconds_, host_, what);
  std::vector<int> displacements(lengths.size());
  std::size_t total = 0;
  for (std::size_t rank = 0; rank < lengths.size(); ++rank) {
    displacements[rank] = to_count(total);
    total += static_cast<std::size_t>(lengths[rank]);
  }
  std::string all(total, '\0');
  PIPEVM_MPI_CHECK(MPI_Iallgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                   displacements.data(), MPI_CHAR, MPI_COMM_WORLD, &request));
  complete_session_request(request, timeout_seconds_, host_, what);
  std::vector<std::string> texts;
  for (std::size_t rank = 0; rank < lengths.size(); ++rank) {
    texts.push_back(all.substr(static_cast<std::size_t>(displacements[rank]),
                               static_cast<std::size_t>(lengths[rank])));
  }
  return texts;
}

void MpiSession::abort(std::string_view message, double grace_seconds) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  if (grace_seconds > 0.0)
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_seconds));
  // MPI_Abort reaches the other ranks through this host's Open MPI daemon
  // and mpirun; from a host whose link is down it may never return.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    std::_Exit(1);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

struct MpiComm::State {
  // What a pending request waits for, for the watchdog's message.
  struct Subject {
    enum class Kind : std::uint8_t { send, recv, all_reduce } kind = Kind::send;
    int peer = 0;  // program rank (send, recv)
  };

  int world_rank = 0;  // the program rank
  int world_size = 1;
  int stages = 1;
  MPI_Comm world = MPI_COMM_NULL;  // MPI_COMM_WORLD ordered by program rank
  MPI_Comm pipeline = MPI_COMM_NULL;
  std::vector<MPI_Comm> groups;  // Group g; 0 is the data-parallel group

  MPI_Comm group(Comm::Group g) const {
    if (g < 0 || static_cast<std::size_t>(g) >= groups.size()) {
      throw CommError("no group " + std::to_string(g));
    }
    return groups[static_cast<std::size_t>(g)];
  }
  std::vector<MPI_Request> requests;  // slot i is request id i; MPI_REQUEST_NULL when free
  std::vector<Subject> subjects;      // of slot i
  std::vector<int> free_slots;
  int active = 0;
  Waiting waiting;
  std::vector<std::string> hosts;  // by program rank; may be empty
  bool timed_out = false;

  Request take_slot(Subject subject) {
    if (free_slots.empty()) {
      const std::size_t grown = requests.empty() ? 16 : requests.size() * 2;
      for (std::size_t i = grown; i-- > requests.size();) free_slots.push_back(static_cast<int>(i));
      requests.resize(grown, MPI_REQUEST_NULL);
      subjects.resize(grown);
    }
    const int slot = free_slots.back();
    free_slots.pop_back();
    subjects[static_cast<std::size_t>(slot)] = subject;
    ++active;
    return slot;
  }
  void release_slot(int slot) {
    free_slots.push_back(slot);
    --active;
  }

  int program_rank(int stage, int dp_rank) const { return dp_rank * stages + stage; }

  // "rank 3 (stage 1, replica 1, host h2)"
  std::string rank_text(int rank) const {
    return "rank " + std::to_string(rank) + " (stage " + std::to_string(rank % stages) +
           ", replica " + std::to_string(rank / stages) +
           (hosts.empty() ? "" : ", host " + hosts[static_cast<std::size_t>(rank)]) + ")";
  }
  // "all 4 ranks (hosts h1, h2)"
  std::string world_text() const {
    std::string text = "all " + std::to_string(world_size) + " ranks";
    std::vector<std::string> on;
    for (const std::string& host : hosts) {
      if (std::find(on.begin(), on.end(), host) == on.end()) on.push_back(host);
    }
    for (std::size_t i = 0; i < on.size(); ++i) {
      text += (i == 0 ? (on.size() > 1 ? " (hosts " : " (host ") : ", ") + on[i];
    }
    return on.empty() ? text : text + ")";
  }

  std::string describe(const Subject& subject) const {
    switch (subject.kind) {
      case Subject::Kind::send:
        return "for " + rank_text(subject.peer) + " to receive";
      case Subject::Kind::recv:
        return "to receive from " + rank_text(subject.peer);
      case Subject::Kind::all_reduce: {
        const int stage = world_rank % stages;
        std::string others;
        for (int replica = 0; replica < world_size / stages; ++replica) {
          const int rank = program_rank(stage, replica);
          if (rank != world_rank) others += (others.empty() ? "" : ", ") + rank_text(rank);
        }
        return "in the all-reduce of stage " + std::to_string(stage) + "'s replicas with " + others;
      }
    }
    return "";
  }

  [[noreturn]] void time_out(double waited, const std::string& what) {
    timed_out = true;
    throw_timeout(waited, waiting.timeout_seconds,
                  hosts.empty() ? "" : hosts[static_cast<std::size_t>(world_rank)], what);
  }

  // Completes one request of `subject` (not from the pool).
  void complete(MPI_Request& request, const Subject& subject) {
    double waited = 0.0;
    if (!complete_requests(&request, 1, waiting, waited)) time_out(waited, describe(subject));
  }
  // Completes one world-wide collective; `what()` says which, when needed.
  template <typename What>
  void complete_world(MPI_Request& request, const What& what) {
    double waited = 0.0;
    if (!complete_requests(&request, 1, waiting, waited)) time_out(waited, what());
  }
};

MpiComm::MpiComm(const MpiSession& session, int stages, std::int64_t max_tag,
                 MpiCommOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.waiting = {options.wait == WaitMode::sleep, options.timeout_seconds};
  // Naps of a few microseconds, not the default 50 us of timer slack.
  if (s.waiting.sleep) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  s.world_rank = options.rank < 0 ? session.world_rank() : options.rank;
  s.world_size = session.world_size();
  s.stages = stages;
  if (stages <= 0 || s.world_size % stages != 0) {
    throw CommError("the world size " + std::to_string(s.world_size) +
                    " is not a multiple of the stage count " + std::to_string(stages));
  }
  if (s.world_rank >= s.world_size || (s.world_rank == 0) != (session.world_rank() == 0)) {
    throw CommError("MPI rank " + std::to_string(session.world_rank()) + " cannot play rank " +
                    std::to_string(s.world_rank) + " (program rank 0 must be MPI rank 0)");
  }
  if (max_tag > session.tag_upper_bound()) {
    throw CommError("this configuration needs message tags up to " + std::to_string(max_tag) +
                    ", more than this MPI allows (MPI_TAG_UB = " +
                    std::to_string(session.tag_upper_bound()) + "); use fewer micro-batches");
  }
  if (static_cast<int>(options.hosts.size()) == s.world_size) s.hosts = std::move(options.hosts);
  const int stage = s.world_rank % stages;
  const int dp_rank = s.world_rank / stages;
  PIPEVM_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, s.world_rank, &s.world));
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(s.world, MPI_ERRORS_RETURN));
  PIPEVM_MPI_CHECK(MPI_Comm_split(s.world, dp_rank, stage, &s.pipeline));
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
  if (s.world != MPI_COMM_NULL) MPI_Comm_free(&s.world);
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
  State& s = *state_;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             s.pipeline, &request));
  s.complete(request, {State::Subject::Kind::send, s.program_rank(peer_stage, dp_rank())});
}

void MpiComm::recv(int peer_stage, int tag, std::span<float> data) {
  State& s = *state_;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             s.pipeline, &request));
  s.complete(request, {State::Subject::Kind::recv, s.program_rank(peer_stage, dp_rank())});
}

Comm::Request MpiComm::isend(int peer_stage, int tag, std::span<const float> data) {
  State& s = *state_;
  const Request id =
      s.take_slot({State::Subject::Kind::send, s.program_rank(peer_stage, dp_rank())});
  PIPEVM_MPI_CHECK(MPI_Isend(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             s.pipeline, &s.requests[static_cast<std::size_t>(id)]));
  return id;
}

Comm::Request MpiComm::irecv(int peer_stage, int tag, std::span<float> data) {
  State& s = *state_;
  const Request id =
      s.take_slot({State::Subject::Kind::recv, s.program_rank(peer_stage, dp_rank())});
  PIPEVM_MPI_CHECK(MPI_Irecv(data.data(), to_count(data.size()), MPI_FLOAT, peer_stage, tag,
                             s.pipeline, &s.requests[static_cast<std::size_t>(id)]));
  return id;
}

Comm::Group MpiComm::split(int color, int key) {
  State& s = *state_;
  MPI_Comm group = MPI_COMM_NULL;
  PIPEVM_MPI_CHECK(MPI_Comm_split(s.world, color, key, &group));
  PIPEVM_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  s.groups.push_back(group);
  return static_cast<Group>(s.groups.size() - 1);
}

void MpiComm::allreduce_sum(std::span<float> data, Group group) {
  State& s = *state_;
  const MPI_Comm comm = s.group(group);
  if (members_of(comm) == 1) return;
  if (s.waiting.timeout_seconds <= 0.0) {
    // No watchdog: the blocking collective, even when waits nap: Open MPI's
    // tuned MPI_Allreduce took 2-3x less time than MPI_Iallreduce + wait on 724 KB.
    PIPEVM_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, data.data(), to_count(data.size()), MPI_FLOAT, MPI_SUM, comm));
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data(), to_count(data.size()), MPI_FLOAT,
                                  MPI_SUM, comm, &request));
  s.complete(request, {State::Subject::Kind::all_reduce, 0});
}

Comm::Request MpiComm::iallreduce_sum(std::span<float> data, Group group) {
  State& s = *state_;
  const MPI_Comm comm = s.group(group);
  const Request id = s.take_slot({State::Subject::Kind::all_reduce, 0});
  if (members_of(comm) == 1) return id;  // its slot stays MPI_REQUEST_NULL: waiting is a no-op
  PIPEVM_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data(), to_count(data.size()), MPI_FLOAT,
                                  MPI_SUM, comm, &s.requests[static_cast<std::size_t>(id)]));
  return id;
}

void MpiComm::allgather(std::span<const float> mine, std::span<float> all,
                        std::span<const int> counts, std::span<const int> displacements,
                        Group group) {
  State& s = *state_;
  const MPI_Comm comm = s.group(group);
  const int members = members_of(comm);
  if (counts.size() != static_cast<std::size_t>(members) || displacements.size() != counts.size()) {
    throw CommError("all-gather: one count and displacement per member expected");
  }
  if (members == 1) {
    std::copy(mine.begin(), mine.end(), all.begin() + displacements[0]);
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Iallgatherv(mine.data(), to_count(mine.size()), MPI_FLOAT, all.data(),
                                   counts.data(), displacements.data(), MPI_FLOAT, comm, &request));
  s.complete(request, {State::Subject::Kind::all_reduce, 0});
}

void MpiComm::reduce_scatter_sum(std::span<float> data, std::span<const int> counts, Group group) {
  State& s = *state_;
  const MPI_Comm comm = s.group(group);
  const int members = members_of(comm);
  if (counts.size() != static_cast<std::size_t>(members)) {
    throw CommError("reduce-scatter: one count per member expected");
  }
  if (members == 1) return;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Ireduce_scatter(MPI_IN_PLACE, data.data(), counts.data(), MPI_FLOAT, MPI_SUM,
                                       comm, &request));
  s.complete(request, {State::Subject::Kind::all_reduce, 0});
}

void MpiComm::wait(Request request) {
  State& s = *state_;
  if (request < 0 || static_cast<std::size_t>(request) >= s.requests.size()) {
    throw CommError("wait on an unknown request " + std::to_string(request));
  }
  const auto slot = static_cast<std::size_t>(request);
  s.complete(s.requests[slot], s.subjects[slot]);
  s.release_slot(request);
}

void MpiComm::wait_all() {
  State& s = *state_;
  if (s.active == 0) return;
  double waited = 0.0;
  if (!complete_requests(s.requests.data(), to_count(s.requests.size()), s.waiting, waited)) {
    // Name what is still missing: the requests not complete yet.
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < s.requests.size(); ++i) {
      int complete = 1;
      if (s.requests[i] != MPI_REQUEST_NULL) {
        PIPEVM_MPI_CHECK(MPI_Request_get_status(s.requests[i], &complete, MPI_STATUS_IGNORE));
      }
      const std::string what = s.describe(s.subjects[i]);
      if (!complete && std::find(missing.begin(), missing.end(), what) == missing.end()) {
        missing.push_back(what);
      }
    }
    std::string text;
    for (const std::string& what : missing) text += (text.empty() ? "" : "; and ") + what;
    s.time_out(waited, text);
  }
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
  State& s = *state_;
  int mine = ok ? 1 : 0;
  int all = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_LAND, s.world, &request));
  s.complete_world(request, [&] { return "in a world-wide agreement with " + s.world_text(); });
  return all != 0;
}

std::vector<std::byte> MpiComm::gather_to_root(std::span<const std::byte> mine,
                                               std::vector<std::size_t>& counts) {
  State& s = *state_;
  const bool root = s.world_rank == 0;
  const auto what = [&] {
    return root ? "in a world-wide gather from " + s.world_text()
                : "in a world-wide gather to " + s.rank_text(0);
  };
  int my_count = to_count(mine.size());
  std::vector<int> int_counts(root ? static_cast<std::size_t>(s.world_size) : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(
      MPI_Igather(&my_count, 1, MPI_INT, int_counts.data(), 1, MPI_INT, 0, s.world, &request));
  s.complete_world(request, what);
  std::vector<int> displacements(int_counts.size());
  std::size_t total = 0;
  counts.assign(int_counts.size(), 0);
  for (std::size_t r = 0; r < int_counts.size(); ++r) {
    displacements[r] = to_count(total);
    counts[r] = static_cast<std::size_t>(int_counts[r]);
    total += counts[r];
  }
  std::vector<std::byte> all(total);
  PIPEVM_MPI_CHECK(MPI_Igatherv(mine.data(), my_count, MPI_BYTE, all.data(), int_counts.data(),
                                displacements.data(), MPI_BYTE, 0, s.world, &request));
  s.complete_world(request, what);
  return all;
}

void MpiComm::broadcast_from_root(std::span<std::byte> data) {
  State& s = *state_;
  MPI_Request request = MPI_REQUEST_NULL;
  PIPEVM_MPI_CHECK(MPI_Ibcast(data.data(), to_count(data.size()), MPI_BYTE, 0, s.world, &request));
  s.complete_world(request, [&] {
    return s.world_rank == 0 ? "in a world-wide broadcast to " + s.world_text()
                             : "in a world-wide broadcast from " + s.rank_text(0);
  });
}

void MpiComm::abort(std::string_view message) {
  const State& s = *state_;
  MpiSession::abort(message, s.timed_out ? MpiSession::kWatchdogGraceSeconds : 0.0);
}

}  // namespace pipevm::runtime
