// The per-rank pass: everything that can be decided by walking one rank's
// stream alone, in program order, with the requests each wait completes
// taken from the link (link.hpp).
//  - Non-blocking misuse: a request never completed, a Wait with nothing to
//    complete (both found by the link), a pending receive's buffer read or
//    received into again. Two pending sends of the same value are allowed:
//    both only read it.
//  - Dataflow: inputs, gradients, forward/backward order, once per
//    micro-batch and chunk, ZeroGrad and OptimizerStep placement. At the
//    turn of a V (local_source_chunk, program.hpp) a value another chunk
//    of the rank made is taken with no message: chunk 1's input is chunk
//    0's output once that Fwd ran, chunk 0's output gradient chunk 1's
//    input gradient once its backward ran.
//  - Memory: micro-batches whose stash is on the device (a Fwd or Recompute
//    to the weight gradient, less the time between a completed Offload and
//    its Reload) and messages in flight, at their peak.
// Where a stash is between an Offload and its Reload, and what a Recompute
// needs, is check_memory_policy.cpp's rule.
// Deadlock and pairing are elsewhere (check_matching.cpp, check_progress.cpp).
#include <algorithm>
#include <bit>

#include "check_internal.hpp"
#include "dataflow.hpp"

namespace pipevm::check_detail {

namespace {

using namespace dataflow;

bool is_training(const Program& program) {
  return std::any_of(program.code.begin(), program.code.end(), [](const Instruction& in) {
    return is_backward(in.op) || is_step(in.op);
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
  RankWalker(const Program& program, const Link& link, Reporter& reporter, bool training)
      : program_(program),
        link_(link),
        reporter_(reporter),
        training_(training),
        chunks_(chunks_per_rank(program)),
        micro_batches_(std::max(0, program.config.micro_batches)),
        cells_(static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(micro_batches_)),
        flags_(cells_, 0) {}

  // Walks rank r; reports only when `loud` (a replica identical to its dp
  // rank 0 would repeat the same findings).
  StageMemory walk(int rank, bool loud);

 private:
  std::size_t cell(const Instruction& in) const {
    if (in.chunk >= chunks_ || in.micro_batch >= static_cast<std::uint32_t>(micro_batches_)) {
      return cells_;
    }
    return static_cast<std::size_t>(in.chunk) * static_cast<std::size_t>(micro_batches_) +
           in.micro_batch;
  }
  Diagnostic* report(DiagnosticKind kind, std::string message, std::size_t local) {
    if (!loud_) return nullptr;
    return reporter_.report(kind, std::move(message), reporter_.at(begin_ + local));
  }
  // The instruction as written; for an overlapped pair, also the half
  // being checked ("`FwdBwd 1 with 0` (its `Bwd 0`)").
  std::string what(std::size_t local) const {
    const Instruction& in = program_.code[begin_ + local];
    std::string text = "`" + disassemble(in) + "`";
    if (half_ >= 0 && is_pair(in.op)) text += " (its `" + disassemble(half(in, half_)) + "`)";
    return text;
  }

  // The instruction being stepped: the half of a pair, else the instruction.
  Instruction stepped(std::size_t local) const {
    const Instruction& in = program_.code[begin_ + local];
    return half_ >= 0 ? half(in, half_) : in;
  }

  void post(std::size_t local);
  // One more micro-batch's stash on the device.
  void raise_held() { peak_.peak_activations = std::max(peak_.peak_activations, ++held_); }
  void complete(std::uint32_t local);
  // The link's next request failure, when it is of `kind` at global index `index`.
  bool request_failure(LinkFailureKind kind, std::size_t index);
  void step_data(std::size_t local, const Instruction& in, std::size_t c);
  void step_rank(std::size_t local, const Instruction& in);
  // The findings of step_data, out of its way.
  [[gnu::cold]] void report_pending_read(std::size_t local, Value value);
  [[gnu::cold]] void report_busy_receive(std::size_t local);
  [[gnu::cold]] void report_twice(std::size_t local, std::uint16_t again);
  [[gnu::cold]] void report_missing(std::size_t local, OpClass reader, Value value, PieceEnds ends);
  // Takes the cell's input or output gradient from the chunk of the rank
  // that made it (the turn of a V), when it has; false otherwise.
  bool take_on_rank(const Instruction& in, Value value, std::uint16_t& f);
  // The chunk of the rank `value` of a cell of `chunk` comes from, -1 if none.
  int local_source(std::uint16_t chunk, Value value) const;
  static std::string twice(Value value, std::uint32_t micro_batch);
  static GroupSet all_groups();
  static std::string unreduced_step(Group group);
  void step_optimizer(std::size_t local);
  void finish();

  const Program& program_;
  const Link& link_;
  Reporter& reporter_;
  const bool training_;
  const int chunks_;
  const int micro_batches_;
  const std::size_t cells_;
  std::vector<std::uint16_t> flags_;
  std::vector<std::uint32_t> pending_prev_, pending_next_;  // posting order
  std::size_t next_failure_ = 0;  // into link_.failures: request failures come rank by rank
  std::uint32_t pending_head_ = kNone, pending_tail_ = kNone;
  int pending_count_ = 0;

  int rank_ = 0;
  std::size_t begin_ = 0;
  bool loud_ = true;
  // Per chunk of the rank: whether its piece is the model's first or last,
  // and its layers.
  std::vector<std::uint8_t> ends_;
  std::vector<LayerRange> layers_;
  // Per chunk of the rank: the chunk whose output is its input, and the
  // one whose input gradient is its output gradient, on this rank (-1: none).
  std::vector<int> act_source_, grad_source_;
  int held_ = 0;
  StageMemory peak_;
  bool zeroed_ = false;
  bool reported_no_zero_grad_ = false;
  std::uint32_t first_step_ = kNone;
  bool reported_late_backward_ = false;
  int half_ = -1;     // the half of an overlapped pair being stepped, else -1
  // Per layer of the model (one entry when the program has no split): the
  // groups its accumulated gradient is summed over since its last backward.
  std::vector<GroupSet> reduced_;
  // The entries of reduced_ an instruction's layers cover.
  LayerRange reduced_range(const Instruction& in) const;
};

void RankWalker::post(std::size_t local) {
  const auto l = static_cast<std::uint32_t>(local);
  pending_prev_[local] = pending_tail_;
  pending_next_[local] = kNone;
  (pending_tail_ == kNone ? pending_head_ : pending_next_[pending_tail_]) = l;
  pending_tail_ = l;
  // A host copy is no message in flight; a Reload brings a stash back to
  // the device from its start (the byte walk's rule, memory_bytes.hpp).
  const Opcode op = program_.code[begin_ + local].op;
  if (is_host_copy(op)) {
    if (info(op).direction == Direction::from_host) raise_held();
    return;
  }
  ++pending_count_;
  peak_.peak_in_flight = std::max(peak_.peak_in_flight, pending_count_);
}

// Takes a completed request off the pending list; a completed receive delivers.
void RankWalker::complete(std::uint32_t local) {
  const Instruction& in = program_.code[begin_ + local];
  const std::uint32_t prev = pending_prev_[local];
  const std::uint32_t next = pending_next_[local];
  (prev == kNone ? pending_head_ : pending_next_[prev]) = next;
  (next == kNone ? pending_tail_ : pending_prev_[next]) = prev;
  if (is_host_copy(in.op)) {
    // A completed Offload has taken its stash off the device.
    if (info(in.op).direction == Direction::to_host) --held_;
    return;
  }
  --pending_count_;
  const std::size_t c = cell(in);
  if (c == cells_ || !info(in.op).produces.contains(Value::message)) return;
  const Value value = message_value(in.kind, false);
  flags_[c] = static_cast<std::uint16_t>((flags_[c] & ~pending(value)) |
                                         produced(value, info(in.op).cls));
}

bool RankWalker::request_failure(LinkFailureKind kind, std::size_t index) {
  const auto& failures = link_.failures;
  while (next_failure_ < failures.size() &&
         failures[next_failure_].kind != LinkFailureKind::wait_without_request &&
         failures[next_failure_].kind != LinkFailureKind::never_completed) {
    ++next_failure_;
  }
  if (next_failure_ == failures.size() || failures[next_failure_].kind != kind ||
      failures[next_failure_].index != index) {
    return false;
  }
  ++next_failure_;
  return true;
}

StageMemory RankWalker::walk(int rank, bool loud) {
  rank_ = rank;
  loud_ = loud;
  begin_ = program_.rank_begin[static_cast<std::size_t>(rank)];
  const std::size_t size = program_.rank_begin[static_cast<std::size_t>(rank) + 1] - begin_;
  const int stage = stage_of(program_.config, rank);
  std::fill(flags_.begin(), flags_.end(), std::uint16_t{0});
  pending_prev_.assign(size, kNone);
  pending_next_.assign(size, kNone);
  pending_head_ = pending_tail_ = kNone;
  pending_count_ = 0;
  held_ = 0;
  peak_ = StageMemory{stage, 0, 0};
  zeroed_ = reported_no_zero_grad_ = reported_late_backward_ = false;
  reduced_.assign(
      std::max<std::size_t>(1, program_.layer_split.empty()
                                   ? 1
                                   : static_cast<std::size_t>(layer_count(program_.layer_widths))),
      all_groups());
  first_step_ = kNone;
  const int last_position = lane_length(program_.placement, program_.config) - 1;
  ends_.assign(static_cast<std::size_t>(chunks_), 0);
  layers_.assign(static_cast<std::size_t>(chunks_), LayerRange{});
  act_source_.assign(static_cast<std::size_t>(chunks_), -1);
  grad_source_.assign(static_cast<std::size_t>(chunks_), -1);
  for (int chunk = 0; chunk < chunks_; ++chunk) {
    layers_[static_cast<std::size_t>(chunk)] = chunk_layers(program_, stage, chunk);
    act_source_[static_cast<std::size_t>(chunk)] =
        local_source_chunk(program_.placement, program_.config, stage, chunk, MessageKind::act);
    grad_source_[static_cast<std::size_t>(chunk)] =
        local_source_chunk(program_.placement, program_.config, stage, chunk, MessageKind::grad);
    const int position = position_of(program_.placement, program_.config, stage, chunk).position;
    ends_[static_cast<std::size_t>(chunk)] =
        static_cast<std::uint8_t>((position == 0 ? 1 : 0) + (position == last_position ? 2 : 0));
  }

  for (std::size_t local = 0; local < size; ++local) {
    const Instruction& in = program_.code[begin_ + local];
    const std::size_t c = cell(in);
    const OpcodeInfo& row = info(in.op);
    switch (row.cls) {
      case OpClass::wait: {
        if (request_failure(LinkFailureKind::wait_without_request, begin_ + local)) {
          report(DiagnosticKind::WaitWithoutRequest,
                 what(local) + " has no pending request to complete (never posted, or already "
                               "completed)",
                 local);
        }
        const std::uint32_t w = link_.to[begin_ + local];
        for (std::uint32_t q = link_.completes_begin[w]; q < link_.completes_begin[w + 1]; ++q) {
          complete(static_cast<std::uint32_t>(link_.completed[q] - begin_));
        }
        // GossipWait mixes the parameters: the step may follow.
        if (row.produces.contains(Value::reduced_gradient)) step_rank(local, in);
        continue;
      }
      case OpClass::p2p:
        // A blocking message is in flight while its rank waits in it.
        if (row.completion == Completion::blocking) {
          peak_.peak_in_flight = std::max(peak_.peak_in_flight, pending_count_ + 1);
        }
        break;
      case OpClass::data:
      case OpClass::compute:
      case OpClass::collective:
      case OpClass::optimizer:
        break;
    }
    if (is_pair(in.op)) {
      // An overlapped pair is both of its halves for dataflow and memory.
      for (half_ = 0; half_ < half_count(in); ++half_) {
        const Instruction part = half(in, half_);
        step_data(local, part, cell(part));
      }
      half_ = -1;
      continue;
    }
    step_data(local, in, c);
    if (row.completion == Completion::request) post(local);
  }
  finish();
  return peak_;
}

void RankWalker::step_data(std::size_t local, const Instruction& in, std::size_t c) {
  CellPlan plan = kCellPlans[static_cast<std::size_t>(in.op)];
  if (const int layer = layer_of(in); layer != kNoLayer && in.chunk < chunks_) {
    const LayerRange held = layers_[in.chunk];
    plan = layer_plan(plan, layer_role(info(in.op), layer, held.begin, held.end));
  }
  if (plan.rank_level) step_rank(local, in);
  if (c == cells_) return;

  std::uint16_t& f = flags_[c];
  const std::uint8_t ends = ends_[in.chunk];
  const auto& present_bits = kPresentBits[ends];
  // The values it reads, in their order in Value: the first one pending or
  // missing is reported.
  std::uint32_t reads = plan.reads;
  if (plan.reads_message) reads |= ValueSet::of(message_value(in.kind, true)).bits();
  for (; reads != 0; reads &= reads - 1) {
    const auto bit = static_cast<std::size_t>(std::countr_zero(reads));
    if (f & kPendingBits[bit]) {
      report_pending_read(local, static_cast<Value>(bit));
      break;
    }
    if (!(f & present_bits[bit])) {
      if (take_on_rank(in, static_cast<Value>(bit), f)) continue;
      // A backward's stash is gone once its weight gradient ran: the rule of
      // a second backward (report_twice) says what is wrong.
      if (static_cast<Value>(bit) == Value::stash && (f & weight_gradient_done) &&
          is_backward(in.op)) {
        continue;
      }
      report_missing(local, info(in.op).cls, static_cast<Value>(bit),
                     PieceEnds{(ends & 1) != 0, (ends & 2) != 0});
      break;
    }
  }

  if (plan.makes_message) {
    const Value v = message_value(in.kind, false);
    if (f & kPendingBits[static_cast<std::size_t>(v)]) report_busy_receive(local);
    f |= posts_request(in.op) ? pending(v) : produced(v, info(in.op).cls);
    return;
  }
  if (f & plan.again) report_twice(local, f & plan.again);
  f |= plan.makes;
  if (plan.stashes && !(f & stashed)) {
    f |= stashed;
    raise_held();
  }
  if (plan.unstashes && (f & stashed)) {
    f &= static_cast<std::uint16_t>(~stashed);
    --held_;
  }
}

int RankWalker::local_source(std::uint16_t chunk, Value value) const {
  if (chunk >= chunks_) return -1;
  if (value == Value::input) return act_source_[chunk];
  if (value == Value::output_gradient) return grad_source_[chunk];
  return -1;
}

bool RankWalker::take_on_rank(const Instruction& in, Value value, std::uint16_t& f) {
  const int from = local_source(in.chunk, value);
  if (from < 0) return false;
  const std::uint16_t made =
      flags_[static_cast<std::size_t>(from) * static_cast<std::size_t>(micro_batches_) +
             in.micro_batch];
  if (!(made & (value == Value::input ? forwarded : input_gradient_done))) return false;
  f |= produced(value, OpClass::p2p);
  return true;
}

// The rank's own values: the accumulated gradients (cleared by ZeroGrad,
// accumulated into by weight gradients) and their reduction over groups.
void RankWalker::step_rank(std::size_t local, const Instruction& in) {
  const OpcodeInfo& row = info(in.op);
  if (row.consumes.contains(Value::gradient) && !zeroed_ && !reported_no_zero_grad_) {
    reported_no_zero_grad_ = true;
    report(DiagnosticKind::DataflowNoZeroGrad,
           what(local) + " accumulates into gradients that no ZeroGrad cleared first", local);
  }
  if (is_backward(in.op) && first_step_ != kNone && !reported_late_backward_) {
    reported_late_backward_ = true;
    Diagnostic* d = report(DiagnosticKind::DataflowStepTooEarly,
                           "OptimizerStep runs before the last backward of the rank", first_step_);
    reporter_.note(d, "a backward after it: " + reporter_.describe(begin_ + local),
                   reporter_.at(begin_ + local));
  }
  const LayerRange layers = reduced_range(in);
  if (row.produces.contains(Value::weight_gradient)) {
    for (int l = layers.begin; l < layers.end; ++l)
      reduced_[static_cast<std::size_t>(l)] = GroupSet{};
  }
  if (row.produces.contains(Value::gradient)) zeroed_ = true;
  // A sum over every rank is a sum over every group that holds copies.
  if (row.produces.contains(Value::reduced_gradient)) {
    for (int l = layers.begin; l < layers.end; ++l) {
      GroupSet& reduced = reduced_[static_cast<std::size_t>(l)];
      reduced = group_of(in) == Group::world ? all_groups() : reduced.with(group_of(in));
    }
  }
  if (row.consumes.contains(Value::reduced_gradient)) step_optimizer(local);
}

LayerRange RankWalker::reduced_range(const Instruction& in) const {
  const int all = static_cast<int>(reduced_.size());
  if (program_.layer_split.empty()) return {0, all};
  const int layer = layer_of(in);
  if (layer != kNoLayer) return {std::min(layer, all - 1), std::min(layer + 1, all)};
  // A compute step works on its chunk's layers; a reduction without a layer
  // sums every gradient of the rank.
  if (operand_parts(in.op).micro_batch && in.chunk < chunks_) return layers_[in.chunk];
  return {0, all};
}

void RankWalker::report_pending_read(std::size_t local, Value value) {
  report(DiagnosticKind::BufferInUse,
         what(local) + " reads its " + (value == Value::input ? "input" : "gradient") +
             " while the IRecv of it is still pending (Wait first)",
         local);
}

void RankWalker::report_busy_receive(std::size_t local) {
  const MessageKind kind = program_.code[begin_ + local].kind;
  report(DiagnosticKind::BufferInUse,
         what(local) + " receives into the buffer of a receive of the same " +
             (kind == MessageKind::act ? "activation" : "gradient") + " that is still pending",
         local);
}

// `again`: the state bits of values the step makes that are there already.
void RankWalker::report_twice(std::size_t local, std::uint16_t again) {
  for (const Value v : kCellValues) {
    if (!(again & present(v, {}))) continue;
    report(DiagnosticKind::DataflowNotExactlyOnce,
           what(local) + twice(v, stepped(local).micro_batch), local);
    return;
  }
}

// What a reader lacks, by the value and by what reads it (a compute step or a send).
void RankWalker::report_missing(std::size_t local, OpClass reader, Value value, PieceEnds ends) {
  const Instruction in = stepped(local);
  const std::string mb = std::to_string(in.micro_batch);
  const bool sends = reader == OpClass::p2p;
  if (const int from = local_source(in.chunk, value); from >= 0) {
    // The turn of a V: the value comes from the rank's other chunk.
    const bool input = value == Value::input;
    const Instruction producer =
        cell_instruction(program_.placement, program_.config, stage_of(program_.config, rank_),
                         input ? Opcode::Fwd : Opcode::BwdInput, static_cast<int>(in.micro_batch),
                         from);
    report(input ? DiagnosticKind::DataflowInputMissing : DiagnosticKind::DataflowGradientMissing,
           what(local) + " runs before `" + disassemble(producer) + "`" +
               (input ? "" : " (or its Bwd)") + " on this rank, whose " +
               (input ? "output is its input" : "input gradient is its output gradient") +
               " (the turn of the V: no message needed), and no Recv " + (input ? "act" : "grad") +
               " brings it",
           local);
    return;
  }
  switch (value) {
    case Value::input:
      report(DiagnosticKind::DataflowInputMissing,
             what(local) + (ends.first ? " runs before LoadInput of its micro-batch"
                                       : " runs before its input activation is received"),
             local);
      return;
    case Value::activation:
      if (sends) {
        report(DiagnosticKind::DataflowSendBeforeCompute,
               what(local) + " sends an activation that no Fwd of micro-batch " + mb +
                   " has computed yet",
               local);
      } else {
        report(DiagnosticKind::DataflowBackwardBeforeForward,
               what(local) + " runs before the Fwd of its micro-batch", local);
      }
      return;
    case Value::output_gradient:
    case Value::target:
      report(DiagnosticKind::DataflowGradientMissing,
             what(local) + (ends.last ? " runs before LoadTarget of its micro-batch"
                                      : " runs before its output gradient is received"),
             local);
      return;
    case Value::input_gradient:
      if (sends) {
        report(DiagnosticKind::DataflowSendBeforeCompute,
               what(local) + " sends a gradient that no backward of micro-batch " + mb +
                   " has computed yet",
               local);
      } else {
        report(DiagnosticKind::DataflowWeightBeforeInput,
               what(local) + " runs before the BwdInput of its micro-batch", local);
      }
      return;
    case Value::stash: {
      const std::uint16_t f = flags_[cell(in)];
      const std::string held = !(f & forwarded) ? " runs before any forward of micro-batch " + mb
                               : (f & weight_gradient_done)
                                   ? " runs after the backward of micro-batch " + mb +
                                         " freed its activations"
                                   : " reads activations of micro-batch " + mb +
                                         " that its FwdCheckpoint did not keep (Recompute " + mb +
                                         " first)";
      report(DiagnosticKind::StashNotOnDevice, what(local) + held, local);
      return;
    }
    case Value::weight_gradient:
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient:
    case Value::weights:
      report(DiagnosticKind::DataflowInputMissing,
             what(local) + " runs before its " + std::string(name(value)) + " exists", local);
      return;
  }
}

// What a compute step does a second time, by the first value it makes again.
std::string RankWalker::twice(Value value, std::uint32_t micro_batch) {
  const std::string mb = std::to_string(micro_batch);
  switch (value) {
    case Value::activation: return " forwards micro-batch " + mb + " a second time";
    case Value::input_gradient: return " backwards micro-batch " + mb + " a second time";
    case Value::weight_gradient:
      return " computes the weight gradient of micro-batch " + mb + " a second time";
    case Value::input:
    case Value::target:
    case Value::output_gradient:
    case Value::message:
    case Value::gradient:
    case Value::reduced_gradient:
    case Value::weights:
    case Value::stash: break;
  }
  return " makes its " + std::string(name(value)) + " of micro-batch " + mb + " a second time";
}

GroupSet RankWalker::all_groups() {
  GroupSet all;
  for (std::size_t g = 0; g < kGroupCount; ++g) all = all.with(static_cast<Group>(g));
  return all;
}

void RankWalker::step_optimizer(std::size_t local) {
  if (first_step_ == kNone) first_step_ = static_cast<std::uint32_t>(local);
  // A host copy touches no parameter: one never waited for is finish()'s.
  std::uint32_t pending = pending_head_;
  while (pending != kNone && is_host_copy(program_.code[begin_ + pending].op)) {
    pending = pending_next_[pending];
  }
  if (pending != kNone) {
    Diagnostic* d = report(DiagnosticKind::DataflowStepTooEarly,
                           "OptimizerStep runs while a request is still pending", local);
    reporter_.note(d, "the pending request: " + reporter_.describe(begin_ + pending),
                   reporter_.at(begin_ + pending));
  }
  // The parameters have copies on other ranks (or twice on this one): the
  // gradients must be summed over each group that holds them first.
  // Every layer the rank holds counts (the layers of its chunks).
  GroupSet reduced = all_groups();
  if (program_.layer_split.empty()) {
    reduced = reduced_.front();
  } else {
    for (const LayerRange& held : layers_) {
      for (int l = held.begin; l < held.end; ++l) {
        const GroupSet of = reduced_[static_cast<std::size_t>(l)];
        GroupSet both;
        for (std::size_t g = 0; g < kGroupCount; ++g) {
          const auto group = static_cast<Group>(g);
          if (reduced.contains(group) && of.contains(group)) both = both.with(group);
        }
        reduced = both;
      }
    }
  }
  const GroupSet copies = groups_holding_copies(program_.placement, program_.config);
  for (std::size_t g = 0; g < kGroupCount; ++g) {
    const auto group = static_cast<Group>(g);
    if (!copies.contains(group) || reduced.contains(group)) continue;
    // Gossip averages the parameters instead of the gradients.
    if (group == Group::dp && reduced.contains(Group::gossip)) continue;
    report(DiagnosticKind::DataflowStepTooEarly,
           std::string(name(program_.code[begin_ + local].op)) + unreduced_step(group), local);
  }
}

// Why a step's gradients are not summed over `group` yet.
std::string RankWalker::unreduced_step(Group group) {
  switch (group) {
    case Group::dp:
      return " applies gradients that were not reduced over the data-parallel group (no "
             "AllReduce, BwdAllReduce or ReduceScatter after the last backward of every layer)";
    case Group::mirror:
      return " applies gradients that were not summed with the other copy of each model piece "
             "(no AllReduce over mirror after the last backward)";
    case Group::none:
    case Group::pipeline:
    case Group::world: break;
    case Group::gossip:
      break;
  }
  return " applies gradients that were not summed over the " + std::string(name(group)) + " group";
}

void RankWalker::finish() {
  for (std::uint32_t r = pending_head_; r != kNone; r = pending_next_[r]) {
    if (!request_failure(LinkFailureKind::never_completed, begin_ + r)) continue;
    if (info(program_.code[begin_ + r].op).direction == Direction::from_host) {
      report(DiagnosticKind::ReloadNotWaited,
             what(r) + " is never completed by a WaitReload or WaitAll: its backward would "
                       "read activations the copy may still be writing",
             r);
    } else {
      report(DiagnosticKind::RequestNeverWaited,
             what(r) + " is never completed by a " +
                 (is_host_copy(program_.code[begin_ + r].op) ? "WaitOffload" : "Wait") +
                 " or WaitAll",
             r);
    }
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
        if (g & forwarded) ++forwarded_by;
      }
      const auto m = static_cast<std::uint32_t>(mb);
      if (!(f & forwarded)) unforwarded.push_back(m);
      if (forwarded_by > 1) twice.push_back(m);
      if (!training_) continue;
      if (!(f & input_gradient_done)) {
        unbackwarded.push_back(m);
      } else if (!(f & weight_gradient_done)) {
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

void check_ranks(const Program& program, const Link& link, Reporter& reporter,
                 const std::vector<bool>& quiet, std::vector<StageMemory>& memory) {
  const Config& c = program.config;
  RankWalker walker(program, link, reporter, is_training(program));
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
