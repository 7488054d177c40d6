// The checker's rules for memory policies, one rank's stream at a time, per
// (chunk, micro-batch) cell: where its stash (what its backward reads) is.
// A Fwd leaves it on the device; a FwdCheckpoint keeps only the input, and
// a Recompute brings the rest back; an Offload starts it on its way to host
// memory, the wait that completes the Offload sees it there, a Reload
// starts it back and the wait that completes the Reload sees it on the
// device again. Then:
//  - a Recompute needs a kept input: a FwdCheckpoint before it and no
//    Recompute since (PV2061);
//  - an Offload needs the stash on the device before the backward begins,
//    and not offloaded already (PV2064; a stash never made, or freed by
//    the backward, is check_ranks.cpp's PV2060, by the table's `stash`);
//  - a Reload needs a completed Offload (PV2062);
//  - between an Offload and its Reload nothing reads the stash: a backward
//    half, an Offload, a send of the cell's output, the forward that takes
//    that output as its input on the rank at the turn of a V (PV2063); from the
//    Reload to the wait that completes it, the same (PV2065; a Reload never
//    completed is check_ranks.cpp's, with the same code);
//  - a Recompute or Reload makes the cell's output again: a send still
//    reading the one before completes first (PV2011).
// Which wait completes which copy or send is the link's rule (link.hpp).
// Leaves out: the bytes (core/memory_bytes_policy.cpp), the time (the
// simulator's host link).
#include <algorithm>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

bool has_policy(const Instruction& in) {
  return in.op == Opcode::FwdCheckpoint || in.op == Opcode::Recompute || is_host_copy(in.op);
}

enum class Where : std::uint8_t {
  unforwarded,
  on_device,
  recomputed,  // on the device, by a Recompute
  input_only,
  offloading,
  on_host,
  reloading,
};

struct CellState {
  Where where = Where::unforwarded;
  bool backward_begun = false;
  int output_sends = 0;             // non-blocking sends of its output not yet completed
  bool input_received = false;      // a Recv or IRecv act of the cell came
  std::uint32_t copied_at = kNone;  // the Offload or Reload that moved it last
};

class PolicyWalker {
 public:
  PolicyWalker(const Program& program, const Link& link, Reporter& reporter)
      : program_(program),
        link_(link),
        reporter_(reporter),
        chunks_(chunks_per_rank(program)),
        micro_batches_(std::max(0, program.config.micro_batches)) {}
  void walk(int rank);

 private:
  CellState* cell(const Instruction& in) {
    if (in.chunk >= chunks_ || in.micro_batch >= static_cast<std::uint32_t>(micro_batches_)) {
      return nullptr;
    }
    return &cells_[static_cast<std::size_t>(in.chunk) * static_cast<std::size_t>(micro_batches_) +
                   in.micro_batch];
  }
  std::string what(std::size_t index) const {
    return "`" + disassemble(program_.code[index]) + "`";
  }
  static std::string of(const Instruction& in) {
    return "micro-batch " + std::to_string(in.micro_batch) +
           (in.chunk != 0 ? " of chunk " + std::to_string(in.chunk) : "");
  }
  // With a note at `earlier`, the copy that moved the stash last.
  void report(DiagnosticKind kind, std::size_t index, const std::string& message,
              std::uint32_t earlier = kNone) {
    Diagnostic* d = reporter_.report(kind, what(index) + message, reporter_.at(index));
    if (earlier == kNone) return;
    const bool offload = info(program_.code[earlier].op).direction == Direction::to_host;
    reporter_.note(
        d, std::string(offload ? "the Offload: " : "the Reload: ") + reporter_.describe(earlier),
        reporter_.at(earlier));
  }
  void step(std::size_t index, const Instruction& in);
  // A forward at the turn of a V with no receive of its input reads the
  // output of the rank's chunk before it (local_source_chunk).
  void take_on_rank(std::size_t index, const Instruction& in, CellState& c);
  void complete(std::uint32_t request);
  // A read of the stash (a backward half, a send of the output, an
  // Offload) while it is offloaded or being reloaded.
  bool away(std::size_t index, const Instruction& in, const CellState& c, const char* reads);
  void recompute(std::size_t index, const Instruction& in, CellState& c);
  void offload(std::size_t index, const Instruction& in, CellState& c);
  void reload(std::size_t index, const Instruction& in, CellState& c);
  // A Recompute or Reload makes the output again: no send may still read it.
  void output_in_send(std::size_t index, const Instruction& in, const CellState& c);

  const Program& program_;
  const Link& link_;
  Reporter& reporter_;
  const int chunks_;
  const int micro_batches_;
  std::vector<CellState> cells_;
  std::vector<int> act_source_;  // per chunk of the rank: local_source_chunk for act
};

void PolicyWalker::walk(int rank) {
  cells_.assign(static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(micro_batches_),
                CellState{});
  act_source_.clear();
  for (int chunk = 0; chunk < chunks_; ++chunk) {
    act_source_.push_back(local_source_chunk(program_.placement, program_.config,
                                             stage_of(program_.config, rank), chunk,
                                             MessageKind::act));
  }
  const std::size_t begin = program_.rank_begin[static_cast<std::size_t>(rank)];
  const std::size_t end = program_.rank_begin[static_cast<std::size_t>(rank) + 1];
  for (std::size_t i = begin; i < end; ++i) {
    const Instruction& in = program_.code[i];
    if (info(in.op).cls == OpClass::wait) {
      const std::uint32_t w = link_.to[i];
      for (std::uint32_t q = link_.completes_begin[w]; q < link_.completes_begin[w + 1]; ++q) {
        complete(link_.completed[q]);
      }
      continue;
    }
    for (int h = 0; h < half_count(in); ++h) step(i, half(in, h));
  }
}

void PolicyWalker::complete(std::uint32_t request) {
  const Instruction& in = program_.code[request];
  CellState* c = cell(in);
  if (c == nullptr) return;
  if (is_send(in.op) && in.kind == MessageKind::act) {
    c->output_sends = std::max(0, c->output_sends - 1);
    return;
  }
  const Direction direction = info(in.op).direction;
  if (direction == Direction::to_host && c->where == Where::offloading) c->where = Where::on_host;
  if (direction == Direction::from_host && c->where == Where::reloading) {
    c->where = Where::on_device;
  }
}

void PolicyWalker::step(std::size_t index, const Instruction& in) {
  CellState* c = cell(in);
  if (c == nullptr || !operand_parts(in.op).micro_batch) return;
  if (is_send(in.op)) {
    if (in.kind != MessageKind::act) return;
    away(index, in, *c, "sends its output");
    if (posts_request(in.op)) ++c->output_sends;
    return;
  }
  if (is_recv(in.op)) {
    if (in.kind == MessageKind::act) c->input_received = true;
    return;
  }
  const OpcodeInfo& row = info(in.op);
  if (in.op == Opcode::Recompute) {
    recompute(index, in, *c);
  } else if (row.direction == Direction::to_host) {
    offload(index, in, *c);
  } else if (row.direction == Direction::from_host) {
    reload(index, in, *c);
  } else if (row.produces.contains(Value::activation)) {
    take_on_rank(index, in, *c);
    // A forward: a Fwd makes the stash, a FwdCheckpoint keeps the input.
    c->where = row.produces.contains(Value::stash) ? Where::on_device : Where::input_only;
  }
  if (!row.consumes.contains(Value::stash) || is_host_copy(in.op)) return;
  if (away(index, in, *c, "reads its activations")) return;
  c->backward_begun = true;
}

bool PolicyWalker::away(std::size_t index, const Instruction& in, const CellState& c,
                        const char* reads) {
  if (c.where == Where::offloading || c.where == Where::on_host) {
    report(DiagnosticKind::UseWhileOffloaded, index,
           " " + std::string(reads) + " while " + of(in) + " is offloaded: Reload " +
               std::to_string(in.micro_batch) + " and WaitReload " +
               std::to_string(in.micro_batch) + " first",
           c.copied_at);
    return true;
  }
  if (c.where == Where::reloading) {
    report(DiagnosticKind::ReloadNotWaited, index,
           " " + std::string(reads) + " before the Reload of " + of(in) +
               " is waited for (WaitReload " + std::to_string(in.micro_batch) +
               " first): the copy may still be running",
           c.copied_at);
    return true;
  }
  return false;
}

void PolicyWalker::take_on_rank(std::size_t index, const Instruction& in, CellState& c) {
  if (c.input_received || c.where != Where::unforwarded) return;
  const int from = in.chunk < act_source_.size() ? act_source_[in.chunk] : -1;
  if (from < 0) return;
  Instruction producer = in;
  producer.chunk = static_cast<std::uint16_t>(from);
  c.input_received = true;
  const std::string reads =
      "takes as its input the output of chunk " + std::to_string(from) + " at the turn of the V";
  away(index, producer, *cell(producer), reads.c_str());
}

void PolicyWalker::recompute(std::size_t index, const Instruction& in, CellState& c) {
  std::string why;
  switch (c.where) {
    case Where::input_only:
      output_in_send(index, in, c);
      c.where = Where::recomputed;
      return;
    case Where::unforwarded:
      why = "no FwdCheckpoint of " + of(in) + " came before it";
      break;
    case Where::on_device:
      why = of(in) +
            "'s forward was a Fwd, which keeps all its activations (forward it with "
            "FwdCheckpoint to recompute)";
      break;
    case Where::recomputed:
      why = of(in) + " is recomputed already";
      break;
    case Where::offloading:
    case Where::on_host:
    case Where::reloading:
      why = of(in) + "'s activations are offloaded, not checkpointed";
      break;
  }
  report(DiagnosticKind::RecomputeWithoutCheckpoint, index, " has no kept input: " + why);
}

void PolicyWalker::offload(std::size_t index, const Instruction& in, CellState& c) {
  switch (c.where) {
    case Where::on_device:
    case Where::recomputed:
      if (c.backward_begun) {
        report(DiagnosticKind::StashNotOnDevice, index,
               " runs after the backward of " + of(in) +
                   " began: only a forward's whole stash is offloaded (before its BwdInput)");
        return;
      }
      c.where = Where::offloading;
      c.copied_at = static_cast<std::uint32_t>(index);
      return;
    case Where::offloading:
    case Where::on_host:
      report(DiagnosticKind::DoubleOffload, index,
             " offloads " + of(in) + " a second time with no Reload in between", c.copied_at);
      return;
    case Where::reloading:
      away(index, in, c, "offloads its activations");
      return;
    case Where::unforwarded:
    case Where::input_only:
      return;  // no stash to offload: the table's `stash` (check_ranks.cpp, PV2060)
  }
}

void PolicyWalker::reload(std::size_t index, const Instruction& in, CellState& c) {
  std::string why;
  switch (c.where) {
    case Where::on_host:
      output_in_send(index, in, c);
      c.where = Where::reloading;
      c.copied_at = static_cast<std::uint32_t>(index);
      return;
    case Where::offloading:
      why = "the Offload of " + of(in) + " is not complete (WaitOffload " +
            std::to_string(in.micro_batch) + " first)";
      break;
    case Where::reloading:
      why = of(in) + " is being reloaded already";
      break;
    case Where::unforwarded:
    case Where::on_device:
    case Where::recomputed:
    case Where::input_only:
      why = "no Offload of " + of(in) + " came before it";
      break;
  }
  report(DiagnosticKind::ReloadWithoutOffload, index, " has nothing to reload: " + why,
         c.copied_at);
}

void PolicyWalker::output_in_send(std::size_t index, const Instruction& in, const CellState& c) {
  if (c.output_sends == 0) return;
  report(DiagnosticKind::BufferInUse, index,
         " makes the output of " + of(in) + " again while a send still reads it (Wait send act " +
             std::to_string(in.micro_batch) + " first)");
}

}  // namespace

void check_memory_policy(const Program& program, const Link& link, Reporter& reporter,
                         const std::vector<bool>& quiet) {
  if (std::none_of(program.code.begin(), program.code.end(), has_policy)) return;
  PolicyWalker walker(program, link, reporter);
  for (int r = 0; r < program.ranks(); ++r) {
    if (!quiet[static_cast<std::size_t>(r)]) walker.walk(r);
  }
}

}  // namespace pipevm::check_detail
