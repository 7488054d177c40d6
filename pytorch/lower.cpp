// The lowering of compute-only tables (lower.hpp), written from the rules of
// PyTorch's `_merge_bw` and `_add_send_recv`:
//  - ranks take turns in rank order; a rank places its next compute when its
//    input is there: a forward of stage s > 0 when RECV_F(s, mb) or
//    F(s-1, mb) is already on its row; an I or B of stage s < last when
//    RECV_B(s, mb), I(s+1, mb) or B(s+1, mb) is; every other action at once;
//    an overlapped pair when both halves could go;
//  - placing a forward of s < last whose next stage is on another rank
//    appends SEND_F(s, mb) to the row and RECV_F(s+1, mb) to the receiver's
//    row; an I or B of s > 0 whose previous stage is elsewhere appends
//    SEND_B(s, mb) and RECV_B(s-1, mb) likewise.
#include "lower.hpp"

#include <set>
#include <tuple>

namespace pipevm::pytorch {

namespace {

using Key = std::tuple<int, ActionType, int>;  // stage, type, micro-batch

Key key_of(const Action& a) {
  return {a.stage, a.type, a.micro_batch};
}

Action made(int stage, ActionType type, int mb, SourceRange range) {
  Action a;
  a.stage = stage;
  a.type = type;
  a.micro_batch = mb;
  a.range = range;
  return a;
}

std::vector<const Action*> leaves(const Action& a) {
  std::vector<const Action*> out;
  if (a.type == ActionType::OVERLAP_F_B) {
    for (const Action& sub : a.sub_actions) out.push_back(&sub);
  } else {
    out.push_back(&a);
  }
  return out;
}

}  // namespace

bool compute_only(const Table& table) {
  for (const auto& row : table.rows) {
    for (const auto& cell : row) {
      if (cell && is_comm(cell->type)) return false;
    }
  }
  return true;
}

Table merge_backwards(const Table& table) {
  Table out;
  out.row_starts = table.row_starts;
  for (const auto& row : table.rows) {
    std::vector<std::optional<Action>> merged;
    std::vector<const Action*> busy;
    for (const auto& cell : row) {
      if (cell) busy.push_back(&*cell);
    }
    for (std::size_t i = 0; i < busy.size(); ++i) {
      const Action& a = *busy[i];
      if (a.type == ActionType::I && i + 1 < busy.size()) {
        const Action& next = *busy[i + 1];
        if (next.type == ActionType::W && next.stage == a.stage &&
            next.micro_batch == a.micro_batch) {
          Action b = made(a.stage, ActionType::B, a.micro_batch, {a.range.begin, next.range.end});
          merged.emplace_back(std::move(b));
          ++i;
          continue;
        }
      }
      merged.emplace_back(a);
    }
    out.rows.push_back(std::move(merged));
  }
  return out;
}

std::optional<Table> add_send_recv(const Table& merged, const Layout& layout,
                                   const std::shared_ptr<const SourceFile>& file,
                                   Diagnostics& diagnostics) {
  const int ranks = static_cast<int>(merged.rows.size());
  const int last = layout.stages - 1;
  Table out;
  out.row_starts = merged.row_starts;
  out.rows.resize(merged.rows.size());
  std::vector<std::set<Key>> seen(merged.rows.size());
  std::vector<std::size_t> next(merged.rows.size(), 0);

  const auto ready = [&](const Action& a, const std::set<Key>& done) {
    if (a.type == ActionType::F && a.stage != 0) {
      return done.contains({a.stage, ActionType::RECV_F, a.micro_batch}) ||
             done.contains({a.stage - 1, ActionType::F, a.micro_batch});
    }
    if ((a.type == ActionType::I || a.type == ActionType::B) && a.stage != last) {
      return done.contains({a.stage, ActionType::RECV_B, a.micro_batch}) ||
             done.contains({a.stage + 1, ActionType::I, a.micro_batch}) ||
             done.contains({a.stage + 1, ActionType::B, a.micro_batch});
    }
    return true;
  };
  const auto place = [&](int rank, const Action& a) {
    out.rows[static_cast<std::size_t>(rank)].emplace_back(a);
    seen[static_cast<std::size_t>(rank)].insert(key_of(a));
  };

  for (;;) {
    bool any_left = false;
    bool progress = false;
    for (int r = 0; r < ranks; ++r) {
      const auto& row = merged.rows[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      if (i >= row.size()) continue;
      any_left = true;
      const std::optional<Action>& cell = row[i];
      if (cell) {
        const auto parts = leaves(*cell);
        bool go = true;
        for (const Action* part : parts) go = go && ready(*part, seen[static_cast<std::size_t>(r)]);
        if (!go) continue;
        out.rows[static_cast<std::size_t>(r)].emplace_back(*cell);
        for (const Action* part : parts) {
          const Action& a = *part;
          seen[static_cast<std::size_t>(r)].insert(key_of(a));
          const bool forward = a.type == ActionType::F;
          const bool backward = a.type == ActionType::I || a.type == ActionType::B;
          if (!forward && !backward) continue;
          const int to = forward ? a.stage + 1 : a.stage - 1;
          if (to < 0 || to > last || layout.rank_of(to) == layout.rank_of(a.stage)) continue;
          place(r, made(a.stage, forward ? ActionType::SEND_F : ActionType::SEND_B, a.micro_batch,
                        a.range));
          place(layout.rank_of(to), made(to, forward ? ActionType::RECV_F : ActionType::RECV_B,
                                         a.micro_batch, a.range));
        }
      }
      ++i;
      progress = true;
    }
    if (!any_left) return out;
    if (!progress) break;
  }

  // Stuck: name the action every unfinished rank waits at.
  Diagnostic* first = nullptr;
  for (int r = 0; r < ranks; ++r) {
    const auto& row = merged.rows[static_cast<std::size_t>(r)];
    const std::size_t i = next[static_cast<std::size_t>(r)];
    if (i >= row.size() || !row[i]) continue;
    const Location where = location_at(file, row[i]->range, r);
    const std::string what = "rank " + std::to_string(r) + " waits to run " + to_string(*row[i]) +
                             " for an input that no rank can produce first";
    if (first == nullptr) {
      first = &diagnostics.report(
          DiagnosticKind::LoweringStuck,
          "the compute order cannot be given sends and receives (PyTorch: \"Malformed compute "
          "schedule\"): " +
              what,
          where);
    } else {
      first->notes.push_back({what, where});
    }
  }
  return std::nullopt;
}

}  // namespace pipevm::pytorch
