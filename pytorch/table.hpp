// A torch.distributed.pipelining schedule table: one CSV row per rank (row
// index = rank), one cell per action, an empty cell idle. What PyTorch's
// `_load_csv` reads and `_dump_csv` writes. This file reads and writes the
// text and infers the layout (which rank holds which stage); what the
// actions do is torch_csv.hpp, adding communication lower.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "action.hpp"
#include "diagnostics.hpp"
#include "program.hpp"

namespace pipevm::pytorch {

struct Table {
  // rows[rank][step]; nullopt: an idle cell.
  std::vector<std::vector<std::optional<Action>>> rows;
  // Where each row starts in its file (an empty range at the line's start).
  std::vector<SourceRange> row_starts;
};

// A place in a table's file, for a diagnostic about rank `rank`.
Location location_at(const std::shared_ptr<const SourceFile>& file, SourceRange range,
                     int rank = -1);

// Reads the CSV text of `file` (cells may be double-quoted, as Python's csv
// module writes them when they must). Trailing empty lines are not ranks.
// Reports a SyntaxError at the cell and returns nullopt on a bad cell.
std::optional<Table> read_table(const std::shared_ptr<const SourceFile>& file,
                                Diagnostics& diagnostics);

// The table as `_dump_csv` writes it: cells joined by commas, one line per rank.
std::string write_table(const Table& table);

// Which rank holds which of the global stages, inferred from the rows the
// way PyTorch's `_validate_schedule` does (each stage on exactly one rank),
// then matched to pipevm's placements: looped (stage s on rank s mod P,
// chunk s / P) or V (rank r holds stages r and 2P-1-r as chunks 0 and 1).
struct Layout {
  int ranks = 1;   // P: rows
  int stages = 1;  // global stages: P * chunks
  int chunks = 1;
  int micro_batches = 1;  // one more than the largest micro-batch named
  Placement placement = Placement::looped;

  int rank_of(int stage) const;
  int chunk_of(int stage) const;
  // The global stage of `rank`'s `chunk`.
  int stage_of(int rank, int chunk) const;
  Config config() const;
};

// Reports a diagnostic at the offending cell and returns nullopt when the
// stages fit no placement, a stage sits on two ranks, or one is missing.
std::optional<Layout> infer_layout(const Table& table,
                                   const std::shared_ptr<const SourceFile>& file,
                                   Diagnostics& diagnostics);

// The layout of a pipevm configuration (looped or v; mirror has no
// PyTorch equivalent).
Layout layout_of(Placement placement, const Config& config);

}  // namespace pipevm::pytorch
