// The VM's sharded weights: which floats of a chunk a rank owns, and what
// AllGather, Release, ReduceScatter and ShardStep do to the chunk's buffers.
// The runtime keeps every chunk's whole parameter and gradient arrays on
// every rank (the bytes a schedule saves are the checker's and the
// simulator's figures, not this process's); what sharding changes here is
// which floats are current: after a Release only the own shard is kept (the
// rest is zeroed, so that a compute on it could not pass unnoticed), after a
// reduce-scatter only the own shard of the gradients is the group's sum,
// and a ShardStep updates only the own shard with an optimizer whose state
// is the shard's. The collectives are sums over the data-parallel group
// (runtime::Comm has only sums): a gather is a sum of buffers that are zero
// outside each member's shard, which adds nothing but zeros, so it is exact.
// Not here: sharding over every rank (over world), which the VM refuses.
#include <algorithm>

#include "vm.hpp"

namespace pipevm {

namespace {

bool gathers(std::span<const Instruction> stream, int chunk) {
  return std::any_of(stream.begin(), stream.end(), [chunk](const Instruction& in) {
    return in.op == Opcode::AllGather && in.chunk == chunk;
  });
}

// Zeroes `values` outside [offset, offset + count).
void keep_only(std::span<float> values, std::size_t offset, std::size_t count) {
  std::fill(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(offset), 0.0F);
  std::fill(values.begin() + static_cast<std::ptrdiff_t>(offset + count), values.end(), 0.0F);
}

}  // namespace

// Equal shards in dp_rank order, the last ones shorter (or empty) when the
// parameters do not divide evenly.
Machine::Shard Machine::shard_of(int chunk, std::size_t parameters) const {
  Shard shard;
  shard.sharded = gathers(program_->rank(rank_), chunk);
  const auto members = static_cast<std::size_t>(comm_.dp());
  const std::size_t per = (parameters + members - 1) / members;
  shard.offset = std::min(parameters, per * static_cast<std::size_t>(dp_rank_));
  shard.count = std::min(per, parameters - shard.offset);
  return shard;
}

void Machine::gather(Chunk& chunk) {
  if (!chunk.shard.sharded || chunk.shard.gathered) {
    throw std::logic_error("the chunk's weights are already whole");
  }
  const std::span<float> parameters = chunk.piece.parameters();
  if (comm_.dp() > 1) {
    keep_only(parameters, chunk.shard.offset, chunk.shard.count);
    comm_.allreduce_sum(parameters);
  }
  chunk.shard.gathered = true;
}

void Machine::release(Chunk& chunk) {
  if (!chunk.shard.gathered) throw std::logic_error("the chunk's weights are not gathered");
  if (comm_.dp() > 1) keep_only(chunk.piece.parameters(), chunk.shard.offset, chunk.shard.count);
  chunk.shard.gathered = false;
}

void Machine::keep_own_gradients(Chunk& chunk) {
  if (comm_.dp() > 1) keep_only(chunk.piece.gradients(), chunk.shard.offset, chunk.shard.count);
}

void Machine::shard_step() {
  for (Chunk& chunk : chunks_) {
    if (!chunk.shard.sharded) {
      throw std::logic_error("ShardStep on a chunk that is not sharded (no AllGather of it)");
    }
    chunk.optimizer.step(chunk.piece.parameters().subspan(chunk.shard.offset, chunk.shard.count),
                         chunk.piece.gradients().subspan(chunk.shard.offset, chunk.shard.count));
  }
}

void Machine::unshard() {
  for (Chunk& chunk : chunks_) {
    if (!chunk.shard.sharded || chunk.shard.gathered) continue;
    gather(chunk);
    chunk.shard.gathered = false;
  }
}

}  // namespace pipevm
