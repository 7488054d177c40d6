// Message tags: a MessageKey (kind, lane, producing position, micro-batch;
// core/program.hpp) as one non-negative int, the VM's way of naming a
// message to the Comm, so that a receive can only match the send of the
// very same value. The encoding is dense:
//   tag = ((micro_batch * lanes + lane) * positions + producer) * 2 + kind
// with kind 0 for activations and 1 for gradients. Every message is an
// instruction of the program, so these are all the tags there are. MpiComm
// refuses a configuration whose largest tag exceeds MPI_TAG_UB.
#pragma once

#include <cstdint>

#include "program.hpp"

namespace pipevm {

class MessageTags {
 public:
  MessageTags(Placement placement, const Config& config)
      : lanes_(lane_count(placement)),
        positions_(lane_length(placement, config)),
        micro_batches_(config.micro_batches) {}

  int tag(const MessageKey& key) const {
    const std::int64_t kind = key.kind == MessageKind::grad ? 1 : 0;
    const std::int64_t slot =
        (static_cast<std::int64_t>(key.micro_batch) * lanes_ + key.lane) * positions_ +
        key.producer;
    return static_cast<int>(slot * 2 + kind);
  }

  // The largest tag of any message of the configuration.
  std::int64_t max_tag() const {
    return (static_cast<std::int64_t>(micro_batches_) * lanes_ * positions_) * 2 - 1;
  }

 private:
  int lanes_;
  int positions_;
  int micro_batches_;
};

}  // namespace pipevm
