// Fuzz target `torch_csv`: any bytes as a PyTorch pipelining table (`pipevm
// check FILE.csv`, pytorch/torch_csv.hpp), read, lowered when it has no
// communication, and checked. Asserts:
//   - a table that is refused gets an error diagnostic inside the file; one
//     the checker rejects gets every error (in MPI's order and in NCCL's
//     posted order) at the start of a cell or of a row;
//   - a table the checker accepts (no error) runs each rank's compute in the
//     table's order: the program written back compute-only is the table's
//     F, I, W and B cells row by row (after PyTorch's _merge_bw when the
//     table was lowered, an overlapped pair as its two halves);
//   - it exports and re-imports to the same per-rank order: written with
//     its communication, read back, it is accepted and writes the same
//     table again; written compute-only, read back (lowered by PyTorch's
//     rule), it is accepted and its compute is the exported one after
//     _merge_bw.
// A first byte 0xFF makes the rest a recipe instead of a table, so that
// accepted tables are common enough to exercise the round trip: the next
// four bytes choose a shipped schedule, stages (1-4), micro-batches (1-8),
// chunks (1-3) and, by the last one's top bit, a table with communication;
// that program is exported as a table, then each further pair of bytes (a
// row, a position) swaps a cell with its right neighbour.
// Leaves out the command line (check_file, output formats).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "compile.hpp"
#include "fuzz_support.hpp"
#include "lower.hpp"
#include "shipped_schedule.hpp"
#include "torch_csv.hpp"

namespace {

using pipevm::pytorch::Action;
using pipevm::pytorch::ActionType;
using pipevm::pytorch::Table;

bool rejected(const pipevm::CheckResult& result) {
  for (const pipevm::Diagnostic& d : result.diagnostics) {
    if (d.severity == pipevm::Severity::error) return true;
  }
  return false;
}

// Where a diagnostic may point: the first byte of a cell, of an action
// inside a cell (an overlapped pair's halves), or of a row.
void add_starts(const Action& action, std::set<std::uint32_t>& starts) {
  starts.insert(action.range.begin);
  for (const Action& sub : action.sub_actions) add_starts(sub, starts);
}

std::set<std::uint32_t> cell_starts(const Table& table) {
  std::set<std::uint32_t> starts;
  for (const pipevm::SourceRange& row : table.row_starts) starts.insert(row.begin);
  for (const auto& row : table.rows) {
    for (const auto& cell : row) {
      if (cell) add_starts(*cell, starts);
    }
  }
  return starts;
}

void expect_errors_at_cells(const pipevm::CheckResult& result, const Table& table,
                            const pipevm::SourceFile& file) {
  const std::set<std::uint32_t> starts = cell_starts(table);
  for (const pipevm::Diagnostic& d : result.diagnostics) {
    if (d.severity != pipevm::Severity::error) continue;
    FUZZ_ASSERT(d.location.file.get() == &file, "a rejected table's error is in its file");
    FUZZ_ASSERT(
        starts.count(d.location.range.begin) == 1 && d.location.range.end <= file.text().size(),
        "a rejected table's error is at a cell or a row");
  }
}

void add_compute_leaves(const Action& action, std::vector<std::optional<Action>>& row) {
  if (action.type == ActionType::OVERLAP_F_B) {
    for (const Action& sub : action.sub_actions) add_compute_leaves(sub, row);
    return;
  }
  if (pipevm::pytorch::is_compute(action.type)) {
    Action leaf = action;
    leaf.range = {};
    row.emplace_back(std::move(leaf));
  }
}

// The table's F, I, W and B cells, row by row, as the program should run them.
std::string compute_of(const Table& table) {
  Table compute;
  for (const auto& row : table.rows) {
    auto& out = compute.rows.emplace_back();
    for (const auto& cell : row) {
      if (cell) add_compute_leaves(*cell, out);
    }
  }
  return pipevm::pytorch::write_table(compute);
}

std::optional<pipevm::Program> load(const std::string& text) {
  pipevm::Diagnostics diagnostics;
  return pipevm::pytorch::load_csv(std::make_shared<const pipevm::SourceFile>("export.csv", text),
                                   diagnostics);
}

std::string exported(const pipevm::Program& program, bool with_comms) {
  std::string error;
  const auto table = pipevm::pytorch::to_table(program, with_comms, error);
  FUZZ_ASSERT(table.has_value(), "a program read from a table has a table");
  return pipevm::pytorch::write_table(*table);
}

void expect_round_trips(const pipevm::Program& program) {
  const std::string with_comms = exported(program, true);
  const auto back = load(with_comms);
  FUZZ_ASSERT(back.has_value() && !rejected(pipevm::check(*back)),
              "an accepted table written with its communication reads back accepted");
  FUZZ_ASSERT(back->config.stages == program.config.stages &&
                  back->config.chunks == program.config.chunks &&
                  back->config.micro_batches == program.config.micro_batches &&
                  back->placement == program.placement,
              "the table read back has the same layout");
  FUZZ_ASSERT(exported(*back, true) == with_comms,
              "the table read back writes the same table with communication");

  const std::string compute = exported(program, false);
  const auto lowered = load(compute);
  FUZZ_ASSERT(lowered.has_value() && !rejected(pipevm::check(*lowered)),
              "an accepted table written compute-only reads back (lowered) accepted");
  pipevm::Diagnostics diagnostics;
  const auto compute_table = pipevm::pytorch::read_table(
      std::make_shared<const pipevm::SourceFile>("export.csv", compute), diagnostics);
  FUZZ_ASSERT(compute_table.has_value(), "a written table reads");
  FUZZ_ASSERT(
      exported(*lowered, false) == compute_of(pipevm::pytorch::merge_backwards(*compute_table)),
      "the compute-only table read back runs the same compute (after _merge_bw)");
}

// The shipped schedules that have a PyTorch table (not mirror, not dp).
const std::vector<std::shared_ptr<const pipevm::Schedule>>& table_schedules() {
  static const auto schedules = [] {
    std::vector<std::shared_ptr<const pipevm::Schedule>> parsed;
    for (const char* name :
         {"gpipe.pipe", "1f1b.pipe", "zb-h1.pipe", "interleaved-1f1b.pipe", "looped-bfs.pipe",
          "interleaved-zb.pipe", "zb-v.pipe", "dualpipev.pipe"}) {
      parsed.push_back(shipped_schedule(name));
    }
    return parsed;
  }();
  return schedules;
}

// The table the recipe describes (see the top of the file); nullopt when
// the configuration does not fit the schedule.
std::optional<std::string> recipe_table(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return std::nullopt;
  const auto& schedules = table_schedules();
  const pipevm::Config config{
      .stages = 1 + data[1] % 4, .micro_batches = 1 + data[2] % 8, .chunks = 1 + data[3] % 3};
  pipevm::Diagnostics diagnostics;
  const auto program = pipevm::expand(*schedules[data[0] % schedules.size()], config, diagnostics);
  if (!program) return std::nullopt;
  std::string error;
  auto table = pipevm::pytorch::to_table(*program, (data[3] & 0x80) != 0, error);
  FUZZ_ASSERT(table.has_value(), "a looped or V program has a table");
  for (std::size_t i = 4; i + 1 < size; i += 2) {
    auto& row = table->rows[data[i] % table->rows.size()];
    if (row.size() < 2) continue;
    const std::size_t at = data[i + 1] % (row.size() - 1);
    std::swap(row[at], row[at + 1]);
  }
  return pipevm::pytorch::write_table(*table);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (size > 0 && data[0] == 0xFF) {
    auto recipe = recipe_table(data + 1, size - 1);
    if (!recipe) return 0;
    text = std::move(*recipe);
  }
  const auto file = std::make_shared<const pipevm::SourceFile>("fuzz.csv", std::move(text));
  pipevm::Diagnostics diagnostics;
  const auto program = pipevm::pytorch::load_csv(file, diagnostics);
  if (!program) {
    FUZZ_ASSERT(diagnostics.has_errors(), "a refused table reports an error");
    for (const pipevm::Diagnostic& d : diagnostics.all()) {
      FUZZ_ASSERT(d.location.file == file && d.location.range.begin <= d.location.range.end &&
                      d.location.range.end <= file->text().size(),
                  "a refused table's diagnostic is inside the file");
    }
    return 0;
  }
  pipevm::Diagnostics again;
  const auto table = pipevm::pytorch::read_table(file, again);
  FUZZ_ASSERT(table.has_value(), "a table that loads reads");
  pipevm::CheckOptions posted;
  posted.p2p_posted_order = true;
  expect_errors_at_cells(pipevm::check(*program, posted), *table, *file);
  const pipevm::CheckResult result = pipevm::check(*program);
  expect_errors_at_cells(result, *table, *file);
  if (rejected(result)) return 0;
  const Table merged =
      pipevm::pytorch::compute_only(*table) ? pipevm::pytorch::merge_backwards(*table) : *table;
  FUZZ_ASSERT(exported(*program, false) == compute_of(merged),
              "an accepted table's program runs the table's compute in its order");
  expect_round_trips(*program);
  return 0;
}
