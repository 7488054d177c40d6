// The per-rank pass: everything that can be decided by walking one rank's
// stream alone, in program order.
//  - Which request each Wait completes (the oldest pending one of its
//    direction, kind, micro-batch and chunk) and which ones a WaitAll
//    completes: the simulation follows these links.
//  - Non-blocking misuse: a request never completed, a Wait with nothing to
//    complete, a pending receive's buffer read or received into again.
//    Two pending sends of the same value are allowed: both only read it.
//  - Dataflow: inputs, gradients, forward/backward order, once per
//    micro-batch and chunk, ZeroGrad and OptimizerStep placement.
//  - Memory: stashed activations and requests in flight, at their peak.
// Deadlock and pairing are elsewhere (check_matching.cpp, check_progress.cpp).
#include <algorithm>

#include "check_internal.hpp"

namespace pipevm::check_detail {

namespace {

// What has happened to one (chunk, micro-batch) on a rank.
enum CellFlag : std::uint16_t {
  kInputLoaded = 1u << 0,    // LoadInput
  kInputReceived = 1u << 1,  // Recv act, or IRecv act completed
  kForwarded = 1u << 2,
  kTargetLoaded = 1u << 3,
  kGradReceived = 1u << 4,
  kInputGradDone = 1u << 5,   // Bwd, BwdInput or BwdAllReduce
  kWeightGradDone = 1u << 6,  // Bwd, BwdWeight or BwdAllReduce
  kHeld = 1u << 7,            // activations stashed for a backward
  kPendingActRecv = 1u << 8,
  kPendingGradRecv = 1u << 9,
};

bool is_backward(Opcode op) {
  return op == Opcode::Bwd || op == Opcode::BwdInput || op == Opcode::BwdWeight ||
         op == Opcode::BwdAllReduce;
}

bool is_training(const Program& program) {
  return std::any_of(program.code.begin(), program.code.end(), [](const Instruction& in) {
    return is_backward(in.op) || in.op == Opcode::OptimizerStep;
  });
}

std::string list_micro_batches(const std::vector<std::uint32_t>& mbs) {
  std::string out = mbs.size() == 1 ? "micro-batch " : "micro-batches ";
  const std::size_t shown = std::min<std::size_t>(mbs.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + std::to_string(mbs[i]);
  if (shown < mbs.size()) out += " and " + std::to_string(mbs.size() - shown) + " more";
  return out;
}

class RankWalker {
 public:
  RankWalker(const Program& program, Links& links, Reporter& reporter, bool training)
      : program_(program),
        links_(links),
        reporter_(reporter),
        training_(training),
        chunks_(chunks_per_rank(program)),
        micro_batches_(std::max(0, program.config.micro_batches)),
        cells_(static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(micro_batches_)),
        flags_(cells_, 0),
        fifo_(4 * cells_, {kNone, kNone}) {}

  // Walks rank r; reports only when `loud` (a replica identical to its dp
  // rank 0 would repeat the same findings).
  StageMemory walk(int rank, bool loud);

 private:
  using Fifo = std::pair<std::uint32_t, std::uint32_t>;  // local head, tail

  std::size_t cell(const Instruction& in) const {
    if (in.chunk >= chunks_ || in.micro_batch >= static_cast<std::uint32_t>(micro_batches_)) {
      return cells_;
    }
    return static_cast<std::size_t>(in.chunk) * static_cast<std::size_t>(micro_batches_) +
           in.micro_batch;
  }
  std::size_t fifo_slot(bool receive, MessageKind kind, std::size_t c) const {
    const std::size_t kind_index = kind == MessageKind::grad ? 1 : 0;
    return ((receive ? 2 : 0) + kind_index) * cells_ + c;
  }
  Diagnostic* report(DiagnosticKind kind, std::string message, std::size_t local) {
    if (!loud_) return nullptr;
    return reporter_.report(kind, std::move(message), reporter_.at(begin_ + local));
  }
  std::string what(std::size_t local) const {
    return "`" + disassemble(program_.code[begin_ + local]) + "`";
  }

  void post(std::size_t local, std::size_t c);
  void complete(std::uint32_t local);
  void step_data(std::size_t local, const Instruction& in, std::size_t c);
  void step_optimizer(std::size_t local);
  void finish();

  const Program& program_;
  Links& links_;
  Reporter& reporter_;
  const bool training_;
  const int chunks_;
  const int micro_batches_;
  const std::size_t cells_;
  std::vector<std::uint16_t> flags_;
  std::vector<Fifo> fifo_;               // pending requests per (direction, kind, cell)
  std::vector<std::uint32_t> fifo_next_;  // per local instruction
  std::vector<std::uint32_t> pending_prev_, pending_next_;  // posting order
  std::uint32_t pending_head_ = kNone, pending_tail_ = kNone;
  int pending_count_ = 0;

  int rank_ = 0;
  std::size_t begin_ = 0;
  bool loud_ = true;
  int position_ = 0;
  int last_position_ = 0;
  int held_ = 0;
  StageMemory peak_;
  bool zeroed_ = false;
  bool reported_no_zero_grad_ = false;
  std::uint32_t first_step_ = kNone;
  bool reported_late_backward_ = false;
  bool unreduced_ = false;
};

void RankWalker::post(std::size_t local, std::size_t c) {
  const Instruction& in = program_.code[begin_ + local];
  const auto l = static_cast<std::uint32_t>(local);
  pending_prev_[local] = pending_tail_;
  pending_next_[local] = kNone;
  if (pending_tail_ == kNone) {
    pending_head_ = l;
  } else {
    pending_next_[pending_tail_] = l;
  }
  pending_tail_ = l;
  ++pending_count_;
  peak_.peak_in_flight = std::max(peak_.peak_in_flight, pending_count_);
  if (c == cells_) return;
  Fifo& fifo = fifo_[fifo_slot(is_recv(in.op), in.kind, c)];
  fifo_next_[local] = kNone;
  if (fifo.first == kNone) {
    fifo.first = l;
  } else {
    fifo_next_[fifo.second] = l;
  }
  fifo.second = l;
}

// Takes a pending request off both lists; a completed receive delivers.
void RankWalker::complete(std::uint32_t local) {
  const Instruction& in = program_.code[begin_ + local];
  const std::uint32_t prev = pending_prev_[local];
  const std::uint32_t next = pending_next_[local];
  (prev == kNone ? pending_head_ : pending_next_[prev]) = next;
  (next == kNone ? pending_tail_ : pending_prev_[next]) = prev;
  --pending_count_;
  const std::size_t c = cell(in);
  if (c == cells_) return;
  Fifo& fifo = fifo_[fifo_slot(is_recv(in.op), in.kind, c)];
  // Requests complete oldest first within a key, except under WaitAll,
  // which empties every list anyway.
  if (fifo.first == local) {
    fifo.first = fifo_next_[local];
    if (fifo.first == kNone) fifo.second = kNone;
  } else {
    fifo = {kNone, kNone};
  }
  if (in.op == Opcode::IRecv) {
    const bool act = in.kind == MessageKind::act;
    flags_[c] = static_cast<std::uint16_t>(
        (flags_[c] & ~(act ? kPendingActRecv : kPendingGradRecv)) |
        (act ? kInputReceived : kGradReceived));
  }
}

StageMemory RankWalker::walk(int rank, bool loud) {
  rank_ = rank;
  loud_ = loud;
  begin_ = program_.rank_begin[static_cast<std::size_t>(rank)];
  const std::size_t size = program_.rank_begin[static_cast<std::size_t>(rank) + 1] - begin_;
  const int stage = stage_of(program_.config, rank);
  std::fill(flags_.begin(), flags_.end(), std::uint16_t{0});
  fifo_next_.assign(size, kNone);
  pending_prev_.assign(size, kNone);
  pending_next_.assign(size, kNone);
  pending_head_ = pending_tail_ = kNone;
  pending_count_ = 0;
  held_ = 0;
  peak_ = StageMemory{stage, 0, 0};
  zeroed_ = reported_no_zero_grad_ = reported_late_backward_ = unreduced_ = false;
  first_step_ = kNone;
  last_position_ = lane_length(program_.placement, program_.config) - 1;

  for (std::size_t local = 0; local < size; ++local) {
    const Instruction& in = program_.code[begin_ + local];
    const std::size_t c = cell(in);
    position_ = position_of(program_.placement, program_.config, stage, in.chunk).position;
    switch (in.op) {
      case Opcode::ISend:
      case Opcode::IRecv:
        step_data(local, in, c);
        post(local, c);
        break;
      case Opcode::Send:
      case Opcode::Recv:
        peak_.peak_in_flight = std::max(peak_.peak_in_flight, pending_count_ + 1);
        step_data(local, in, c);
        break;
      case Opcode::Wait: {
        const Fifo& fifo =
            c == cells_ ? Fifo{kNone, kNone}
                        : fifo_[fifo_slot(in.direction == WaitDirection::recv, in.kind, c)];
        if (fifo.first == kNone) {
          report(DiagnosticKind::WaitWithoutRequest,
                 what(local) + " has no pending request to complete (never posted, or already "
                               "completed)",
                 local);
          break;
        }
        const std::uint32_t request = fifo.first;
        links_.link[begin_ + local] = static_cast<std::uint32_t>(begin_ + request);
        complete(request);
        break;
      }
      case Opcode::WaitAll: {
        links_.link[begin_ + local] = static_cast<std::uint32_t>(links_.waitall_ranges.size());
        const auto first = static_cast<std::uint32_t>(links_.waitall_requests.size());
        while (pending_head_ != kNone) {
          const std::uint32_t request = pending_head_;
          links_.waitall_requests.push_back(static_cast<std::uint32_t>(begin_ + request));
          complete(request);
        }
        links_.waitall_ranges.emplace_back(
            first, static_cast<std::uint32_t>(links_.waitall_requests.size()));
        break;
      }
      default:
        step_data(local, in, c);
        break;
    }
  }
  finish();
  // Requests never completed leave their keys' lists behind: empty them for
  // the next rank.
  for (std::uint32_t r = pending_head_; r != kNone; r = pending_next_[r]) {
    const Instruction& in = program_.code[begin_ + r];
    const std::size_t c = cell(in);
    if (c != cells_) fifo_[fifo_slot(is_recv(in.op), in.kind, c)] = {kNone, kNone};
  }
  return peak_;
}

void RankWalker::step_data(std::size_t local, const Instruction& in, std::size_t c) {
  const bool at_first = position_ == 0;
  const bool at_last = position_ == last_position_;
  if (is_backward(in.op)) {
    if (!zeroed_ && !reported_no_zero_grad_) {
      reported_no_zero_grad_ = true;
      report(DiagnosticKind::DataflowNoZeroGrad,
             what(local) + " accumulates into gradients that no ZeroGrad cleared first", local);
    }
    if (first_step_ != kNone && !reported_late_backward_) {
      reported_late_backward_ = true;
      Diagnostic* d = report(DiagnosticKind::DataflowStepTooEarly,
                             "OptimizerStep runs before the last backward of the rank",
                             first_step_);
      reporter_.note(d, "a backward after it: " + reporter_.describe(begin_ + local),
                     reporter_.at(begin_ + local));
    }
    if (in.op != Opcode::BwdInput) unreduced_ = true;
  }
  switch (in.op) {
    case Opcode::ZeroGrad: zeroed_ = true; return;
    case Opcode::AllReduce: unreduced_ = false; return;
    case Opcode::OptimizerStep: step_optimizer(local); return;
    default: break;
  }
  if (c == cells_) return;
  std::uint16_t& f = flags_[c];
  switch (in.op) {
    case Opcode::LoadInput: f |= kInputLoaded; break;
    case Opcode::LoadTarget: f |= kTargetLoaded; break;
    case Opcode::Recv:
    case Opcode::IRecv: {
      const bool act = in.kind == MessageKind::act;
      const std::uint16_t pending = act ? kPendingActRecv : kPendingGradRecv;
      if (f & pending) {
        report(DiagnosticKind::BufferInUse,
               what(local) + " receives into the buffer of a receive of the same " +
                   (act ? "activation" : "gradient") + " that is still pending",
               local);
      }
      if (in.op == Opcode::IRecv) {
        f |= pending;
      } else {
        f |= act ? kInputReceived : kGradReceived;
      }
      break;
    }
    case Opcode::Send:
    case Opcode::ISend:
      if (in.kind == MessageKind::act && !(f & kForwarded)) {
        report(DiagnosticKind::DataflowSendBeforeCompute,
               what(local) + " sends an activation that no Fwd of micro-batch " +
                   std::to_string(in.micro_batch) + " has computed yet",
               local);
      } else if (in.kind == MessageKind::grad && !(f & kInputGradDone)) {
        report(DiagnosticKind::DataflowSendBeforeCompute,
               what(local) + " sends a gradient that no backward of micro-batch " +
                   std::to_string(in.micro_batch) + " has computed yet",
               local);
      }
      break;
    case Opcode::Fwd:
      if (f & kPendingActRecv) {
        report(DiagnosticKind::BufferInUse,
               what(local) + " reads its input while the IRecv of it is still pending (Wait first)",
               local);
      } else if (!(f & (at_first ? kInputLoaded : kInputReceived))) {
        report(DiagnosticKind::DataflowInputMissing,
               what(local) + (at_first ? " runs before LoadInput of its micro-batch"
                                       : " runs before its input activation is received"),
               local);
      }
      if (f & kForwarded) {
        report(DiagnosticKind::DataflowNotExactlyOnce,
               what(local) + " forwards micro-batch " + std::to_string(in.micro_batch) +
                   " a second time",
               local);
      }
      f |= kForwarded;
      if (!(f & kHeld)) {
        f |= kHeld;
        ++held_;
        peak_.peak_activations = std::max(peak_.peak_activations, held_);
      }
      break;
    case Opcode::Bwd:
    case Opcode::BwdInput:
    case Opcode::BwdAllReduce:
      if (!(f & kForwarded)) {
        report(DiagnosticKind::DataflowBackwardBeforeForward,
               what(local) + " runs before the Fwd of its micro-batch", local);
      } else if (f & kPendingGradRecv) {
        report(DiagnosticKind::BufferInUse,
               what(local) + " reads its gradient while the IRecv of it is still pending (Wait "
                             "first)",
               local);
      } else if (!(f & (at_last ? kTargetLoaded : kGradReceived))) {
        report(DiagnosticKind::DataflowGradientMissing,
               what(local) + (at_last ? " runs before LoadTarget of its micro-batch"
                                      : " runs before its output gradient is received"),
               local);
      }
      if (f & kInputGradDone) {
        report(DiagnosticKind::DataflowNotExactlyOnce,
               what(local) + " backwards micro-batch " + std::to_string(in.micro_batch) +
                   " a second time",
               local);
      }
      f |= kInputGradDone;
      if (in.op != Opcode::BwdInput) {
        f |= kWeightGradDone;
        if (f & kHeld) {
          f &= static_cast<std::uint16_t>(~kHeld);
          --held_;
        }
      }
      if (in.op == Opcode::BwdAllReduce) unreduced_ = false;
      break;
    case Opcode::BwdWeight:
      if (!(f & kInputGradDone)) {
        report(DiagnosticKind::DataflowWeightBeforeInput,
               what(local) + " runs before the BwdInput of its micro-batch", local);
      } else if (f & kWeightGradDone) {
        report(DiagnosticKind::DataflowNotExactlyOnce,
               what(local) + " computes the weight gradient of micro-batch " +
                   std::to_string(in.micro_batch) + " a second time",
               local);
      }
      f |= kWeightGradDone;
      if (f & kHeld) {
        f &= static_cast<std::uint16_t>(~kHeld);
        --held_;
      }
      break;
    default: break;
  }
}

void RankWalker::step_optimizer(std::size_t local) {
  if (first_step_ == kNone) first_step_ = static_cast<std::uint32_t>(local);
  if (pending_head_ != kNone) {
    Diagnostic* d = report(DiagnosticKind::DataflowStepTooEarly,
                           "OptimizerStep runs while a request is still pending", local);
    reporter_.note(d, "the pending request: " + reporter_.describe(begin_ + pending_head_),
                   reporter_.at(begin_ + pending_head_));
  }
  // Mirror placement sums a piece's two copies inside OptimizerStep, within
  // one pipeline; the replicas of a stage still need their reduction.
  if (program_.config.dp > 1 && unreduced_) {
    report(DiagnosticKind::DataflowStepTooEarly,
           "OptimizerStep applies gradients that were not reduced over the data-parallel "
           "group (no AllReduce or BwdAllReduce after the last backward)",
           local);
  }
}

void RankWalker::finish() {
  for (std::uint32_t r = pending_head_; r != kNone; r = pending_next_[r]) {
    report(DiagnosticKind::RequestNeverWaited,
           what(r) + " is never completed by a Wait or WaitAll", r);
  }
  if (!loud_) return;
  // Under mirror placement a micro-batch travels one of the two lanes, so on
  // every rank exactly one of the two chunks runs it: the chunks are judged
  // together.
  const bool one_lane_each = program_.placement == Placement::mirror;
  const int groups = one_lane_each ? 1 : chunks_;
  for (int chunk = 0; chunk < groups; ++chunk) {
    std::vector<std::uint32_t> unforwarded, twice, unbackwarded, no_weight;
    for (int mb = 0; mb < micro_batches_; ++mb) {
      std::uint16_t f = 0;
      int forwarded_by = 0;
      for (int c = one_lane_each ? 0 : chunk; c < (one_lane_each ? chunks_ : chunk + 1); ++c) {
        const std::uint16_t g = flags_[static_cast<std::size_t>(c * micro_batches_ + mb)];
        f |= g;
        if (g & kForwarded) ++forwarded_by;
      }
      const auto m = static_cast<std::uint32_t>(mb);
      if (!(f & kForwarded)) unforwarded.push_back(m);
      if (forwarded_by > 1) twice.push_back(m);
      if (!training_) continue;
      if (!(f & kInputGradDone)) {
        unbackwarded.push_back(m);
      } else if (!(f & kWeightGradDone)) {
        no_weight.push_back(m);
      }
    }
    const std::string of_chunk = one_lane_each ? " in either chunk"
                                 : chunks_ > 1  ? " of chunk " + std::to_string(chunk)
                                                : "";
    const auto say = [&](const std::vector<std::uint32_t>& mbs, const std::string& verb) {
      if (mbs.empty()) return;
      reporter_.report(DiagnosticKind::DataflowNotExactlyOnce,
                       reporter_.rank_name(rank_) + " never " + verb + " " +
                           list_micro_batches(mbs) + of_chunk,
                       reporter_.end_of(rank_));
    };
    say(unforwarded, "forwards");
    if (!twice.empty()) {
      reporter_.report(DiagnosticKind::DataflowNotExactlyOnce,
                       reporter_.rank_name(rank_) + " runs " + list_micro_batches(twice) +
                           " in both chunks; under mirror placement each micro-batch travels "
                           "one lane",
                       reporter_.end_of(rank_));
    }
    say(unbackwarded, "backwards");
    say(no_weight, "computes the weight gradient (BwdWeight) of");
  }
}

}  // namespace

void check_ranks(const Program& program, Links& links, Reporter& reporter,
                 const std::vector<bool>& quiet, std::vector<StageMemory>& memory) {
  const Config& c = program.config;
  RankWalker walker(program, links, reporter, is_training(program));
  memory.assign(static_cast<std::size_t>(std::max(0, c.stages)), StageMemory{});
  for (int s = 0; s < c.stages; ++s) memory[static_cast<std::size_t>(s)].stage = s;
  for (int r = 0; r < program.ranks(); ++r) {
    const StageMemory m = walker.walk(r, !quiet[static_cast<std::size_t>(r)]);
    StageMemory& stage = memory[static_cast<std::size_t>(stage_of(c, r))];
    stage.peak_activations = std::max(stage.peak_activations, m.peak_activations);
    stage.peak_in_flight = std::max(stage.peak_in_flight, m.peak_in_flight);
  }
}

}  // namespace pipevm::check_detail
