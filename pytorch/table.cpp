// Reading and writing schedule tables as CSV text, and inferring which rank
// holds which stage. The CSV dialect is the part of Python's `csv` module
// that PyTorch's tables use: comma-separated cells, lines ended by LF or
// CRLF, a cell optionally in double quotes with "" for a quote.
#include "table.hpp"

#include <algorithm>
#include <limits>

namespace pipevm::pytorch {

namespace {

// Calls visit(stage action) for every action and sub-action of a cell.
template <typename Visit>
void for_each_leaf(const Action& action, Visit&& visit) {
  if (action.type == ActionType::OVERLAP_F_B) {
    for (const Action& sub : action.sub_actions) for_each_leaf(sub, visit);
  } else {
    visit(action);
  }
}

}  // namespace

Location location_at(const std::shared_ptr<const SourceFile>& file, SourceRange range, int rank) {
  Location location;
  location.file = file;
  location.range = range;
  location.rank = rank;
  location.stage = rank;
  return location;
}

std::optional<Table> read_table(const std::shared_ptr<const SourceFile>& file,
                                Diagnostics& diagnostics) {
  const std::string& text = file->text();
  Table table;
  std::size_t at = 0;
  bool ok = true;
  while (at < text.size()) {
    const std::size_t line_start = at;
    std::vector<std::optional<Action>> row;
    bool line_empty = true;
    for (;;) {
      // One cell: [at, end) of raw text, its content in `cell`.
      std::size_t begin = at;
      std::string quoted;
      bool is_quoted = false;
      if (at < text.size() && text[at] == '"') {
        is_quoted = true;
        ++at;
        while (at < text.size()) {
          if (text[at] == '"' && at + 1 < text.size() && text[at + 1] == '"') {
            quoted += '"';
            at += 2;
          } else if (text[at] == '"') {
            ++at;
            break;
          } else {
            quoted += text[at++];
          }
        }
      }
      while (at < text.size() && text[at] != ',' && text[at] != '\n') ++at;
      std::size_t end = at;
      if (end > begin && text[end - 1] == '\r') --end;
      if (end > begin) line_empty = false;
      std::optional<ActionError> error;
      std::optional<Action> action;
      if (is_quoted) {
        // Positions inside a quoted cell point at the cell's opening quote.
        action = parse_action(quoted, static_cast<std::uint32_t>(begin), error);
        if (action)
          action->range = {static_cast<std::uint32_t>(begin), static_cast<std::uint32_t>(end)};
      } else {
        action = parse_action(std::string_view(text).substr(begin, end - begin),
                              static_cast<std::uint32_t>(begin), error);
      }
      if (error) {
        const std::uint32_t where = is_quoted ? static_cast<std::uint32_t>(begin)
                                              : static_cast<std::uint32_t>(begin) + error->offset;
        // At least one character, but not past the end of the file (a cell
        // cut short by it: `1F` as the last bytes).
        const auto last = std::min(std::max(where + 1, static_cast<std::uint32_t>(end)),
                                   static_cast<std::uint32_t>(text.size()));
        diagnostics.report(DiagnosticKind::SyntaxError, error->message,
                           location_at(file, {where, last}, static_cast<int>(table.rows.size())));
        ok = false;
      }
      row.push_back(std::move(action));
      if (at < text.size() && text[at] == ',') {
        ++at;
        continue;
      }
      if (at < text.size()) ++at;  // the line break
      break;
    }
    // An empty line is a rank without actions; a row of one empty cell is none.
    if (line_empty && row.size() == 1) row.clear();
    table.rows.push_back(std::move(row));
    table.row_starts.push_back(
        {static_cast<std::uint32_t>(line_start), static_cast<std::uint32_t>(line_start)});
  }
  while (!table.rows.empty() && table.rows.back().empty()) {
    table.rows.pop_back();
    table.row_starts.pop_back();
  }
  if (!ok) return std::nullopt;
  if (table.rows.empty()) {
    diagnostics.report(DiagnosticKind::SyntaxError,
                       "the table has no rows: a PyTorch schedule has one row of actions per rank",
                       location_at(file, {0, 0}));
    return std::nullopt;
  }
  return table;
}

std::string write_table(const Table& table) {
  std::string text;
  for (const auto& row : table.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) text += ',';
      if (row[i]) text += to_string(*row[i]);
    }
    text += '\n';
  }
  return text;
}

int Layout::rank_of(int stage) const {
  if (placement == Placement::v && stage >= ranks) return 2 * ranks - 1 - stage;
  return stage % ranks;
}

int Layout::chunk_of(int stage) const {
  if (placement == Placement::v) return stage < ranks ? 0 : 1;
  return stage / ranks;
}

int Layout::stage_of(int rank, int chunk) const {
  if (placement == Placement::v) return chunk == 0 ? rank : 2 * ranks - 1 - rank;
  return chunk * ranks + rank;
}

Config Layout::config() const {
  return Config{.stages = ranks, .micro_batches = micro_batches, .chunks = chunks, .dp = 1};
}

Layout layout_of(Placement placement, const Config& config) {
  Layout layout;
  layout.ranks = config.stages;
  layout.chunks = config.chunks;
  layout.stages = config.stages * config.chunks;
  layout.micro_batches = config.micro_batches;
  layout.placement = placement;
  return layout;
}

std::optional<Layout> infer_layout(const Table& table,
                                   const std::shared_ptr<const SourceFile>& file,
                                   Diagnostics& diagnostics) {
  Layout layout;
  layout.ranks = static_cast<int>(table.rows.size());
  // The rank each stage was first seen on, and where.
  std::vector<int> owner;
  std::vector<SourceRange> first_seen;
  int max_stage = -1;
  int max_mb = -1;
  bool ok = true;
  for (int r = 0; r < layout.ranks; ++r) {
    for (const auto& cell : table.rows[static_cast<std::size_t>(r)]) {
      if (!cell) continue;
      for_each_leaf(*cell, [&](const Action& a) {
        if (!ok) return;
        if (a.stage > std::numeric_limits<std::int16_t>::max() * 2) {
          diagnostics.report(DiagnosticKind::InvalidOperand,
                             "stage " + std::to_string(a.stage) + " is too large",
                             location_at(file, a.range, r));
          ok = false;
          return;
        }
        max_stage = std::max(max_stage, a.stage);
        if (is_compute(a.type) || is_comm(a.type)) max_mb = std::max(max_mb, a.micro_batch);
        if (owner.size() <= static_cast<std::size_t>(a.stage)) {
          owner.resize(static_cast<std::size_t>(a.stage) + 1, -1);
          first_seen.resize(static_cast<std::size_t>(a.stage) + 1);
        }
        int& o = owner[static_cast<std::size_t>(a.stage)];
        if (o < 0) {
          o = r;
          first_seen[static_cast<std::size_t>(a.stage)] = a.range;
        } else if (o != r) {
          // A receive names the receiver's stage, a send the sender's: every
          // action of a stage is on the rank that holds it.
          auto& d = diagnostics.report(DiagnosticKind::InvalidOperand,
                                       "stage " + std::to_string(a.stage) + " is on rank " +
                                           std::to_string(o) + " and on rank " + std::to_string(r) +
                                           ": each stage belongs to one rank",
                                       location_at(file, a.range, r));
          d.notes.push_back({"stage " + std::to_string(a.stage) + " first appears on rank " +
                                 std::to_string(o) + " here",
                             location_at(file, first_seen[static_cast<std::size_t>(a.stage)], o)});
          ok = false;
        }
      });
    }
  }
  if (!ok) return std::nullopt;
  if (max_stage < 0 || max_mb < 0) {
    diagnostics.report(DiagnosticKind::InvalidOperand,
                       "the table has no compute actions: nothing to check",
                       location_at(file, {0, 0}));
    return std::nullopt;
  }
  // Every micro-batch needs a forward on every stage: a number past the
  // count of cells is a typo, not a schedule (and would size the checker's
  // tables by it).
  std::size_t cells = 0;
  for (const auto& row : table.rows) cells += row.size();
  if (static_cast<std::size_t>(max_mb) >= cells) {
    diagnostics.report(DiagnosticKind::InvalidOperand,
                       "micro-batch " + std::to_string(max_mb) + " in a table of " +
                           std::to_string(cells) +
                           " cells: micro-batches are numbered from 0 and each needs a forward",
                       location_at(file, {0, 0}));
    return std::nullopt;
  }
  layout.stages = max_stage + 1;
  layout.micro_batches = max_mb + 1;
  for (int s = 0; s < layout.stages; ++s) {
    if (owner[static_cast<std::size_t>(s)] < 0) {
      diagnostics.report(DiagnosticKind::InvalidOperand,
                         "stage " + std::to_string(s) + " appears on no rank, but stage " +
                             std::to_string(max_stage) + " does: stages are numbered from 0",
                         location_at(file, {0, 0}));
      return std::nullopt;
    }
  }
  if (layout.stages % layout.ranks != 0) {
    diagnostics.report(DiagnosticKind::InvalidOperand,
                       std::to_string(layout.stages) + " stages on " +
                           std::to_string(layout.ranks) +
                           " ranks: every rank must hold the same number of stages",
                       location_at(file, first_seen[static_cast<std::size_t>(max_stage)]));
    return std::nullopt;
  }
  layout.chunks = layout.stages / layout.ranks;
  if (layout.ranks > std::numeric_limits<std::int16_t>::max() ||
      layout.chunks > std::numeric_limits<std::uint16_t>::max()) {
    diagnostics.report(DiagnosticKind::InvalidOperand, "too many ranks or stages",
                       location_at(file, {0, 0}));
    return std::nullopt;
  }
  const auto fits = [&](Placement p) {
    Layout candidate = layout;
    candidate.placement = p;
    for (int s = 0; s < layout.stages; ++s) {
      if (candidate.rank_of(s) != owner[static_cast<std::size_t>(s)]) return s;
    }
    return -1;
  };
  const int looped_misfit = fits(Placement::looped);
  if (looped_misfit < 0) return layout;
  if (layout.chunks == 2 && fits(Placement::v) < 0) {
    layout.placement = Placement::v;
    return layout;
  }
  const int s = looped_misfit;
  diagnostics.report(DiagnosticKind::InvalidOperand,
                     "stage " + std::to_string(s) + " is on rank " +
                         std::to_string(owner[static_cast<std::size_t>(s)]) +
                         ", which fits neither looped placement (stage s on rank s mod " +
                         std::to_string(layout.ranks) + ") nor V placement (rank r holds r and " +
                         std::to_string(2 * layout.ranks - 1) + "-r)",
                     location_at(file, first_seen[static_cast<std::size_t>(s)],
                                 owner[static_cast<std::size_t>(s)]));
  return std::nullopt;
}

}  // namespace pipevm::pytorch
