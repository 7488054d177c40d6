// Tables to Programs and back (torch_csv.hpp says the rules).
#include "torch_csv.hpp"

#include <filesystem>
#include <map>
#include <tuple>

#include "lower.hpp"

namespace pipevm::pytorch {

namespace {

// Emits one rank's stream.
class RankBuilder {
 public:
  RankBuilder(Program& program, const Layout& layout, int rank)
      : program_(program), layout_(layout), rank_(rank) {}

  void emit(Opcode op, SourceRange range, int mb = 0, int chunk = 0,
            MessageKind kind = MessageKind::none, WaitDirection direction = WaitDirection::none) {
    Instruction in = cell_instruction(program_.placement, program_.config, rank_, op, mb, chunk,
                                      kind, direction);
    in.set_source(static_cast<std::uint32_t>(program_.sources.size()), false);
    program_.sources.push_back(range);
    program_.code.push_back(in);
  }

  void action(const Action& a) {
    switch (a.type) {
      case ActionType::OVERLAP_F_B:
        overlap(a);
        return;
      case ActionType::F:
        forward(a);
        return;
      case ActionType::I:
        backward(a, Opcode::BwdInput);
        return;
      case ActionType::B:
        backward(a, Opcode::Bwd);
        return;
      case ActionType::W:
        emit(Opcode::BwdWeight, a.range, a.micro_batch, chunk(a));
        return;
      case ActionType::SEND_F:
        emit(Opcode::ISend, a.range, a.micro_batch, chunk(a), MessageKind::act);
        return;
      case ActionType::SEND_B:
        emit(Opcode::ISend, a.range, a.micro_batch, chunk(a), MessageKind::grad);
        return;
      case ActionType::RECV_F:
        post_receive(a, MessageKind::act);
        return;
      case ActionType::RECV_B:
        post_receive(a, MessageKind::grad);
        return;
      case ActionType::UNSHARD:
      case ActionType::RESHARD:
      case ActionType::REDUCE_GRAD:
        return;  // no pipevm instruction yet (torch_csv.hpp)
    }
  }

 private:
  using Pending = std::tuple<MessageKind, int, int>;  // kind, chunk, micro-batch

  int chunk(const Action& a) const { return layout_.chunk_of(a.stage); }
  bool local(int stage) const { return layout_.rank_of(stage) == rank_; }

  // OVERLAP_F_B, the one place that says what it is in pipevm: a forward
  // and a backward become one FwdBwd, started when both inputs are there
  // (their receives waited first), their outputs handed on after it. A pair
  // of another shape runs its sub-actions one after the other.
  void overlap(const Action& pair) {
    const auto& sub = pair.sub_actions;
    if (sub.size() != 2 || sub[0].type != ActionType::F || sub[1].type != ActionType::B) {
      for (const Action& a : sub) action(a);
      return;
    }
    const Action& f = sub[0];
    const Action& b = sub[1];
    forward_input(f);
    backward_input(b);
    emit(Opcode::FwdBwd, pair.range, f.micro_batch, chunk(f));
    set_second_cell(program_.code.back(), Cell{static_cast<std::uint32_t>(b.micro_batch),
                                               static_cast<std::uint16_t>(chunk(b))});
    forward_output(f);
  }

  void post_receive(const Action& a, MessageKind kind) {
    emit(Opcode::IRecv, a.range, a.micro_batch, chunk(a), kind);
    ++pending_[{kind, chunk(a), a.micro_batch}];
  }

  // The input a compute needs: on this rank already (the turn of a V: no
  // message), from a posted receive (waited now), or missing (the checker
  // will say so).
  void take(const Action& a, MessageKind kind, int from_stage) {
    const int c = chunk(a);
    if (local(from_stage)) return;
    auto it = pending_.find({kind, c, a.micro_batch});
    if (it == pending_.end() || it->second == 0) return;
    --it->second;
    emit(Opcode::Wait, a.range, a.micro_batch, c, kind, WaitDirection::recv);
  }

  void forward_input(const Action& a) {
    if (a.stage == 0) {
      emit(Opcode::LoadInput, a.range, a.micro_batch, chunk(a));
    } else {
      take(a, MessageKind::act, a.stage - 1);
    }
  }

  void forward_output(const Action& a) {
    if (a.stage == layout_.stages - 1) {
      emit(Opcode::LoadTarget, a.range, a.micro_batch, chunk(a));
    }
  }

  void forward(const Action& a) {
    forward_input(a);
    emit(Opcode::Fwd, a.range, a.micro_batch, chunk(a));
    forward_output(a);
  }

  void backward_input(const Action& a) {
    if (a.stage != layout_.stages - 1) take(a, MessageKind::grad, a.stage + 1);
  }

  void backward(const Action& a, Opcode op) {
    backward_input(a);
    emit(op, a.range, a.micro_batch, chunk(a));
  }

  Program& program_;
  const Layout& layout_;
  int rank_;
  std::map<Pending, int> pending_;
};

}  // namespace

Program to_program(const Table& table, const Layout& layout,
                   const std::shared_ptr<const SourceFile>& file) {
  Program program;
  program.file = file;
  program.name = std::filesystem::path(file->name()).stem().string();
  program.placement = layout.placement;
  program.config = layout.config();
  program.rank_begin.assign(1, 0);
  for (int r = 0; r < layout.ranks; ++r) {
    const SourceRange row_start = table.row_starts.size() > static_cast<std::size_t>(r)
                                      ? table.row_starts[static_cast<std::size_t>(r)]
                                      : SourceRange{};
    RankBuilder builder(program, layout, r);
    builder.emit(Opcode::ZeroGrad, row_start);
    for (const auto& cell : table.rows[static_cast<std::size_t>(r)]) {
      if (cell) builder.action(*cell);
    }
    builder.emit(Opcode::WaitAll, row_start);
    builder.emit(Opcode::OptimizerStep, row_start);
    program.rank_begin.push_back(program.code.size());
  }
  return program;
}

std::optional<Program> load_csv(const std::shared_ptr<const SourceFile>& file,
                                Diagnostics& diagnostics) {
  const auto table = read_table(file, diagnostics);
  if (!table) return std::nullopt;
  const auto layout = infer_layout(*table, file, diagnostics);
  if (!layout) return std::nullopt;
  if (!compute_only(*table)) return to_program(*table, *layout, file);
  const auto lowered = add_send_recv(merge_backwards(*table), *layout, file, diagnostics);
  if (!lowered) return std::nullopt;
  return to_program(*lowered, *layout, file);
}

bool is_csv_path(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
}

std::optional<Table> to_table(const Program& program, bool with_comms, std::string& error) {
  if (program.placement == Placement::mirror) {
    error = "placement mirror (two pipelines in opposite directions) has no PyTorch table";
    return std::nullopt;
  }
  if (program.config.dp != 1) {
    error = "a PyTorch table is one pipeline: export with --dp 1";
    return std::nullopt;
  }
  const Layout layout = layout_of(program.placement, program.config);
  Table table;
  for (int r = 0; r < program.ranks(); ++r) {
    std::vector<std::optional<Action>> row;
    for (const Instruction& whole : program.rank(r)) {
      // A FwdBwd is written as its forward then its backward (the same order;
      // PyTorch's lowering of compute-only tables knows no OVERLAP_F_B).
      for (int which = 0; which < half_count(whole); ++which) {
        const Instruction in = half(whole, which);
        const int stage = layout.stage_of(r, in.chunk);
        const auto add = [&](ActionType type) {
          Action a;
          a.stage = stage;
          a.type = type;
          a.micro_batch = static_cast<int>(in.micro_batch);
          row.emplace_back(std::move(a));
        };
        const OpcodeInfo& row_info = info(in.op);
        switch (row_info.cls) {
          case OpClass::compute:
          case OpClass::collective:
            // A checkpointed forward is a forward to PyTorch, whose
            // activation checkpointing recomputes inside the backward: the
            // Recompute, and the host copies, have no action of their own.
            if (in.op == Opcode::Fwd || in.op == Opcode::FwdCheckpoint) add(ActionType::F);
            if (in.op == Opcode::BwdInput) add(ActionType::I);
            if (in.op == Opcode::BwdWeight) add(ActionType::W);
            if (in.op == Opcode::Bwd || in.op == Opcode::BwdAllReduce) add(ActionType::B);
            break;
          case OpClass::p2p:
            // Messages a rank sends itself stay on the rank in PyTorch.
            if (!with_comms || in.peer == r) break;
            if (is_send(in.op)) {
              add(in.kind == MessageKind::act ? ActionType::SEND_F : ActionType::SEND_B);
            } else {
              add(in.kind == MessageKind::act ? ActionType::RECV_F : ActionType::RECV_B);
            }
            break;
          case OpClass::data:
          case OpClass::wait:
          case OpClass::optimizer:
            break;
        }
      }
    }
    table.rows.push_back(std::move(row));
    table.row_starts.push_back({});
  }
  return table;
}

}  // namespace pipevm::pytorch
