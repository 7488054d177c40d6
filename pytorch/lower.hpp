// Lowering a compute-only PyTorch table to one with communication, the way
// torch.distributed.pipelining does before it runs a custom schedule:
// `_merge_bw` (idle cells dropped; an I directly followed by the W of the
// same stage and micro-batch becomes one B), then `_add_send_recv` (each
// compute that hands a value to a stage on another rank is followed by its
// send on its own row, and the matching receive is appended to the
// receiver's row at the same moment). The FSDP passes (`_add_unshard_reshard`,
// `_add_reduce_grad`) are not applied: pipevm has no sharded parameters yet.
#pragma once

#include <optional>

#include "table.hpp"

namespace pipevm::pytorch {

// True when no cell of the table is a SEND_*/RECV_*.
bool compute_only(const Table& table);

// `_merge_bw` on every row.
Table merge_backwards(const Table& table);

// `_add_send_recv`. Reports LoweringStuck (with the cell each rank is held
// at) and returns nullopt when no rank can go on, which is where PyTorch
// stops with "Malformed compute schedule". Added actions carry the range of
// the compute action they serve.
std::optional<Table> add_send_recv(const Table& merged, const Layout& layout,
                                   const std::shared_ptr<const SourceFile>& file,
                                   Diagnostics& diagnostics);

}  // namespace pipevm::pytorch
