// The simulator's static pairing, shared by its engine (simulate.cpp) and
// its helpers for traces (simulate_pairing.cpp): which receive takes which
// send, FIFO queues of instructions per key, and small predicates. Not part
// of the public interface (simulate.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <unordered_map>
#include <vector>

#include "program.hpp"

namespace pipevm::simulate_detail {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// FIFO queues of instruction indexes, one per key, linked through a single
// `next` array indexed by instruction: no allocation per queue, which matters
// when nearly every message has a key of its own.
template <class Key, class Hash>
class IndexQueues {
 public:
  IndexQueues(std::size_t instructions, std::size_t expected_keys) : next_(instructions, kNone) {
    ends_.reserve(expected_keys);
  }
  void push(const Key& key, std::size_t i) {
    Ends& ends = ends_[key];
    next_[i] = kNone;
    if (ends.tail == kNone) {
      ends.head = i;
    } else {
      next_[ends.tail] = i;
    }
    ends.tail = i;
  }
  // The oldest index of `key` for which skip(index) is false, removed; kNone if none.
  template <class Skip>
  std::size_t pop(const Key& key, Skip skip) {
    const auto found = ends_.find(key);
    if (found == ends_.end()) return kNone;
    Ends& ends = found->second;
    while (ends.head != kNone) {
      const std::size_t i = ends.head;
      ends.head = next_[i];
      if (ends.head == kNone) ends.tail = kNone;
      if (!skip(i)) return i;
    }
    return kNone;
  }
  std::size_t pop(const Key& key) {
    return pop(key, [](std::size_t) { return false; });
  }

 private:
  struct Ends {
    std::size_t head = kNone;
    std::size_t tail = kNone;
  };
  std::unordered_map<Key, Ends, Hash> ends_;
  std::vector<std::size_t> next_;
};

// A rank's pending requests of one Wait key.
struct RequestKey {
  int rank = 0;
  std::uint64_t key = 0;
  friend bool operator==(const RequestKey&, const RequestKey&) = default;
};
struct RequestKeyHash {
  std::size_t operator()(const RequestKey& k) const {
    return std::hash<std::uint64_t>{}(k.key * 1000003ULL + static_cast<std::uint32_t>(k.rank));
  }
};

inline bool is_point_to_point(Opcode op) { return info(op).cls == OpClass::p2p; }

// Whether `in`, run by `rank`, names a peer inside the pipeline: another
// stage, or the rank itself at the turn of a V placement, where the lane's
// next position is on the same rank.
bool peer_is_valid(const Program& program, int rank, const Instruction& in);

// partner[i]: the instruction that receives what send i sends, or sends what
// receive i receives; kNone when there is none (or i is no message).
std::vector<std::size_t> pair_partners(const Program& program);

// How many non-blocking requests the program posts.
std::size_t requests(const Program& program);

// owner[i]: the rank whose stream holds instruction i.
std::vector<int> owners(const Program& program);

}  // namespace pipevm::simulate_detail
