// InProcessComm: Comm between threads (see inprocess_comm.hpp). One mutex
// and one condition variable guard the whole world: it serves tests, where
// simplicity beats contention. Message storage is recycled per mailbox, so
// a steady state allocates nothing.
#include "inprocess_comm.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace pipevm::runtime {

namespace {

struct Message {
  std::vector<float> data;
  bool taken = false;
};

// The messages from one rank to another with one tag, in sending order, in
// a ring that grows to the most messages ever waiting and is then reused.
// Receives claim sequence numbers in posting order, as MPI matches them.
struct Mailbox {
  std::vector<Message> ring;
  std::size_t head = 0;   // ring index of sequence number first_sequence
  std::size_t count = 0;  // messages held, taken or not
  std::uint64_t first_sequence = 0;
  std::uint64_t next_claim = 0;

  Message& at(std::uint64_t sequence) {
    return ring[(head + static_cast<std::size_t>(sequence - first_sequence)) % ring.size()];
  }
  bool holds(std::uint64_t sequence) const { return first_sequence + count > sequence; }

  void push(std::span<const float> data) {
    if (count == ring.size()) {
      std::vector<Message> grown(ring.empty() ? 4 : 2 * ring.size());
      for (std::size_t i = 0; i < count; ++i) grown[i] = std::move(ring[(head + i) % ring.size()]);
      ring = std::move(grown);
      head = 0;
    }
    Message& slot = ring[(head + count) % ring.size()];
    slot.data.assign(data.begin(), data.end());  // reuses the slot's capacity
    slot.taken = false;
    ++count;
  }

  void drop_taken_front() {
    while (count > 0 && ring[head].taken) {
      head = (head + 1) % ring.size();
      --count;
      ++first_sequence;
    }
    // Start over at slot 0 when empty, so that the slots (and the storage
    // they keep) in use stay the same from one step to the next.
    if (count == 0) head = 0;
  }
};

// The members of a collective meet here; the last to arrive combines.
struct InProcessGroup {
  int size = 0;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::vector<const void*> inputs;
  std::vector<std::size_t> sizes;
  std::vector<char> flags;
  std::vector<float> sum;
  std::vector<std::byte> bytes;
  std::vector<int> colors, keys;  // split()'s arguments, per member
  bool all = true;

  explicit InProcessGroup(int members)
      : size(members),
        inputs(static_cast<std::size_t>(members)),
        sizes(static_cast<std::size_t>(members)),
        flags(static_cast<std::size_t>(members)),
        colors(static_cast<std::size_t>(members)),
        keys(static_cast<std::size_t>(members)) {}
};

using MailboxKey = std::tuple<int, int, int>;  // source world rank, destination, tag

}  // namespace

struct InProcessWorld::State {
  int stages = 1;
  int dp = 1;
  std::chrono::milliseconds timeout;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<MailboxKey, Mailbox> mailboxes;
  std::vector<InProcessGroup> data_parallel_groups;  // one per stage
  InProcessGroup world_group;
  std::deque<InProcessGroup> split_groups;         // made by split(); deque: they never move
  std::vector<InProcessGroup*> last_split;         // per world rank: its group of the last split
  std::vector<int> last_split_member;     // and its place in it
  bool aborted = false;
  std::string abort_message;

  State(int stages_, int dp_, std::chrono::milliseconds timeout_)
      : stages(stages_),
        dp(dp_),
        timeout(timeout_),
        world_group(stages_ * dp_),
        last_split(static_cast<std::size_t>(stages_ * dp_), nullptr),
        last_split_member(static_cast<std::size_t>(stages_ * dp_), 0) {
    for (int s = 0; s < stages; ++s) data_parallel_groups.emplace_back(dp);
  }

  // Marks the world dead and wakes everyone; the caller holds the lock.
  void abort_locked(std::string message) {
    if (!aborted) {
      aborted = true;
      abort_message = std::move(message);
    }
    changed.notify_all();
  }

  template <typename Ready>
  void wait_for(std::unique_lock<std::mutex>& lock, int rank, const char* what, Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (aborted) throw CommError("rank " + std::to_string(rank) + ": " + abort_message);
      if (ready()) return;
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout && !ready() && !aborted) {
        abort_locked("rank " + std::to_string(rank) + " timed out waiting for " + what);
      }
    }
  }

  // One collective: deposit, wait for all, the last one combines, collect.
  template <typename Deposit, typename Combine, typename Collect>
  void rendezvous(int rank, InProcessGroup& group, Deposit deposit, Combine combine, Collect collect) {
    std::unique_lock lock(mutex);
    if (aborted) throw CommError("rank " + std::to_string(rank) + ": " + abort_message);
    deposit(group);
    const std::uint64_t generation = group.generation;
    if (++group.arrived == group.size) {
      try {
        combine(group);
      } catch (const std::exception& error) {
        abort_locked(error.what());
        throw;
      }
      group.arrived = 0;
      ++group.generation;
      changed.notify_all();
    } else {
      wait_for(lock, rank, "a collective", [&] { return group.generation != generation; });
    }
    collect(group);
  }

  // A collective of floats: each member deposits its own (`mine`, at its
  // place `member` of the group), then as rendezvous.
  template <typename Combine, typename Collect>
  void float_rendezvous(int rank, InProcessGroup& group, int member, std::span<const float> mine,
                        Combine combine, Collect collect) {
    const auto at = static_cast<std::size_t>(member);
    rendezvous(
        rank, group,
        [&](InProcessGroup& g) {
          g.inputs[at] = mine.data();
          g.sizes[at] = mine.size();
        },
        combine, collect);
  }
};

InProcessWorld::InProcessWorld(int stages, int dp, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>(stages, dp, timeout)) {}
InProcessWorld::~InProcessWorld() = default;
int InProcessWorld::stages() const {
  return state_->stages;
}
int InProcessWorld::dp() const {
  return state_->dp;
}

struct InProcessComm::GroupMembership {
  InProcessGroup* group = nullptr;
  int member = 0;  // the rank's place in it
};

struct InProcessComm::PendingReceive {
  Mailbox* mailbox = nullptr;  // null: a send or collective, already complete
  std::uint64_t sequence = 0;
  std::span<float> into;
  bool in_use = false;
};

InProcessComm::InProcessComm(InProcessWorld& world, int world_rank)
    : world_(world), world_rank_(world_rank) {
  InProcessWorld::State& s = world.state();
  groups_.push_back({&s.data_parallel_groups[static_cast<std::size_t>(stage())], dp_rank()});
}
InProcessComm::~InProcessComm() = default;

int InProcessComm::world_size() const {
  return world_.stages() * world_.dp();
}
int InProcessComm::stages() const {
  return world_.stages();
}
int InProcessComm::dp() const {
  return world_.dp();
}

Comm::Request InProcessComm::take_slot() {
  if (free_slots_.empty()) {
    const std::size_t grown = requests_.empty() ? 16 : requests_.size() * 2;
    for (std::size_t i = grown; i-- > requests_.size();) free_slots_.push_back(static_cast<int>(i));
    requests_.resize(grown);
  }
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  requests_[static_cast<std::size_t>(slot)] = PendingReceive{};
  requests_[static_cast<std::size_t>(slot)].in_use = true;
  ++active_;
  return slot;
}

Comm::Request InProcessComm::isend(int peer_stage, int tag, std::span<const float> data) {
  InProcessWorld::State& s = world_.state();
  const int peer = world_rank_ - stage() + peer_stage;
  {
    std::lock_guard lock(s.mutex);
    if (s.aborted) throw CommError("rank " + std::to_string(world_rank_) + ": " + s.abort_message);
    s.mailboxes[{world_rank_, peer, tag}].push(data);
    s.changed.notify_all();
  }
  return take_slot();
}

Comm::Request InProcessComm::irecv(int peer_stage, int tag, std::span<float> data) {
  InProcessWorld::State& s = world_.state();
  const int peer = world_rank_ - stage() + peer_stage;
  const Request id = take_slot();
  PendingReceive& request = requests_[static_cast<std::size_t>(id)];
  std::lock_guard lock(s.mutex);
  request.mailbox = &s.mailboxes[{peer, world_rank_, tag}];
  request.sequence = request.mailbox->next_claim++;
  request.into = data;
  return id;
}

void InProcessComm::send(int peer_stage, int tag, std::span<const float> data) {
  wait(isend(peer_stage, tag, data));
}

void InProcessComm::recv(int peer_stage, int tag, std::span<float> data) {
  wait(irecv(peer_stage, tag, data));
}

void InProcessComm::complete(Request id) {
  PendingReceive& request = requests_[static_cast<std::size_t>(id)];
  if (request.mailbox != nullptr) {
    InProcessWorld::State& s = world_.state();
    std::unique_lock lock(s.mutex);
    Mailbox& box = *request.mailbox;
    const std::uint64_t sequence = request.sequence;
    s.wait_for(lock, world_rank_, "a message", [&] { return box.holds(sequence); });
    Message& message = box.at(sequence);
    if (message.data.size() != request.into.size()) {
      const std::string text = "rank " + std::to_string(world_rank_) + " expected a message of " +
                               std::to_string(request.into.size()) + " floats, got " +
                               std::to_string(message.data.size());
      s.abort_locked(text);
      throw CommError(text);
    }
    std::memcpy(request.into.data(), message.data.data(), message.data.size() * sizeof(float));
    message.taken = true;
    box.drop_taken_front();
  }
  request = PendingReceive{};
  free_slots_.push_back(id);
  --active_;
}

void InProcessComm::wait(Request request) {
  if (request < 0 || static_cast<std::size_t>(request) >= requests_.size() ||
      !requests_[static_cast<std::size_t>(request)].in_use) {
    throw CommError("rank " + std::to_string(world_rank_) + ": wait on an unknown request " +
                    std::to_string(request));
  }
  complete(request);
}

void InProcessComm::wait_all() {
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i].in_use) complete(static_cast<Request>(i));
  }
}

int InProcessComm::pending() const {
  return active_;
}

Comm::Group InProcessComm::split(int color, int key) {
  InProcessWorld::State& s = world_.state();
  const auto member = static_cast<std::size_t>(world_rank_);
  s.rendezvous(
      world_rank_, s.world_group,
      [&](InProcessGroup& g) {
        g.colors[member] = color;
        g.keys[member] = key;
      },
      [&](InProcessGroup& g) {
        // Per colour, its ranks ordered by (key, world rank).
        std::map<int, std::vector<std::pair<int, int>>> by_color;
        for (std::size_t r = 0; r < g.colors.size(); ++r) {
          by_color[g.colors[r]].emplace_back(g.keys[r], static_cast<int>(r));
        }
        for (auto& [c, ranks] : by_color) {
          std::sort(ranks.begin(), ranks.end());
          InProcessGroup& made = s.split_groups.emplace_back(static_cast<int>(ranks.size()));
          for (std::size_t i = 0; i < ranks.size(); ++i) {
            const auto r = static_cast<std::size_t>(ranks[i].second);
            s.last_split[r] = &made;
            s.last_split_member[r] = static_cast<int>(i);
          }
        }
      },
      [&](InProcessGroup&) {
        groups_.push_back({s.last_split[member], s.last_split_member[member]});
      });
  return static_cast<Group>(groups_.size() - 1);
}

const InProcessComm::GroupMembership& InProcessComm::membership_of(Group group) const {
  if (group < 0 || static_cast<std::size_t>(group) >= groups_.size()) {
    throw CommError("rank " + std::to_string(world_rank_) + ": no group " + std::to_string(group));
  }
  return groups_[static_cast<std::size_t>(group)];
}

void InProcessComm::allreduce_sum(std::span<float> data, Group group) {
  const GroupMembership& membership = membership_of(group);
  world_.state().float_rendezvous(
      world_rank_, *membership.group, membership.member, data,
      [&](InProcessGroup& g) {
        for (const std::size_t size : g.sizes) {
          if (size != data.size()) throw CommError("all-reduce members disagree on the size");
        }
        g.sum.assign(data.size(), 0.0F);
        for (const void* input : g.inputs) {
          const auto* values = static_cast<const float*>(input);
          for (std::size_t i = 0; i < g.sum.size(); ++i) g.sum[i] += values[i];
        }
      },
      [&](InProcessGroup& g) { std::memcpy(data.data(), g.sum.data(), data.size() * sizeof(float)); });
}

void InProcessComm::allgather(std::span<const float> mine, std::span<float> all,
                              std::span<const int> counts, std::span<const int> displacements,
                              Group group) {
  const GroupMembership& membership = membership_of(group);
  world_.state().float_rendezvous(
      world_rank_, *membership.group, membership.member, mine,
      [&](InProcessGroup& g) {
        if (counts.size() != g.sizes.size()) throw CommError("all-gather: one count per member");
        g.sum.assign(all.size(), 0.0F);
        for (std::size_t m = 0; m < g.sizes.size(); ++m) {
          const auto at = static_cast<std::size_t>(displacements[m]);
          if (g.sizes[m] != static_cast<std::size_t>(counts[m]) || at + g.sizes[m] > all.size()) {
            throw CommError("all-gather members disagree on the counts");
          }
          std::memcpy(g.sum.data() + at, g.inputs[m], g.sizes[m] * sizeof(float));
        }
      },
      [&](InProcessGroup& g) {
        std::memcpy(all.data(), g.sum.data(), all.size() * sizeof(float));
      });
}

void InProcessComm::reduce_scatter_sum(std::span<float> data, std::span<const int> counts,
                                       Group group) {
  const GroupMembership& membership = membership_of(group);
  const auto member = static_cast<std::size_t>(membership.member);
  if (counts.size() <= member) throw CommError("reduce-scatter: one count per member");
  std::size_t offset = 0;
  for (std::size_t m = 0; m < member; ++m) offset += static_cast<std::size_t>(counts[m]);
  const auto mine = static_cast<std::size_t>(counts[member]);
  allreduce_sum(data, group);
  std::memmove(data.data(), data.data() + offset, mine * sizeof(float));
}

Comm::Request InProcessComm::iallreduce_sum(std::span<float> data, Group group) {
  // Eager: every member issues its collectives in the same order, so doing
  // the work now cannot reorder it.
  allreduce_sum(data, group);
  return take_slot();
}

bool InProcessComm::all_ok(bool ok) {
  InProcessWorld::State& s = world_.state();
  const auto member = static_cast<std::size_t>(world_rank_);
  bool result = false;
  s.rendezvous(
      world_rank_, s.world_group, [&](InProcessGroup& g) { g.flags[member] = ok ? 1 : 0; },
      [&](InProcessGroup& g) {
        g.all = true;
        for (const char flag : g.flags) g.all = g.all && flag != 0;
      },
      [&](InProcessGroup& g) { result = g.all; });
  return result;
}

std::vector<std::byte> InProcessComm::gather_to_root(std::span<const std::byte> mine,
                                                     std::vector<std::size_t>& counts) {
  InProcessWorld::State& s = world_.state();
  const auto member = static_cast<std::size_t>(world_rank_);
  std::vector<std::byte> result;
  s.rendezvous(
      world_rank_, s.world_group,
      [&](InProcessGroup& g) {
        g.inputs[member] = mine.data();
        g.sizes[member] = mine.size();
      },
      [&](InProcessGroup& g) {
        g.bytes.clear();
        for (std::size_t r = 0; r < g.inputs.size(); ++r) {
          const auto* begin = static_cast<const std::byte*>(g.inputs[r]);
          g.bytes.insert(g.bytes.end(), begin, begin + g.sizes[r]);
        }
      },
      [&](InProcessGroup& g) {
        if (world_rank_ != 0) return;
        result = g.bytes;
        counts = g.sizes;
      });
  if (world_rank_ != 0) counts.clear();
  return result;
}

void InProcessComm::broadcast_from_root(std::span<std::byte> data) {
  InProcessWorld::State& s = world_.state();
  s.rendezvous(
      world_rank_, s.world_group,
      [&](InProcessGroup& g) {
        if (world_rank_ == 0) {
          g.inputs[0] = data.data();
          g.sizes[0] = data.size();
        }
      },
      [&](InProcessGroup& g) {
        const auto* begin = static_cast<const std::byte*>(g.inputs[0]);
        g.bytes.assign(begin, begin + g.sizes[0]);
      },
      [&](InProcessGroup& g) {
        if (g.bytes.size() != data.size()) throw CommError("broadcast sizes differ");
        std::memcpy(data.data(), g.bytes.data(), data.size());
      });
}

void InProcessComm::abort(std::string_view message) {
  InProcessWorld::State& s = world_.state();
  std::lock_guard lock(s.mutex);
  s.abort_locked(std::string(message));
  throw CommError(std::string(message));
}

void run_in_process(int stages, int dp, const std::function<void(Comm&)>& body) {
  InProcessWorld world(stages, dp);
  std::mutex first_error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  const int ranks = stages * dp;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        InProcessComm comm(world, rank);
        body(comm);
      } catch (...) {
        {
          std::lock_guard lock(first_error_mutex);
          if (!first_error) first_error = std::current_exception();
        }
        InProcessWorld::State& s = world.state();
        std::lock_guard lock(s.mutex);
        s.abort_locked("another rank failed");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace pipevm::runtime
