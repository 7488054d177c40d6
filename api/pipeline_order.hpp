// PyTorch schedules given as values rather than files: the in-memory
// `pipeline_order` of torch.distributed.pipelining (`{rank: ["0F0", None,
// "1B0", ...]}`) becomes the CSV text PyTorch's `_dump_csv` would write, so
// that it is read by the very rules of the CSV reader (pytorch/table.hpp,
// torch_csv.hpp); a position in that text leads back to the rank and step.
// Also lowering a compute-only table (pytorch/lower.hpp) to its text with
// communication. Not here: checking (check_run.hpp, with `table` set).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics.hpp"
#include "table.hpp"

namespace pipevm::api {

// rows[rank][step]: an action's text, or nullopt for an idle step.
using PipelineOrder = std::vector<std::vector<std::optional<std::string>>>;

// The order as a table file named `name`; null with `error` set when a
// cell holds a character the CSV form cannot carry unquoted (comma, quote,
// line break), naming its rank and step.
std::shared_ptr<const SourceFile> pipeline_order_file(const PipelineOrder& order,
                                                      const std::string& name, std::string& error);

// Where a byte offset of a table's text lies: its rank (row), step (cell)
// and the cell's text.
struct TableCell {
  int rank = 0;
  int step = 0;
  std::string action;
};
TableCell cell_at(const SourceFile& file, std::uint32_t offset);

// The table's layout (which rank holds which stage, how many micro-batches),
// as the CSV reader infers it; nullopt with diagnostics when it cannot.
std::optional<pytorch::Layout> table_layout(const std::shared_ptr<const SourceFile>& file,
                                            Diagnostics& diagnostics);

// A table with its communication, as PyTorch lowers a compute-only one
// (a table that has it already is written back as read); nullopt with
// diagnostics when it cannot be read or lowered.
std::optional<std::string> lower_table(const std::shared_ptr<const SourceFile>& file,
                                       Diagnostics& diagnostics);

}  // namespace pipevm::api
