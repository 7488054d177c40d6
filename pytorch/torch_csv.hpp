// A PyTorch schedule table as a pipevm Program, and a Program as a table.
//
// Reading (a table with communication, as PyTorch's _PipelineScheduleRuntime
// runs it): every SEND_* and RECV_* is posted as a non-blocking operation
// (ISend, IRecv); a forward waits for its activation's receive right before
// it runs, a backward for its gradient's; the sends are waited at the end of
// the step (WaitAll). Values that stay on a rank (two adjacent stages on one
// rank, the turn of a V) need no table action and no pipevm instruction:
// the consumer takes them on the rank (docs/language.md, "The turn"). Stage 0 loads its inputs, the last stage its targets;
// the step starts with ZeroGrad and ends with OptimizerStep. UNSHARD,
// RESHARD and REDUCE_GRAD are accepted and have no pipevm instruction yet.
//
// Writing: each rank's compute (and with communication, its sends and
// receives to other ranks) in stream order, under PyTorch's names.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "table.hpp"

namespace pipevm::pytorch {

// The Program of a table that already has its communication.
Program to_program(const Table& table, const Layout& layout,
                   const std::shared_ptr<const SourceFile>& file);

// Reads a PyTorch CSV schedule: a compute-only table is lowered first
// (lower.hpp), a table with communication is taken as written. Nullopt
// with diagnostics when it cannot be read or lowered.
std::optional<Program> load_csv(const std::shared_ptr<const SourceFile>& file,
                                Diagnostics& diagnostics);

// Whether a path names a PyTorch table (ends in .csv).
bool is_csv_path(const std::string& path);

// The table of a Program: compute only, or with the sends and receives
// between ranks. Empty with `error` set when the program has no PyTorch
// form (placement mirror, data parallelism).
std::optional<Table> to_table(const Program& program, bool with_comms, std::string& error);

}  // namespace pipevm::pytorch
